import NIOHTTP1
import AsyncHTTPClient
import Foundation
import Testing
@testable import OfflineStore
import Remote
import Storage
import Sync

/// Issue 37, F16: answers that come back in another order than the requests went (a proxy that
/// reorders a batch's parts). The whole answer is checked before any of it is judged: one that
/// cannot be mapped onto the requests leaves every request of the round in doubt, settled by
/// nothing — it never archives an applied request for another's refusal.
@Suite(.checksStores) struct ReorderedAnswerTests {
    /// Hands a batch's answers back in reverse order.
    struct Reversing: WrappingBackend {
        let inner: HTTPTransport

        func batch(_ requests: [WireRequest], headers: [(String, String)]) async throws -> [WireResponse] {
            try await inner.batch(requests, headers: headers).reversed()
        }
    }

    @Test func answersInAnotherOrderSettleNothingAndTheNextFlushSettlesEach() async throws {
        let (served, store) = try await FlushFixture.pair()
        let server = try await ServerProcess.start(store: served)
        // Another copy created D-1 on the service meanwhile.
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let taken = try await HTTP(client: client, base: server.url).send(
            .POST, "Products", body: #"{"ProductID":"D-1","Name":"theirs"}"#)
        try await client.shutdown()
        #expect(taken.status == 201)
        // Applied by the service (201), and refused by it (the key is taken: 4xx).
        try await store.create(set: "Products", entity: ["ProductID": .string("R-1"), "Name": .string("new")])
        try await store.create(set: "Products", entity: ["ProductID": .string("D-1"), "Name": .string("mine")])
        let reversing = Reversing(inner: HTTPTransport(serviceRoot: server.url, retries: 0))
        let mixed = try await store.flush(backend: reversing, batchSize: 10)
        #expect(mixed.stopped?.contains("does not match the requests sent") == true, "\(mixed)")
        #expect(mixed.succeeded == 0 && mixed.archived == 0, "\(mixed)")
        #expect(try FlushFixture.errors(store).isEmpty, "nothing archived for another request's answer")
        #expect(try FlushFixture.queue(store).allSatisfy { $0.status == .sent }, "both in doubt, to be sent again")
        try await reversing.inner.shutdown()
        // Sent again in order: the create is answered from the service's record, the refusal is
        // the duplicate's own.
        let plain = HTTPTransport(serviceRoot: server.url, retries: 0)
        let again = try await store.flush(backend: plain, batchSize: 10)
        try await plain.shutdown()
        #expect(again.succeeded == 1 && again.archived == 1, "\(again)")
        let errors = try FlushFixture.errors(store)
        #expect(
            errors.count == 1 && errors.first?["AffectedEntity"].map { "\($0)" }?.contains("D-1") == true, "\(errors)")
        #expect(try store.entities("Products('R-1')").count == 1)
        #expect(await server.stop() == 0)
        #expect(try FlushFixture.served(served)["Products"]?.filter { $0["ProductID"] == .string("R-1") }.count == 1)
    }
}
