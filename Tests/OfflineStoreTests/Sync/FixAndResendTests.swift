import NIOHTTP1
import AsyncHTTPClient
import Foundation
import Testing
@testable import OfflineStore
@testable import Queue
import Storage

/// SAP's ways out of the ErrorArchive besides giving the change up (`resolveError`): retry the
/// refused request unchanged (`retryError`), or fix the entity — a change to an entity in error
/// merges into the refused request, which leaves the ErrorArchive and goes on the next flush.
/// Against `serve`, with the service's own data read back.
@Suite(.checksStores) struct FixAndResendTests {
    static func dec(_ s: String) -> Value { .decimal(EDMDecimal(s)!) }

    /// A create refused because the service has the key (409), with a dependent that needs it;
    /// the key freed on the service; `retryError` sends both again: applied once each.
    @Test func aRefusedRequestRetriedGoesThroughOnce() async throws {
        let (served, store) = try await FlushFixture.pair(optimize: false)
        try await store.create(
            set: "BusinessPartners", entity: ["BusinessPartnerID": .string("BP-R"), "CompanyName": .string("Mine")])
        try await store.create(set: "Products", entity: ["ProductID": .string("P-R"), "SupplierID": .string("BP-R")])
        try await withServer(served) { http, server in
            #expect(
                try await http.send(
                    .POST, "BusinessPartners", body: #"{"BusinessPartnerID":"BP-R","CompanyName":"Theirs"}"#
                ).status == 201)
            let first = try await store.flush(serviceRoot: server.url)
            #expect(first.archived == 2 && first.succeeded == 0, "\(first)")
            let errors = try FlushFixture.errors(store)
            #expect(errors.count == 2 && errors[0]["HTTPStatusCode"] == .int(409) && errors[1]["CausedBy"] == .int(1))
            // Retrying the dependent alone is refused: it was not the service's refusal.
            #expect(throws: EntityError.self) { try store.retryError(requestID: 2) }
            // Someone frees the key on the service; retry: both go.
            #expect(try await http.send(.DELETE, "BusinessPartners('BP-R')").status == 204)
            #expect(try store.retryError(requestID: 1) == [1, 2])
            #expect(try FlushFixture.errors(store).isEmpty)
            #expect(try FlushFixture.queue(store).allSatisfy { $0.status == .pending })
            let second = try await store.flush(serviceRoot: server.url)
            #expect(second.succeeded == 2 && second.archived == 0, "\(second)")
            let partner = try await http.get("BusinessPartners('BP-R')").object
            #expect(partner["CompanyName"] as? String == "Mine")
            #expect(try await http.get("Products('P-R')").status == 200)
        }
        #expect(try store.check().isConsistent)
    }

    /// An update the service refuses (412: the entity changed on the service since the store
    /// read it) is fixed the SAP way: a refresh brings the service's image and ETag (rebased
    /// under the pending change), then changing the entity merges into the refused request,
    /// which leaves the ErrorArchive; the store passes `check` in between; the next flush sends
    /// the merged request, once.
    @Test func changingTheEntityInErrorMergesIntoTheRefusedRequest() async throws {
        let (served, store) = try await FlushFixture.pair()
        try store.define(name: "Products", url: "Products")
        try await withServer(served) { http, server in
            _ = try await store.refresh(serviceRoot: server.url)
            #expect(try store.serverETag(set: "Products", key: [.string("HT-1002")]) != nil)
            try await store.update(
                set: "Products", key: [.string("HT-1002")], changes: ["Name": .string("first try")])
            // Someone changes it on the service first: the flush's If-Match is stale.
            let theirs = try await http.send(
                .PATCH, "Products('HT-1002')", body: #"{"Category":"changed on the service"}"#)
            #expect((200..<300).contains(theirs.status), "\(theirs.status) \(theirs.text)")
            let first = try await store.flush(serviceRoot: server.url)
            #expect(first.archived == 1, "\(first)")
            let refused = try FlushFixture.errors(store)
            #expect(refused.count == 1 && refused.first?["HTTPStatusCode"] == .int(412), "\(refused)")
            #expect(try store.entities("Products?$filter=offline.inErrorState()").count == 1)
            #expect(try store.check().isConsistent)

            // Fix: refresh (the service's image and ETag under the pending change), change again.
            _ = try await store.refresh(serviceRoot: server.url)
            try await store.update(set: "Products", key: [.string("HT-1002")], changes: ["Price": Self.dec("77.5")])
            #expect(try FlushFixture.errors(store).isEmpty)
            let queue = try FlushFixture.queue(store)
            #expect(queue.count == 1 && queue.first?.status == .pending, "\(queue)")
            #expect(queue.first?.body?.contains("first try") == true && queue.first?.body?.contains("77.5") == true)
            #expect(try store.check().isConsistent)
            let second = try await store.flush(serviceRoot: server.url)
            #expect(second.succeeded == 1 && second.archived == 0, "\(second)")
            let there = try await http.get("Products('HT-1002')").object
            #expect(there["Name"] as? String == "first try")
            #expect((there["Price"] as? NSNumber)?.doubleValue == 77.5)
            #expect(there["Category"] as? String == "changed on the service")
        }
    }
}
