package import LMDB

/// A module's own named databases in a store's environment, with their integrity check.
///
/// Storage owns `meta`, the entity sets (`e/<Set>` and the system sets) and their indexes
/// (`i/<Set>/<index>`). Every other module that keeps durable state in the store — the request
/// queue (`Queue`), flush and refresh (`Sync`), the served role (`Served`) — declares it as a
/// role: the names it needs, opened by `EntityStore.init` together with the entity sets in one
/// transaction (no write ever opens a database), and the invariants `check` verifies in the same
/// read transaction as the entity sets. A role reads its handles back with
/// `EntityStore.database(_:)`; it never sees another role's databases except through that
/// role's module.
package protocol StoreRole: Sendable {
    /// The databases the role uses in a store with this schema, created when missing (a store
    /// made before the role existed is upgraded when opened writable).
    static func databaseNames(schema: Schema) -> [String]
    /// The role's invariants, in `check`'s read transaction, after the entity sets and indexes;
    /// each problem one sentence.
    static func check(_ store: EntityStore, _ t: ReadView, problem: (String) -> Void) throws
    /// The role's part of a `$metadata` migration (`EntityStore.migrate`), in its transaction:
    /// see the default in `EntityStore+Migrate.swift`.
    static func migrate(
        _ store: EntityStore, _ migration: SchemaMigration, _ t: WriteView, outcome: inout MigrationOutcome
    ) throws
    /// The files of `streams/` the role keeps in snapshot `t` besides those the stream records
    /// name (the request queue's: the bytes of stream changes not yet settled): the sweep leaves
    /// them. None by default.
    static func streamFiles(_ store: EntityStore, _ t: ReadView) throws -> Set<String>
}

extension StoreRole {
    package static func streamFiles(_ store: EntityStore, _ t: ReadView) throws -> Set<String> { [] }
}

/// The role that answers SAP's local-state functions (`offline.isLocal()`,
/// `offline.hasPendingChanges()`, `offline.inErrorState()`) for the query engine: the request queue.
package protocol LocalStateRole: StoreRole {
    static func localState(
        _ store: EntityStore, _ t: ReadView, set: String, keyBytes: some Collection<UInt8>
    ) throws -> LocalState
}

/// What the request queue says of one entity: answers SAP's local-state functions in `$filter`.
package struct LocalState: Sendable, Hashable {
    /// Created locally and not yet acknowledged by the service.
    package var isLocal = false
    /// Has requests in the queue.
    package var hasPendingChanges = false
    /// One of its requests was refused by the service (it is in ErrorArchive).
    package var inErrorState = false

    package init(isLocal: Bool = false, hasPendingChanges: Bool = false, inErrorState: Bool = false) {
        self.isLocal = isLocal
        self.hasPendingChanges = hasPendingChanges
        self.inErrorState = inErrorState
    }
}

extension EntityStore {
    /// The handle of a role's database `name`. A role asks only for names it declared, so a
    /// missing one is a programming error.
    package func database(_ name: String) -> Database {
        guard let db = roleDatabases[name] else {
            preconditionFailure("no role of this store declared the database '\(name)'")
        }
        return db
    }

    /// The handle of a role's database `name`, or nil when no role of this store declared it.
    package func databaseIfDeclared(_ name: String) -> Database? { roleDatabases[name] }

    /// The entity's local state from the store's `LocalStateRole` (the queue); an entity of a
    /// store without one has none.
    package func localState(_ t: ReadView, set: String, keyBytes: some Collection<UInt8>) throws -> LocalState {
        guard let role = localStateRole else { return LocalState() }
        return try role.localState(self, t, set: set, keyBytes: keyBytes)
    }

    /// The key every role uses for "entity set ‖ key" (the set name as a key component, then the
    /// entity's key tuple): the prefix of an entity's `q/by-entity` entries, the key of its
    /// `etags`, `changes/by-entity` and `membership/by-entity` entries.
    package static func entityKey(set: String, keyBytes: some Collection<UInt8>) -> [UInt8] {
        var out = (try? KeyCodec.encode([.string(set)])) ?? []
        out.append(contentsOf: keyBytes)
        return out
    }

    /// Splits bytes that begin with an `entityKey` into the service set's handle, its key bytes and
    /// the length of the entity key; nil when they do not begin with one of a service set.
    package func splitEntityKey(
        _ bytes: UnsafeRawBufferPointer
    ) -> (set: EntitySetHandle, keyBytes: [UInt8], length: Int)? {
        guard let (values, n) = try? KeyCodec.decode(bytes, count: 1), case .string(let name)? = values.first,
            !schema.isSystemSet(name), let set = try? self.set(name)
        else { return nil }
        let rest = UnsafeRawBufferPointer(rebasing: bytes[n...])
        guard let keyLength = try? KeyCodec.decode(rest, count: set.type.key.count).length else { return nil }
        return (set, Array(rest[..<keyLength]), n + keyLength)
    }
}
