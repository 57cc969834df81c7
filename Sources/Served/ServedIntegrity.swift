import LMDB
import Storage

extension EntityStore {
    /// The served role's invariants, in read transaction `t`; each problem as a sentence.
    ///
    /// - every `changes` entry has an 8-byte sequence number above 0 and a value that decodes: a
    ///   kind (upsert or delete), the name of one of the store's entity sets, and a key tuple of
    ///   that set that decodes exactly;
    /// - `changes` and `changes/by-entity` agree one to one: each entry's entity maps to its number,
    ///   and each `changes/by-entity` entry to an entry of that entity (so one entry per entity);
    /// - every `repeat` record decodes, under an id of 1 to 200 bytes, and has exactly one
    ///   `repeat/by-time` entry, at its time; every `repeat/by-time` entry is empty and belongs to a
    ///   record recorded at that time.
    func checkServed(_ t: ReadView, problem: (String) -> Void) throws {
        // changes → changes/by-entity
        var entries = 0
        try Self.each(t, changes) { k, v in
            entries += 1
            let n = ChangeLog.sequence(k)
            let name = n.map { "changes: entry \($0)" } ?? "changes: an entry under a \(k.count)-byte key"
            guard let entry = ChangeLog.entry(key: k, value: v) else {
                problem(
                    n == 0 ? "\(name): 0 is not a sequence number" : "\(name) does not decode (kind, set name, key)")
                return
            }
            guard let set = try? self.set(entry.set), !schema.isSystemSet(entry.set) else {
                problem("\(name) names an unknown entity set '\(entry.set)'")
                return
            }
            let decoded = try? entry.keyBytes.withUnsafeBytes { try KeyCodec.decode($0, count: set.type.key.count) }
            if decoded?.length != entry.keyBytes.count {
                problem("\(name): its key does not decode as a key of \(entry.set)")
            }
            let entity = EntityStore.entityKey(set: entry.set, keyBytes: entry.keyBytes)
            if let s = try t.get(changesByEntity, entity) {
                if let m = ChangeLog.sequence(s), m != entry.sequence {
                    problem(
                        "\(name) (\(entry.set)(\(set.describeKeyBytes(entry.keyBytes)))): changes/by-entity points to entry \(m) instead"
                    )
                }
            } else {
                problem(
                    "\(name) (\(entry.set)(\(set.describeKeyBytes(entry.keyBytes)))) has no changes/by-entity entry")
            }
        }
        // changes/by-entity → changes
        var byEntity = 0
        try Self.each(t, changesByEntity) { k, v in
            byEntity += 1
            let who =
                ChangeLog.split(k).map { "\($0.set) \(describe($0.set, $0.keyBytes))" }
                ?? "an entity whose key does not decode"
            guard let n = ChangeLog.sequence(v) else {
                problem("changes/by-entity: the entry of \(who) is not a sequence number")
                return
            }
            guard let value = try t.get(changes, ChangeLog.sequenceKey(n)) else {
                problem("changes/by-entity: \(who) points to entry \(n), which does not exist")
                return
            }
            if !(value.count == k.count + 1 && value[1...].elementsEqual(k)) {
                problem("changes/by-entity: \(who) points to entry \(n), which is of another entity")
            }
        }
        if entries != byEntity {
            problem("changes has \(entries) entries, changes/by-entity \(byEntity): they must agree one to one")
        }
        // repeat → repeat/by-time
        var records = 0
        try Self.each(t, repeatRecords) { k, v in
            records += 1
            let id = String(decoding: k, as: UTF8.self)
            if !(1...RepeatRecords.maxIDLength).contains(k.count) {
                problem(
                    "repeat: a record is under an id of \(k.count) bytes (1 to \(RepeatRecords.maxIDLength) allowed)")
            }
            guard let r = RepeatRecord(v) else {
                problem("repeat: the record of '\(_excerpt(id))' does not decode")
                return
            }
            if try t.get(repeatRecordsByTime, RepeatRecords.timeKey(r.recordedAt, id: Array(k))) == nil {
                problem("repeat: the record of '\(_excerpt(id))' has no repeat/by-time entry at its time")
            }
        }
        // repeat/by-time → repeat
        var times = 0
        try Self.each(t, repeatRecordsByTime) { k, v in
            times += 1
            guard let time = RepeatRecords.time(ofTimeKey: k) else {
                problem("repeat/by-time: an entry key of \(k.count) bytes is too short")
                return
            }
            let id = Array(k[8...])
            let name = "repeat/by-time: the entry of '\(_excerpt(String(decoding: id, as: UTF8.self)))'"
            if !v.isEmpty { problem("\(name) is not empty") }
            guard let value = try t.get(repeatRecords, id) else {
                problem("\(name) has no record in repeat")
                return
            }
            if let r = RepeatRecord(value), r.recordedAt != time {
                problem("\(name) is at \(time), its record at \(r.recordedAt)")
            }
        }
        if records != times {
            problem("repeat has \(records) records, repeat/by-time \(times) entries: they must agree one to one")
        }
    }

    /// Visits every entry of `db` in key order.
    private static func each(_ t: ReadView, _ db: Database, _ body: (MappedBytes, MappedBytes) throws -> Void) throws {
        try t.withCursor(db) { c in
            var e = try c.first()
            while let (k, v) = e {
                try body(k, v)
                e = try c.next()
            }
        }
    }

    private func describe(_ set: String, _ keyBytes: [UInt8]) -> String {
        (try? self.set(set)).map { "(\($0.describeKeyBytes(keyBytes)))" } ?? "(\(keyBytes))"
    }
}
