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

    func response(_ request: Request, url: String, resource: String) throws -> Response {
        guard !resource.hasSuffix("/$count"), !url.contains("$deltatoken") else {
            throw ODataFailure(
                .badRequest,
                "a live query (text/event-stream) needs a collection or an entity, not /$count or a delta link")
        }
        let store = service.store
        var options = ResultOptions(serviceRoot: service.serviceRoot(request), etags: true)
        options.verbose = V2Dialect.applies(to: store)
        // A URL that does not bind is answered as a GET's. Streams of one URL and root share each
        // run and its one rendering.
        let results = try store.observeRendering(url, options: options, limit: ResponseStream.inlineLimit)
        let lifetime = service.options.writeTimeout.map { $0 * 0.9 } ?? .seconds(3600)
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        let body = ResponseBody { writer in
            try await writer.write(ByteBuffer(string: "retry: 1000\n\n"))
            // Woken by each result, each keep-alive, and the end (a graceful shutdown ends it).
            let (signals, signal) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
            try await withGracefulShutdownHandler {
                try await Self.stream(results, signals: signals, signal: signal, until: .now + lifetime) {
                    try await writer.write(ByteBuffer(string: $0))
                }
            } onGracefulShutdown: {
                signal.finish()
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: headers, body: body)
    }

    /// Writes the events until `deadline`, the end of `results`, or a cancellation: each
    /// rendering as it comes (the newest, when several came while one was written).
    static func stream(
        _ results: AsyncThrowingStream<[UInt8], any Error>, signals: AsyncStream<Void>,
        signal: AsyncStream<Void>.Continuation, until deadline: ContinuousClock.Instant,
        write: (String) async throws -> Void
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
                    if ContinuousClock.now < deadline { try await write(": keep-alive\n\n") }
                case .tooLarge:
                    try await write(
                        "event: error\ndata: {\"error\":{\"code\":\"TooLarge\",\"message\":\"the result is over \(ResponseStream.inlineLimit) bytes: ask for less ($top, $select, $filter)\"}}\n\n"
                    )
                    break loop
                case .result(let json):
                    id += 1
                    var bytes = json[...]
                    while bytes.last == UInt8(ascii: "\n") { bytes = bytes.dropLast() }
                    let data = String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "\n", with: "\ndata: ")
                    try await write("event: result\nid: \(id)\ndata: \(data)\n\n")
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
        case result([UInt8])
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
