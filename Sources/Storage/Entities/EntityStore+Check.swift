import LMDB
import Foundation

extension EntityStore {
    /// Verifies the store in directory `path` without trusting its file: the structural audit
    /// (`PageAudit`, `pread` only) runs first, and the store is opened and walked through LMDB
    /// only when `data.mdb` is sound. A damaged file is reported, never read through the map,
    /// where it could crash the process.
    ///
    /// The audit is of the snapshot an open read transaction sees, so that another process
    /// committing meanwhile cannot reuse the pages being read. Before the audit, LMDB reads only
    /// what the check at open has made safe: the two meta pages (through the map) and its lock
    /// file's reader table, which is not made from `data.mdb` (the first process to open the
    /// store resets it). A reader takes meta page `txnid & 1`, the one the audit walks unless the
    /// meta pages hold transactions of the wrong parity, which the audit reports.
    ///
    /// `progress` is called as the logical check goes (see `CheckProgress`).
    ///
    /// - Throws: `DataFileError.unreadable` when `data.mdb` cannot be read; what `open` throws.
    package static func check(
        path: String, maxProblems: Int = 100, roles: [any StoreRole.Type] = [],
        progress: ((CheckProgress) -> Void)? = nil
    ) throws -> IntegrityReport {
        let dataFile = path + "/data.mdb"
        guard let size = (try? FileManager.default.attributesOfItem(atPath: dataFile))?[.size] as? NSNumber else {
            throw EntityError.badInput("no store in '\(path)' (run 'offline-store init' first)")
        }
        let audit: PageAuditReport
        do {
            // An empty file is no store; opening it would make LMDB write a new one there.
            guard size.intValue > 0 else { throw DataFileError.tooShortForMetaPages(path: dataFile, fileSize: 0) }
            audit = try Environment(path: path, readOnly: true).readAudited(maxProblems: maxProblems) { _, audit in
                audit
            }
        } catch let refused as DataFileError {
            // Not even to be mapped: the audit of the file alone says what is wrong.
            guard let byFile = try PageAudit.run(path: dataFile, maxProblems: maxProblems) else {
                preconditionFailure("an audit of the newest snapshot always has one")
            }
            var report = IntegrityReport(damaged: byFile)
            if report.isConsistent { report.problem("\(refused)", max: maxProblems) }
            return report
        }
        guard audit.isSound else { return IntegrityReport(damaged: audit) }
        return try open(path: path, readOnly: true, roles: roles).check(
            maxProblems: maxProblems, audited: audit, progress: progress)
    }

    /// Verifies the whole store in one read transaction. First the structural audit of that
    /// transaction's snapshot (`PageAudit`, `pread` only: every page, node, key order, count);
    /// if the file is damaged that is the report, and nothing is read through LMDB's map. Then
    /// the logical check: every row decodes and fits the schema and sits under its own key; every
    /// index has exactly one entry per entity and each entry matches the entity it points to (a
    /// covering index's carried values too);
    /// unique indexes hold no duplicates; then each role's invariants (`StoreRole.check`: the
    /// request queue's, sync's membership and ETags, the served role's change log and
    /// repeatability records), in the same transaction.
    ///
    /// `progress` is called on this thread at each entity set and every 4096 entities and index
    /// entries checked, and once at the end of the entity sets (see `CheckProgress`).
    ///
    /// - Throws: `LMDBError`, `DataFileError.unreadable`, or `CheckInterrupted` when writes
    ///   replace the snapshot 100 times in a row before its audit begins.
    package func check(maxProblems: Int = 100, progress: ((CheckProgress) -> Void)? = nil) throws -> IntegrityReport {
        try check(maxProblems: maxProblems, audited: nil, progress: progress)
    }

    /// `check`, skipping the audit when `audited` is of the snapshot the read transaction gets.
    func check(
        maxProblems: Int, audited: PageAuditReport?, progress: ((CheckProgress) -> Void)? = nil
    ) throws -> IntegrityReport {
        try environment.readAudited(maxProblems: maxProblems, reusing: audited) { t, audit in
            guard audit.isSound else { return IntegrityReport(damaged: audit) }
            var report = IntegrityReport()
            report.pagesAudited = audit.pagesAudited
            report.freePages = audit.freePages
            try checkLogically(t, into: &report, maxProblems: maxProblems, progress: progress)
            return report
        }
    }

    /// The logical half of `check`, in read transaction `t` of a structurally sound file.
    private func checkLogically(
        _ t: ReadView, into report: inout IntegrityReport, maxProblems: Int, progress: ((CheckProgress) -> Void)?
    ) throws {
        func problem(_ s: String) { report.problem(s, max: maxProblems) }
        try checkSchemaRecords(t, problem: problem)
        var counter = CheckProgress.Counter(report: progress)
        if progress != nil {
            for name in setNames {
                let set = try self.set(name)
                counter.value.total += try set.count(t)
                for index in set.indexes { counter.value.total += try t.count(index.database) }
            }
        }
        for name in setNames {
            let set = try self.set(name)
            counter.begin(name)
            var rows = 0
            try set.scanRaw(t) { key, row in
                rows += 1
                counter.tick()
                let props: Properties
                do { props = try set.codec.decode(row) } catch {
                    problem("\(name): row under key \(Array(key)) does not decode: \(error)")
                    return true
                }
                do {
                    // Facets are the service's business: its values may exceed them (counted by refresh).
                    try set.validate(props, partial: false, facets: false)
                    let k = try set.encodeKey(try set.keyValues(props))
                    if !k.elementsEqual(key) {
                        problem("\(name): row \(set.describeKey(try set.keyValues(props))) is stored under another key")
                    }
                } catch {
                    problem("\(name): row under key \(Array(key)) is invalid: \(error)")
                }
                return true
            }
            report.entities += rows
            for index in set.indexes {
                var entries = 0
                var previousTuple: [UInt8]? = nil
                try set.scanIndexEntries(t, index, lower: nil, upper: nil) { entry, pk, value in
                    entries += 1
                    counter.tick()
                    let tuple = Array(entry.prefix(entry.count - pk.count))
                    if index.definition.unique, tuple == previousTuple,
                        !(try KeyCodec.decode(
                            entry, count: index.definition.components.count, descending: index.descending
                        ).values.contains(.null))
                    {
                        problem("\(name): unique index '\(index.definition.name)' has duplicate entries")
                    }
                    previousTuple = tuple
                    guard let row = try t.get(set.entities, pk) else {
                        problem("\(name): index '\(index.definition.name)' has an entry for a missing entity")
                        return true
                    }
                    guard let props = try? set.codec.decode(row),
                        let expected = try? index.entryKey(props, primaryKey: Array(pk))
                    else { return true }
                    if !expected.elementsEqual(entry) {
                        problem(
                            "\(name): index '\(index.definition.name)' has a stale entry for \(set.describeKey((try? set.keyValues(props)) ?? []))"
                        )
                    } else if !value.elementsEqual(index.entryValue(props)) {
                        problem(
                            "\(name): index '\(index.definition.name)' carries values (INCLUDE) that differ from the entity \(set.describeKey((try? set.keyValues(props)) ?? []))"
                        )
                    }
                    return true
                }
                report.indexEntries += entries
                if entries != rows {
                    problem("\(name): index '\(index.definition.name)' has \(entries) entries for \(rows) entities")
                }
            }
        }
        counter.end()
        var streamProblems: [String] = []
        try checkStreams(t, into: &report) { streamProblems.append($0) }
        for p in streamProblems { problem(p) }
        try checkLinks(t, problem: problem)
        for role in roles { try role.check(self, t, problem: problem) }
    }

    /// Entity and index counts per set, and the file's size.
    package func stats() throws -> StoreStats {
        try read { t in
            var sets: [StoreStats.SetStats] = []
            for name in setNames {
                let set = try self.set(name)
                let indexes = try set.indexes.map {
                    ($0.definition.name, try t.count($0.database), $0.definition.automatic)
                }
                sets.append(
                    .init(
                        name: name, entities: try set.count(t),
                        indexes: indexes.map { .init(name: $0.0, entries: $0.1, automatic: $0.2) }))
            }
            return StoreStats(sets: sets, fileSize: environment.fileSize, mapSize: environment.mapSize)
        }
    }

    /// Imports server data into `set`: every entity is upserted, all in one transaction (all or
    /// nothing). Returns how many were written.
    @discardableResult
    package func load(set name: String, entities: [Properties]) throws -> Int {
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

extension EntityStore {
    /// `meta`'s records of the schema (`migrate`): the `$metadata` is the one this check reads
    /// the rows with and its generation the one it opened with (else another process migrated
    /// the store since, and the rows would be judged by the old schema); the generation is 8
    /// bytes; every `ready/` marker is of an index the store has (a marker left by a dropped
    /// index would let a later index of the same name be trusted without its backfill).
    private func checkSchemaRecords(_ t: ReadView, problem: (String) -> Void) throws {
        if let g = try t.get(meta, Self.generationKey) {
            if g.count != 8 { problem("meta: schema-generation is \(g.count) bytes, not 8") }
            if Self.generationNumber(g) != generation {
                problem("meta: the store was migrated to a new $metadata since this check opened it; run check again")
            }
        } else if generation != 0 {
            problem("meta: schema-generation is missing, but the store was opened at generation \(generation)")
        }
        if let stored = try t.get(meta, Self.metadataKey), !stored.elementsEqual(metadata) {
            problem("meta: the $metadata is not the one this check opened the store with; run check again")
        }
        let indexes = Set(setNames.flatMap { name in ((try? set(name))?.indexes ?? []).map(\.definition.databaseName) })
        let prefix = Array("ready/".utf8)
        try t.withCursor(meta) { c in
            var e = try c.seek(prefix)
            while let (k, _) = e, k.starts(with: prefix) {
                let name = String(decoding: k.dropFirst(prefix.count), as: UTF8.self)
                if !indexes.contains(name) {
                    problem("meta: a ready/ marker for index database '\(name)', which the store does not have")
                }
                e = try c.next()
            }
        }
    }
}
