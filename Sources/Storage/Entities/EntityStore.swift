package import LMDB
import Synchronization

/// The entity sets of one store, their indexes, and the store's metadata, in one LMDB environment.
///
/// ```swift
/// let store = try EntityStore.create(path: dir, metadata: xml, configuration: config)
/// try store.write { t in try store.set("Products").insert(t, ["ProductID": .string("HT-1000"), …]) }
/// let p = try store.read { t in try store.set("Products").get(t, key: [.string("HT-1000")]) }
/// ```
/// `Sendable`: the environment is; the set handles change only under `handles`' lock.
package final class EntityStore: Sendable {
    package let environment: Environment
    package let schema: Schema
    /// The `$metadata` document the schema was read from.
    package let metadata: [UInt8]
    package let meta: Database
    /// The streams of media entities and stream properties (`StreamStore`): nil only in a store
    /// of an older format opened read-only.
    package let streams: StreamStore?
    /// The links of navigation properties without a referential constraint (`LinkStore`): nil
    /// only in a store of an older format opened read-only.
    package let links: LinkStore?
    /// The roles whose databases this store opened (`StoreRole`): the request queue, sync and
    /// served roles for a store the facade opens; none for a bare store of entity sets.
    package let roles: [any StoreRole.Type]
    /// The roles' databases by name (`database(_:)`).
    let roleDatabases: [String: Database]
    /// The role that answers the local-state functions (the queue), found once: `$filter` asks
    /// it once a row.
    let localStateRole: (any LocalStateRole.Type)?
    /// `schema.foreignKeys(ofSet:)` of every set, found once (every local change asks).
    package let foreignKeys: [String: [ForeignKey]]
    /// `schema.entityShapes()`, made once: what a parse of the service's data or a file builds.
    package let entityShapes: [String: JSONShape]
    private let state: Mutex<State>
    /// How many times the store's `$metadata` was migrated when this process opened it (`meta`
    /// key `schema-generation`, absent: 0). Every write checks it first: a process that opened
    /// the store before another migrated it must not write rows in the old layout.
    package let generation: UInt64
    /// The conflict resolvers the program registered (`OfflineStore.setConflictResolver`).
    package let conflictResolvers = ConflictResolvers()
    /// Held while the configuration text in `meta` is written, so the text written last is
    /// always made from the newest configuration.
    private let configurationWriter = Mutex(())

    /// The database of a set's rows: `e/<Set>`, or `q`, `errors`, `events` for the system sets.
    static func databaseName(ofSet set: String) -> String { SystemSets.databases[set] ?? "e/\(set)" }

    struct State {
        var configuration: StorageSettings
        var handles: [String: EntitySetHandle]
    }

    static let formatKey = Array("format".utf8)
    static let metadataKey = Array("metadata".utf8)
    static let configKey = Array("config".utf8)
    static let generationKey = Array("schema-generation".utf8)

    static func generationNumber(_ bytes: some Collection<UInt8>) -> UInt64 {
        bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }

    static func generationBytes(_ n: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: n >> (56 - 8 * $0)) }
    }

    /// Throws when another process migrated the store's `$metadata` since this one opened it.
    func checkGeneration(_ t: WriteView) throws {
        let now = try t.get(meta, Self.generationKey).map(Self.generationNumber) ?? 0
        guard now == generation else {
            throw EntityError.badInput(
                "the store in '\(environment.path)' was migrated to a new $metadata by another process since this one opened it; open it again"
            )
        }
    }
    /// The on-disk format this code writes (`meta` key `format`, text `offline-store N`).
    /// 1: entity sets and indexes. 2: the request queue (`q`, `q/by-entity`, `base/…`),
    /// `errors`, `events`. 3: the served role's `changes`, `changes/by-entity`, `repeat`,
    /// `repeat/by-time`. 4: the sync databases `etags`, `membership`, `membership/by-entity`.
    /// An older store is upgraded when opened writable (the new databases are created empty,
    /// nothing is rewritten). 5: `streams` (the records of media streams; their bytes are files
    /// in `streams/`), `links`, `links/by-target`, `links/navs` (`LinkStore`).
    package static let formatVersion = 5

    /// Opens the store in `environment` with an already parsed schema; creates missing databases.
    /// Used by `create` and `open` once they have the schema. Every named database the store uses
    /// is opened here, in one transaction, so no write ever has to open one.
    package init(
        environment: Environment, schema serviceSchema: Schema, metadata: [UInt8], configuration: StorageSettings,
        roles: [any StoreRole.Type] = []
    ) throws {
        let schema = try serviceSchema.withSystemSets()
        self.environment = environment
        self.schema = schema
        self.metadata = metadata
        let definitions = try Self.indexDefinitions(schema: schema, configuration: configuration)
        let setNames = schema.entitySetNames
        let roleNames = roles.flatMap { $0.databaseNames(schema: schema) }
        let names =
            ["meta", StreamStore.databaseName] + LinkStore.databaseNames + roleNames
            + setNames.map(Self.databaseName(ofSet:))
            + definitions.map(\.databaseName)
        let opened = try environment.databases(named: names, create: !environment.isReadOnly)
        var byName: [String: Database] = [:]
        for (name, db) in zip(names, opened) {
            // Index databases may be missing in a read-only store (their backfill never ran).
            if let db {
                byName[name] = db
            } else if !name.hasPrefix("i/") && name != StreamStore.databaseName
                && !LinkStore.databaseNames.contains(name)
            {
                throw EntityError.badInput(
                    "the store in '\(environment.path)' has no database '\(name)'; open it writable once to create it")
            }
        }
        self.meta = byName["meta"]!
        // A store of format 4 or older opened read-only has no `streams` database: no streams.
        let streamStore = byName[StreamStore.databaseName].map {
            StreamStore(database: $0, directory: environment.path + "/streams")
        }
        self.streams = streamStore
        var linkStore: LinkStore? = nil
        if let f = byName["links"], let b = byName["links/by-target"], let n = byName["links/navs"] {
            linkStore = LinkStore(forward: f, backward: b, navs: n, schema: schema)
        }
        self.links = linkStore
        let meta = self.meta
        generation =
            try environment.read { t in try t.view.get(meta, Self.generationKey).map(Self.generationNumber) } ?? 0
        self.roles = roles
        self.localStateRole = roles.lazy.compactMap { $0 as? any LocalStateRole.Type }.first
        self.foreignKeys = Dictionary(uniqueKeysWithValues: setNames.map { ($0, schema.foreignKeys(ofSet: $0)) })
        self.entityShapes = schema.entityShapes()
        let declared = Set(roleNames)
        self.roleDatabases = byName.filter { declared.contains($0.key) }
        var handles: [String: EntitySetHandle] = [:]
        for name in setNames {
            guard let type = schema.entityType(ofSet: name) else { throw EntityError.unknownEntitySet(name) }
            handles[name] = EntitySetHandle(
                name: name, type: type, schema: schema, entities: byName[Self.databaseName(ofSet: name)]!, indexes: [],
                streams: type.hasStreams ? streamStore : nil,
                links: linkStore?.linkedSets.contains(name) == true ? linkStore : nil)
        }
        state = Mutex(State(configuration: configuration, handles: handles))
        for d in definitions { try addIndex(d, persist: false) }
    }

    /// The store's indexes: the configuration's, then one per navigation foreign key not already
    /// covered (`foreignKeyIndexes`).
    static func indexDefinitions(schema: Schema, configuration: StorageSettings) throws -> [IndexDefinition] {
        var definitions: [IndexDefinition] = []
        for (set, defs) in configuration.indexes.sorted(by: { $0.key < $1.key }) {
            guard schema.entitySet(set) != nil else { throw EntityError.unknownEntitySet(set) }
            for d in defs {
                let definition = try IndexDefinition(entitySet: set, definition: d)
                if let other = definitions.first(where: { $0.entitySet == set && $0.name == definition.name }),
                    other.included != definition.included
                {
                    throw EntityError.badIndexDefinition(
                        "index '\(definition.name)' of '\(set)' is configured twice, with different INCLUDE lists ('\(other.text)' and '\(definition.text)')"
                    )
                }
                definitions.append(definition)
            }
        }
        for fk in Self.foreignKeyIndexes(schema)
        where !definitions.contains(where: {
            $0.entitySet == fk.entitySet && $0.components.map(\.path) == fk.components.map(\.path)
        }) {
            definitions.append(fk)
        }
        return definitions
    }

    /// One index per set and foreign key (the dependent properties of a referential constraint).
    static func foreignKeyIndexes(_ schema: Schema) -> [IndexDefinition] {
        var out: [IndexDefinition] = []
        for set in schema.entitySetNames {
            guard let type = schema.entityType(ofSet: set) else { continue }
            for nav in type.navigationProperties where !nav.dependentConstraints.isEmpty {
                let props = nav.dependentConstraints.map(\.property)
                if props.isEmpty || type.key.starts(with: props) { continue }  // a key prefix is already ordered
                if !props.allSatisfy({ type.property($0) != nil }) { continue }
                let d = IndexDefinition(entitySet: set, components: props.map { .init(path: [$0]) }, automatic: true)
                if !out.contains(d) { out.append(d) }
            }
        }
        return out
    }

    package var configuration: StorageSettings { state.withLock { $0.configuration } }

    /// The handle of entity set `name`; throws `unknownEntitySet`.
    package func set(_ name: String) throws(EntityError) -> EntitySetHandle {
        guard let h = state.withLock({ $0.handles[name] }) else { throw .unknownEntitySet(name) }
        return h
    }

    package var setNames: [String] { schema.entitySetNames }

    // MARK: Transactions

    /// Runs `body` in a read transaction.
    package func read<R>(_ body: (ReadView) throws -> R) throws -> R {
        try environment.read { txn in try body(txn.view) }
    }

    /// Runs `body` in a (group-committed) write transaction and waits for the durable commit.
    /// `body` may run more than once (after the map grows): it must act only through `t`, and
    /// take entity-set handles from the store inside the body, so it sees indexes added since.
    @discardableResult
    /// Runs `body` in a write transaction. At the size cap, the outcome record gives way to the
    /// store's data: a write refused there (`EnvironmentError.sizeCapReached`) drops the oldest
    /// half of `RequestHistory` (`giveWay`) and runs once more.
    package func write<R: Sendable>(_ body: @escaping @Sendable (WriteView) throws -> R) throws -> R {
        do {
            return try environment.write { txn in
                try self.checkGeneration(txn.view)
                return try body(txn.view)
            }
        } catch EnvironmentError.sizeCapReached(let path, let cap) {
            guard try giveWay() else { throw EnvironmentError.sizeCapReached(path: path, capBytes: cap) }
            return try environment.write { txn in
                try self.checkGeneration(txn.view)
                return try body(txn.view)
            }
        }
    }

    package func write<R: Sendable>(_ body: @escaping @Sendable (WriteView) throws -> R) async throws -> R {
        try await write(usingReserve: false, body)
    }

    /// `usingReserve`: see `Environment.write(usingReserve:_:)` (an upload's bookkeeping).
    package func write<R: Sendable>(
        usingReserve: Bool, _ body: @escaping @Sendable (WriteView) throws -> R
    ) async throws -> R {
        do {
            return try await environment.write(usingReserve: usingReserve) { txn in
                try self.checkGeneration(txn.view)
                return try body(txn.view)
            }
        } catch EnvironmentError.sizeCapReached(let path, let cap) {
            let history = try? set(SystemSets.requestHistory)
            let gave = try await environment.write(usingReserve: true) { txn in try Self.giveWay(history, txn.view) }
            guard gave else { throw EnvironmentError.sizeCapReached(path: path, capBytes: cap) }
            return try await environment.write(usingReserve: usingReserve) { txn in
                try self.checkGeneration(txn.view)
                return try body(txn.view)
            }
        }
    }

    /// Drops the oldest half of the outcome record (`RequestHistory`, at least one row), in a
    /// transaction of its own (which, removing entries, may use the reserve above the size cap).
    /// False when the record is empty: nothing to give.
    func giveWay() throws -> Bool {
        let history = try? set(SystemSets.requestHistory)
        return try environment.write { txn in try Self.giveWay(history, txn.view) }
    }

    static func giveWay(_ history: EntitySetHandle?, _ t: WriteView) throws -> Bool {
        guard let history else { return false }
        let count = try history.count(t.reader)
        guard count > 0 else { return false }
        var oldest: [[Value]] = []
        try history.scan(t.reader) { p in
            if let id = p["RequestID"] { oldest.append([id]) }
            return oldest.count < max(1, count / 2)
        }
        for key in oldest { _ = try history.delete(t, key: key) }
        return !oldest.isEmpty
    }

    /// `bodies` in order, each in a nested transaction of its own, in one group commit
    /// (`Environment.writeAll`): each body's outcome, in order.
    package func writeAll<R: Sendable>(_ bodies: [@Sendable (WriteView) throws -> R]) async -> [Result<R, Error>] {
        await environment.writeAll(
            bodies.map { body in
                { txn in
                    try self.checkGeneration(txn.view)
                    return try body(txn.view)
                }
            })
    }

    // MARK: Indexes

    /// Adds an index and backfills it from the set's entities, in one transaction, and records it
    /// in the configuration. Adding an index that exists is a no-op; adding one that exists with
    /// another `INCLUDE` list rebuilds it with the new list (the old entries go in the same
    /// transaction).
    package func addIndex(_ definition: IndexDefinition) throws {
        try addIndex(definition, persist: true)
    }

    func addIndex(_ definition: IndexDefinition, persist: Bool) throws {
        let set = try self.set(definition.entitySet)
        let existing = set.index(named: definition.name)
        if let existing, existing.definition.includedMarker == definition.includedMarker { return }
        if existing != nil && environment.isReadOnly {
            throw EntityError.badInput(
                "the INCLUDE list of index '\(definition.name)' of '\(definition.entitySet)' cannot be changed in a store opened read-only"
            )
        }
        // An index is ready once its backfill committed together with a marker in `meta` holding
        // its INCLUDE list; one without the marker (new, or cut off by a crash) or whose marker
        // holds another list (the configuration changed it) is rebuilt from the entities.
        let marker = Array("ready/\(definition.databaseName)".utf8)
        let included = Array(definition.includedMarker.utf8)
        let meta = self.meta
        let ready = try read { t in try t.get(meta, marker).map { $0.elementsEqual(included) } ?? false }
        // A read-only store cannot build an index; one that is not ready is left out, so queries
        // scan instead of trusting an incomplete (or differently covering) index.
        if environment.isReadOnly && !ready { return }
        guard let db = try environment.database(named: definition.databaseName, create: true) else { return }
        let handle = try IndexHandle(definition: definition, database: db, entityType: set.type, schema: schema)
        if ready {
            install(handle)
        } else {
            // The backfill runs alone in its transaction and installs the handle before it
            // commits: every write after it (each takes its set's handle inside its body) keeps
            // the index, every write before it is in what the backfill reads.
            do {
                try environment.writeAlone { txn in
                    let t = txn.view
                    try t.clear(db)
                    try t.put(meta, marker, included)
                    let current = try self.set(definition.entitySet)
                    if definition.unique {
                        // Each entry checked against those put before it.
                        try current.scanRaw(t.reader) { key, row in
                            let props = try current.decodeRow(row, keyBytes: key)
                            try handle.checkUnique(t.reader, props, primaryKey: Array(key))
                            try t.put(db, try handle.entryKey(props, primaryKey: Array(key)), handle.entryValue(props))
                            return true
                        }
                    } else {
                        try Self.backfillSorted(t, from: current, into: db, handle: handle)
                    }
                    self.install(handle)
                }
            } catch {
                if let existing { install(existing) } else { uninstall(definition) }
                throw error
            }
        }
        if !definition.automatic {
            state.withLock { s in
                var list = s.configuration.indexes[definition.entitySet] ?? []
                let at = list.firstIndex {
                    (try? IndexDefinition(entitySet: definition.entitySet, definition: $0).name) == definition.name
                }
                list.removeAll {
                    (try? IndexDefinition(entitySet: definition.entitySet, definition: $0).name) == definition.name
                }
                list.insert(definition.text, at: min(at ?? list.count, list.count))
                s.configuration.indexes[definition.entitySet] = list
            }
        }
        if persist { try saveConfiguration() }
    }

    /// Arena bytes a backfill sorts at once (`SortedIndexEntries`): a set whose entries take more
    /// is written in several sorted batches, each but the first by ordinary puts. This is the
    /// memory a backfill takes besides its transaction's dirty pages.
    package static let backfillSortBytes = 64 << 20

    /// Writes `handle`'s entries for every entity of `set` into the empty `db`, sorted: batches of
    /// about `sortBytes`, the first appended (`MDB_APPEND`), the others put in order. A writable
    /// open that backfilled two indexes (`ProductID`, `Quantity DESC, ProductID`) of 1,000,000
    /// SalesOrderItems took 2.53 s putting an entry as each entity was scanned, 1.97–2.19 s
    /// sorted, and the store 54,669 pages instead of 73,060 (appended leaves are full); release
    /// build, 2 cores, `PerfTests/results/2026-11-27-decb814.md`.
    static func backfillSorted(
        _ t: WriteView, from set: EntitySetHandle, into db: Database, handle: IndexHandle,
        sortBytes: Int = backfillSortBytes
    ) throws {
        var entries = SortedIndexEntries()
        var empty = true
        func write() throws {
            try entries.drain { k, v in
                if empty { try t.append(db, k, v) } else { try t.put(db, Array(k), Array(v)) }
            }
            empty = false
        }
        try set.scanRaw(t.reader) { key, row in
            let props = try set.decodeRow(row, keyBytes: key)
            entries.add(key: try handle.entryKey(props, primaryKey: Array(key)), value: handle.entryValue(props))
            if entries.bytes >= sortBytes { try write() }
            return true
        }
        if entries.count > 0 { try write() }
    }

    /// Puts `handle` into its set's handle, replacing one of the same name with another INCLUDE
    /// list (idempotent: a body that runs twice installs once).
    private func install(_ handle: IndexHandle) {
        let setName = handle.definition.entitySet
        state.withLock { s in
            let h = s.handles[setName]!
            if let same = h.index(named: handle.definition.name), same.definition == handle.definition { return }
            s.handles[setName] = EntitySetHandle(
                name: h.name, type: h.type, schema: schema, entities: h.entities,
                indexes: h.indexes.filter { $0.definition.name != handle.definition.name } + [handle],
                streams: h.streams)
        }
    }

    private func uninstall(_ definition: IndexDefinition) {
        state.withLock { s in
            let h = s.handles[definition.entitySet]!
            s.handles[definition.entitySet] = EntitySetHandle(
                name: h.name, type: h.type, schema: schema, entities: h.entities,
                indexes: h.indexes.filter { $0.definition.name != definition.name }, streams: h.streams, links: h.links)
        }
    }

    /// Drops index `name` of `set` and its entries.
    package func dropIndex(set setName: String, name: String) throws {
        let set = try self.set(setName)
        guard let index = set.index(named: name) else { throw EntityError.unknownIndex(set: setName, index: name) }
        state.withLock { s in
            let h = s.handles[setName]!
            s.handles[setName] = EntitySetHandle(
                name: h.name, type: h.type, schema: schema, entities: h.entities,
                indexes: h.indexes.filter { $0.definition.name != name }, streams: h.streams, links: h.links)
            s.configuration.indexes[setName]?.removeAll {
                $0 == name || (try? IndexDefinition(entitySet: setName, definition: $0).name) == name
            }
        }
        let meta = self.meta
        try write { t in try t.delete(meta, Array("ready/\(index.definition.databaseName)".utf8)) }
        try environment.dropDatabase(named: index.definition.databaseName)
        try saveConfiguration()
    }

    func saveConfiguration() throws {
        try configurationWriter.withLock { _ in
            let text = Array(configuration.json.text.utf8)
            let meta = self.meta
            try write { t in try t.put(meta, Self.configKey, text) }
        }
    }

    /// Changes the roles' members of the configuration (`StorageSettings.roles`): `change` edits
    /// them (a role reads and writes its own: the sync role's defining requests), and they are
    /// written to `meta` (with whatever `also` writes, in the same transaction) and then take
    /// effect. Nothing changes when `change` or the write throws.
    package func changeRoleSettings(
        _ change: (inout [String: JSON]) throws -> Void,
        also: (@Sendable (WriteView) throws -> Void)? = nil
    ) throws {
        try configurationWriter.withLock { _ in
            var config = configuration
            try change(&config.roles)
            let (text, meta, roles) = (Array(config.json.text.utf8), self.meta, config.roles)
            try write { t in
                try t.put(meta, Self.configKey, text)
                try also?(t)
            }
            state.withLock { $0.configuration.roles = roles }
        }
    }
}

extension EntitySetHandle {
    /// Visits raw (key, row) pairs in key order until `body` returns false.
    package func scanRaw(_ t: ReadView, _ body: (MappedBytes, MappedBytes) throws -> Bool) throws {
        try t.withCursor(entities) { c in
            var e = try c.first()
            while let (k, v) = e {
                if try !body(k, v) { return }
                e = try c.next()
            }
        }
    }
}
