/// What `check` found: counts, and every inconsistency (empty when the store is consistent).
public struct IntegrityReport: Sendable, CustomStringConvertible {
    public var entities = 0
    public var indexEntries = 0
    public var problems: [String] = []
    public var isConsistent: Bool { problems.isEmpty }

    public var description: String {
        if isConsistent { return "ok: \(entities) entities, \(indexEntries) index entries" }
        return problems.joined(separator: "\n")
    }
}

extension EntityStore {
    /// Verifies the whole store in one read transaction: every row decodes and fits the schema and
    /// sits under its own key; every index has exactly one entry per entity and each entry matches
    /// the entity it points to; unique indexes hold no duplicates.
    public func check(maxProblems: Int = 100) throws -> IntegrityReport {
        var report = IntegrityReport()
        func problem(_ s: String) { if report.problems.count < maxProblems { report.problems.append(s) } }
        try read { t in
            for name in setNames {
                let set = try self.set(name)
                var rows = 0
                try set.scanRaw(t) { key, row in
                    rows += 1
                    let props: Properties
                    do { props = try set.codec.decode(row) } catch {
                        problem("\(name): row under key \(Array(key)) does not decode: \(error)")
                        return true
                    }
                    do {
                        try set.validate(props, partial: false)
                        let k = try set.encodeKey(try set.keyValues(props))
                        if !k.elementsEqual(key) { problem("\(name): row \(set.describeKey(try set.keyValues(props))) is stored under another key") }
                    } catch {
                        problem("\(name): row under key \(Array(key)) is invalid: \(error)")
                    }
                    return true
                }
                report.entities += rows
                for index in set.indexes {
                    var entries = 0
                    var previousTuple: [UInt8]? = nil
                    try set.scanIndex(t, index, lower: nil, upper: nil) { entry, pk in
                        entries += 1
                        let tuple = Array(entry.prefix(entry.count - pk.count))
                        if index.definition.unique, tuple == previousTuple,
                           !(try KeyCodec.decode(entry, count: index.definition.components.count, descending: index.descending).values.contains(.null)) {
                            problem("\(name): unique index '\(index.definition.name)' has duplicate entries")
                        }
                        previousTuple = tuple
                        guard let row = try t.get(set.entities, pk) else {
                            problem("\(name): index '\(index.definition.name)' has an entry for a missing entity")
                            return true
                        }
                        guard let props = try? set.codec.decode(row),
                              let expected = try? index.entryKey(props, primaryKey: Array(pk)) else { return true }
                        if !expected.elementsEqual(entry) {
                            problem("\(name): index '\(index.definition.name)' has a stale entry for \(set.describeKey((try? set.keyValues(props)) ?? []))")
                        }
                        return true
                    }
                    report.indexEntries += entries
                    if entries != rows {
                        problem("\(name): index '\(index.definition.name)' has \(entries) entries for \(rows) entities")
                    }
                }
            }
        }
        return report
    }

    /// Entity and index counts per set, and the file's size.
    public func stats() throws -> StoreStats {
        try read { t in
            var sets: [StoreStats.SetStats] = []
            for name in setNames {
                let set = try self.set(name)
                let indexes = try set.indexes.map { ($0.definition.name, try t.count($0.database), $0.definition.automatic) }
                sets.append(.init(name: name, entities: try set.count(t), indexes: indexes.map { .init(name: $0.0, entries: $0.1, automatic: $0.2) }))
            }
            return StoreStats(sets: sets, fileSize: environment.fileSize, mapSize: environment.mapSize)
        }
    }

    /// Imports server data into `set`: every entity is upserted, all in one transaction (all or
    /// nothing). Returns how many were written.
    @discardableResult
    public func load(set name: String, entities: [Properties]) throws -> Int {
        let set = try self.set(name)
        return try write { t in
            for e in entities { try set.upsert(t, e) }
            return entities.count
        }
    }
}

/// Counts for `offline-store stats`.
public struct StoreStats: Sendable {
    public struct IndexStats: Sendable {
        public var name: String
        public var entries: Int
        public var automatic: Bool
    }
    public struct SetStats: Sendable {
        public var name: String
        public var entities: Int
        public var indexes: [IndexStats]
    }
    public var sets: [SetStats]
    public var fileSize: Int
    public var mapSize: Int
}
