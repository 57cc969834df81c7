import Foundation
package import LMDB

#if canImport(Glibc)
import Glibc
#endif

/// What a migration did (or, dry, would do): `EntityStore.migrate`.
package struct MigrationOutcome: Sendable {
    package var migration: SchemaMigration
    /// Entities re-encoded in the new layout (entity sets and the queue's `base/` images).
    package var rewrittenRows = 0
    /// Indexes emptied, to be rebuilt from the entities when the store opens next.
    package var rebuiltIndexes: [String] = []
    /// Indexes removed: their set or a property they used is gone.
    package var droppedIndexes: [String] = []
    /// What a person should know: each pending request that lost a property, an index or a
    /// configuration entry that went, a defining request that no longer reads.
    package var warnings: [String] = []
    /// The `$metadata` bytes were the store's already: nothing was written.
    package var unchanged = false
    /// The store's configuration after the migration (what it names of dropped sets and
    /// properties left out); nil when unchanged.
    package var configuration: StorageSettings?
}

extension StoreRole {
    /// The role's part of a migration, in its transaction, before the entity sets' rows are
    /// rewritten: rewrite what it keeps in the old schema's shapes, drop what it keeps of
    /// `migration.droppedSets`, or throw to refuse the whole migration (nothing is written).
    /// None by default.
    package static func migrate(
        _ store: EntityStore, _ migration: SchemaMigration, _ t: WriteView, outcome: inout MigrationOutcome
    ) throws {}

    /// The role's part of a migration of the configuration: edit its members of `roles`
    /// (`StorageSettings.roles`) for what `migration` drops, with a `warn` for each, or throw to
    /// refuse the migration. None by default.
    package static func migrateSettings(
        _ roles: inout [String: JSON], _ migration: SchemaMigration, warn: (String) -> Void
    ) throws {}
}

extension EntityStore {
    /// Moves the store in `path` to a new `$metadata` document, in one write transaction: the
    /// old store or the new one, never a mix (a kill at any instant leaves one of them).
    ///
    /// - Properties added: absent (null) in stored entities until a refresh fills them.
    /// - Properties dropped: removed from stored entities, from each role's data (the queue's
    ///   pending bodies and base images), and from indexes (an index that used one is dropped,
    ///   with its configuration entry).
    /// - Properties retyped: each stored value converted through its JSON form; one that does
    ///   not fit the new type refuses the migration, naming the entity.
    /// - Sets added: available at once (their databases are made when the store opens next).
    /// - Sets dropped: their entities and indexes removed; a role may refuse (the queue does
    ///   when requests to one are pending).
    /// - A changed key is refused. Every index of a set whose rows changed is emptied and
    ///   rebuilt from the entities when the store opens next (an index is rebuilt whenever its
    ///   `ready/` marker is missing, also after a kill).
    ///
    /// Refused while another process has the store open (its rows would be written in the old
    /// layout): LMDB holds a lock on `lock.mdb` in every process that opened it, listed in
    /// `/proc/locks`. And every write checks `generation`, so a process that opened the store
    /// in the instant between is refused its writes. This process must not have it open either.
    /// `dryRun` does all of it, reports it, and commits nothing. `opened` gets the environment
    /// once the store is open (tests inject faults there). `progress` gets (rows rewritten, rows of
    /// the sets to rewrite) at each set and every 4096 rows.
    package static func migrate(
        path: String, metadata: [UInt8], roles: [any StoreRole.Type], dryRun: Bool = false,
        opened: (Environment) -> Void = { _ in }, progress: (@Sendable (_ rewritten: Int, _ total: Int) -> Void)? = nil
    ) throws -> MigrationOutcome {
        if let pid = try processHoldingOpen(path) {
            throw EntityError.badInput(
                "the store in '\(path)' is open in process \(pid); stop it first (a migration rewrites rows that process would read and write in the old layout)"
            )
        }
        let store = try open(path: path, roles: roles)
        opened(store.environment)  // tests: fault injection
        let newSchema = try CSDL.parse(metadata)
        try newSchema.checkStorable(indexCount: store.configuration.indexes.values.reduce(0) { $0 + $1.count })
        let migration = try SchemaMigration(old: store.schema, new: try newSchema.withSystemSets())
        var outcome = MigrationOutcome(migration: migration)
        if migration.isEmpty && metadata == store.metadata {
            outcome.unchanged = true
            return outcome
        }
        var configuration = store.configuration
        let oldDefinitions = try indexDefinitions(schema: store.schema, configuration: configuration)
        configuration.prune(for: migration, warn: { outcome.warnings.append($0) })
        for role in roles {
            try role.migrateSettings(&configuration.roles, migration, warn: { outcome.warnings.append($0) })
        }
        let newDefinitions = try indexDefinitions(schema: migration.new, configuration: configuration)
        let configText = Array(configuration.json.text.utf8)
        outcome.configuration = configuration
        var indexDatabases: [(db: Database, name: String, drop: Bool)] = []
        for d in oldDefinitions {
            let survives = newDefinitions.contains {
                $0.databaseName == d.databaseName && $0.includedMarker == d.includedMarker
            }
            guard !survives || migration.sets[d.entitySet] != nil else { continue }
            guard let db = try store.environment.database(named: d.databaseName, create: false) else { continue }
            indexDatabases.append((db, d.databaseName, !survives))
            if survives {
                outcome.rebuiltIndexes.append(d.databaseName)
            } else {
                outcome.droppedIndexes.append(d.databaseName)
            }
        }
        let droppedSets = try migration.droppedSets.map { name in
            (name, try store.set(name).entities)
        }
        struct Rollback: Error { let outcome: MigrationOutcome }
        let before = outcome
        let indexes = indexDatabases
        let generation = store.generation
        let meta = store.meta
        do {
            return try store.environment.writeAlone { txn -> MigrationOutcome in
                let t = txn.view
                var outcome = before
                try store.checkGeneration(t)
                for role in roles { try role.migrate(store, migration, t, outcome: &outcome) }
                let changed = migration.sets.sorted(by: { $0.key < $1.key })
                var total = 0
                if progress != nil {
                    for (name, _) in changed { total += try t.reader.count(try store.set(name).entities) }
                }
                for (name, change) in changed {
                    let set = try store.set(name)
                    let before = outcome.rewrittenRows
                    progress?(before, total)
                    outcome.rewrittenRows += try rewriteRows(
                        set.entities, of: name, change, migration, t,
                        decode: { row, key in try set.decodeRow(row, keyBytes: key) },
                        describe: { set.describeKeyBytes($0) },
                        rewritten: progress.map { p in { p(before + $0, total) } })
                }
                progress?(outcome.rewrittenRows, total)
                for (_, db) in droppedSets { try t.drop(db) }
                if let streams = store.streams {
                    let gone = try streams.dropUndeclared(t, in: migration.new)
                    if gone > 0 {
                        outcome.warnings.append(
                            "\(gone) stream(s) of sets or streams the new $metadata no longer declares were dropped")
                    }
                }
                for index in indexes {
                    _ = try t.delete(meta, Array("ready/\(index.name)".utf8))
                    if index.drop { try t.drop(index.db) } else { try t.clear(index.db) }
                }
                try t.put(meta, metadataKey, metadata)
                try t.put(meta, configKey, configText)
                try t.put(meta, generationKey, generationBytes(generation + 1))
                if dryRun { throw Rollback(outcome: outcome) }
                return outcome
            }
        } catch let r as Rollback {
            return r.outcome
        }
    }

    /// Re-encodes every row of `db` (entities of `set` in the old layout) in the new layout;
    /// returns how many. Keys are read first, then each row rewritten in place.
    package static func rewriteRows(
        _ db: Database, of set: String, _ change: SchemaMigration.SetChange, _ migration: SchemaMigration,
        _ t: WriteView, decode: (MappedBytes, [UInt8]) throws -> Properties, describe: ([UInt8]) -> String,
        rewritten: ((Int) -> Void)? = nil
    ) throws -> Int {
        var keys: [[UInt8]] = []
        try t.reader.withCursor(db) { c in
            var e = try c.first()
            while let (k, _) = e {
                keys.append(Array(k))
                e = try c.next()
            }
        }
        let codec = RowCodec(schema: migration.new, entityType: change.newType)
        for (i, key) in keys.enumerated() {
            if let rewritten, i > 0, i % 4096 == 0 { rewritten(i) }
            guard let row = try t.get(db, key) else { continue }
            let entity = try decode(row, key)
            try t.put(db, key, codec.encode(try migration.convert(entity, set: set, key: describe(key))))
        }
        return keys.count
    }

    /// The process (other than this one) holding a lock on the store's `lock.mdb`, from
    /// `/proc/locks` (device and inode of the file): LMDB takes one in every process that opens
    /// the environment. Nil when none does, or when there is no lock file.
    static func processHoldingOpen(_ path: String) throws -> Int32? {
        var st = stat()
        guard stat(path + "/lock.mdb", &st) == 0 else { return nil }
        guard let text = readWhole("/proc/locks") else { return nil }
        let me = getpid()
        for line in text.split(separator: "\n") {
            // "1: POSIX  ADVISORY  READ 3568 fd:00:2531452 0 0" (or "1: -> POSIX …" for a waiter).
            let fields = line.split(separator: " ").filter { $0 != "->" }
            guard fields.count >= 6, let pid = Int32(fields[4]), pid != me, pid > 0 else { continue }
            let device = fields[5].split(separator: ":")
            guard device.count == 3, let major = UInt32(device[0], radix: 16), let minor = UInt32(device[1], radix: 16),
                let inode = UInt64(device[2])
            else { continue }
            if inode == UInt64(st.st_ino), major == devMajor(UInt64(st.st_dev)), minor == devMinor(UInt64(st.st_dev)) {
                return pid
            }
        }
        return nil
    }

    /// A file read to its end with `read(2)`: Foundation's `String(contentsOfFile:)` reads a
    /// `/proc` file (size 0 to `stat`) as one page, 4,095 bytes — with more than ~75 locks on the
    /// machine the lock holding this store was not in it, and a migration ran under a process
    /// that had the store open.
    static func readWhole(_ path: String) -> String? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if n == 0 { break }
            out.append(contentsOf: buffer[..<n])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// glibc's `gnu_dev_major` and `gnu_dev_minor` (macros Swift does not import).
    private static func devMajor(_ d: UInt64) -> UInt32 {
        UInt32(truncatingIfNeeded: ((d >> 8) & 0xfff) | ((d >> 32) & ~0xfff))
    }
    private static func devMinor(_ d: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: (d & 0xff) | ((d >> 12) & ~0xff)) }
}

extension StorageSettings {
    /// Leaves out the indexes that use a set or property `migration` drops, each removal a
    /// warning (the roles prune their own settings: `StoreRole.migrateSettings`).
    mutating func prune(for migration: SchemaMigration, warn: (String) -> Void) {
        let gone = Set(migration.droppedSets)
        for set in indexes.keys.sorted() {
            if gone.contains(set) {
                warn("the indexes of \(set) go with the set: \(indexes[set]!.joined(separator: "; "))")
                indexes[set] = nil
                continue
            }
            let dropped = Set(migration.sets[set]?.dropped ?? [])
            indexes[set]?.removeAll { text in
                guard let d = try? IndexDefinition(entitySet: set, definition: text) else { return false }
                let used = d.components.compactMap(\.path.first) + d.included
                guard let name = used.first(where: dropped.contains) else { return false }
                warn("index '\(text)' of \(set) is dropped: it uses \(name), which the new $metadata drops")
                return true
            }
            if indexes[set]?.isEmpty == true { indexes[set] = nil }
        }
    }
}
