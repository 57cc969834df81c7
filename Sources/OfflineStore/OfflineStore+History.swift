import Queue
public import Storage

/// What became of one request: a row of the outcome record (`RequestHistory`).
public struct RequestOutcome: Sendable, Hashable {
    /// The request's id (its `RequestQueue` id, unique for the store's life).
    public var requestID: Int64
    /// `applied`, `found applied` (sent again after its answer was lost, and found applied rather
    /// than applied twice), `in doubt` (a create whose key the service assigns, sent again to a
    /// service that did not say it executed it once: perhaps applied twice), `refused` (in
    /// ErrorArchive), `given up`, `undone`, `cancelled` (by a later local change before it was
    /// sent), `merged` (into an earlier request of its entity).
    public var outcome: String
    /// `POST`, `PATCH`, `PUT` or `DELETE`.
    public var method: String
    public var entitySet: String
    /// The key it was queued with (a local one, `-1` or `'~1'`, for a create whose key the
    /// service assigns).
    public var entityKey: String
    /// The key the service gave it, when it is not `entityKey`.
    public var serverKey: String?
    public var customTag: String?
    public var transactionID: String?
    public var httpStatus: Int?
    public var etag: String?
    public var message: String?
    public var attempts: Int
    public var createdAt: EDMDateTimeOffset
    public var decidedAt: EDMDateTimeOffset

    init?(_ p: Properties) {
        guard case .int(let id)? = p["RequestID"], case .string(let outcome)? = p["Outcome"],
            case .string(let method)? = p["Method"], case .string(let set)? = p["EntitySet"],
            case .string(let key)? = p["EntityKey"], case .int(let attempts)? = p["Attempts"],
            case .dateTimeOffset(let created)? = p["CreatedAt"], case .dateTimeOffset(let decided)? = p["DecidedAt"]
        else { return nil }
        func string(_ name: String) -> String? {
            if case .string(let s)? = p[name] { s } else { nil }
        }
        (requestID, self.outcome, self.method, entitySet, entityKey) = (id, outcome, method, set, key)
        (serverKey, customTag, transactionID) = (string("ServerKey"), string("CustomTag"), string("TransactionID"))
        if case .int(let s)? = p["HTTPStatusCode"] { httpStatus = Int(s) }
        (etag, message) = (string("ETag"), string("Message"))
        (self.attempts, createdAt, decidedAt) = (Int(attempts), created, decided)
    }
}

extension OfflineStore {
    /// What became of request `requestID`, if the outcome record keeps it: nil for a request still
    /// pending (see `RequestQueue`), one older than the record's bound
    /// (`StoreConfiguration.requestHistory`), or one never made. A refused request is `refused`
    /// while it waits in ErrorArchive; its row changes when it is given up or sent again.
    public func outcome(ofRequest requestID: Int64) throws -> RequestOutcome? {
        let set = try entities.set(SystemSets.requestHistory)
        return try entities.read { t in try set.get(t, key: [.int(requestID)]).flatMap(RequestOutcome.init) }
    }

    /// The outcome record, oldest first (`RequestHistory?$orderby=RequestID` as values).
    public func requestHistory() throws -> [RequestOutcome] {
        let set = try entities.set(SystemSets.requestHistory)
        return try entities.read { t in
            var out: [RequestOutcome] = []
            try set.scan(t) { p in
                if let o = RequestOutcome(p) { out.append(o) }
                return true
            }
            return out
        }
    }
}

extension OfflineStore {
    /// The entity sets whose key the service assigns (a computed key property) that have no
    /// create marker (`StoreConfiguration.createMarkers`): a create of one whose answer is lost is
    /// sent again, and a service that does not deduplicate repeated requests (SAP Gateway without
    /// its idempotency, OData V4 without `Repeatability-*`) may apply it twice. Flush flags each
    /// such create in doubt (`FlushReport.inDoubt`, the EventLog, `RequestHistory`); `init` and
    /// `define` warn. Empty for a store without a service root (it is the authority).
    public var setsWithoutCreateMarker: [String] {
        configuration.serviceRoot == nil ? [] : configuration.sync.setsWithoutMarker(entities.schema)
    }

    /// The warning `init` and `define` print for `sets` (some of `setsWithoutCreateMarker`), or nil.
    public static func createMarkerWarning(_ sets: [String]) -> String? {
        guard !sets.isEmpty else { return nil }
        return
            "the service assigns the keys of \(sets.joined(separator: ", ")): a create whose answer is lost is sent again, and a service that does not deduplicate repeated requests may apply it twice (flush then flags it in doubt); name a property each create can carry its identity in (configuration createMarkers, e.g. {\"\(sets[0])\": \"Note\"}) so flush finds it instead"
    }

    /// The entity sets the defining requests read whose `$metadata` declares no concurrency
    /// control (`Schema.declaresConcurrencyControl(ofSet:)`: V2 `ConcurrencyMode="Fixed"`, V4
    /// `Core.OptimisticConcurrency`). Unless the service sends ETags anyway, a change flushed to
    /// one of them is not checked against changes others made since this store's last refresh:
    /// the last writer wins, and no conflict ever reaches the ErrorArchive. `init` and `define`
    /// warn.
    public var setsWithoutConcurrencyControl: [String] {
        let read = Set(definingRequests.map { String($0.url.prefix { $0 != "?" && $0 != "(" && $0 != "/" }) })
        return schema.serviceSetNames.filter { read.contains($0) && !schema.declaresConcurrencyControl(ofSet: $0) }
    }

    /// The warning `init` and `define` print for `sets` (some of `setsWithoutConcurrencyControl`), or nil.
    public static func concurrencyWarning(_ sets: [String]) -> String? {
        guard !sets.isEmpty else { return nil }
        return
            "the $metadata declares no concurrency control for \(sets.joined(separator: ", ")) (V2 ConcurrencyMode=\"Fixed\", V4 Core.OptimisticConcurrency): unless the service sends ETags anyway, a change flushed there overwrites what others changed since the last refresh (the last writer wins, no conflict is reported)"
    }
}
