import Storage

extension RequestQueue {
    /// Drops the pending requests of one entity and puts it back as the service last sent it: an
    /// updated or deleted entity gets its server image back, a locally created one disappears.
    /// Requests of other entities that depend on a dropped create (a child created under a parent
    /// created locally) are undone too. Returns the ids of the requests dropped.
    ///
    /// A request already sent cannot be undone — the service may have applied it — and throws.
    @discardableResult
    package func undo(_ t: WriteView, set setName: String, key: [Value]) throws -> [Int64] {
        let set = try store.set(setName)
        let keyBytes = try set.encodeKey(key)
        var dropped: [Int64] = []
        try undo(t, set: set, keyBytes: keyBytes, dropped: &dropped)
        return dropped.sorted()
    }

    private func undo(_ t: WriteView, set: EntitySetHandle, keyBytes: [UInt8], dropped: inout [Int64]) throws {
        let chain = try self.chain(t.reader, set: set.name, keyBytes: keyBytes)
        if chain.isEmpty { return }
        if let sent = chain.first(where: { $0.status == .sent }) {
            throw EntityError.badInput("\(set.name)(\(set.describeKeyBytes(keyBytes))): request \(sent.id) was already sent to the service and cannot be undone; flush first")
        }
        var creates: Set<Int64> = []
        for entry in chain {
            guard let r = try record(t.reader, id: entry.id) else { continue }
            if r.method == .create { creates.insert(r.id) }
            try remove(t, r)
            try t.delete(try store.set(SystemSets.errorArchive).entities, try KeyCodec.encode([.int(r.id)]))
            dropped.append(r.id)
        }
        let base = store.bases[set.name]!
        if let image = try t.get(base, keyBytes) {
            let props = try set.codec.decode(image)
            try t.delete(base, keyBytes)
            try set.upsert(t, props)
        } else {
            _ = try set.delete(t, key: try keyBytes.withUnsafeBytes { try KeyCodec.decode($0, count: set.type.key.count).values })
        }
        guard !creates.isEmpty else { return }
        // Requests that needed a dropped create go too (their entities are undone whole).
        var dependents: [(String, [UInt8])] = []
        try records.scan(t.reader) { p in
            if let r = try? RequestRecord(p), !Set(r.dependencies).isDisjoint(with: creates) {
                dependents.append((r.entitySet, r.keyBytes))
            }
            return true
        }
        for (name, bytes) in dependents {
            try undo(t, set: try store.set(name), keyBytes: bytes, dropped: &dropped)
        }
    }
}
