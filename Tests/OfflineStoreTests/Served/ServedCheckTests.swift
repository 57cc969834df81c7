import LMDB
import Foundation
import Testing
@testable import OfflineStore
import Samples
@testable import Served
@testable import Storage

/// `check` on the served role's structures: each kind of damage, written directly into a store
/// with a few served writes and records, is reported (by `check` and `check(at:)`); undone, the
/// store is consistent again.
@Suite(.checksStores) struct ServedCheckTests {
    /// A damage: what to write, and what the report must say.
    struct Damage: Sendable, CustomStringConvertible {
        var name: String
        var expected: String
        var apply: @Sendable (WriteView, EntityStore) throws -> Void
        var description: String { name }
    }

    static func seq(_ n: UInt64) -> [UInt8] { ChangeLog.sequenceKey(n) }
    static func entity(_ set: String, _ key: String) -> [UInt8] {
        EntityStore.entityKey(set: set, keyBytes: try! KeyCodec.encode([.string(key)]))
    }
    static func record(at ms: Int64) -> [UInt8] {
        try! RepeatRecord(status: 200, headers: [], body: [], recordedAt: ms, fingerprint: []).encoded()
    }

    // The store has change entries 1 (P-1), 2 (P-2) and the record "r".
    static let damages: [Damage] = [
        Damage(
            name: "an entry without its by-entity entry",
            expected: "changes: entry 99 (Products('HT-1000')) has no changes/by-entity entry"
        ) { t, s in
            try t.put(s.changes, seq(99), [1] + entity("Products", "HT-1000"))
        },
        Damage(
            name: "a by-entity entry without its entry",
            expected: "changes/by-entity: Products ('HT-1001') points to entry 77, which does not exist"
        ) { t, s in
            try t.put(s.changesByEntity, entity("Products", "HT-1001"), seq(77))
        },
        Damage(name: "a bad kind", expected: "changes: entry 1 does not decode") { t, s in
            try t.put(s.changes, seq(1), [9] + entity("Products", "P-1"))
        },
        Damage(name: "an unknown set", expected: "changes: entry 1 names an unknown entity set 'Nope'") { t, s in
            try t.put(s.changes, seq(1), [1] + entity("Nope", "P-1"))
        },
        Damage(name: "a system set", expected: "names an unknown entity set 'RequestQueue'") { t, s in
            try t.put(
                s.changes, seq(1),
                [1] + EntityStore.entityKey(set: "RequestQueue", keyBytes: try KeyCodec.encode([.int(1)])))
        },
        Damage(name: "a sequence key of 3 bytes", expected: "changes: an entry under a 3-byte key does not decode") {
            t, s in
            try t.put(s.changes, [1, 2, 3], [1] + entity("Products", "P-1"))
        },
        Damage(name: "sequence number 0", expected: "changes: entry 0: 0 is not a sequence number") { t, s in
            try t.put(s.changes, seq(0), [1] + entity("Products", "P-1"))
        },
        Damage(
            name: "a key that is not the set's",
            expected: "changes: entry 1: its key does not decode as a key of Products"
        ) { t, s in
            try t.put(s.changes, seq(1), [1] + EntityStore.entityKey(set: "Products", keyBytes: [0xEE, 1]))
        },
        Damage(
            name: "a by-entity entry pointing to another entity's entry",
            expected: "points to entry 2, which is of another entity"
        ) { t, s in
            try t.put(s.changesByEntity, entity("Products", "P-1"), seq(2))
        },
        Damage(
            name: "a by-entity value of 2 bytes",
            expected: "changes/by-entity: the entry of Products ('P-1') is not a sequence number"
        ) { t, s in
            try t.put(s.changesByEntity, entity("Products", "P-1"), [0, 1])
        },
        Damage(name: "a record that does not decode", expected: "repeat: the record of 'r' does not decode") { t, s in
            try t.put(s.repeatRecords, Array("r".utf8), [1, 2, 3])
        },
        Damage(
            name: "a record without its time entry",
            expected: "repeat: the record of 'lonely' has no repeat/by-time entry at its time"
        ) { t, s in
            try t.put(s.repeatRecords, Array("lonely".utf8), record(at: 5))
        },
        Damage(
            name: "a time entry without its record",
            expected: "repeat/by-time: the entry of 'ghost' has no record in repeat"
        ) { t, s in
            try t.put(s.repeatRecordsByTime, RepeatRecords.timeKey(5, id: Array("ghost".utf8)), [])
        },
        Damage(
            name: "a time entry at another time",
            expected: "repeat/by-time: the entry of 'r' is at 6, its record at 1700000000000"
        ) { t, s in
            try t.put(s.repeatRecordsByTime, RepeatRecords.timeKey(6, id: Array("r".utf8)), [])
        },
        Damage(name: "a time entry that is not empty", expected: "repeat/by-time: the entry of 'r' is not empty") {
            t, s in
            try t.put(s.repeatRecordsByTime, RepeatRecords.timeKey(1_700_000_000_000, id: Array("r".utf8)), [1])
        },
        Damage(name: "a time entry key of 8 bytes", expected: "repeat/by-time: an entry key of 8 bytes is too short") {
            t, s in
            try t.put(s.repeatRecordsByTime, Array(repeating: 0, count: 8), [])
        },
        Damage(name: "an id of 201 bytes", expected: "repeat: a record is under an id of 201 bytes") { t, s in
            let id = Array(repeating: UInt8(ascii: "x"), count: 201)
            try t.put(s.repeatRecords, id, record(at: 5))
            try t.put(s.repeatRecordsByTime, RepeatRecords.timeKey(5, id: id), [])
        },
    ]

    /// The raw entries of the served databases, to put back after a damage.
    static func snapshot(_ s: EntityStore) throws -> [(Database, [([UInt8], [UInt8])])] {
        try [s.changes, s.changesByEntity, s.repeatRecords, s.repeatRecordsByTime].map { db in
            try (
                db,
                s.read { t in
                    try t.withCursor(db) { c in
                        var out: [([UInt8], [UInt8])] = []
                        var e = try c.first()
                        while let (k, v) = e { out.append((Array(k), Array(v))); e = try c.next() }
                        return out
                    }
                }
            )
        }
    }

    @Test func everyDamageIsReported() async throws {
        let store = try await makeSampleStore()
        let clock = TestClock()
        store.now = { clock.now }
        _ = try await store.served(repeatabilityID: "r", fingerprint: [1]) { tx in
            _ = try tx.create(set: "Products", entity: ["ProductID": .string("P-1")])
            _ = try tx.create(set: "Products", entity: ["ProductID": .string("P-2")])
            return RecordedResponse(status: 200, headers: [("A", "b")], body: [1])
        }
        let entities = store.entities
        let saved = try Self.snapshot(entities)
        #expect(try store.check().isConsistent)
        for damage in Self.damages {
            _ = try await entities.write { t in try damage.apply(t, entities) }
            for (how, report) in [
                ("check()", try store.check()), ("check(at:)", try OfflineStore.check(at: store.path)),
            ] {
                #expect(
                    !report.isConsistent && report.problems.contains { $0.contains(damage.expected) },
                    "\(damage), \(how): \(report)")
            }
            // Undone, the store is consistent again.
            try await entities.write { t in
                for (db, entries) in saved {
                    try t.clear(db)
                    for (k, v) in entries { try t.put(db, k, v) }
                }
            }
            #expect(try store.check().isConsistent, "\(damage): not consistent after undoing it")
        }
    }
}
