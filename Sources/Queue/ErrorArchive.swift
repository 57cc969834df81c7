package import LMDB
package import Storage

/// A refusal from the service, as flush reports it.
package struct ServiceError: Sendable, Hashable {
    package var httpStatus: Int
    package var code: String?
    package var message: String
    package var innerError: String?

    package init(httpStatus: Int, code: String? = nil, message: String, innerError: String? = nil) {
        self.httpStatus = httpStatus
        self.code = code
        self.message = message
        self.innerError = innerError
    }
}

extension RequestQueue {
    var errorArchive: EntitySetHandle { get throws { try store.set(SystemSets.errorArchive) } }
    var eventLog: EntitySetHandle { get throws { try store.set(SystemSets.eventLog) } }

    /// Records that the service refused request `id`: the request is marked `error` and gets an
    /// ErrorArchive entry; so do its dependents — later requests of the same entity, and requests
    /// that need it (a child's create under a refused parent) — each with `CausedBy` = `id`.
    /// They stay in the queue, out of flush's way, until the entry is resolved.
    /// With `causedBy`, request `id` itself is archived as a dependent of that request (with
    /// `error` as its status and message: a member of a refused change set, say).
    /// Returns the ids archived. The service's words (`Message`, `Code`, `InnerError`) are kept
    /// without the configured secrets (`SecretForms.known`): a service that repeats the request
    /// in its error repeats its credentials.
    @discardableResult
    package func archive(_ t: WriteView, id: Int64, error: ServiceError, causedBy: Int64? = nil) throws -> [Int64] {
        let secrets = SecretForms.known
        var error = error
        error.message = secrets.scrub(error.message)
        error.code = error.code.map(secrets.scrub)
        error.innerError = error.innerError.map(secrets.scrub)
        guard let failed = try record(t.reader, id: id) else {
            throw EntityError.notFound(set: SystemSets.requestQueue, key: String(id))
        }
        var archived: [Int64] = []
        var queue: [(RequestRecord, Int64?)] = [(failed, causedBy)]
        var seen: Set<Int64> = []
        while !queue.isEmpty {
            let (r, cause) = queue.removeFirst()
            let isRoot = r.id == id
            guard seen.insert(r.id).inserted else { continue }
            var marked = r
            marked.status = .error
            let entry = try chain(t.reader, set: r.entitySet, keyBytes: r.keyBytes).first { $0.id == r.id }
            try put(t, marked, hasDependents: entry?.hasDependents ?? false)
            var row: Properties = [
                "RequestID": .int(r.id), "RequestMethod": .string(r.method.rawValue),
                "RequestURL": .string(r.resourcePath),
                "AffectedEntity": .string("\(r.entitySet)(\(r.entityKey))"),
                "ArchivedAt": .dateTimeOffset(.now),
            ]
            if let tag = r.customTag { row["CustomTag"] = .string(tag) }
            if let body = r.body { row["RequestBody"] = .string(body) }
            if let cause, isRoot {
                row["CausedBy"] = .int(cause)
                row["HTTPStatusCode"] = .int(Int64(error.httpStatus))
                row["Message"] = .string(error.message)
                if let c = error.code { row["Code"] = .string(c) }
            } else if let cause {
                row["CausedBy"] = .int(cause)
                row["Message"] = .string("not sent: it depends on request \(cause), which the service refused")
            } else {
                row["HTTPStatusCode"] = .int(Int64(error.httpStatus))
                row["Message"] = .string(error.message)
                if let c = error.code { row["Code"] = .string(c) }
                if let i = error.innerError { row["InnerError"] = .string(i) }
            }
            try errorArchive.upsert(t, row)
            var status: Int? = nil
            if case .int(let code)? = row["HTTPStatusCode"] { status = Int(code) }
            var message: String? = nil
            if case .string(let m)? = row["Message"] { message = m }
            try recordOutcome(t, marked, .refused, status: status, message: message)
            archived.append(r.id)
            // Later requests of the same entity, and requests that need this one.
            for later in try chain(t.reader, set: r.entitySet, keyBytes: r.keyBytes)
            where later.id > r.id && !seen.contains(later.id) {
                if let lr = try record(t.reader, id: later.id) { queue.append((lr, cause ?? id)) }
            }
            try records.scan(t.reader) { p in
                if let d = try? RequestRecord(p), d.dependencies.contains(r.id), !seen.contains(d.id) {
                    queue.append((d, cause ?? id))
                }
                return true
            }
        }
        return archived.sorted()
    }

    /// Resolves an ErrorArchive entry by giving up the change: the refused request and its
    /// dependents leave the queue and the archive, and the entities get back the service's image
    /// (plus whatever else is still queued for them). Returns the request ids dropped.
    @discardableResult
    package func resolveError(_ t: WriteView, id: Int64) throws -> [Int64] {
        guard try errorArchive.get(t.reader, key: [.int(id)]) != nil, let r = try record(t.reader, id: id) else {
            throw EntityError.notFound(set: SystemSets.errorArchive, key: String(id))
        }
        // Dropping the request from its entity's chain takes every later request of that entity
        // and, through dependencies, the requests that needed it.
        if r.isUnboundCall {
            try dropUnboundCall(t, r)
            return [r.id]
        }
        return try dropFrom(t, set: try store.set(r.entitySet), keyBytes: r.keyBytes, id: id)
    }

    /// Sends a refused request again, unchanged (SAP's "retry"): request `id` — an entry the
    /// service refused itself, not one archived for depending on another — and every request
    /// archived because of it go back to pending, in their places in the queue, and leave the
    /// ErrorArchive; the next flush sends them. Safe: the service refused them, so none was
    /// applied. Returns the request ids revived.
    @discardableResult
    package func retryError(_ t: WriteView, id: Int64) throws -> [Int64] {
        guard let entry = try errorArchive.get(t.reader, key: [.int(id)]), try record(t.reader, id: id) != nil else {
            throw EntityError.notFound(set: SystemSets.errorArchive, key: String(id))
        }
        if case .int(let cause)? = entry["CausedBy"] {
            throw EntityError.badInput(
                "request \(id) was not refused by the service: it waits for request \(cause), which was; retry \(cause)"
            )
        }
        return try revive(t, roots: [id])
    }

    /// The refused requests behind the error state of an entity's chain (their roots: the
    /// requests the service refused), revived (`retryError`) because the entity is being changed
    /// — SAP's "fix and re-send": the change then collapses into the refused request as into any
    /// pending one. Returns the request ids revived (none when the chain has no request in error).
    @discardableResult
    package func reviveForChange(_ t: WriteView, chain: [ChainEntry]) throws -> [Int64] {
        var roots: Set<Int64> = []
        for e in chain where e.status == .error {
            guard let row = try errorArchive.get(t.reader, key: [.int(e.id)]) else { continue }
            if case .int(let cause)? = row["CausedBy"] { roots.insert(cause) } else { roots.insert(e.id) }
        }
        return roots.isEmpty ? [] : try revive(t, roots: roots)
    }

    /// The requests of `set`'s entity `keyBytes` (now `entity`) that a new request of it joins,
    /// in `t`: those in error revived first (`reviveForChange`); and when there are none, the
    /// entity's server image kept, for undo and rebase — it is the first local change of a
    /// server entity.
    func chainForChange(
        _ t: WriteView, set: EntitySetHandle, keyBytes: [UInt8], entity: Properties
    ) throws -> [ChainEntry] {
        var chain = try self.chain(t.reader, set: set.name, keyBytes: keyBytes)
        if chain.contains(where: { $0.status == .error }), try !reviveForChange(t, chain: chain).isEmpty {
            chain = try self.chain(t.reader, set: set.name, keyBytes: keyBytes)
        }
        if chain.isEmpty { try t.put(store.base(ofSet: set.name), keyBytes, set.codec.encode(entity)) }
        return chain
    }

    /// Makes `roots` and every request archived with `CausedBy` in `roots` pending again, and
    /// removes their ErrorArchive entries.
    private func revive(_ t: WriteView, roots: Set<Int64>) throws -> [Int64] {
        var ids: [Int64] = []
        try errorArchive.scan(t.reader) { p in
            guard case .int(let id)? = p["RequestID"] else { return true }
            if roots.contains(id) {
                ids.append(id)
            } else if case .int(let cause)? = p["CausedBy"], roots.contains(cause) {
                ids.append(id)
            }
            return true
        }
        for id in ids {
            _ = try errorArchive.delete(t, key: [.int(id)])
            guard var r = try record(t.reader, id: id), r.status == .error else { continue }
            let entry = try chain(t.reader, set: r.entitySet, keyBytes: r.keyBytes).first { $0.id == id }
            r.status = .pending
            try put(t, r, hasDependents: entry?.hasDependents ?? false)
        }
        return ids.sorted()
    }

    /// Resolves every ErrorArchive entry (see `resolveError`). Returns the request ids dropped.
    @discardableResult
    package func resolveAllErrors(_ t: WriteView) throws -> [Int64] {
        var ids: [Int64] = []
        try errorArchive.scan(t.reader) { p in
            if case .int(let id)? = p["RequestID"] { ids.append(id) }
            return true
        }
        var dropped: [Int64] = []
        for id in ids where try errorArchive.get(t.reader, key: [.int(id)]) != nil {
            if try record(t.reader, id: id) == nil {
                _ = try errorArchive.delete(t, key: [.int(id)])  // an entry whose request is gone already
                continue
            }
            dropped += try resolveError(t, id: id)
        }
        return dropped.sorted()
    }

    // MARK: EventLog

    /// How many events the EventLog keeps.
    package static let eventLogSize = 100

    /// Appends an upload or download event, dropping the oldest beyond `eventLogSize`. `outcome`
    /// and `details` are kept without the configured secrets (`SecretForms.known`).
    package func logEvent(
        _ t: WriteView, type: String, startedAt: EDMDateTimeOffset, finishedAt: EDMDateTimeOffset?,
        outcome: String, requests: Int? = nil, entities: Int? = nil, details: String? = nil
    ) throws {
        let log = try eventLog
        var last: Int64 = 0
        var ids: [Int64] = []
        try log.scan(t.reader) { p in
            if case .int(let id)? = p["EventID"] { ids.append(id); last = max(last, id) }
            return true
        }
        let secrets = SecretForms.known
        var row: Properties = [
            "EventID": .int(last + 1), "Type": .string(type), "StartedAt": .dateTimeOffset(startedAt),
            "Outcome": .string(secrets.scrub(outcome)),
        ]
        if let finishedAt { row["FinishedAt"] = .dateTimeOffset(finishedAt) }
        if let requests { row["Requests"] = .int(Int64(requests)) }
        if let entities { row["Entities"] = .int(Int64(entities)) }
        if let details { row["Details"] = .string(secrets.scrub(details)) }
        try log.insert(t, row)
        for id in ids.sorted().prefix(max(0, ids.count + 1 - Self.eventLogSize)) {
            _ = try log.delete(t, key: [.int(id)])
        }
    }
}
