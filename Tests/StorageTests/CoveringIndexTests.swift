import LMDB
import Foundation
import Testing
@testable import Storage

/// Covering indexes (`INCLUDE`): the definition's syntax, the carried values under `check`, and
/// what a changed INCLUDE list does to a store.
@Suite(.runsOffThePool) struct CoveringIndexTests {
    static func items(_ store: EntityStore, count: Int = 30) throws {
        let set = try store.set("SalesOrderItems")
        try store.write { t in
            for i in 0..<count {
                try set.insert(
                    t,
                    [
                        "SalesOrderID": .string("SO\(i % 7)"), "ItemPosition": .int(Int64(i)),
                        "ProductID": .string("HT-\(1000 + i % 4)"), "Quantity": .int(Int64(i)),
                        "NetAmount": .decimal(EDMDecimal(significand: Int128(i * 150), scale: 2)),
                    ])
            }
        }
    }

    /// The carried values of every entry of `index`, decoded.
    static func carried(_ store: EntityStore, _ setName: String, _ index: String) throws -> [Properties] {
        let set = try store.set(setName)
        let handle = try #require(set.index(named: index))
        var out: [Properties] = []
        try store.read { t in
            try set.scanIndexEntries(t, handle, lower: nil, upper: nil) { _, _, value in
                out.append(value.isEmpty ? [:] : try set.codec.decode(value))
                return true
            }
        }
        return out
    }

    @Test func definitionsParseAndBadOnesAreRefused() throws {
        let d = try IndexDefinition(
            entitySet: "SalesOrderItems", definition: "  ProductID  include Quantity ,NetAmount, Quantity ")
        #expect(d.name == "ProductID")
        #expect(d.included == ["Quantity", "NetAmount"])
        #expect(d.text == "ProductID INCLUDE Quantity,NetAmount")
        let u = try IndexDefinition(
            entitySet: "BusinessPartners", definition: "UNIQUE CompanyName DESC INCLUDE Country")
        #expect(u.unique && u.name == "UNIQUE CompanyName DESC" && u.included == ["Country"])
        for bad in [
            "ProductID INCLUDE", "ProductID INCLUDE Quantity,,NetAmount", "ProductID INCLUDE Address/City",
            "INCLUDE Quantity",
            "ProductID INCLUDE Quantity NetAmount",
        ] {
            #expect(throws: EntityError.self, "\(bad)") {
                try IndexDefinition(entitySet: "SalesOrderItems", definition: bad)
            }
        }
        // An unknown property, and one index configured twice with different lists.
        #expect(throws: EntityError.self) {
            try Fixtures.openStore(temporaryDirectory(), indexes: ["SalesOrderItems": ["ProductID INCLUDE Nope"]])
        }
        #expect(throws: EntityError.self) {
            try Fixtures.openStore(
                temporaryDirectory(),
                indexes: ["SalesOrderItems": ["ProductID INCLUDE Quantity", "ProductID INCLUDE NetAmount"]])
        }
    }

    /// `check` compares each entry's carried values with its entity's: a wrong value, a missing
    /// one and one on a plain index are each reported.
    @Test func checkReportsCarriedValuesThatDiffer() throws {
        let store = try Fixtures.openStore(
            temporaryDirectory(), indexes: ["SalesOrderItems": ["ProductID INCLUDE Quantity, NetAmount", "Quantity"]])
        try Self.items(store)
        _ = try expectConsistent(store)
        let set = try store.set("SalesOrderItems")
        let covering = try #require(set.index(named: "ProductID"))
        let plain = try #require(set.index(named: "Quantity"))
        let entity = try #require(try store.read { t in try set.get(t, key: [.string("SO3"), .int(10)]) })
        let pk = try set.encodeKey([.string("SO3"), .int(10)])
        var wrong = entity
        wrong["Quantity"] = .int(999)
        for (index, value) in [
            (covering, covering.entryValue(wrong)), (covering, []), (plain, covering.entryValue(entity)),
        ] {
            let entryKey = try index.entryKey(entity, primaryKey: pk)
            try store.write { t in try t.put(index.database, entryKey, value) }
            let report = try store.check()
            #expect(!report.isConsistent)
            #expect(
                report.problems.contains { $0.contains("index '\(index.definition.name)' carries values") }, "\(report)"
            )
            try store.write { t in try t.put(index.database, entryKey, index.entryValue(entity)) }
            _ = try expectConsistent(store)
        }
        // A write that keeps the entry's key but changes a carried value rewrites the value.
        try store.write { t in
            try set.merge(t, key: [.string("SO3"), .int(10)], ["NetAmount": .decimal(EDMDecimal(7))])
        }
        _ = try expectConsistent(store)
        #expect(
            try Self.carried(store, "SalesOrderItems", "ProductID").contains {
                $0["NetAmount"] == .decimal(EDMDecimal(7))
            })
    }

    /// A store opened with another INCLUDE list for an index rebuilds the index with that list
    /// (its ready marker records the list it was built with); `addIndex` with another list
    /// rebuilds it and records the new list in the configuration.
    @Test func aChangedIncludeListRebuildsTheIndex() throws {
        let dir = temporaryDirectory()
        do {
            let store = try Fixtures.openStore(dir, indexes: ["SalesOrderItems": ["ProductID INCLUDE Quantity"]])
            try Self.items(store)
            #expect(
                try Self.carried(store, "SalesOrderItems", "ProductID").allSatisfy {
                    $0["Quantity"] != nil && $0["NetAmount"] == nil
                })
        }
        do {
            let store = try Fixtures.openStore(dir, indexes: ["SalesOrderItems": ["ProductID INCLUDE NetAmount"]])
            _ = try expectConsistent(store)
            #expect(
                try Self.carried(store, "SalesOrderItems", "ProductID").allSatisfy {
                    $0["Quantity"] == nil && $0["NetAmount"] != nil
                })
        }
        do {
            let store = try Fixtures.openStore(dir, indexes: ["SalesOrderItems": ["ProductID"]])
            _ = try expectConsistent(store)
            #expect(try Self.carried(store, "SalesOrderItems", "ProductID").allSatisfy { $0.isEmpty })
            try store.addIndex(
                IndexDefinition(entitySet: "SalesOrderItems", definition: "ProductID INCLUDE Quantity, NetAmount"))
            _ = try expectConsistent(store)
            #expect(store.configuration.indexes["SalesOrderItems"] == ["ProductID INCLUDE Quantity,NetAmount"])
            #expect(
                try Self.carried(store, "SalesOrderItems", "ProductID").allSatisfy {
                    $0["Quantity"] != nil && $0["NetAmount"] != nil
                })
            // Writes after the rebuild keep the new list.
            let set = try store.set("SalesOrderItems")
            try store.write { t in
                try set.upsert(
                    t,
                    [
                        "SalesOrderID": .string("SO9"), "ItemPosition": .int(1), "ProductID": .string("HT-1000"),
                        "Quantity": .int(5),
                    ])
            }
            _ = try expectConsistent(store)
        }
        // Read-only with a list the index was not built with: the index is left out (queries
        // scan), the file is not touched; the same properties in another order are the same list.
        let env = try Environment(path: dir, readOnly: true)
        let readOnly = try EntityStore(
            environment: env, schema: Fixtures.schema, metadata: [],
            configuration: StorageSettings(indexes: ["SalesOrderItems": ["ProductID INCLUDE Quantity"]]))
        #expect(try readOnly.set("SalesOrderItems").index(named: "ProductID") == nil)
        let again = try EntityStore(
            environment: env, schema: Fixtures.schema, metadata: [],
            configuration: StorageSettings(indexes: ["SalesOrderItems": ["ProductID INCLUDE NetAmount, Quantity"]]))
        #expect(
            try again.set("SalesOrderItems").index(named: "ProductID")?.definition.included == [
                "NetAmount", "Quantity",
            ])
    }
}

/// The index scans' stop test (`EntitySetHandle.precedes`, eight bytes at a time) orders byte
/// strings as `lexicographicallyPrecedes` does: random strings of 0–40 bytes over a small
/// alphabet (so long common prefixes and prefixes of each other are common).
@Test func indexStopTestOrdersAsLexicographicallyPrecedes() {
    var r = SeededRandom(seed: 31)
    for _ in 0..<20_000 {
        let a = (0..<Int.random(in: 0...40, using: &r)).map { _ in UInt8.random(in: 0...2, using: &r) * 127 }
        var b = Bool.random(using: &r) ? a : []
        if b.isEmpty || Bool.random(using: &r) {
            b = (0..<Int.random(in: 0...40, using: &r)).map { _ in UInt8.random(in: 0...2, using: &r) * 127 }
        } else if !b.isEmpty {
            b[Int.random(in: 0..<b.count, using: &r)] = UInt8.random(in: 0...2, using: &r) * 127
            if Bool.random(using: &r) { b.removeLast(Int.random(in: 0...b.count, using: &r)) }
        }
        let got = a.withUnsafeBytes { EntitySetHandle.precedes($0, b) }
        #expect(got == a.lexicographicallyPrecedes(b), "\(a) \(b)")
    }
}
