import Synchronization
import NIOHTTP1
import AsyncHTTPClient
import Foundation
import NIOCore
import Testing
@testable import OfflineStore

/// `serve`'s live queries (`Accept: text/event-stream`) of what issue 37 found stale: a result
/// with `$expand` (one level, of one entity, and nested) gets an event when a write changes only
/// an expanded entity (F12), and a result with `$select` gets one when a write changes only a
/// property it leaves out — the entity's ETag, which the event carries (F15) — so a client that
/// sends the streamed ETag with `If-Match` is not refused 412.
@Suite(.checksStores) struct ServeLiveExpandTests {
    /// A live query of `path` on `server`: the events so far, and the task reading them.
    static func stream(
        _ client: HTTPClient, _ server: ServerProcess, _ path: String
    ) async throws -> (
        ServeLiveStreamTests.Received, Task<Void, any Error>
    ) {
        var request = HTTPClientRequest(url: server.url + path)
        request.headers.add(name: "Accept", value: "text/event-stream")
        let response = try await client.execute(request, timeout: .seconds(120))
        #expect(response.status == .ok)
        let received = ServeLiveStreamTests.Received()
        let reading = Task {
            for try await chunk in response.body {
                let s = String(buffer: chunk)
                received.text.withLock { $0 += s }
            }
        }
        #expect(try await eventually(within: 60) { received.events.count == 1 }, "\(path)")
        return (received, reading)
    }

    /// The last event's JSON.
    static func last(_ received: ServeLiveStreamTests.Received) -> [String: Any] {
        guard let event = received.events.last, let range = event.range(of: "data: ") else { return [:] }
        let json = event[range.upperBound...].replacingOccurrences(of: "\ndata: ", with: "\n")
        return (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any] ?? [:]
    }

    @Test func aWriteToAnExpandedSetIsStreamed() async throws {
        let (served, _) = try await FlushFixture.pair()
        let server = try await ServerProcess.start(store: served)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let http = HTTP(client: client, base: server.url)
        let product = try #require(
            try await http.get("Products?$top=1&$select=ProductID,SupplierID").object["value"] as? [[String: Any]])[0]
        let (productID, supplier) = (product["ProductID"] as! String, product["SupplierID"] as! String)
        let item = try #require(
            try await http.get("SalesOrderItems?$top=1").object["value"] as? [[String: Any]])[0]
        let (order, position) = (item["SalesOrderID"] as! String, item["ItemPosition"] as! Int)
        let customer = try #require(try await http.get("SalesOrders('\(order)')").object["CustomerID"] as? String)

        let paths = [
            "BusinessPartners?$expand=Products",
            "BusinessPartners('\(supplier)')?$expand=Products",
            "BusinessPartners('\(customer)')?$expand=SalesOrders($expand=Items)",
        ]
        var streams: [(ServeLiveStreamTests.Received, Task<Void, any Error>)] = []
        for path in paths { streams.append(try await Self.stream(client, server, path)) }
        defer { for s in streams { s.1.cancel() } }

        #expect(try await http.send(.PATCH, "Products('\(productID)')", body: #"{"Name":"expanded"}"#).status == 204)
        for (path, (received, _)) in zip(paths.prefix(2), streams) {
            #expect(try await eventually(within: 60) { received.events.count == 2 }, "\(path): no event")
            #expect(received.events.last?.contains(#""Name":"expanded""#) == true, "\(path)")
        }
        let nested = streams[2].0
        #expect(
            try await http.send(
                .PATCH, "SalesOrderItems(SalesOrderID='\(order)',ItemPosition=\(position))", body: #"{"Quantity":977}"#
            ).status == 204)
        #expect(try await eventually(within: 60) { nested.events.count == 2 }, "nested: no event")
        #expect(nested.events.last?.contains(#""Quantity":977"#) == true, "\(nested.events.last ?? "")")

        try await client.shutdown()
        #expect(await server.stop() == 0)
    }

    @Test func anETagTheStreamCarriesIsKeptCurrent() async throws {
        let (served, _) = try await FlushFixture.pair()
        let server = try await ServerProcess.start(store: served)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let http = HTTP(client: client, base: server.url)
        let (one, r1) = try await Self.stream(client, server, "Products('HT-1000')?$select=Name")
        let (many, r2) = try await Self.stream(client, server, "Products?$select=Name&$top=3&$orderby=ProductID")
        defer {
            r1.cancel()
            r2.cancel()
        }
        let first = try #require(Self.last(one)["@odata.etag"] as? String)
        // Only Price, which the streams leave out: the ETag changes, and the streams say so.
        #expect(try await http.send(.PATCH, "Products('HT-1000')", body: #"{"Price":4321.5}"#).status == 204)
        #expect(try await eventually(within: 60) { one.events.count == 2 }, "no event for a new ETag")
        #expect(try await eventually(within: 60) { many.events.count == 2 }, "no event for a new ETag")
        let streamed = try #require(Self.last(one)["@odata.etag"] as? String)
        #expect(streamed != first)
        let listed = (Self.last(many)["value"] as? [[String: Any]])?.first?["@odata.etag"] as? String
        #expect(listed == streamed)
        // The streamed ETag is the entity's: a write with it is taken, not refused 412.
        let patched = try await http.send(
            .PATCH, "Products('HT-1000')", body: #"{"Name":"with the streamed ETag"}"#,
            headers: [("If-Match", streamed)])
        #expect(patched.status == 204, "\(patched.text)")
        // A write that changes nothing a stream carries brings no event.
        #expect(try await eventually(within: 60) { one.events.count == 3 })
        #expect(try await http.send(.PATCH, "Products('HT-1001')", body: #"{"Price":1}"#).status == 204)
        try await Task.sleep(for: .milliseconds(500))
        #expect(one.events.count == 3, "\(one.events)")
        try await client.shutdown()
        #expect(await server.stop() == 0)
    }
}
