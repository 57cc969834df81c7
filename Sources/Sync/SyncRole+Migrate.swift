package import LMDB
package import Storage

extension SyncRole {
    /// Sync's part of a `$metadata` migration: the ETags and defining-request memberships of the
    /// entities of each dropped set go with them; and when any set's properties changed, every
    /// defining request forgets its delta link, so the next refresh reads it in full and fills
    /// the properties added (a delta sends only entities changed since, and the new values of
    /// the others would stay null until each happened to change).
    package static func migrate(
        _ store: EntityStore, _ migration: SchemaMigration, _ t: WriteView, outcome: inout MigrationOutcome
    ) throws {
        let membership = Membership(store: store)
        if !migration.sets.isEmpty {
            for r in try store.syncSettings().definingRequests { try membership.setDeltaLink(t, name: r.name, nil) }
        }
        for name in migration.droppedSets {
            let set = try store.set(name)
            let prefix = EntityStore.entityKey(set: name, keyBytes: [])
            var entities: Set<[UInt8]> = []
            for db in [store.serverETags, store.membershipByEntity] {
                try t.reader.withCursor(db) { c in
                    var e = try c.seek(prefix)
                    while let (k, _) = e, k.starts(with: prefix) {
                        let keyBytes = Array(k[prefix.count...])
                        // membership/by-entity: the key, then the request's name.
                        let length = keyBytes.withUnsafeBytes {
                            (try? KeyCodec.decode($0, count: set.type.key.count).length)
                        }
                        if let length { entities.insert(Array(keyBytes[..<length])) }
                        e = try c.next()
                    }
                }
            }
            for keyBytes in entities.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                try membership.entityDeleted(t, set: name, keyBytes: keyBytes)
            }
        }
    }
}
