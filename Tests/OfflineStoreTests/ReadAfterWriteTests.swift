import Foundation
import Testing
@testable import OfflineStore

/// A read that starts after a write returned sees it, also through reused read transactions.
struct ReadAfterWriteTests {
    @Test func readsSeeEveryCommittedWrite() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("os-raw-\(UUID().uuidString)").path
        let s = try OfflineStore.create(at: dir, metadata: Array(SampleData.metadata.utf8), configuration: SampleData.configuration)
        for i in 0..<200 {
            #expect(try s.get(set: "Products", key: [.string("P\(i)")]) == nil)
            try s.load(set: "Products", entities: [["ProductID": .string("P\(i)")]])
            #expect(try s.get(set: "Products", key: [.string("P\(i)")]) != nil, "write \(i) not visible")
            #expect(try s.count(set: "Products") == i + 1)
        }
    }
}

extension ReadAfterWriteTests {
    @Test func jsonLoadThenGet() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("os-raw-\(UUID().uuidString)").path
        let s = try OfflineStore.create(at: dir, metadata: Array(SampleData.metadata.utf8), configuration: SampleData.configuration)
        for set in SampleData.setsInLoadOrder { try s.load(set: set, json: Array(SampleData.json(set).utf8)) }
        #expect(try s.count(set: "Products") == 24)
        var keys: [String] = []
        try s.scan(set: "Products") { p in if case .string(let k)? = p["ProductID"] { keys.append(k) }; return true }
        #expect(keys.contains("HT-1001"), "\(keys)")
        #expect(try s.get(set: "Products", key: [.string("HT-1001")]) != nil)
        #expect(try s.get(set: "Products", key: [.string("HT-1000")]) != nil)
    }
}
