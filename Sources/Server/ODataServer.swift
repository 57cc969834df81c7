import Foundation
import Hummingbird
import Logging
import NIOCore
import OfflineStore
import ServiceLifecycle

/// How `offline-store serve` serves a store.
public struct ServeOptions: Sendable {
    /// The address to bind: loopback unless the caller chooses otherwise.
    public var host = "127.0.0.1"
    /// The port; 0 picks a free one (the bound port is passed to `onRunning`).
    public var port = 8080
    /// Server-driven paging when the client sends no `Prefer: odata.maxpagesize`: at most this many
    /// entities per response, with an `@odata.nextLink` to the rest. nil: no paging by default.
    public var defaultPageSize: Int?
    /// Request bodies larger than this are refused with 413.
    public var maxRequestBytes = 64 << 20
    /// Seconds between access summaries logged at info level (when there was traffic).
    public var summaryInterval: Double = 60
    /// Stop gracefully on SIGTERM and SIGINT (what `serve` wants). Off for a server run inside
    /// another program (`demo`): a `ServerStop` then stops it, and the signals keep their usual
    /// effect on the program.
    public var stopOnSignals = true
    public init() {}
}

/// The store as an OData V4 service over HTTP/1.1, on Hummingbird 2.
///
/// ```swift
/// try await ODataServer.run(store: store, options: ServeOptions(), logger: logger) { port in
///     print("serving at http://127.0.0.1:\(port)/")
/// }
/// ```
/// Runs until SIGINT or SIGTERM (unless `options.stopOnSignals` is off) or until `stop` is called,
/// then stops accepting connections, finishes the requests in flight and returns.
public enum ODataServer {
    public static func run(
        store: OfflineStore, options: ServeOptions, logger: Logger, stop: ServerStop? = nil,
        onRunning: @escaping @Sendable (Int) async -> Void
    ) async throws {
        let service = ODataService(store: store, options: options, logger: logger)
        let responder = CallbackResponder<BasicRequestContext> { request, _ in
            await service.respond(to: request)
        }
        let app = Application(
            responder: responder,
            configuration: .init(address: .hostname(options.host, port: options.port), serverName: "offline-store"),
            onServerRunning: { channel in
                await onRunning(channel.localAddress?.port ?? options.port)
            },
            logger: logger)
        let summaries = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(options.summaryInterval))
                service.stats.logSummary(logger, onlyIfChanged: true)
            }
        }
        defer { summaries.cancel() }
        let group = ServiceGroup(
            configuration: .init(
                services: [app], gracefulShutdownSignals: options.stopOnSignals ? [.sigterm, .sigint] : [],
                logger: logger))
        let stopper = Task {
            guard let stop else { return }
            await stop.requested()
            if !Task.isCancelled { await group.triggerGracefulShutdown() }
        }
        defer { stopper.cancel() }
        try await group.run()
        service.stats.logSummary(logger, onlyIfChanged: false)
    }
}

/// Stops a server that `ODataServer.run(…, stop:)` runs, gracefully, from elsewhere in the program.
///
/// ```swift
/// let stop = ServerStop()
/// let server = Task { try await ODataServer.run(store: s, options: o, logger: l, stop: stop) { _ in } }
/// …
/// stop()
/// try await server.value
/// ```
public final class ServerStop: Sendable {
    private let stream: AsyncStream<Never>
    private let continuation: AsyncStream<Never>.Continuation

    public init() { (stream, continuation) = AsyncStream.makeStream(of: Never.self) }

    /// Asks the server to stop; it returns from `run` once the requests in flight are done.
    public func callAsFunction() { continuation.finish() }

    /// Returns once a stop is asked (or the waiting task is cancelled).
    func requested() async {
        for await _ in stream {}
    }
}
