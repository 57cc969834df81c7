import ArgumentParser
import Dispatch
import Foundation
import Logging
import CommandSupport
import OfflineStore
import Server
import Synchronization

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Serve the store as an OData V4 service over HTTP (the served role: writes apply directly, nothing is queued).",
        discussion: """
            Binds 127.0.0.1 unless --host says otherwise; --port 0 takes a free port. Prints one line, \
            "serving DIR at http://HOST:PORT/", once it listens. Stops cleanly on SIGINT or SIGTERM. \
            Logs an access summary at info level and a line per request at debug (--log-level debug).
            Example: offline-store serve --store s --port 8080
            """)
    @OptionGroup var options: StoreOption
    @Option(help: "The address to bind (loopback by default; another address is an explicit choice).") var host =
        "127.0.0.1"
    @Option(help: "The port (0: a free one).") var port = 8080
    @Option(help: "Entities per response page when the client asks for no odata.maxpagesize (default: no paging).")
    var pageSize: Int?
    @Option(help: "trace, debug, info, notice, warning, error or critical.") var logLevel = "info"
    @Option(help: "Change the store's size cap (as init --max-size; 0 lifts it) and keep it in its configuration.")
    var maxSize: String?
    @Option(help: "Stop (as on SIGTERM) after this many seconds: a bound on a test server's life.") var lifetime:
        Double?

    func run() throws {
        try runReportingErrors {
            guard let level = Logger.Level(rawValue: logLevel) else {
                throw CLIError("unknown log level '\(logLevel)'")
            }
            guard (0...65535).contains(port) else { throw CLIError("--port must be 0…65535") }
            if let pageSize, pageSize < 1 { throw CLIError("--page-size must be at least 1") }
            if let lifetime, !(lifetime > 0) { throw CLIError("--lifetime must be a positive number of seconds") }
            let store = try OfflineStore.open(
                at: options.store, maxSizeBytes: try maxSize.map { try parseSize($0, zeroAllowed: true) })
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
            var logger = Logger(label: "offline-store.serve")
            logger.logLevel = level
            var serve = ServeOptions()
            serve.host = host
            serve.port = port
            serve.defaultPageSize = pageSize
            let (path, host, settings, log) = (options.store, host, serve, logger)
            if let lifetime {
                // The same path as a SIGTERM from outside: a graceful stop. Sent to the process, not with
                // raise(), which targets this dispatch worker thread: it blocks SIGTERM, so the
                // signal was never delivered and --lifetime never stopped the server.
                DispatchQueue.global().asyncAfter(deadline: .now() + lifetime) { _ = kill(getpid(), SIGTERM) }
            }
            try blocking {
                try await ODataServer.run(store: store, options: settings, logger: log) { bound in
                    try? output("serving \(path) at http://\(host.contains(":") ? "[\(host)]" : host):\(bound)/")
                }
            }
        }
    }
}
