import Foundation
import TestSupport
import Testing
@testable import OfflineStore
import Samples

/// A read that starts after a write returned sees it, also through reused read transactions.
@Suite(.checksStores) struct ReadAfterWriteTests {
    @Test(.runsOffThePool) func readsSeeEveryCommittedWrite() throws {
        let dir = TestScratch.directory("os-raw")
        let s = try OfflineStore.create(
            at: dir, metadata: Array(SampleData.metadata.utf8), configuration: SampleData.configuration)
        for i in 0..<200 {
            #expect(try s.get(set: "Products", key: [.string("P\(i)")]) == nil)
            try s.load(set: "Products", entities: [["ProductID": .string("P\(i)")]])
            #expect(try s.get(set: "Products", key: [.string("P\(i)")]) != nil, "write \(i) not visible")
            #expect(try s.count(set: "Products") == i + 1)
        }
    }
}

extension ReadAfterWriteTests {
    @Test(.runsOffThePool) func jsonLoadThenGet() throws {
        let dir = TestScratch.directory("os-raw")
        let s = try OfflineStore.create(
            at: dir, metadata: Array(SampleData.metadata.utf8), configuration: SampleData.configuration)
        for set in SampleData.setsInLoadOrder { try s.load(set: set, json: Array(SampleData.json(set).utf8)) }
        #expect(try s.count(set: "Products") == 24)
        var keys: [String] = []
        try s.scan(set: "Products") { p in
            if case .string(let k)? = p["ProductID"] { keys.append(k) }; return true
        }
        #expect(keys.contains("HT-1001"), "\(keys)")
        #expect(try s.get(set: "Products", key: [.string("HT-1001")]) != nil)
        #expect(try s.get(set: "Products", key: [.string("HT-1000")]) != nil)
    }
}

extension ReadAfterWriteTests {
    /// Readers on many threads while writers group-commit: every read sees a consistent snapshot
    /// (an order's count of items only grows, and never exceeds what was committed), no errors.
    @Test func concurrentReadersAndWriters() async throws {
        let dir = TestScratch.directory("os-conc")
        let s = try OfflineStore.create(
            at: dir, metadata: Array(SampleData.metadata.utf8), configuration: SampleData.configuration)
        let writers = 4, perWriter = 150
        try s.load(set: "SalesOrders", entities: (0..<writers).map { ["SalesOrderID": .string("SO\($0)")] })
        try await withThrowingTaskGroup(of: Void.self) { group in
            for w in 0..<writers {
                group.addTask {
                    for i in 0..<perWriter {
                        try await s.upsert(
                            set: "SalesOrderItems",
                            entity: [
                                "SalesOrderID": .string("SO\(w)"), "ItemPosition": .int(Int64(i)),
                                "Quantity": .int(Int64(i % 7)),
                            ])
                    }
                }
            }
            for _ in 0..<4 {
                group.addTask {
                    var last = [Int](repeating: 0, count: writers)
                    for n in 0..<300 {
                        let w = n % writers
                        let seen = try s.queries.count("SalesOrders('SO\(w)')/Items")
                        let direct = try s.entities("SalesOrderItems?$filter=SalesOrderID eq 'SO\(w)'").count
                        #expect(
                            seen >= last[w] && seen <= perWriter && direct >= seen,
                            "order \(w): \(seen) after \(last[w]), then \(direct)")
                        last[w] = max(seen, direct)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try s.count(set: "SalesOrderItems") == writers * perWriter)
        #expect(try s.check().isConsistent)
    }
}
