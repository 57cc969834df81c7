import NIOPosix
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OfflineStore
import ServiceLifecycle
import Synchronization

/// `GET` of a collection or an entity with `Accept: text/event-stream`: the resource's result as
/// Server-Sent Events, kept up to date (`OfflineStore.observe`) — for clients that are not Swift.
///
/// - The first event is the current result; another comes after each commit that changed it —
///   local writes, refreshes, writes served to other clients, other processes' commits. Each is
///   `event: result`, `id: N` (1, 2, …) and `data:` the JSON a plain `GET` of the URL answers
///   (`{"@odata.context":…,"value":[…]}`), without server-driven paging: a result over
///   `ResponseStream.inlineLimit` (1 MiB) ends the stream with an `event: error`.
/// - A comment line (`: keep-alive`) every `keepAlive` keeps proxies and idle timeouts from
///   closing a quiet stream. The stream ends by itself before the server's write timeout (at
///   nine tenths of it) and on the server's graceful shutdown; `retry: 1000` asks the client to
///   connect again a second later (EventSource does it by itself).
/// - Bursts coalesce: a client that reads slowly gets the newest result, never a backlog.
/// - The work of a result is done once for all its streams, on the query threads (never on
///   Swift's concurrency pool, which answers everything else): the query, its rendering, and the
///   event's `data:` lines, one shared buffer that each stream writes as it is; a stream adds
///   only its `event:` and `id:` lines (issue 37, F9 and F10: each stream reformatted a 400 KB
///   result on the pool, and 300 streams that never read let one writer through 2–5 times in
///   15 s).
/// - One client address holds at most `ServeOptions.maxStreamsPerClient` streams at once; past it
///   a stream is refused 429 (`StreamCounts`).
struct LiveStream {
    let service: ODataService
    static let keepAlive: Duration = .seconds(15)

    /// Whether the request's `Accept` names `text/event-stream`.
    static func wanted(_ request: Request) -> Bool {
        guard let accept = request.headers[.accept] else { return false }
        return accept.split(separator: ",").contains {
            ($0.split(separator: ";", omittingEmptySubsequences: false).first ?? "").trimmingCharacters(
                in: .whitespaces
            ).lowercased()
                == "text/event-stream"
        }
    }

    func response(_ request: Request, url: String, resource: String, peer: SocketAddress?) throws -> Response {
        guard !resource.hasSuffix("/$count"), !url.contains("$deltatoken") else {
            throw ODataFailure(
                .badRequest,
                "a live query (text/event-stream) needs a collection or an entity, not /$count or a delta link")
        }
        // Held by the body: its place is given back when the response is dropped, written or not.
        let slot = try service.streams.reserve(
            for: peer?.ipAddress ?? "unknown", limit: service.options.maxStreamsPerClient)
        let store = service.store
        var options = ResultOptions(serviceRoot: service.serviceRoot(request), etags: true)
        options.verbose = V2Dialect.applies(to: store)
        // A URL that does not bind is answered as a GET's. Streams of one URL and root share each
        // run, its one rendering and its one event's bytes, made on the query threads.
        let queries = service.queries
        let results = try store.observeRendering(
            url, options: options, limit: ResponseStream.inlineLimit,
            executor: { work in try await queries.runIfActive(work) }, event: Self.data)
        let lifetime = service.options.writeTimeout.map { $0 * 0.9 } ?? .seconds(3600)
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        let body = ResponseBody { writer in
            _ = slot
            try await writer.write(ByteBuffer(string: "retry: 1000\n\n"))
            // Woken by each result, each keep-alive, and the end (a graceful shutdown ends it).
            let (signals, signal) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
            try await withGracefulShutdownHandler {
                try await Self.stream(results, signals: signals, signal: signal, until: .now + lifetime) {
                    try await writer.write($0)
                }
            } onGracefulShutdown: {
                signal.finish()
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: headers, body: body)
    }

    /// A rendering as the `data:` lines of an event and the blank line that ends it: one line per
    /// line of the JSON (it has none inside a string: JSON escapes them), its trailing line ends
    /// dropped.
    static func data(_ json: [UInt8]) -> ByteBuffer {
        var bytes = json[...]
        while bytes.last == UInt8(ascii: "\n") { bytes = bytes.dropLast() }
        var out = ByteBuffer()
        out.reserveCapacity(bytes.count + 64)
        out.writeString("data: ")
        var start = bytes.startIndex
        while let newline = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) {
            out.writeBytes(bytes[start..<newline])
            out.writeString("\ndata: ")
            start = newline + 1
        }
        out.writeBytes(bytes[start...])
        out.writeString("\n\n")
        return out
    }

    /// Writes the events until `deadline`, the end of `results`, or a cancellation: each
    /// result's `data:` lines as they come (the newest, when several came while one was
    /// written), after the stream's own `event:` and `id:` lines.
    static func stream(
        _ results: AsyncThrowingStream<ByteBuffer, any Error>, signals: AsyncStream<Void>,
        signal: AsyncStream<Void>.Continuation, until deadline: ContinuousClock.Instant,
        write: (ByteBuffer) async throws -> Void
    ) async throws {
        let pending = Pending()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    for try await json in results {
                        pending.value.withLock { $0 = .result(json) }
                        signal.yield()
                    }
                } catch is LiveRenderingTooLarge {
                    pending.value.withLock { $0 = .tooLarge }
                    signal.yield()
                }
                signal.finish()
            }
            group.addTask {
                while ContinuousClock.now < deadline {
                    try await Task.sleep(for: min(keepAlive, deadline - .now))
                    signal.yield()
                }
                signal.finish()
            }
            var id = 0
            loop: for await _ in signals {
                switch pending.take() {
                case .none:
                    if ContinuousClock.now < deadline { try await write(ByteBuffer(string: ": keep-alive\n\n")) }
                case .tooLarge:
                    try await write(
                        ByteBuffer(
                            string:
                                "event: error\ndata: {\"error\":{\"code\":\"TooLarge\",\"message\":\"the result is over \(ResponseStream.inlineLimit) bytes: ask for less ($top, $select, $filter)\"}}\n\n"
                        ))
                    break loop
                case .result(let data):
                    id += 1
                    try await write(ByteBuffer(string: "event: result\nid: \(id)\n"))
                    // The buffer every stream of the result shares: written, not copied.
                    try await write(data)
                }
            }
            group.cancelAll()
        }
    }
}

/// What the observing task has for the writing one: nothing new, the newest rendering, or the
/// end of a result grown too large.
private final class Pending: Sendable {
    enum Item {
        case none
        case result(ByteBuffer)
        case tooLarge
    }
    let value = Mutex<Item>(.none)

    /// What there is, leaving nothing.
    func take() -> Item {
        value.withLock { item in
            defer { item = .none }
            return item
        }
    }
}

/// The live-query streams each client address holds (`LiveStream`), bounded by
/// `ServeOptions.maxStreamsPerClient`: one client cannot make the server keep, and write to,
/// hundreds of streams (issue 37, F10).
final class StreamCounts: Sendable {
    private let counts = Mutex<[String: Int]>([:])

    /// A place for one more stream of `client`, given back when the slot is released; past
    /// `limit`, 429 Too Many Requests.
    func reserve(for client: String, limit: Int) throws -> Slot {
        let taken = counts.withLock { counts -> Bool in
            guard counts[client, default: 0] < limit else { return false }
            counts[client, default: 0] += 1
            return true
        }
        guard taken else {
            var failure = ODataFailure(
                .tooManyRequests,
                "this client (\(client)) holds \(limit) live-query streams (text/event-stream) already, the most one client may (serve --max-streams-per-client \(limit)): close one, or watch fewer queries",
                code: "TooManyStreams")
            failure.headers[.retryAfter] = "5"
            throw failure
        }
        return Slot(client: client, counts: self)
    }

    /// Streams of `client` now.
    func count(_ client: String) -> Int { counts.withLock { $0[client] ?? 0 } }

    fileprivate func release(_ client: String) {
        counts.withLock { counts in
            counts[client, default: 1] -= 1
            if counts[client] == 0 { counts[client] = nil }
        }
    }

    /// One stream's place: given back when the slot goes (the stream's response body ended or
    /// was dropped unwritten).
    final class Slot: Sendable {
        let client: String
        let counts: StreamCounts
        init(client: String, counts: StreamCounts) { (self.client, self.counts) = (client, counts) }
        deinit { counts.release(client) }
    }
}
