import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization
import Testing
@testable import OfflineStore
import Samples
import Server
import Storage

/// `serve`'s live queries: a `GET` with `Accept: text/event-stream` streams the result as
/// Server-Sent Events — the current result, then one after each write that changes it, none for a
/// write that does not — and the stream ends when `serve` shuts down gracefully (SIGTERM), which
/// then exits 0. A URL that does not bind is answered 400 as a plain GET would be.
@Suite(.checksStores) struct ServeLiveStreamTests {
    /// What the stream has brought so far.
    final class Received: Sendable {
        let text = Mutex("")
        /// The whole events: each ends with a blank line, and what follows the last one is an
        /// event still arriving (under load a chunk can end inside one: counted, it failed the
        /// checks of its text once).
        var events: [String] {
            text.withLock { t in
                t.components(separatedBy: "\n\n").dropLast().filter { $0.hasPrefix("event: result") }
            }
        }
    }

    @Test func aLiveQueryStreamsEachChangedResultAndEndsOnShutdown() async throws {
        let (served, _) = try await FlushFixture.pair()
        let server = try await ServerProcess.start(store: served)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let http = HTTP(client: client, base: server.url)
        let received = Received()
        var request = HTTPClientRequest(url: server.url + "Products?$filter=ProductID%20eq%20'HT-1000'&$select=Name")
        request.headers.add(name: "Accept", value: "text/event-stream")
        let response = try await client.execute(request, timeout: .seconds(120))
        #expect(response.status == .ok)
        #expect(response.headers.first(name: "Content-Type") == "text/event-stream")
        let reading = Task {
            for try await chunk in response.body {
                let s = String(buffer: chunk)
                received.text.withLock { $0 += s }
            }
        }
        #expect(try await eventually { received.events.count == 1 })
        #expect(received.events.first?.contains("HT-1000") == true, "\(received.events)")
        #expect(received.events.first?.hasPrefix("event: result\nid: 1\ndata: {") == true)
        #expect(received.events.first?.hasSuffix("}") == true, "one data line, the JSON: \(received.events)")
        // A change of the result: a second event with it.
        #expect(
            try await http.send(.PATCH, "Products('HT-1000')", body: #"{"Name":"streamed"}"#).status == 204)
        #expect(try await eventually { received.events.count == 2 })
        #expect(received.events.last?.contains(#""Name":"streamed""#) == true, "\(received.events)")
        // Writes that do not change it: another product. (A property it does not select changes
        // the ETag the event carries, and brings an event: ServeLiveExpandTests.)
        #expect(try await http.send(.PATCH, "Products('HT-1001')", body: #"{"Name":"other"}"#).status == 204)
        try await Task.sleep(for: .milliseconds(500))
        #expect(received.events.count == 2, "\(received.events)")
        // SIGTERM: the stream ends and serve exits 0.
        #expect(await server.stop() == 0, "serve did not exit within 20 s of SIGTERM: \(server.stderr.suffix(2_000))")
        _ = await reading.result
        try await client.shutdown()
    }

    @Test func aLiveQueryThatDoesNotBindIsRefusedAsAGetIs() async throws {
        let (served, _) = try await FlushFixture.pair()
        let server = try await ServerProcess.start(store: served)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let http = HTTP(client: client, base: server.url)
        let bad = try await http.send(
            .GET, "Products?$filter=Nope%20eq%201", headers: [("Accept", "text/event-stream")])
        #expect(bad.status == 400, "\(bad.text)")
        let count = try await http.send(.GET, "Products/$count", headers: [("Accept", "text/event-stream")])
        #expect(count.status == 400, "\(count.text)")
        try await client.shutdown()
        #expect(await server.stop() == 0)
    }

    /// `Accept` values a hostile client may send never take the live-query path by mistake nor
    /// crash it (the fuzz corpus found `,,`): they are answered as a plain GET answers them.
    @Test func oddAcceptHeadersAreAnsweredAsAPlainGet() async throws {
        let (_, store) = try await FlushFixture.pair()
        let server = InMemoryServer(store: store)
        for accept in [",", ";", ",;,", " ", ";text/event-stream", "text/event-streams", "application/json,,"] {
            let r = await server.respond(
                method: "GET", target: "/Products?$top=1", headers: [("Accept", accept)], body: [])
            #expect(r?.status == 200 || r?.status == 406, "Accept '\(accept)': \(r?.status ?? 0)")
            // A live query's body starts with `retry:` (and would end only at its lifetime).
            #expect(
                r?.body.starts(with: Array("retry:".utf8)) == false, "Accept '\(accept)' was taken for a live query")
        }
    }
}
