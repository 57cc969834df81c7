import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore

/// A V2 upstream without Python: `serve` over an authority store made from V2 `$metadata` is the
/// back end of an offline V2 store, which refreshes from it and flushes to it in V2's dialect
/// (verbose JSON, `$expand` inline, CSRF token fetched, a multipart `$batch` with MERGE) —
/// the client of issue 21 against the server of issue 23, each written to [MS-ODATA] and checked
/// against independent peers elsewhere (mock-sap, pyodata).
@Suite(.checksStores) struct V2UpstreamTests {
    @Test func anOfflineV2StoreRefreshesFromAndFlushesToAV2Serve() async throws {
        let upstream = try V2ServeTests.store()
        try await withServer(upstream) { http, server in
            let configuration = StoreConfiguration(
                serviceRoot: server.url,
                definingRequests: [
                    DefiningRequest(name: "C", url: "Customers?$expand=Orders"),
                    DefiningRequest(name: "O", url: "Orders"),
                ])
            let store = try OfflineStore.create(
                at: tempDir() + "/v2-offline", metadata: Array(V2ServeTests.metadata.utf8),
                configuration: configuration)
            let first = try await store.refresh()
            #expect(try store.count(set: "Customers") == 2, "\(first)")
            #expect(try store.count(set: "Orders") == 3, "\(first)")
            let o1 = try #require(try store.get(set: "Orders", key: [.string("O1")]))
            #expect(o1["Amount"] == .decimal(EDMDecimal("10.50")!) && o1["Quantity"] == .int(7))
            #expect(o1["CreatedAt"] == .dateTimeOffset(EDMDateTimeOffset(ticks: 1_700_000_000_000 * 10_000)))

            try await store.create(
                set: "Orders",
                entity: [
                    "OrderID": .string("O5"), "CustomerID": .string("C2"), "Amount": .decimal(EDMDecimal("7.75")!),
                    "Quantity": .int(2),
                    "CreatedAt": .dateTimeOffset(EDMDateTimeOffset(ticks: 1_720_000_000_000 * 10_000)),
                ])
            try await store.update(
                set: "Orders", key: [.string("O1")], changes: ["Amount": .decimal(EDMDecimal("11.00")!)])
            try await store.delete(set: "Orders", key: [.string("O2")])
            let flushed = try await store.flush()
            #expect(flushed.sent == 3 && flushed.succeeded == 3 && flushed.archived == 0, "\(flushed)")

            // On the upstream, read back as a V2 client reads it.
            let o5 = V2ServeTests.d(try await http.get("Orders('O5')"))
            #expect(o5["Amount"] as? String == "7.75" && o5["Quantity"] as? String == "2", "\(o5)")
            #expect(o5["CreatedAt"] as? String == "/Date(1720000000000)/")
            #expect(V2ServeTests.d(try await http.get("Orders('O1')"))["Amount"] as? String == "11.00")
            #expect(try await http.get("Orders('O2')").status == 404)

            // A change on the upstream comes down with the next refresh; nothing is pending.
            let token = try #require(
                try await http.get("", headers: [("X-CSRF-Token", "Fetch")]).header("X-CSRF-Token"))
            let theirs = try await http.send(
                .PATCH, "Customers('C1')", body: #"{"Name":"Renamed upstream"}"#, headers: [("X-CSRF-Token", token)])
            #expect(theirs.status == 204)
            let second = try await store.refresh()
            #expect(
                try store.get(set: "Customers", key: [.string("C1")])?["Name"] == .string("Renamed upstream"),
                "\(second)")
            #expect(try store.count(set: "Orders") == 3)
            #expect(try store.pendingRequestCount() == 0)
            #expect(try store.check().isConsistent)
        }
        #expect(try OfflineStore.check(at: upstream).isConsistent)
    }
}
