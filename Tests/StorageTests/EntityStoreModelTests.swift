import LMDB
import Testing
@testable import Storage

/// Thousands of seeded random operations on three sets with indexes, checked against a plain
/// dictionary model after every step, with index look-ups compared too, and the integrity check
/// at the end.
struct EntityStoreModelTests {
    /// Two covering indexes (`INCLUDE`) among them: `check` at the end compares their carried values.
    static let indexes = [
        "BusinessPartners": [
            "Country INCLUDE CompanyName, Address, Emails", "Address/City DESC, CompanyName", "UNIQUE CompanyName",
        ],
        "SalesOrderItems": ["ProductID INCLUDE Quantity, NetAmount", "Quantity DESC, ProductID"],
    ]

    struct Model {
        var sets: [String: [[UInt8]: Properties]] = [:]
    }

    static func partner(_ r: inout SeededRandom) -> Properties {
        var p: Properties = [
            "PartnerID": .string("P\(Int.random(in: 0..<60, using: &r))"),
            "CompanyName": .string("Co \(Int.random(in: 0..<200, using: &r))"),
        ]
        if Bool.random(using: &r) { p["Country"] = .string(["US", "DE", "IN", "中国"].randomElement(using: &r)!) }
        if Bool.random(using: &r) {
            p["Address"] = .complex(["City": .string(["Berlin", "Austin", "Pune"].randomElement(using: &r)!)])
        }
        return p
    }

    static func item(_ r: inout SeededRandom) -> Properties {
        var p: Properties = [
            "SalesOrderID": .string("SO\(Int.random(in: 0..<10, using: &r))"),
            "ItemPosition": .int(Int64.random(in: 0..<8, using: &r) * 10),
        ]
        if Bool.random(using: &r) { p["ProductID"] = .string("HT-\(Int.random(in: 1000..<1010, using: &r))") }
        if Bool.random(using: &r) { p["Quantity"] = .int(Int64.random(in: -5...20, using: &r)) }
        if Bool.random(using: &r) {
            p["NetAmount"] = .decimal(
                EDMDecimal(significand: Int128(Int.random(in: -99999...99999, using: &r)), scale: 2))
        }
        return p
    }

    @Test(.runsOffThePool) func randomOperationsMatchTheModel() throws {
        let seed = testSeed("randomOperationsMatchTheModel")
        var r = SeededRandom(seed: seed)
        let dir = temporaryDirectory()
        let store = try Fixtures.openStore(dir, indexes: Self.indexes, mapSize: 1 << 17)  // small: the map must grow
        var model = Model()
        var failures = 0
        for step in 0..<4_000 {
            let setName = Bool.random(using: &r) ? "BusinessPartners" : "SalesOrderItems"
            let set = try store.set(setName)
            let props = setName == "BusinessPartners" ? Self.partner(&r) : Self.item(&r)
            let keyValues = try set.keyValues(props)
            let key = try set.encodeKey(keyValues)
            let existing = model.sets[setName]?[key]
            let op = Int.random(in: 0..<6, using: &r)
            // What the model expects: the new state of this key, or nil when the store must refuse.
            var expected: Properties?? = .none  // .none = refused
            switch op {
            case 0: expected = existing == nil ? .some(props) : .none
            case 1: expected = .some(props)
            case 2:
                if var merged = existing {
                    for (k, v) in props { merged[k] = v }
                    expected = .some(merged)
                }
            case 3: expected = existing == nil ? .none : .some(props)
            case 4: expected = .some(nil)
            default:  // an invalid write: must be refused and change nothing
                expected = .none
            }
            // Unique CompanyName: refuse when another partner has the name.
            if case .some(.some(let new)) = expected, setName == "BusinessPartners",
                model.sets[setName, default: [:]].contains(where: {
                    $0.key != key && $0.value["CompanyName"] == new["CompanyName"]
                })
            {
                expected = .none
            }
            do {
                try store.write { t in
                    switch op {
                    case 0: try set.insert(t, props)
                    case 1: try set.upsert(t, props)
                    case 2: try set.merge(t, key: keyValues, props)
                    case 3: try set.replace(t, key: keyValues, props)
                    case 4: try set.delete(t, key: keyValues)
                    default:
                        try set.upsert(t, props)  // applied, then undone by the throw below
                        var bad = props
                        bad[setName == "BusinessPartners" ? "Country" : "Quantity"] = .string(
                            String(repeating: "x", count: 9))
                        try set.upsert(t, bad)
                    }
                }
                guard case .some(let state) = expected else {
                    Issue.record("step \(step): op \(op) on \(setName) should have been refused (seed \(seed))")
                    return
                }
                model.sets[setName, default: [:]][key] = state
            } catch is EntityError {
                failures += 1
                if case .some = expected {
                    Issue.record("step \(step): op \(op) on \(setName) refused unexpectedly (seed \(seed))"); return
                }
            }
            let stored = try store.read { t in try set.get(t, key: keyValues) }
            #expect(stored == model.sets[setName]?[key] ?? nil, "step \(step) seed \(seed)")
            if step % 250 == 0 { try compareAll(store, model) }
        }
        try compareAll(store, model)
        #expect(failures > 100)
        _ = try expectConsistent(store)
    }

    /// Full scans and every index's order and look-ups against the model.
    func compareAll(_ store: EntityStore, _ model: Model) throws {
        try store.read { t in
            for name in ["BusinessPartners", "SalesOrderItems"] {
                let set = try store.set(name)
                let rows = model.sets[name, default: [:]]
                var scanned: [Properties] = []
                try set.scan(t) {
                    scanned.append($0); return true
                }
                #expect(scanned == rows.sorted { $0.key.lexicographicallyPrecedes($1.key) }.map(\.value))
                #expect(try set.count(t) == rows.count)
                for index in set.indexes {
                    let expectedOrder = try rows.map { (try index.entryKey($0.value, primaryKey: $0.key), $0.value) }
                        .sorted { $0.0.lexicographicallyPrecedes($1.0) }.map(\.1)
                    var viaIndex: [Properties] = []
                    try set.scanIndexEntries(t, index, lower: nil, upper: nil) { _, pk, value in
                        let entity = try set.entity(t, primaryKey: pk)!
                        viaIndex.append(entity)
                        #expect(value.elementsEqual(index.entryValue(entity)), "index \(index.definition.text)")
                        if index.isCovering {
                            // The carried row reads as the entity restricted to the carried properties.
                            let carried = try set.codec.decode(value)
                            #expect(
                                carried == Properties(entity.filter { index.carried.contains($0.key) }),
                                "index \(index.definition.text)")
                        }
                        return true
                    }
                    #expect(viaIndex == expectedOrder, "index \(index.definition.name)")
                    // Equality look-up on the first component, for one value present.
                    if let probe = rows.values.first.map({ index.componentValues($0)[0] }) {
                        var found: [Properties] = []
                        try set.findEqual(t, index: index, [probe]) { pk in
                            found.append(try set.entity(t, primaryKey: pk)!); return true
                        }
                        #expect(found == expectedOrder.filter { index.componentValues($0)[0] == probe })
                    }
                }
            }
        }
    }

    @Test(.runsOffThePool) func rangeAndPrefixLookupsFollowValueOrder() throws {
        let store = try Fixtures.openStore(
            temporaryDirectory(), indexes: ["SalesOrderItems": ["Quantity DESC", "ProductID"]])
        let set = try store.set("SalesOrderItems")
        try store.write { t in
            for q in [-3, 0, 5, 7, 10] {
                try set.insert(
                    t,
                    [
                        "SalesOrderID": .string("S"), "ItemPosition": .int(Int64(q)), "Quantity": .int(Int64(q)),
                        "ProductID": .string("HT-\(q)"),
                    ])
            }
            try set.insert(t, ["SalesOrderID": .string("S"), "ItemPosition": .int(99)])  // null Quantity and ProductID
        }
        try store.read { t in
            let desc = set.index(named: "Quantity DESC")!
            var got: [Int64] = []
            try set.findRange(
                t, index: desc, lower: ValueBound(.int(0), inclusive: false),
                upper: ValueBound(.int(7), inclusive: true)
            ) { pk in
                if case .int(let q)? = try set.entity(t, primaryKey: pk)?["Quantity"] { got.append(q) }
                return true
            }
            #expect(got == [7, 5])  // index order is descending
            got = []
            try set.findRange(t, index: desc, lower: nil, upper: ValueBound(.int(5), inclusive: false)) { pk in
                if case .int(let q)? = try set.entity(t, primaryKey: pk)?["Quantity"] { got.append(q) }
                return true
            }
            #expect(got == [0, -3])  // null never matches a range
            var names: [String] = []
            try set.findPrefix(t, index: set.index(named: "ProductID")!, stringPrefix: "HT-1") { pk in
                if case .string(let s)? = try set.entity(t, primaryKey: pk)?["ProductID"] { names.append(s) }
                return true
            }
            #expect(names == ["HT-10"])
        }
        _ = try expectConsistent(store)
    }

    @Test(.runsOffThePool) func badWritesNameTheProblemAndChangeNothing() throws {
        let store = try Fixtures.openStore(temporaryDirectory())
        let set = try store.set("BusinessPartners")
        let ok: Properties = ["PartnerID": .string("P1"), "CompanyName": .string("SAP")]
        try store.write { t in try set.insert(t, ok) }
        let cases: [(Properties, String)] = [
            (
                ["PartnerID": .string("P2"), "CompanyName": .string("x"), "Countr": .string("US")],
                "unknown property 'Countr'"
            ),
            (["PartnerID": .string("P2"), "CompanyName": .int(3)], "property 'CompanyName': expected Edm.String"),
            (["PartnerID": .string("P2")], "property 'CompanyName' cannot be null"),
            (["CompanyName": .string("x")], "key property 'PartnerID'"),
            (["PartnerID": .string(String(repeating: "k", count: 600)), "CompanyName": .string("x")], "MaxLength"),
            (["PartnerID": .string("P2"), "CompanyName": .string("x"), "Country": .string("LONG")], "MaxLength is 3"),
            (["PartnerID": .string("P1"), "CompanyName": .string("x")], "already exists"),
        ]
        for (props, message) in cases {
            do {
                try store.write { t in try set.insert(t, props) }
                Issue.record("accepted \(props)")
            } catch {
                #expect("\(error)".contains(message), "\(error)")
            }
        }
        // Oversized keys are refused with a clear error, not a crash in LMDB.
        let noMax = EntityStore.self
        _ = noMax
        #expect(throws: EntityError.self) { try set.encodeKey([.string(String(repeating: "k", count: 600))]) }
        #expect(try store.read { t in try set.count(t) } == 1)
        _ = try expectConsistent(store)
    }

    @Test(.runsOffThePool) func addingAnIndexBackfillsAndDroppingRemovesIt() throws {
        let dir = temporaryDirectory()
        let store = try Fixtures.openStore(dir)
        let set = try store.set("BusinessPartners")
        try store.write { t in
            for i in 0..<50 {
                try set.insert(
                    t,
                    [
                        "PartnerID": .string("P\(i)"), "CompanyName": .string("C\(i % 7)"),
                        "Country": .string(i % 2 == 0 ? "US" : "DE"),
                    ])
            }
        }
        try store.addIndex(IndexDefinition(entitySet: "BusinessPartners", definition: "Country"))
        let index = try store.set("BusinessPartners").index(named: "Country")!
        var n = 0
        try store.read { t in
            try store.set("BusinessPartners").findEqual(t, index: index, [.string("US")]) { _ in
                n += 1; return true
            }
        }
        #expect(n == 25)
        _ = try expectConsistent(store)
        #expect(throws: EntityError.self) {
            try store.addIndex(IndexDefinition(entitySet: "BusinessPartners", definition: "UNIQUE CompanyName"))
        }
        try store.dropIndex(set: "BusinessPartners", name: "Country")
        #expect(try store.set("BusinessPartners").index(named: "Country") == nil)
        #expect(try store.environment.database(named: "i/BusinessPartners/Country", create: false) == nil)
        _ = try expectConsistent(store)
    }

    /// A backfill sorts its entries before it writes them (`EntityStore.backfillSorted`): in one
    /// batch appended to the empty index, in many put in order. Either way the index holds exactly
    /// the entries — keys and carried values — that maintenance writes as entities are inserted.
    @Test(.runsOffThePool) func aBackfillWritesWhatMaintenanceWrites() throws {
        let definition = "Country INCLUDE CompanyName"
        let maintained = try Fixtures.openStore(temporaryDirectory())
        try maintained.addIndex(IndexDefinition(entitySet: "BusinessPartners", definition: definition))
        let backfilled = try Fixtures.openStore(temporaryDirectory())
        var r = SeededRandom(seed: 24)
        let countries: [Value] = [.string("US"), .string("DE"), .string("FR"), .string(""), .string("ÄÖ"), .null]
        let rows = (0..<600).map { n -> Properties in
            [
                "PartnerID": .string("P\(n)"), "CompanyName": .string("C\(r.next() % 1_000)"),
                "Country": countries[Int(r.next() % UInt64(countries.count))],
            ]
        }
        for store in [maintained, backfilled] {
            let set = try store.set("BusinessPartners")
            for part in stride(from: 0, to: rows.count, by: 150) {
                let some = rows[part..<(part + 150)]
                try store.write { t in for row in some { try set.insert(t, row) } }
            }
        }
        try backfilled.addIndex(IndexDefinition(entitySet: "BusinessPartners", definition: definition))

        func entries(_ store: EntityStore, _ name: String) throws -> [[UInt8]] {
            let db = try #require(try store.environment.database(named: name, create: false))
            return try store.read { t in
                var out: [[UInt8]] = []
                try t.withCursor(db) { c in
                    var e = try c.first()
                    while let (k, v) = e {
                        out.append(Array(k) + [0xFF] + Array(v))
                        e = try c.next()
                    }
                }
                return out
            }
        }
        let name = try #require(try maintained.set("BusinessPartners").index(named: "Country")).definition.databaseName
        let expected = try entries(maintained, name)
        #expect(expected.count == 600)
        #expect(try entries(backfilled, name) == expected)
        _ = try expectConsistent(backfilled)

        // In batches of about 1 KiB (several dozen), into a database of their own.
        let set = try backfilled.set("BusinessPartners")
        let handle = try #require(set.index(named: "Country"))
        let scratch = try #require(try backfilled.environment.database(named: "i/scratch", create: true))
        try backfilled.write { t in
            try EntityStore.backfillSorted(t, from: set, into: scratch, handle: handle, sortBytes: 1_024)
        }
        #expect(try entries(backfilled, "i/scratch") == expected)
    }

    @Test(.runsOffThePool) func foreignKeysAreIndexedAutomatically() throws {
        let store = try Fixtures.openStore(temporaryDirectory())
        #expect(try store.set("SalesOrders").index(named: "PartnerID")?.definition.automatic == true)
        // SalesOrderItems' foreign key SalesOrderID is the key's prefix: the key order serves it.
        #expect(try store.set("SalesOrderItems").indexes.isEmpty)
    }

    @Test(.runsOffThePool) func theMapGrowsByItself() throws {
        let store = try Fixtures.openStore(temporaryDirectory(), mapSize: 1 << 16)
        let set = try store.set("BusinessPartners")
        for batch in 0..<20 {
            try store.write { t in
                for i in 0..<100 {
                    try set.insert(
                        t,
                        [
                            "PartnerID": .string("P\(batch)-\(i)"),
                            "CompanyName": .string(String(repeating: "x", count: 70)),
                        ])
                }
            }
        }
        #expect(try store.read { t in try set.count(t) } == 2000)
        #expect(store.environment.mapSize > 1 << 16)
        _ = try expectConsistent(store)
    }

    @Test func groupCommitRunsConcurrentWritersTogether() async throws {
        let store = try Fixtures.openStore(temporaryDirectory())
        let set = try store.set("BusinessPartners")
        await withThrowingTaskGroup(of: Void.self) { g in
            for i in 0..<200 {
                g.addTask {
                    try await store.write { t in
                        try set.insert(t, ["PartnerID": .string("P\(i)"), "CompanyName": .string("C\(i)")])
                        // only its own change is undone
                        if i % 10 == 0 { throw EntityError.badInput("caller \(i) fails") }
                    }
                }
            }
            var failed = 0
            while let r = await g.nextResult() { if case .failure = r { failed += 1 } }
            #expect(failed == 20)
        }
        #expect(try store.read { t in try set.count(t) } == 180)
        _ = try expectConsistent(store)
    }
}

@Suite(.runsOffThePool) struct CorruptionTests {
    /// Garbage under an entity key: reads throw a clear error, `check` names it, nothing crashes.
    @Test func corruptRowsAreReportedNotFatal() throws {
        let store = try Fixtures.openStore(temporaryDirectory(), indexes: ["BusinessPartners": ["Country"]])
        let set = try store.set("BusinessPartners")
        try store.write { t in
            try set.insert(t, ["PartnerID": .string("P1"), "CompanyName": .string("SAP"), "Country": .string("DE")])
            try set.insert(t, ["PartnerID": .string("P2"), "CompanyName": .string("Talpa"), "Country": .string("DE")])
        }
        let key = try set.encodeKey([.string("P2")])
        var r = SeededRandom(seed: testSeed("corruptRowsAreReportedNotFatal"))
        for _ in 0..<50 {
            let garbage = (0..<Int.random(in: 0...40, using: &r)).map { _ in UInt8.random(in: 0...255, using: &r) }
            try store.write { t in try t.put(set.entities, key, garbage) }
            let got = Result { try store.read { t in try set.get(t, key: [.string("P2")]) } }
            if case .failure(let e) = got { #expect("\(e)".contains("corrupt")) }
            let report = try store.check()
            #expect(!report.isConsistent)
            #expect(report.problems.contains { $0.contains("BusinessPartners") })
        }
        // Restored, the store is consistent again.
        try store.write { t in
            try set.upsert(t, ["PartnerID": .string("P2"), "CompanyName": .string("Talpa"), "Country": .string("DE")])
        }
        _ = try expectConsistent(store)
    }
}

@Suite(.runsOffThePool) struct IndexRecoveryTests {
    /// An index whose backfill never committed (its database exists, its ready marker does not,
    /// as after a crash between the two) is rebuilt from the entities when the store opens.
    @Test func unfinishedBackfillIsRebuiltOnOpen() throws {
        let dir = temporaryDirectory()
        do {
            let store = try Fixtures.openStore(dir, indexes: ["BusinessPartners": ["Country"]])
            let set = try store.set("BusinessPartners")
            try store.write { t in
                for i in 0..<40 {
                    try set.insert(
                        t,
                        [
                            "PartnerID": .string("P\(i)"), "CompanyName": .string("C\(i)"),
                            "Country": .string(i % 2 == 0 ? "US" : "DE"),
                        ])
                }
            }
            let index = set.index(named: "Country")!
            let meta = store.meta
            try store.write { t in
                try t.clear(index.database)
                try t.delete(meta, Array("ready/\(index.definition.databaseName)".utf8))
            }
            #expect(try !store.check().isConsistent)  // the state a crash would leave
        }
        let reopened = try Fixtures.openStore(dir, indexes: ["BusinessPartners": ["Country"]])
        _ = try expectConsistent(reopened)
        let set = try reopened.set("BusinessPartners")
        var us = 0
        try reopened.read { t in
            try set.findEqual(t, index: set.index(named: "Country")!, [.string("US")]) { _ in
                us += 1; return true
            }
        }
        #expect(us == 20)
    }
}
