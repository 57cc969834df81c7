package import LMDB
package import Storage

extension ServedRole {
    /// The served role's part of a `$metadata` migration. Its change log and repeatability records
    /// hold keys and answers, not rows, so a changed set needs nothing. A dropped set whose
    /// entities are in the change log is refused: removing its entries could lower the log's
    /// last number, and a delta token given out before would then skip changes.
    package static func migrate(
        _ store: EntityStore, _ migration: SchemaMigration, _ t: WriteView, outcome: inout MigrationOutcome
    ) throws {
        for name in migration.droppedSets {
            let prefix = EntityStore.entityKey(set: name, keyBytes: [])
            let logged = try t.reader.withCursor(store.changesByEntity) { c in
                guard let (k, _) = try c.seek(prefix) else { return false }
                return k.starts(with: prefix)
            }
            if logged {
                throw EntityError.badInput(
                    "the new $metadata drops \(name), whose changes are in this served store's change log (delta links); a served store keeps its sets: serve the new $metadata from a new store"
                )
            }
        }
    }
}
