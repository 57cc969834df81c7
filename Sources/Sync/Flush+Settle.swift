package import LMDB
package import Queue
package import Storage

extension Flush {
    // MARK: 4. Settle

    /// In one write transaction: takes back the marking of `takingBack` (a round marked that
    /// does not go), applies the verdicts of `round` and, when the flush goes on (`goOn`, and the
    /// settlement neither stopped it nor settled nothing), marks the next round sent, planned
    /// without `excluding` (the round on its way); nil for the next round when it was not prepared.
    func settleAndPrepare(
        _ round: [Outgoing], _ verdicts: [Verdict], takingBack: [Outgoing] = [], excluding: Set<Int64> = [],
        goOn: Bool = true
    ) async throws -> (Settled, [Outgoing]?) {
        let (queue, options) = (self.queue, self.options)
        let work = Array(zip(round.map(\.record), verdicts))
        let goOn = goOn && !Task.isCancelled
        return try await store.write(usingReserve: true) { t in
            try Self.takeBack(t, queue: queue, takingBack)
            return try Self.settleAndPrepare(t, queue: queue, work, options: options, goOn: goOn, excluding: excluding)
        }
    }

    /// Puts back, in `t`, the records of requests marked sent that did not go (`unmarkSent`).
    static func takeBack(_ t: WriteView, queue: RequestQueue, _ outgoing: [Outgoing]) throws {
        for o in outgoing {
            if let before = o.before { try queue.unmarkSent(t, marked: o.record, before: before) }
        }
    }

    /// Adds what a settlement of `round` did to `report` (and tells `progress`); returns why the
    /// flush stops there, if it does: the settlement stopped it, or it settled nothing.
    func account(_ settled: Settled, of round: [Outgoing], into report: inout FlushReport) -> String? {
        report.succeeded += settled.succeeded.count
        report.reconciled += settled.reconciled.count
        report.archived += settled.archived.count
        report.resolvedByPolicy += settled.resolved.count
        for o in round { if let line = settled.refusals[o.record.id] { report.refused.append(line) } }
        for o in round {
            guard let line = settled.inDoubt[o.record.id] else { continue }
            report.inDoubt.append(line)
        }
        options.progress?(report)
        if let stop = settled.stop { return stop }
        if settled.succeeded.isEmpty && settled.archived.isEmpty && settled.resolved.isEmpty && settled.retried.isEmpty
        {
            return "no request of the last round trip could be settled"
        }
        return nil
    }

    /// `settle`, then — when `goOn` and the settlement neither stopped the flush nor settled
    /// nothing — `prepare` (without `excluding`), in `t`.
    package static func settleAndPrepare(
        _ t: WriteView, queue: RequestQueue, _ work: [(RequestRecord, Verdict)], options: Options, goOn: Bool = true,
        now: EDMDateTimeOffset = .now, excluding: Set<Int64> = []
    ) throws -> (Settled, [Outgoing]?) {
        let settled = try settle(t, queue: queue, work, conflictPolicies: options.settings.conflictPolicies)
        guard goOn, settled.stop == nil,
            !(settled.succeeded.isEmpty && settled.archived.isEmpty && settled.resolved.isEmpty
                && settled.retried.isEmpty)
        else {
            return (settled, nil)
        }
        return (settled, try prepare(t, queue: queue, options: options, now: now, excluding: excluding))
    }

    /// Applies each verdict, in order, in `t`; a conflict is settled by `conflictPolicies`
    /// (`SyncSettings`) unless the program's resolver decides.
    package static func settle(
        _ t: WriteView, queue: RequestQueue, _ work: [(RequestRecord, Verdict)],
        conflictPolicies: [String: ConflictPolicy] = [:]
    ) throws -> Settled {
        var out = Settled()
        var archived: Set<Int64> = []
        let etags = ServerETags(store: queue.store)
        func leave(_ id: Int64, _ why: String) {
            out.left.append(id)
            if out.stop == nil { out.stop = why }
        }
        for (sent, verdict) in work {
            // The record as it is now: an earlier verdict may have archived it as a dependent.
            guard let r = try queue.record(t.reader, id: sent.id), r.status == .sent else { continue }
            switch verdict {
            case .success(let image, let etag, let reconciled, let inDoubt, let status, let mediaETag):
                let chain = try queue.chain(t.reader, set: r.entitySet, keyBytes: r.keyBytes)
                guard chain.first?.id == r.id else {
                    leave(r.id, "request \(r.id) succeeded but an earlier request of its entity is not settled")
                    continue
                }
                // In a child transaction: an answer this store cannot take in (a store error
                // that is the request's alone) leaves it as it was, goes to ErrorArchive, and the
                // requests behind it are settled all the same.
                // The line that flags a create perhaps applied twice, and the key the service gave.
                var serverKey: String? = nil
                var doubt: String? = nil
                if r.localKey, let image, let set = try? queue.store.set(r.entitySet),
                    let key = try? set.keyValues(image)
                {
                    serverKey = set.describeKey(key)
                    if inDoubt {
                        let entity = "\(r.entitySet)(\(set.describeKey(key)))"
                        doubt =
                            "request \(r.id) (POST \(r.entitySet) → \(entity)): sent again after its answer was lost, to a service that did not say it executed it once: it may have been applied twice: check \(r.entitySet) for another entity like \(entity)"
                    }
                }
                let outcome: Outcome = doubt != nil ? .inDoubt : reconciled ? .foundApplied : .applied
                do {
                    try t.nested { c in
                        try acknowledge(c, queue: queue, r, image: image, etag: etag, etags: etags)
                        if r.method.carriesStream {
                            // Of the entity under the key it has now (the service's, for a create).
                            var settled = r
                            if r.localKey, let image, let set = try? queue.store.set(r.entitySet) {
                                settled.keyBytes = try set.encodeKey(try set.keyValues(image))
                            }
                            try queue.streamApplied(c, settled, mediaETag: mediaETag, entityETag: etag)
                        }
                        let removed =
                            r.removeAfterUpload ? "removed from this store once applied (RemoveAfterUpload)" : nil
                        try queue.recordOutcome(
                            c, r, outcome, status: status, serverKey: serverKey, etag: etag, message: doubt ?? removed)
                    }
                } catch let e as EntityError {
                    let error = ServiceError(
                        httpStatus: 200, code: "OfflineStore.AnswerNotApplied",
                        message:
                            "the service applied request \(r.id) (\(r.method.rawValue) \(r.entitySet)(\(r.entityKey))), but this store could not take its answer in: \(e). The change is on the service: refresh, then resolve this entry"
                    )
                    for id in try queue.archive(t, id: r.id, error: error) { archived.insert(id) }
                    continue
                }
                out.succeeded.append(r.id)
                if reconciled { out.reconciled.append(r.id) }
                if let line = doubt {
                    // Flagged durably with the settlement: a flush killed after it keeps the flag.
                    try queue.logEvent(
                        t, type: "InDoubt", startedAt: .now, finishedAt: .now, outcome: "in doubt", requests: 1,
                        details: line)
                    out.inDoubt[r.id] = line
                }
            case .refused(let error):
                for id in try queue.archive(t, id: r.id, error: error) { archived.insert(id) }
                out.refusals[r.id] = refusal(r, error)
            case .conflict(let error, let server, let etag, let mediaETag):
                let ids = try queue.archive(t, id: r.id, error: error)
                if r.method == .putStream, server != nil {
                    try queue.streamConflict(t, r, mediaETag: mediaETag)
                }
                let versions = try queue.recordConflict(t, id: r.id, server: server, serverETag: etag)
                if let etag, server != nil, ServerETags.isHeaderValue(etag) {
                    try etags.put(t, set: r.entitySet, keyBytes: r.keyBytes, etag: etag)
                }
                // The program's resolver or the set's policy decides without a person, in this transaction.
                switch try versions.map({
                    try queue.settleConflict(
                        t, r, $0, status: error.httpStatus, what: "a conflict",
                        policy: conflictPolicies[r.entitySet] ?? .manual)
                }) ?? .waiting {
                case .gaveUp: out.resolved.append(r.id)
                case .resent: out.retried.append(r.id)
                case .waiting:
                    for id in ids { archived.insert(id) }
                    out.refusals[r.id] = refusal(r, error) + " (a conflict: both versions kept)"
                }
            case .refusedWith(let cause, let error):
                for id in try queue.archive(t, id: r.id, error: error, causedBy: cause) { archived.insert(id) }
            case .dependent(let error):
                leave(r.id, "request \(r.id) was not applied: \(error.message)")
            case .again:
                out.left.append(r.id)
            case .stop(let why):
                leave(r.id, why)
            }
        }
        out.archived = archived.sorted()
        return out
    }

    /// The line that says request `r` was refused with `error`.
    /// The configured secrets are scrubbed from it, as from the ErrorArchive: a service may echo them.
    static func refusal(_ r: RequestRecord, _ error: ServiceError) -> String {
        let secrets = SecretForms.known
        return secrets.scrub(
            "request \(r.id) (\(r.method.rawValue) \(r.entitySet)(\(r.entityKey))): \(error.httpStatus) \(error.code.map { $0 + ": " } ?? "")\(error.message.prefix(300))"
        )
    }

    /// A success, in `t`: the request leaves the queue with the service's image applied, and the
    /// entity's ETag (or, for a delete, its membership) follows.
    static func acknowledge(
        _ t: WriteView, queue: RequestQueue, _ r: RequestRecord, image: Properties?, etag: String?,
        etags: ServerETags
    ) throws {
        if r.isUnboundCall {
            // No entity: the call leaves the queue, and that is all.
            try queue.acknowledgeUnboundCall(t, r)
            return
        }
        try queue.acknowledge(t, id: r.id, serverImage: image)
        var keyBytes = r.keyBytes
        if r.localKey, let image {
            let set = try queue.store.set(r.entitySet)
            keyBytes = try set.encodeKey(try set.keyValues(image))
        }
        if r.removeAfterUpload, r.method == .create,
            try queue.chain(t.reader, set: r.entitySet, keyBytes: keyBytes).isEmpty
        {
            // Applied, and nothing else queued for it: it leaves this store (not the service);
            // a defining request that covers it brings the service's copy back on refresh.
            let set = try queue.store.set(r.entitySet)
            let key = try keyBytes.withUnsafeBytes { try KeyCodec.decode($0, count: set.type.key.count).values }
            _ = try set.delete(t, key: key)
            try Membership(store: queue.store).entityDeleted(t, set: r.entitySet, keyBytes: keyBytes)
        } else if r.method == .delete {
            // Gone here and at the service: its ETag and its defining requests' entries go too.
            try Membership(store: queue.store).entityDeleted(t, set: r.entitySet, keyBytes: keyBytes)
        } else if let etag, !etag.isEmpty, ServerETags.isHeaderValue(etag) {
            try etags.put(t, set: r.entitySet, keyBytes: keyBytes, etag: etag)
        } else {
            try etags.delete(t, set: r.entitySet, keyBytes: keyBytes)  // the one held is stale now
        }
    }
}

extension ServerETags {
    static func isHeaderValue(_ s: String) -> Bool {
        var s = s
        return s.withUTF8 { isHeaderValue(UnsafeRawBufferPointer($0)) }
    }
}
