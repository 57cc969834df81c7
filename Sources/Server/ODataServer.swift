import UnixSignals
import Foundation
import Hummingbird
import HummingbirdCore
public import Logging
import NIOCore
import NIOPosix
public import OfflineStore
import ServiceLifecycle
import Synchronization

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
    /// The largest stream a PUT may store (`Set(key)/$value`): it is written to a file as it
    /// arrives, never held in memory; larger answers 413 and changes nothing. Default 4 GiB.
    public var maxStreamBytes = 4 << 30
    /// The service root that links, `@odata.context`, `Location` and `OData-EntityId` name
    /// (`https://data.example/odata/`). nil: `http://HOST:PORT/` of the bound address — for a
    /// wildcard bind (`0.0.0.0`, `::`) the host the request's `Host` names, with the bound port.
    /// Never the `Host` header as sent: a `Host` that is not a host name or an IP address (with an
    /// optional port) is refused with 400.
    public var publicURL: String?
    /// From a request's first byte until its head is complete (slowloris); then 408 and close.
    public var headerTimeout: Duration? = .seconds(10)
    /// From a request's first byte until its body is complete (a body that never arrives); then
    /// 408 and close.
    public var requestTimeout: Duration? = .seconds(60)
    /// How long a connection may stay open with no byte from the client and no response being
    /// written (keep-alive, or a client that connects and says nothing). Hummingbird's idle timeout;
    /// longer than `requestTimeout`, so a stalled request is answered 408 first.
    public var idleTimeout: Duration? = .seconds(75)
    /// How long a response may take to be written, from its head to its end: a client that stops
    /// reading is disconnected after it, and the read snapshot the response holds is released.
    public var writeTimeout: Duration? = .seconds(120)
    /// The answers of one `$batch` together take at most this many bytes (bodies, headers and
    /// each answer's framing): a read whose answer would pass it answers 507 inside the batch, as
    /// does a write unit (a change set, or a write outside one), which is then undone; every unit
    /// after it answers 507 too, without running (the batch itself stays 200).
    public var maxBatchResponseBytes = 16 << 20
    /// The writes (POST, PATCH, MERGE, PUT, DELETE) one `$batch` may hold, in change sets and
    /// outside them: a batch with more is refused 413 before anything of it runs. A batch's write
    /// units between two reads commit in one LMDB transaction, whose dirty pages, and the
    /// answers, grow with them: 100,000 tiny creates took 342–372 MiB.
    public var maxBatchWrites = 10_000
    /// The live-query streams (`Accept: text/event-stream`) one client address may hold at once;
    /// one more is refused 429. Behind a proxy every client has the proxy's address: raise it.
    public var maxStreamsPerClient = 64
    /// Threads that run queries, apart from Swift's concurrency pool, so a long scan never delays
    /// `$metadata` or a write; queries beyond this many at once wait for a thread.
    public var queryThreads = 8
    /// Seconds between access summaries logged at info level (when there was traffic).
    public var summaryInterval: Double = 60
    /// Stop gracefully on SIGTERM and SIGINT (what `serve` wants). Off for a server run inside
    /// another program (`demo`): a `ServerStop` then stops it, and the signals keep their usual
    /// effect on the program.
    public var stopOnSignals = true
    /// For an offline store (`OfflineStore.isOffline`): refresh then flush every this long, in
    /// the background (`SyncLoop`); nil: only when asked (`POST /$sync` from loopback). An
    /// authority store has nothing to sync with, and refuses it.
    public var syncInterval: Duration?
    /// SAP Gateway's CSRF protection (`X-CSRF-Token: Fetch`, then the token on every modifying
    /// request, else 403): nil means on for a store made from V2 `$metadata`, off for V4.
    public var csrfProtection: Bool?
    /// Origins (`scheme://host[:port]`) whose browser pages may use this service (CORS): their
    /// requests are answered with `Access-Control-Allow-Origin` and the headers a client reads
    /// exposed, their preflights (`OPTIONS`) answered. None by default: a page of another origin
    /// gets no CORS header, so its browser withholds the answers (`Cors`).
    public var corsOrigins: [String] = []
    /// The store's metrics in Prometheus' text format, for `GET /metrics` (answered to a loopback
    /// client only); nil: no such endpoint.
    public var metrics: (@Sendable () -> [UInt8])?
    public init() {}

    /// `url` as a service root for `publicURL` (ending with `/`), or an error saying why it is not
    /// one: `http` or `https`, a host name or IP address and an optional port, an optional path;
    /// no query, fragment, user, quotes or dot segments.
    public static func validatedPublicURL(_ url: String) throws -> String { try ServiceRoot.validatePublic(url) }

    /// `origin` as `corsOrigins` takes it (`http(s)://host[:port]`), or an error saying why not.
    public static func validatedCorsOrigin(_ origin: String) throws -> String { try Cors.validated(origin) }
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
        let publicRoot = try options.publicURL.map(ServiceRoot.validatePublic)
        let pool = NIOThreadPool(numberOfThreads: max(1, options.queryThreads))
        pool.start()
        let roots = ServiceRoot(host: options.host, publicRoot: publicRoot)
        let sync = store.isOffline ? SyncLoop(store: store, logger: logger) : nil
        if options.syncInterval != nil, sync == nil {
            throw ServeError(
                "--sync-interval is for an offline store (one with a serviceRoot or defining requests); this store is the authority for its data"
            )
        }
        let service = ODataService(
            store: store, options: options, logger: logger, roots: roots, queries: pool, sync: sync,
            csrf: options.csrfProtection ?? V2Dialect.applies(to: store) ? CSRF() : nil)
        let responder = CallbackResponder<ServeContext> { request, context in
            await service.respond(to: request, peer: context.remoteAddress)
        }
        let limits = ConnectionGuard.Limits(
            header: options.headerTimeout.map(TimeAmount.init), request: options.requestTimeout.map(TimeAmount.init),
            write: options.writeTimeout.map(TimeAmount.init), idle: options.idleTimeout.map(TimeAmount.init))
        let app = Application(
            responder: responder,
            server: HTTPServerBuilder { responder in GuardedHTTP1Channel(responder: responder, limits: limits) },
            configuration: .init(
                address: .hostname(options.host, port: options.port), serverName: "offline-store",
                availableConnectionsDelegate: ConnectionLimit(logger: logger)),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? options.port
                roots.bound(port: port)
                await onRunning(port)
            },
            logger: logger)
        let summaries = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(options.summaryInterval))
                service.stats.logSummary(logger, onlyIfChanged: true)
            }
        }
        defer { summaries.cancel() }
        let syncing = Task {
            guard let sync, let interval = options.syncInterval else { return }
            await sync.run(every: interval)
        }
        defer { syncing.cancel() }
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
        do { try await group.run() } catch {
            try? await pool.shutdownGracefully()
            throw error
        }
        syncing.cancel()
        await syncing.value
        try? await pool.shutdownGracefully()
        service.stats.logSummary(logger, onlyIfChanged: false)
    }
}

/// A setting `ODataServer.run` refuses.
public struct ServeError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// The request context of `serve`: Hummingbird's basic one, and the peer's address (`POST /$sync`
/// is for loopback peers only).
struct ServeContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
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
