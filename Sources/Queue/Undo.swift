package import LMDB
package import Storage

extension RequestQueue {
    /// Drops the pending requests of one entity and puts it back as the service last sent it: an
    /// updated or deleted entity gets its server image back, a locally created one disappears.
    ///
    /// Another entity that came to refer to a dropped create (a child created under, or moved to,
    /// a parent created locally) loses its requests from that point on — the one that needs the
    /// parent and every later one — and is rebuilt from its server image and the requests that
    /// remain. With request-queue optimization on, a merged request is one unit: it goes whole
    /// (with the changes merged into it) when it needs the dropped create. Returns the ids of
    /// every request dropped.
    /// A request already sent cannot be undone — the service may have applied it — and throws.
    @discardableResult
    package func undo(_ t: WriteView, set setName: String, key: [Value]) throws -> [Int64] {
        let set = try store.set(setName)
        var dropped: [Int64] = []
        try drop(t, set: set, keyBytes: try set.encodeKey(key), from: nil, dropped: &dropped)
        return dropped.sorted()
    }

    /// Drops the entity's requests from `id` on and rebuilds it; follows dependents. Returns the ids dropped.
    func dropFrom(_ t: WriteView, set: EntitySetHandle, keyBytes: [UInt8], id: Int64) throws -> [Int64] {
        var dropped: [Int64] = []
        try drop(t, set: set, keyBytes: keyBytes, from: id, dropped: &dropped)
        return dropped.sorted()
    }

    /// Drops the entity's requests from `first` on (all of them when nil), rebuilds the entity
    /// from its server image and the requests left, then follows requests that depended on a
    /// dropped create.
    private func drop(
        _ t: WriteView, set: EntitySetHandle, keyBytes: [UInt8], from first: Int64?, dropped: inout [Int64]
    ) throws {
        let chain = try self.chain(t.reader, set: set.name, keyBytes: keyBytes)
        let going = chain.filter { first == nil || $0.id >= first! }
        if going.isEmpty { return }
        if let sent = going.first(where: { $0.status == .sent }) {
            throw EntityError.badInput(
                "\(set.name)(\(set.describeKeyBytes(keyBytes))): request \(sent.id) was already sent to the service and cannot be undone; flush first"
            )
        }
        var creates: Set<Int64> = []
        var linkChanges: [RequestRecord] = []
        for entry in going {
            guard let r = try record(t.reader, id: entry.id) else { continue }
            if r.method.isCreate { creates.insert(r.id) }
            try remove(t, r)
            try revertStream(t, r)
            if r.method.isLinkChange { linkChanges.append(r) }
            // Refused and given up, or never sent and undone.
            try recordOutcome(t, r, r.status == .error ? .givenUp : .undone)
            try t.delete(try store.set(SystemSets.errorArchive).entities, try KeyCodec.encode([.int(r.id)]))
            dropped.append(r.id)
        }
        // Links back as they were, the latest change undone first.
        for r in linkChanges.reversed() { try revertLink(t, r) }
        // The entity as the service has it plus what is still queued for it.
        let base = store.base(ofSet: set.name)
        var image = try t.get(base, keyBytes).map { try set.codec.decode($0) }
        let remaining = try chain.filter { !going.contains($0) }.compactMap { try record(t.reader, id: $0.id) }
        for r in remaining { image = try apply(r, to: image) }
        if remaining.isEmpty { try t.delete(base, keyBytes) }
        if let image {
            try set.upsert(t, image, facets: false)
        } else {
            _ = try set.delete(
                t, key: try keyBytes.withUnsafeBytes { try KeyCodec.decode($0, count: set.type.key.count).values })
        }
        guard !creates.isEmpty else { return }
        // Requests that need a dropped create: each goes, with the rest of its entity's chain.
        var dependents: [(String, [UInt8], Int64)] = []
        try records.scan(t.reader) { p in
            if let r = try? RequestRecord(p), !Set(r.dependencies).isDisjoint(with: creates) {
                dependents.append((r.entitySet, r.keyBytes, r.id))
            }
            return true
        }
        for (name, bytes, id) in dependents where try record(t.reader, id: id) != nil {
            try drop(t, set: try store.set(name), keyBytes: bytes, from: id, dropped: &dropped)
        }
    }

    /// What the service would hold after applying request `r` to `image` (nil: absent).
    package func apply(_ r: RequestRecord, to image: Properties?) throws -> Properties? {
        let body = try self.body(of: r)
        switch r.method {
        case .create, .replace:
            return Properties(body.filter { !$0.value.isNull })
        case .update:
            var e = image ?? [:]
            for (k, v) in body { e[k] = v.isNull ? nil : v }
            return e
        case .delete:
            return nil
        case .putStream, .link, .unlink, .call:
            return image
        case .createMedia:
            // The entity as the service makes it from the bytes: its key here, the rest from the
            // PATCH that follows (or the service's answer).
            if let image { return image }
            let set = try store.set(r.entitySet)
            let key = try r.keyBytes.withUnsafeBytes { try KeyCodec.decode($0, count: set.type.key.count).values }
            return Properties(zip(set.type.key, key).map { ($0, $1) })
        }
    }
}
