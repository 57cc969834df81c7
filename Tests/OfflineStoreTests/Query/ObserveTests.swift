import Foundation
import Synchronization
import Testing
@testable import OfflineStore
import Samples
import Storage
import TestSupport

/// `OfflineStore.observe`: a live query against what a fresh `entities(url)` gives after each
/// commit — random writes, local and from another process, writes to other sets and to properties
/// the result does not hold (no element, and for other sets no run) — and its bounds: one commit of
/// many changes is one element, a consumer that never reads holds only the newest result,
/// cancelling stops it.
@Suite(.checksStores) struct ObserveTests {
    /// What a consumer task has received so far.
    final class Seen: Sendable {
        let all = Mutex<[[Properties]]>([])
        /// How the stream ended, if it did: an observer's stream ends only when cancelled.
        let ended = Mutex<String?>(nil)
        var count: Int { all.withLock { $0.count } }
        var latest: [Properties]? { all.withLock { $0.last } }
    }

    static func watch(_ stream: AsyncThrowingStream<[Properties], any Error>) -> (Seen, Task<Void, any Error>) {
        let seen = Seen()
        let task = Task {
            do {
                for try await result in stream { seen.all.withLock { $0.append(result) } }
                seen.ended.withLock { $0 = "finished" }
            } catch {
                seen.ended.withLock { $0 = "failed: \(error)" }
                throw error
            }
        }
        return (seen, task)
    }

    /// Waits until the store's live queries stop running (no run for 200 ms).
    static func quiet(_ store: OfflineStore) async {
        var last = store.observationCounts.evaluations
        while true {
            try? await Task.sleep(for: .milliseconds(200))
            let now = store.observationCounts.evaluations
            if now == last { return }
            last = now
        }
    }

    static func price(_ cents: Int) -> Value {
        .decimal(EDMDecimal("\(cents / 100).\(String(format: "%02d", cents % 100))")!)
    }

    @Test func anObserverGivesWhatAFreshQueryGivesAfterEveryWrite() async throws {
        let (_, store) = try await FlushFixture.pair()
        // The observer polls for other processes' commits every 20 ms.
        var random = SeededRandom(seed: testSeed("ObserveTests"))
        let url =
            "Products?$filter=Price gt 500&$orderby=Price desc,ProductID&$select=Name,Price&$expand=Supplier($select=CompanyName)"
        let (seen, task) = Self.watch(try store.observe(url, otherProcessesEvery: .milliseconds(20)))
        defer { task.cancel() }
        #expect(try await eventually { try seen.latest == store.entities(url) })
        let products = try store.entities("Products").map { $0["ProductID"]! }
        let partners = try store.entities("BusinessPartners").map { $0["BusinessPartnerID"]! }
        var created: [Value] = []
        var processWrites = 0
        var partnerWrites = 0
        for step in 0..<60 {
            switch random.next() % 6 {
            case 5:
                // Another process: the `offline-store` tool changes a product's price.
                let p = products[Int(random.next() % UInt64(products.count))]
                guard case .string(let key) = p else { continue }
                let cents = Int(random.next() % 200_000)
                let r = try await ChildProcess.run(
                    [
                        "update", "--store", store.path, "Products('\(key)')",
                        #"{"Price":\#(cents / 100).\#(cents % 100)}"#,
                    ],
                    timeout: 60)
                #expect(r.status == 0, "\(r.stderr)")
                processWrites += 1
            case 0:
                let id = Value.string("OB-\(step)")
                try await store.create(
                    set: "Products",
                    entity: [
                        "ProductID": id, "Name": .string("new \(step)"),
                        "Price": Self.price(Int(random.next() % 200_000)),
                    ])
                created.append(id)
            case 1 where !created.isEmpty:
                try await store.delete(set: "Products", key: [created.removeFirst()])
            case 2:
                partnerWrites += 1
                let p = partners[Int(random.next() % UInt64(partners.count))]
                try await store.update(
                    set: "BusinessPartners", key: [p], changes: ["CompanyName": .string("renamed \(step)")])
            default:
                let p = products[Int(random.next() % UInt64(products.count))]
                try await store.update(
                    set: "Products", key: [p], changes: ["Price": Self.price(Int(random.next() % 200_000))])
            }
            let fresh = try store.entities(url)
            #expect(
                try await eventually { seen.latest == fresh },
                """
                step \(step): the observer never gave the fresh result; its stream: \
                \(seen.ended.withLock { $0 } ?? "open"), live queries: \(store.observationCounts), \
                elements: \(seen.count)
                """)
        }
        #expect(processWrites > 0, "some writes came from another process")
        let all = seen.all.withLock { $0 }
        #expect(all.count <= 61)
        // An element equal to the one before it comes only for a change of an expanded Supplier,
        // which the entities do not hold (what the URL answers changed: issue 37, F12).
        #expect(
            zip(all, all.dropFirst()).filter { $0 == $1 }.count <= partnerWrites,
            "an element equal to the one before it, for no change of what the URL answers")
    }

    @Test func commitsThatCannotChangeTheResultBringNoElement() async throws {
        let (_, store) = try await FlushFixture.pair()
        // In key order: without `$orderby` the order is the index's (Category, Price desc), and a
        // new price moves an entity in it — a change of the result.
        let url = "Products?$filter=Category eq 'Notebooks'&$select=Name&$orderby=ProductID"
        let (seen, task) = Self.watch(try store.observe(url))
        defer { task.cancel() }
        #expect(try await eventually { seen.count == 1 })
        await Self.quiet(store)
        let runs = store.observationCounts.evaluations
        // Another set: the query does not even run again.
        let partner = try #require(try store.entities("BusinessPartners?$top=1").first?["BusinessPartnerID"])
        for n in 0..<5 {
            try await store.update(set: "BusinessPartners", key: [partner], changes: ["CompanyName": .string("x\(n)")])
        }
        await Self.quiet(store)
        #expect(store.observationCounts.evaluations == runs, "a write to another set ran the query")
        #expect(seen.count == 1)
        // A property the result does not hold: it runs again, and gives nothing new.
        let notebook = try #require(try store.entities("Products?$filter=Category eq 'Notebooks'&$top=1").first)
        let key = try #require(notebook["ProductID"])
        try await store.update(set: "Products", key: [key], changes: ["Price": Self.price(123_456)])
        #expect(try await eventually { store.observationCounts.evaluations > runs })
        await Self.quiet(store)
        #expect(
            seen.count == 1,
            "a change of a property not selected brought an element: \(seen.all.withLock { $0.map { $0.map(\.description) } })"
        )
        // One it holds: an element.
        try await store.update(set: "Products", key: [key], changes: ["Name": .string("watched")])
        #expect(try await eventually { seen.count == 2 })
        #expect(seen.latest == (try store.entities(url)))
    }

    /// A query of one entity (`Set(key)`) runs again only for a commit that may have written that
    /// entity: it did, or it wrote too many keys to keep (`WrittenKeys.limit`).
    @Test func aQueryOfOneEntityRunsOnlyForCommitsThatMayHaveWrittenIt() async throws {
        let (_, store) = try await FlushFixture.pair()
        let (seen, task) = Self.watch(try store.observe("Products('HT-1000')"))
        defer { task.cancel() }
        #expect(try await eventually { seen.count == 1 })
        await Self.quiet(store)
        let runs = store.observationCounts.evaluations
        for n in 0..<5 {
            try await store.update(set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("other \(n)")])
        }
        await Self.quiet(store)
        #expect(store.observationCounts.evaluations == runs, "another product's change ran it")
        try await store.update(set: "Products", key: [.string("HT-1000")], changes: ["Name": .string("this one")])
        #expect(try await eventually { seen.latest?.first?["Name"] == .string("this one") })
        await Self.quiet(store)
        // A commit of more keys than are kept: it may have written the entity, so it runs.
        let before = store.observationCounts.evaluations
        let others = try store.entities("Products?$filter=ProductID ne 'HT-1000'").map { $0["ProductID"]! }
        _ = try await store.apply(
            (0..<12).flatMap { round in
                others.map {
                    OfflineStore.Change.update(set: "Products", key: [$0], changes: ["Name": .string("r\(round)")])
                }
            })
        #expect(try await eventually { store.observationCounts.evaluations == before + 1 })
        await Self.quiet(store)
        #expect(store.observationCounts.evaluations == before + 1)
        #expect(seen.count == 2, "it ran, and the entity had not changed")
    }

    @Test func anotherProcessesCommitIsNoticed() async throws {
        let (_, store) = try await FlushFixture.pair()
        let url = "Products?$filter=ProductID eq 'HT-1000'"
        let (seen, task) = Self.watch(try store.observe(url, otherProcessesEvery: .milliseconds(20)))
        defer { task.cancel() }
        #expect(try await eventually { seen.count == 1 })
        let r = try await ChildProcess.run(
            ["update", "--store", store.path, "Products('HT-1000')", #"{"Name":"from another process"}"#], timeout: 60)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try await eventually { seen.latest?.first?["Name"] == .string("from another process") })
        #expect(seen.latest == (try store.entities(url)))
    }

    @Test func oneCommitOfManyChangesIsOneElement() async throws {
        let (_, store) = try await FlushFixture.pair()
        let url = "Products?$orderby=ProductID&$select=Name"
        let (seen, task) = Self.watch(try store.observe(url))
        defer { task.cancel() }
        #expect(try await eventually { seen.count == 1 })
        let keys = try store.entities("Products").map { $0["ProductID"]! }
        _ = try await store.apply(
            keys.map { .update(set: "Products", key: [$0], changes: ["Name": .string("batch")]) })
        #expect(try await eventually { seen.count == 2 })
        await Self.quiet(store)
        #expect(seen.count == 2, "\(keys.count) changes in one commit")
        #expect(seen.latest?.allSatisfy { $0["Name"] == .string("batch") } == true)
    }

    @Test func aConsumerThatDoesNotReadHoldsOnlyTheNewestResult() async throws {
        let (_, store) = try await FlushFixture.pair()
        let url = "Products('HT-1000')"
        let stream = try store.observe(url)
        for n in 0..<300 {
            try await store.update(set: "Products", key: [.string("HT-1000")], changes: ["Name": .string("n\(n)")])
        }
        await Self.quiet(store)
        // At most one result waits: the first read is the newest, or (when the last run had not
        // come yet) one before the newest, which comes next — never a backlog of 300.
        var iterator = stream.makeAsyncIterator()
        var read = 0
        while let next = try await iterator.next() {
            read += 1
            if next.first?["Name"] == .string("n299") { break }
        }
        #expect(read <= 2, "\(read) elements read before the newest result")
        #expect(store.observationCounts.observers == 1)
    }

    @Test func cancellingStopsIt() async throws {
        let (_, store) = try await FlushFixture.pair()
        let (seen, task) = Self.watch(try store.observe("Products"))
        #expect(try await eventually { seen.count == 1 })
        #expect(store.observationCounts.observers == 1)
        task.cancel()
        #expect(try await eventually { store.observationCounts.observers == 0 })
        let runs = store.observationCounts.evaluations
        try await store.update(set: "Products", key: [.string("HT-1000")], changes: ["Name": .string("later")])
        await Self.quiet(store)
        #expect(store.observationCounts.evaluations == runs)
        #expect(seen.count == 1)
    }

    /// Fifty observers of one URL are one live query: one run a commit, not fifty, and each sees
    /// every result. One that joins just after a write gets that write in its first element, not
    /// the shared query's result from before it. The query stops with its last observer.
    @Test func observersOfOneURLShareItsRuns() async throws {
        let (_, store) = try await FlushFixture.pair()
        let url = "Products?$filter=Price gt 500&$orderby=ProductID&$select=Name,Price"
        let watchers = try (0..<50).map { _ in Self.watch(try store.observe(url)) }
        let now = try store.entities(url)
        #expect(try await eventually { watchers.allSatisfy { $0.0.latest == now } })
        #expect(store.observationCounts.observers == 50)
        #expect(store.observationCounts.queries == 1)
        await Self.quiet(store)
        let before = store.observationCounts.evaluations
        for n in 0..<5 {
            try await store.update(
                set: "Products", key: [.string("HT-1000")], changes: ["Price": Self.price(100_000 + n)])
            let fresh = try store.entities(url)
            #expect(try await eventually { watchers.allSatisfy { $0.0.latest == fresh } }, "write \(n)")
        }
        await Self.quiet(store)
        let runs = store.observationCounts.evaluations - before
        #expect(runs >= 1 && runs <= 5, "\(runs) runs for 5 commits and 50 observers")
        #expect(watchers.allSatisfy { $0.0.count == watchers[0].0.count }, "observers saw different elements")

        for n in 0..<20 {
            try await store.update(
                set: "Products", key: [.string("HT-1000")], changes: ["Price": Self.price(200_000 + n)])
            var joiner = try store.observe(url).makeAsyncIterator()
            let first = try await joiner.next()
            let fresh = try store.entities(url)
            #expect(first == fresh, "joined after write \(n): an older result came first")
        }
        #expect(try await eventually { store.observationCounts.observers == 50 })
        #expect(store.observationCounts.queries == 1)
        for w in watchers { w.1.cancel() }
        #expect(try await eventually { store.observationCounts.observers == 0 })
        #expect(store.observationCounts.queries == 0)
    }

    @Test func aTypedCollectionObservesDecodedEntities() async throws {
        struct Product: Codable, Sendable, Equatable {
            var ProductID: String
            var Name: String?
        }
        let (_, store) = try await FlushFixture.pair()
        let products = try store.collection(Product.self, set: "Products")
        var iterator = try products.observe("$filter=ProductID eq 'HT-1000'").makeAsyncIterator()
        #expect(try await iterator.next()?.map(\.ProductID) == ["HT-1000"])
        try await store.update(set: "Products", key: [.string("HT-1000")], changes: ["Name": .string("typed")])
        #expect(try await iterator.next() == [Product(ProductID: "HT-1000", Name: "typed")])
    }

    @Test(.runsOffThePool) func aURLThatDoesNotBindThrowsAtOnce() throws {
        let (_, store) = try FlushFixture.pair()
        #expect(throws: (any Error).self) { _ = try store.observe("Products?$filter=Nope eq 1") }
        #expect(throws: (any Error).self) { _ = try store.observe("NoSuchSet") }
        #expect(store.observationCounts.observers == 0)
    }
}
