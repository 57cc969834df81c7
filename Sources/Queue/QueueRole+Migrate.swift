package import LMDB
package import Storage

extension QueueRole {
    /// The queue's part of a `$metadata` migration: each pending request's body (and an
    /// archived request's versions) loses the properties the new `$metadata` drops and has its
    /// retyped values converted, each request that lost one named in a warning; the `base/`
    /// images of changed sets are re-encoded; those of dropped sets go. A migration that drops a
    /// set with requests still queued for it is refused: flush, undo or resolve them first.
    package static func migrate(
        _ store: EntityStore, _ migration: SchemaMigration, _ t: WriteView, outcome: inout MigrationOutcome
    ) throws {
        let queue = RequestQueue(store: store)
        let records = try queue.records
        var all: [RequestRecord] = []
        try records.scan(t.reader) { p in
            all.append(try RequestRecord(p))
            return true
        }
        let gone = Set(migration.droppedSets)
        let stranded = all.filter { gone.contains($0.entitySet) }
        if let first = stranded.first {
            throw EntityError.badInput(
                "the new $metadata drops \(first.entitySet), and \(stranded.count) request(s) for it are still queued (first: request \(first.id), \(first.method.rawValue) \(first.entitySet)(\(first.entityKey))); flush, undo or resolve them first"
            )
        }
        let errors = try store.set(SystemSets.errorArchive)
        for var r in all where migration.sets[r.entitySet] != nil {
            let place = "request \(r.id) (\(r.method.rawValue) \(r.entitySet)(\(r.entityKey)))"
            if let body = r.body, let (text, dropped) = try migration.convert(json: body, set: r.entitySet, at: place) {
                r.body = text
                try records.upsert(t, r.properties)
                if !dropped.isEmpty {
                    outcome.warnings.append(
                        "\(place) no longer sends \(dropped.joined(separator: ", ")): the new $metadata drops \(dropped.count == 1 ? "it" : "them")"
                    )
                }
            }
            guard r.status == .error, var entry = try errors.get(t.reader, key: [.int(r.id)]) else { continue }
            var changed = false
            for column in ["RequestBody", "BaseEntity", "LocalEntity", "ServerEntity"] {
                guard case .string(let text)? = entry[column],
                    let (converted, _) = try migration.convert(json: text, set: r.entitySet, at: "\(place), \(column)")
                else { continue }
                entry[column] = .string(converted)
                changed = true
            }
            if changed { _ = try errors.upsert(t, entry) }
        }
        for (name, change) in migration.sets.sorted(by: { $0.key < $1.key }) {
            let set = try store.set(name)
            outcome.rewrittenRows += try EntityStore.rewriteRows(
                store.base(ofSet: name), of: name, change, migration, t,
                decode: { row, _ in try set.codec.decode(row) }, describe: { set.describeKeyBytes($0) })
        }
        for name in migration.droppedSets { try t.drop(store.base(ofSet: name)) }
    }
}
