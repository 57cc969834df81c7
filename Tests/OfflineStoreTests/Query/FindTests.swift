import TestSupport
import Foundation
import Samples
import Testing
import OfflineStore

/// `find(set:index:where:)`'s three conditions against a filter over a scan.
@Suite(.checksStores, .runsOffThePool) struct FindTests {
    func sampleStore() throws -> OfflineStore {
        let store = try OfflineStore.create(
            at: tempDir() + "/store", metadata: Array(SampleData.metadata.utf8),
            configuration: SampleData.configuration)
        for set in SampleData.setsInLoadOrder { try store.load(set: set, json: Array(SampleData.json(set).utf8)) }
        return store
    }

    func scan(_ store: OfflineStore, _ set: String, where keep: (Properties) -> Bool) throws -> [Properties] {
        var out: [Properties] = []
        try store.scan(set: set) { e in
            if keep(e) { out.append(e) }
            return true
        }
        return out
    }

    func ids(_ entities: [Properties]) -> Set<Value> { Set(entities.compactMap { $0["ProductID"] }) }

    @Test func equalsRangeAndPrefixMatchAScan() throws {
        let store = try sampleStore()
        let index = "Category,Price DESC"
        let category = Value.string("Notebooks")
        let notebooks = try scan(store, "Products") { $0["Category"] == category }
        #expect(!notebooks.isEmpty)
        #expect(try ids(store.find(set: "Products", index: index, where: .equals([category]))) == ids(notebooks))

        // Price DESC: the range is in value order all the same, and the result in index order.
        let low = EDMDecimal(Int64(1_000)), high = EDMDecimal(Int64(2_000))
        let ranged = try store.find(
            set: "Products", index: index,
            where: .range(
                prefix: [category], from: ValueBound(.decimal(low), inclusive: true),
                to: ValueBound(.decimal(high), inclusive: false)))
        let expected = notebooks.filter { e in
            guard case .decimal(let p)? = e["Price"] else { return false }
            return p >= low && p < high
        }
        #expect(!expected.isEmpty && expected.count < notebooks.count)
        #expect(ids(ranged) == ids(expected))
        let prices = ranged.compactMap { e -> EDMDecimal? in if case .decimal(let p)? = e["Price"] { p } else { nil } }
        #expect(prices == prices.sorted(by: >))

        let prefixed = try store.find(set: "Products", index: index, where: .startsWith("Note"))
        #expect(
            ids(prefixed)
                == ids(
                    try scan(store, "Products") { e in
                        if case .string(let c)? = e["Category"] { c.hasPrefix("Note") } else { false }
                    }))
        #expect(try store.find(set: "Products", index: index, where: .startsWith(prefix: [category], "x")).isEmpty)
    }

    /// A condition on more components than the index has is the caller's input: an error, not a trap.
    @Test func aConditionLongerThanTheIndexIsAnError() throws {
        let store = try sampleStore()
        let two: [Value] = [.string("Notebooks"), .decimal(EDMDecimal(Int64(1)))]
        #expect(throws: EntityError.self) {
            try store.find(set: "Products", index: "Category,Price DESC", where: .equals(two + [.null]))
        }
        #expect(throws: EntityError.self) {
            try store.find(
                set: "Products", index: "Category,Price DESC", where: .range(prefix: two, from: nil, to: nil))
        }
        #expect(throws: EntityError.self) {
            try store.find(set: "Products", index: "Category,Price DESC", where: .startsWith(prefix: two, "a"))
        }
        #expect(throws: EntityError.unknownIndex(set: "Products", index: "Name")) {
            try store.find(set: "Products", index: "Name", where: .equals([]))
        }
    }
}
