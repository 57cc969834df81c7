import LMDB
import Storage

extension RequestQueue {
    /// Records a conflict on the ErrorArchive entry of request `id` (archived just now, refused
    /// for a stale ETag): the three versions — the service's image the change was made on
    /// (`base/`), the entity as changed here, and `server`, the service's entity when the refusal
    /// came (nil: gone there) — and the properties where this store's and the service's differ.
    /// The service's entity becomes the entity's server image (`base/`): giving the change up
    /// (`resolveError`) then adopts it, and the change sent again (`retryError`, or a further
    /// change that revives it) goes against it — with its ETag, which the caller records.
    package func recordConflict(_ t: WriteView, id: Int64, server: Properties?, serverETag: String?) throws {
        guard var row = try errorArchive.get(t.reader, key: [.int(id)]), let r = try record(t.reader, id: id) else {
            return
        }
        let set = try store.set(r.entitySet)
        let baseDB = store.base(ofSet: set.name)
        let base = try t.get(baseDB, r.keyBytes).map { try set.codec.decode($0) }
        let key = try r.keyBytes.withUnsafeBytes { try KeyCodec.decode($0, count: set.type.key.count).values }
        let local = try set.get(t.reader, key: key)
        row["BaseEntity"] = base.map { .string(json(set, $0)) } ?? .null
        row["LocalEntity"] = local.map { .string(json(set, $0)) } ?? .null
        row["ServerEntity"] = server.map { .string(json(set, $0)) } ?? .null
        row["ServerETag"] = serverETag.map { .string($0) } ?? .null
        var differences: [String] = []
        for p in set.type.properties where !set.type.key.contains(p.name) {
            let mine = local?[p.name] ?? .null, theirs = server?[p.name] ?? .null
            if mine != theirs && !(mine.isNull && theirs.isNull) { differences.append(p.name) }
        }
        row["Differences"] = .string(differences.joined(separator: ","))
        try errorArchive.upsert(t, row)
        // The service's entity is the one the change now goes against (a base exists: the
        // entity's first request is a change of a server entity, not a create).
        if let server, base != nil { try t.put(baseDB, r.keyBytes, set.codec.encode(server)) }
    }
}
