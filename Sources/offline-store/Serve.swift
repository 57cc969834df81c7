import ArgumentParser
import Dispatch
import Foundation
import Logging
import CommandSupport
import Metrics
import OfflineStore
import Prometheus
import Server
import Synchronization

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Serve the store as an OData V4 service over HTTP, in the store's role: an offline store queues writes for flush; an authority store applies them.",
        discussion: """
            The role is the store's: a store with a serviceRoot or defining requests is an offline \
            copy of that service, and serve is its local producer — writes go through the request \
            queue exactly as the library's create/update/delete do (local keys, collapse, ETags of the \
            local image, Location naming the local key), RequestQueue, ErrorArchive and EventLog are \
            readable sets, DELETE ErrorArchive(ID) gives a refused request up, and changing an entity \
            whose request was refused sends it again. SAP's request options come as headers: \
            OfflineOData.TransactionID, OfflineOData.NonMergeable, OfflineOData.CustomTag, \
            OfflineOData.UploadCategory. Sync runs behind it: every --sync-interval seconds and on \
            POST /$sync from loopback (answered with the outcome), a refresh then a flush against \
            the configured service, never two at once; a failing service is logged, never fatal. \
            Any other store is the authority: writes apply directly and are logged for delta links.
            A store made from V2 $metadata is served in V2's dialect: verbose JSON (d, results, \
            __metadata, __count for $inlinecount, __next, __deferred, /Date(ms)/, decimals as \
            strings), MERGE and X-HTTP-Method, V2's error envelope, DataServiceVersion 2.0, and \
            Gateway's CSRF token (X-CSRF-Token: Fetch, then the token on every write; --csrf).
            Binds 127.0.0.1 unless --host says otherwise; --port 0 takes a free port. Prints one line, \
            "serving DIR at http://HOST:PORT/", once it listens. Stops cleanly on SIGINT or SIGTERM. \
            Logs an access summary at info level and a line per request at debug (--log-level debug).
            A hostile client cannot hold a connection: a request's head must be complete within \
            --header-timeout (10 s) and the whole request within --request-timeout (60 s), else 408 and \
            the connection closes; a connection with no request in progress closes after --idle-timeout \
            (75 s); a response not written within --write-timeout (120 s: a client that stops reading) \
            is cut off and its read snapshot released; HTTP/1.0 without keep-alive and Connection: \
            close end after the answer; a malformed request (a bad chunk) answers 400. $batch takes \
            the JSON form (OData 4.01) and the multipart/mixed form (V4 §11.7, V2): at most 1,000 \
            parts, and 1,000 in a change set, and at most --max-batch-writes writes (10,000) and, in the JSON \
            form, 1,000 reads (more: 413, nothing run). The answers of one $batch take at most --max-batch-response bytes (16M), \
            writes' answers included: a read past it answers 507 inside the batch, as does a write \
            unit (undone), and every unit after it. Queries, and live queries (Accept: \
            text/event-stream), run on --query-threads threads of their own (8); one client address \
            holds at most --max-streams-per-client live-query streams (64; more: 429). Links, \
            @odata.context and Location name --public-url, else the bound address, never the \
            client's Host header; an invalid Host answers 400.
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
    @Option(
        help: "The service root that links and Location name (http(s)://HOST[:PORT]/PATH/; default: the bound address)."
    )
    var publicURL: String?
    @Option(help: "Seconds from a request's first byte until its head is complete (then 408 and close).")
    var headerTimeout: Double = 10
    @Option(help: "Seconds from a request's first byte until its body is complete (then 408 and close).")
    var requestTimeout: Double = 60
    @Option(help: "Seconds a connection may stay open with no request in progress.") var idleTimeout: Double = 75
    @Option(help: "Seconds a response may take to be written (a client that stops reading is disconnected).")
    var writeTimeout: Double = 120
    @Option(help: "Bytes the answers of one $batch may take together (K, M, G suffixes; a read past it answers 507).")
    var maxBatchResponse = "16M"
    @Option(help: "Writes one $batch may hold, in change sets or not (more: 413, nothing of it run).")
    var maxBatchWrites = 10_000
    @Option(help: "Threads that run queries and live queries, apart from the threads that answer everything else.")
    var queryThreads = 8
    @Option(help: "Live-query streams (text/event-stream) one client address may hold at once (more: 429).")
    var maxStreamsPerClient = 64
    @Option(help: "An offline store: refresh then flush every this many seconds, in the background.")
    var syncInterval: Double?
    @Option(
        help:
            "An origin (http://host:port) whose browser pages may use the service (CORS; repeatable; none by default).")
    var corsOrigin: [String] = []
    @Flag(help: "Expose the store's metrics in Prometheus' text format at /metrics (to loopback clients).")
    var metrics = false
    @Option(help: "SAP Gateway's CSRF token check on writes: on or off (default: on for a V2 store, off for V4).")
    var csrf: String?

    func run() throws {
        try runReportingErrors {
            guard let level = Logger.Level(rawValue: logLevel) else {
                throw CLIError("unknown log level '\(logLevel)'")
            }
            guard (0...65535).contains(port) else { throw CLIError("--port must be 0…65535") }
            if let pageSize, pageSize < 1 { throw CLIError("--page-size must be at least 1") }
            if let lifetime, !(lifetime > 0) { throw CLIError("--lifetime must be a positive number of seconds") }
            for (name, value) in [
                ("--header-timeout", headerTimeout), ("--request-timeout", requestTimeout),
                ("--idle-timeout", idleTimeout), ("--write-timeout", writeTimeout),
            ] where !(value > 0 && value <= 86_400) {
                throw CLIError("\(name) must be a positive number of seconds, at most 86400")
            }
            if let syncInterval, !(syncInterval >= 0.1 && syncInterval <= 86_400) {
                throw CLIError("--sync-interval must be a number of seconds from 0.1 to 86400")
            }
            guard (1...256).contains(queryThreads) else { throw CLIError("--query-threads must be 1…256") }
            guard (1...1_000_000).contains(maxBatchWrites) else {
                throw CLIError("--max-batch-writes must be 1…1000000")
            }
            guard (1...100_000).contains(maxStreamsPerClient) else {
                throw CLIError("--max-streams-per-client must be 1…100000")
            }
            let batchBytes = try parseSize(maxBatchResponse, zeroAllowed: false)
            let publicRoot = try publicURL.map { url in
                do { return try ServeOptions.validatedPublicURL(url) } catch {
                    throw CLIError("--public-url: \(error)")
                }
            }
            let origins = try corsOrigin.map { origin in
                do { return try ServeOptions.validatedCorsOrigin(origin) } catch {
                    throw CLIError("--cors-origin: \(error)")
                }
            }
            // Before the store opens: its metrics are made from the factory bootstrapped then.
            let registry = metrics ? PrometheusCollectorRegistry() : nil
            if let registry { MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry)) }
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
            serve.publicURL = publicRoot
            serve.headerTimeout = .milliseconds(Int64(headerTimeout * 1000))
            serve.requestTimeout = .milliseconds(Int64(requestTimeout * 1000))
            serve.idleTimeout = .milliseconds(Int64(idleTimeout * 1000))
            serve.writeTimeout = .milliseconds(Int64(writeTimeout * 1000))
            serve.maxBatchResponseBytes = batchBytes
            serve.queryThreads = queryThreads
            serve.maxBatchWrites = maxBatchWrites
            serve.maxStreamsPerClient = maxStreamsPerClient
            serve.syncInterval = syncInterval.map { .milliseconds(Int64($0 * 1000)) }
            serve.corsOrigins = origins
            if let registry {
                serve.metrics = {
                    var text: [UInt8] = []
                    registry.emit(into: &text)
                    return text
                }
            }
            switch csrf {
            case nil: break
            case "on": serve.csrfProtection = true
            case "off": serve.csrfProtection = false
            case let other?: throw CLIError("--csrf is on or off, not '\(other)'")
            }
            if syncInterval != nil, !store.isOffline {
                throw CLIError(
                    "--sync-interval is for an offline store (one with a serviceRoot or defining requests); \(options.store) is the authority for its data"
                )
            }
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
