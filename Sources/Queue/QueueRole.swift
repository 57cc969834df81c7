package import LMDB
package import Storage

/// The request queue's databases beside its system entity sets (`q` holds the `RequestQueue`
/// rows, `errors` the `ErrorArchive`, `events` the `EventLog`, `history` the `RequestHistory`;
/// Storage keeps those as entity sets):
///
/// | database | key | value |
/// |---|---|---|
/// | `q/by-entity` | set ‖ key ‖ request id (UInt64 BE) | `[method, status, flags]` (`ByEntityCode`): an entity's pending chain without reading the queue |
/// | `base/<Set>` | the entity's key tuple | the last server image of an entity with pending local changes (undo, rebase) |
/// | `q/stream-files` | a file name of `streams/` | the id of the stream replacement whose bytes it holds (UInt64 BE): kept until the request leaves the queue |
///
/// Written by every local change, in the change's transaction; `check` verifies the queue's
/// invariants (`RequestQueue.check`).
package enum QueueRole: LocalStateRole {
    static let byEntityName = "q/by-entity"

    static func baseName(ofSet set: String) -> String { "base/\(set)" }

    package static func databaseNames(schema: Schema) -> [String] {
        [byEntityName, streamFilesName] + schema.serviceSetNames.map(baseName(ofSet:))
    }

    package static func check(_ store: EntityStore, _ t: ReadView, problem: (String) -> Void) throws {
        let queue = RequestQueue(store: store)
        for p in try queue.check(t) { problem(p) }
        for p in try queue.checkHistory(t) { problem(p) }
    }

    /// The entity's local state, from its `q/by-entity` entries alone (no record is read).
    package static func localState(
        _ store: EntityStore, _ t: ReadView, set: String, keyBytes: some Collection<UInt8>
    ) throws -> LocalState {
        let prefix = EntityStore.entityKey(set: set, keyBytes: keyBytes)
        var state = LocalState()
        try t.withCursor(store.byEntity) { c in
            var e = try c.seek(prefix)
            var first = true
            while let (k, v) = e, k.count == prefix.count + 8, k.starts(with: prefix), v.count >= 2 {
                state.hasPendingChanges = true
                if first && (v[0] == ByEntityCode.create || v[0] == ByEntityCode.createMedia) { state.isLocal = true }
                if v[1] == ByEntityCode.error { state.inErrorState = true }
                first = false
                e = try c.next()
            }
        }
        return state
    }

    /// Codes in a `q/by-entity` value (`[method, status, flags]`).
    package enum ByEntityCode {
        package static let create: UInt8 = 1
        package static let createMedia: UInt8 = 6
        package static let error: UInt8 = 2
    }
}

extension EntityStore {
    /// `q/by-entity`: entity set ‖ key ‖ request id → the request's method and status; finds an
    /// entity's pending requests without reading the queue.
    package var byEntity: Database { database(QueueRole.byEntityName) }

    /// `base/<Set>`: the last server image of each entity of `set` with pending local changes.
    package func base(ofSet set: String) -> Database { database(QueueRole.baseName(ofSet: set)) }

    /// Every service set's `base/` database, by set name.
    package var bases: [String: Database] {
        Dictionary(uniqueKeysWithValues: schema.serviceSetNames.map { ($0, base(ofSet: $0)) })
    }
}
