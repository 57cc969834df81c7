package import LMDB
import Storage

extension RequestQueue {
    /// Compacts the queue (refresh runs it last), when `optimize` — the store's
    /// `requestQueueOptimization` — is on; otherwise nothing changes. Per entity, repeatedly:
    ///
    /// 1. an **obsolete** request goes: a pending PATCH that changes nothing — every property it
    ///    sets already has that value in the image before it (for the entity's first request, the
    ///    server image refresh just put in `base/`: the service already has the change);
    /// 2. **collapsible neighbours** in the entity's chain fold by the collapse table
    ///    (`Collapse.decide`), as if the later one had just been made: create + update → one
    ///    create, update + update → one update, update + delete → one delete, delete + create →
    ///    one replace, create + delete → nothing, and so on. Such pairs are left by changes made
    ///    while the optimization was off.
    ///
    /// Requests already sent or refused, non-mergeable ones and ones another request depends on
    /// are never removed or merged away; a merge keeps the earlier request's place and only
    /// happens when the later one needs nothing queued after that place. Acknowledged requests
    /// are gone already (flush removes them). The local entities do not change: the remaining
    /// chain gives the same result on the server image. An entity left without requests loses
    /// its `base/` image. Returns the number of requests removed.
    package func compact(_ t: WriteView, optimize: Bool) throws -> Int {
        guard optimize else { return 0 }
        // The entities with requests, from q/by-entity (set ‖ key ‖ id).
        var entities: [(set: EntitySetHandle, keyBytes: [UInt8])] = []
        try t.reader.withCursor(store.byEntity) { c in
            var previous: [UInt8]? = nil
            var e = try c.first()
            while let (k, _) = e {
                defer { e = try? c.next() }
                guard k.count > 8 else { continue }
                let prefix = Array(k[..<(k.count - 8)])
                if prefix == previous { continue }
                previous = prefix
                if let (set, keyBytes, length) = prefix.withUnsafeBytes({ store.splitEntityKey($0) }),
                    length == prefix.count
                {
                    entities.append((set, keyBytes))
                }
            }
        }
        var removed = 0
        for (set, keyBytes) in entities {
            while let n = try compactOnce(t, set: set, keyBytes: keyBytes) { removed += n }
            if try chain(t.reader, set: set.name, keyBytes: keyBytes).isEmpty {
                try t.delete(store.base(ofSet: set.name), keyBytes)
            }
        }
        return removed
    }

    /// One step of `compact` on one entity: the number of requests removed, nil when nothing applies.
    private func compactOnce(_ t: WriteView, set: EntitySetHandle, keyBytes: [UInt8]) throws -> Int? {
        let chain = try self.chain(t.reader, set: set.name, keyBytes: keyBytes)
        let records = try chain.compactMap { try record(t.reader, id: $0.id) }
        guard records.count == chain.count, !records.isEmpty else { return nil }
        // images[i]: the entity before records[i] (images[0] the server image, nil if none).
        var images: [Properties?] = [try t.get(store.base(ofSet: set.name), keyBytes).map { try set.codec.decode($0) }]
        for r in records { images.append(try apply(r, to: images.last!)) }
        // 1. A pending PATCH that changes nothing.
        for (i, r) in records.enumerated()
        where r.method == .update && r.status == .pending && !r.nonMergeable && !chain[i].hasDependents {
            if let before = images[i], images[i + 1] == before {
                try remove(t, r)
                try recordOutcome(t, r, .cancelled, message: "it changed nothing the service does not hold")
                return 1
            }
        }
        // 2. Neighbours the collapse table folds.
        for i in records.indices.dropLast() {
            let (a, b) = (records[i], records[i + 1])
            guard b.status == .pending, !b.nonMergeable, !chain[i + 1].hasDependents,
                try !callQueued(t.reader, after: a.id)
            else { continue }
            let pending = Collapse.Pending(
                id: a.id, method: a.method, status: a.status, nonMergeable: a.nonMergeable,
                transactionID: a.transactionID, uploadCategory: a.uploadCategory, hasDependents: chain[i].hasDependents)
            let options = ChangeOptions(
                customTag: b.customTag, customHeaders: b.customHeaders, transactionID: b.transactionID,
                uploadCategory: b.uploadCategory, nonMergeable: b.nonMergeable)
            switch Collapse.decide(
                pending: pending, new: b.method, dependencies: b.dependencies, options: options, optimize: true)
            {
            case .append:
                continue
            case .merge(_, let method):
                var merged = a
                if a.method == .update && method == .update {
                    var body = try self.body(of: a)
                    for (k, v) in try self.body(of: b) { body[k] = v }
                    merged.body = json(set, body, select: Set(body.map(\.key)))
                } else {
                    merged.body = json(set, images[i + 2] ?? [:])
                }
                merged.method = method
                merged.customTag = Collapse.joinTags(a.customTag, b.customTag)
                merged.customHeaders.merge(b.customHeaders) { _, new in new }
                merged.dependencies = Array(Set(a.dependencies + b.dependencies)).sorted()
                try remove(t, b)
                try recordOutcome(t, b, .merged, message: "merged into request \(a.id)")
                try put(t, merged, hasDependents: chain[i].hasDependents)
                return 1
            case .cancel:
                try remove(t, a)
                try remove(t, b)
                try recordOutcome(t, a, .cancelled, message: "cancelled by request \(b.id)")
                try recordOutcome(t, b, .cancelled, message: "it cancelled request \(a.id)")
                return 2
            case .supersede:
                try remove(t, a)
                try recordOutcome(t, a, .cancelled, message: "superseded by request \(b.id)")
                return 1
            }
        }
        return nil
    }
}
