package import LMDB
import Storage

extension RequestQueue {
    /// The queue's invariants, checked in one read transaction; each problem as a sentence.
    ///
    /// - every `RequestQueue` row is a request record, with an id no higher than the last one
    ///   handed out, and dependencies only on earlier requests;
    /// - `q/by-entity` and `q` agree both ways (same set, key, method and status);
    /// - an entity whose last request is a delete is absent, any other with requests is present;
    /// - an entity has a server image in `base/` exactly when its first request is not a create,
    ///   and no image without requests;
    /// - a request is in state `error` exactly when ErrorArchive has an entry for it;
    /// - a request `sent` was sent at least once (`Attempts` > 0), and only one sent has a
    ///   `FirstSentAt`;
    /// - a conflict's versions in the ErrorArchive are JSON objects;
    /// - a request of a deep insert is a create in a transaction; those of one transaction share
    ///   their status (they go, and are settled, as one POST), and each but the first depends on
    ///   an earlier one of them (its parent);
    /// - a stream replacement is outside any transaction, and its bytes' file is kept for it in
    ///   `q/stream-files` with the size and SHA-256 its body records; `q/stream-files` keeps no
    ///   other file (`checkStreamFiles`).
    package func check(_ t: ReadView, maxProblems: Int = 100) throws -> [String] {
        var problems: [String] = []
        func problem(_ s: String) { if problems.count < maxProblems { problems.append(s) } }
        let last = try lastAllocatedID(t)
        let records = try self.records
        var chains: [[UInt8]: (set: String, keyBytes: [UInt8], ids: [Int64])] = [:]
        var deep: [String: [RequestRecord]] = [:]
        var putStreams: [RequestRecord] = []
        try records.scan(t) { p in
            let r: RequestRecord
            do { r = try RequestRecord(p) } catch {
                problem("RequestQueue: a row is not a request record: \(error)")
                return true
            }
            if r.method.isLinkChange,
                (try? LinkChange.of(r)).map({ store.schema.entitySet($0.targetSet) == nil }) ?? true
            {
                problem("RequestQueue: request \(r.id) changes a link but its body does not read or names no set")
            }
            if r.method.carriesStream {
                putStreams.append(r)
                if r.transactionID != nil {
                    problem("RequestQueue: request \(r.id) replaces a stream inside a transaction")
                }
            }
            if r.id > last { problem("RequestQueue: request \(r.id) is above the last id handed out (\(last))") }
            for d in r.dependencies where d >= r.id {
                problem("RequestQueue: request \(r.id) depends on a later request \(d)")
            }
            if r.status == .sent && r.attempts < 1 {
                problem("RequestQueue: request \(r.id) is sent but has no attempt")
            }
            if r.firstSentAt != nil && r.attempts < 1 {
                problem("RequestQueue: request \(r.id) has a FirstSentAt but was never sent")
            }
            if r.deepInsert {
                if r.method != .create || r.transactionID == nil {
                    problem("RequestQueue: request \(r.id) is of a deep insert but is not a create in a transaction")
                } else {
                    deep[r.transactionID!, default: []].append(r)
                }
            }
            if r.method == .call {
                if (try? OperationCall.of(r)) == nil { problem("RequestQueue: call \(r.id) has no readable body") }
            }
            if r.isUnboundCall {
                // No entity: its chain is its own, keyed by its id.
                if r.keyBytes != Self.unboundCallKey(r.id) {
                    problem("RequestQueue: unbound call \(r.id) is not filed under its own id")
                }
            } else {
                guard let set = try? store.set(r.entitySet), !store.schema.isSystemSet(r.entitySet) else {
                    problem("RequestQueue: request \(r.id) names an unknown entity set '\(r.entitySet)'")
                    return true
                }
                if (try? r.keyBytes.withUnsafeBytes { try KeyCodec.decode($0, count: set.type.key.count) })?.length
                    != r.keyBytes.count
                {
                    problem("RequestQueue: request \(r.id) has a key that does not decode for \(r.entitySet)")
                }
            }
            let k = Self.byEntityKey(set: r.entitySet, keyBytes: r.keyBytes, id: r.id)
            if let v = try t.get(store.byEntity, k) {
                if let e = Self.entry(id: r.id, value: v) {
                    if e.method != r.method || e.status != r.status {
                        problem(
                            "q/by-entity: request \(r.id) is \(e.method.rawValue)/\(e.status.rawValue) there but \(r.method.rawValue)/\(r.status.rawValue) in the queue"
                        )
                    }
                } else {
                    problem("q/by-entity: the entry of request \(r.id) does not decode")
                }
            } else {
                problem("q/by-entity: request \(r.id) (\(r.entitySet)(\(r.entityKey))) has no entry")
            }
            let prefix = Self.entityPrefix(set: r.entitySet, keyBytes: r.keyBytes)
            chains[prefix, default: (r.entitySet, r.keyBytes, [])].ids.append(r.id)
            return true
        }
        for (tx, members) in deep.sorted(by: { $0.key < $1.key }) {
            if Set(members.map(\.status)).count > 1 {
                problem(
                    "RequestQueue: the deep insert of transaction \(tx) has requests of different states: "
                        + members.map { "\($0.id) \($0.status.rawValue)" }.joined(separator: ", "))
            }
            let ids = Set(members.map(\.id))
            for m in members.dropFirst() where !m.dependencies.contains(where: ids.contains) {
                problem("RequestQueue: request \(m.id) of the deep insert of transaction \(tx) depends on none of it")
            }
        }
        try checkStreamFiles(t, putStreams, problem: problem)
        // ErrorArchive ↔ error records.
        var archived: Set<Int64> = []
        try errorArchive.scan(t) { p in
            if case .int(let id)? = p["RequestID"] {
                archived.insert(id)
                // A conflict's versions are entities as OData JSON.
                for name in ["BaseEntity", "LocalEntity", "ServerEntity"] {
                    guard case .string(let text)? = p[name] else { continue }
                    guard case .object? = try? JSON.parse(Array(text.utf8)) else {
                        problem("ErrorArchive: the \(name) of request \(id)'s conflict is not a JSON object")
                        continue
                    }
                }
            }
            return true
        }
        try records.scan(t) { p in
            guard let r = try? RequestRecord(p) else { return true }
            if (r.status == .error) != archived.contains(r.id) {
                problem(
                    r.status == .error
                        ? "RequestQueue: request \(r.id) is in error but has no ErrorArchive entry"
                        : "ErrorArchive: request \(r.id) has an entry but is \(r.status.rawValue)")
            }
            archived.remove(r.id)
            return true
        }
        for id in archived.sorted() { problem("ErrorArchive: the entry of request \(id) has no request in the queue") }
        // by-entity → q
        var entries = 0
        try t.withCursor(store.byEntity) { c in
            var e = try c.first()
            while let (k, _) = e {
                entries += 1
                if k.count < 8 {
                    problem("q/by-entity: an entry key is too short")
                } else {
                    var id: UInt64 = 0
                    for b in k[(k.count - 8)...] { id = id << 8 | UInt64(b) }
                    let prefix = Array(k[..<(k.count - 8)])
                    if chains[prefix]?.ids.contains(Int64(bitPattern: id)) != true {
                        problem("q/by-entity: an entry for request \(Int64(bitPattern: id)) has no matching record")
                    }
                }
                e = try c.next()
            }
        }
        // Entities, chains and server images.
        for (_, chain) in chains {
            if chain.set.isEmpty {
                // An unbound call's own chain: it alone.
                if chain.ids.count != 1 { problem("RequestQueue: unbound calls \(chain.ids.sorted()) share a chain") }
                continue
            }
            let set = try store.set(chain.set)
            let ids = chain.ids.sorted()
            guard let first = try record(t, id: ids.first!), let lastRecord = try record(t, id: ids.last!) else {
                continue
            }
            let exists = try set.row(t, key: chain.keyBytes) != nil
            if lastRecord.method == .delete && exists {
                problem(
                    "\(chain.set)(\(lastRecord.entityKey)): its last request \(lastRecord.id) deletes it, yet it exists"
                )
            } else if lastRecord.method != .delete && !exists {
                problem(
                    "\(chain.set)(\(lastRecord.entityKey)): its last request \(lastRecord.id) is a \(lastRecord.method.rawValue), yet it is absent"
                )
            }
            let hasBase = try t.get(store.base(ofSet: chain.set), chain.keyBytes) != nil
            if first.method.isCreate && hasBase {
                problem(
                    "\(chain.set)(\(first.entityKey)): created locally (request \(first.id)) but has a server image in base/"
                )
            } else if !first.method.isCreate && !hasBase {
                problem(
                    "\(chain.set)(\(first.entityKey)): its first request \(first.id) changes a server entity, but base/ has no server image"
                )
            }
        }
        for (name, db) in store.bases {
            let set = try store.set(name)
            try t.withCursor(db) { c in
                var e = try c.first()
                while let (k, v) = e {
                    if chains[Self.entityPrefix(set: name, keyBytes: Array(k))] == nil {
                        problem("base/\(name): a server image of \(set.describeKeyBytes(k)) has no pending request")
                    }
                    if (try? set.codec.decode(v)) == nil {
                        problem("base/\(name): the server image of \(set.describeKeyBytes(k)) does not decode")
                    }
                    e = try c.next()
                }
            }
        }
        return problems
    }
}
