package import LMDB
import Storage

/// The outcome record: what became of each request, one row of the `RequestHistory` set per
/// request id (database `history`), written in the transaction that decided it — so a request is
/// either still in the queue or has its outcome here (within the retention bound), never neither
/// after a crash.
///
/// A row is replaced when a later decision changes the outcome: a request refused, then given up,
/// ends as `given up`; refused, then sent again and applied, as `applied`. The oldest rows go
/// when there are more than `StoreConfiguration.requestHistory`.
package enum Outcome: String, Sendable, CaseIterable {
    /// The service applied it (its answer settled it).
    case applied
    /// Sent again after its answer was lost, and found applied on the service (by reading the
    /// entity back, or by its create marker) instead of being applied again.
    case foundApplied = "found applied"
    /// A create whose key the service assigns, sent again after its answer was lost to a service
    /// that did not say it executed it once: applied, perhaps twice.
    case inDoubt = "in doubt"
    /// The service refused it (or a request it depends on): in ErrorArchive.
    case refused
    /// Given up after a refusal (`resolveError`): it left the queue without being applied.
    case givenUp = "given up"
    /// Dropped locally before it was ever sent (`undo`).
    case undone
    /// Cancelled by a later local change of its entity before it was sent (a create then a
    /// delete, or a change a delete supersedes): nothing of it needs to reach the service.
    case cancelled
    /// Merged into an earlier request of its entity before it was sent (refresh's compaction):
    /// that request carries it.
    case merged
}

extension RequestQueue {
    var history: EntitySetHandle { get throws { try store.set(SystemSets.requestHistory) } }

    /// Records what became of request `r` (as it was when decided), in `t`, and drops the oldest
    /// rows past the configured bound. `serverKey`: the key the service gave, when it is not the
    /// one queued. The service's message is kept without the configured secrets.
    package func recordOutcome(
        _ t: WriteView, _ r: RequestRecord, _ outcome: Outcome, status: Int? = nil, serverKey: String? = nil,
        etag: String? = nil, message: String? = nil
    ) throws {
        let bound = store.configuration.requestHistory
        let history = try self.history
        guard bound > 0 else { return }
        var row: Properties = [
            "RequestID": .int(r.id), "Outcome": .string(outcome.rawValue), "Method": .string(r.method.rawValue),
            "EntitySet": .string(r.entitySet), "EntityKey": .string(r.entityKey),
            "RepeatabilityID": .guid(r.repeatabilityID), "Attempts": .int(Int64(r.attempts)),
            "CreatedAt": .dateTimeOffset(r.createdAt), "DecidedAt": .dateTimeOffset(.now),
        ]
        if let serverKey, serverKey != r.entityKey { row["ServerKey"] = .string(serverKey) }
        if let tag = r.customTag { row["CustomTag"] = .string(tag) }
        if let tx = r.transactionID { row["TransactionID"] = .string(tx) }
        if let status { row["HTTPStatusCode"] = .int(Int64(status)) }
        if let etag { row["ETag"] = .string(String(etag.prefix(1_000))) }
        if let message { row["Message"] = .string(SecretForms.known.scrub(String(message.prefix(2_000)))) }
        _ = try history.upsert(t, row, facets: false)
        try trimHistory(t, to: bound)
    }

    /// Drops the oldest outcome rows (the lowest request ids) past `bound`.
    func trimHistory(_ t: WriteView, to bound: Int) throws {
        let history = try self.history
        var excess = try history.count(t.reader) - bound
        while excess > 0 {
            var oldest: [Value] = []
            try history.scan(t.reader) { p in
                if let id = p["RequestID"] { oldest.append(id) }
                return oldest.count < min(excess, 1_000)
            }
            if oldest.isEmpty { return }
            for id in oldest { _ = try history.delete(t, key: [id]) }
            excess -= oldest.count
        }
    }

    /// The outcome recorded for request `id`, if any is kept.
    package func outcome(_ t: ReadView, id: Int64) throws -> Outcome? {
        guard case .string(let s)? = try history.get(t, key: [.int(id)])?["Outcome"] else { return nil }
        return Outcome(rawValue: s)
    }

    /// The outcome record's invariants, each problem as a sentence: every row decodes with a
    /// known outcome and an id no higher than the last handed out; a final outcome (all but
    /// `refused`) names a request no longer in the queue, and `refused` one still there; there
    /// are no more rows than the configured bound.
    package func checkHistory(_ t: ReadView, maxProblems: Int = 100) throws -> [String] {
        var problems: [String] = []
        func problem(_ s: String) { if problems.count < maxProblems { problems.append(s) } }
        let history = try self.history
        let last = try lastAllocatedID(t)
        let bound = store.configuration.requestHistory
        let count = try history.count(t)
        if count > bound {
            problem("RequestHistory: \(count) rows, more than the configured \(bound) (requestHistory)")
        }
        try history.scan(t) { p in
            guard case .int(let id)? = p["RequestID"] else {
                problem("RequestHistory: a row has no RequestID")
                return true
            }
            guard case .string(let text)? = p["Outcome"], let outcome = Outcome(rawValue: text) else {
                problem(
                    "RequestHistory: request \(id) has an unknown outcome \(p["Outcome"].map { "\($0)" } ?? "(none)")")
                return true
            }
            if id > last { problem("RequestHistory: request \(id) is above the last id handed out (\(last))") }
            let queued = try records.get(t, key: [.int(id)]) != nil
            if outcome == .refused && !queued {
                problem("RequestHistory: request \(id) is recorded refused but is no longer in the queue")
            } else if outcome != .refused && queued {
                problem("RequestHistory: request \(id) is recorded \(outcome.rawValue) but is still in the queue")
            }
            return true
        }
        return problems
    }
}
