import Queue
public import Storage

extension OfflineStore {
    /// A change the service refused because the entity changed there first (412: its ETag was
    /// stale): the three versions and where they differ, as the ErrorArchive keeps them.
    ///
    /// The ways out (<doc:Flush>): **keep mine** — `retryError(requestID:)` sends the change
    /// again, against the service's version recorded here; **take theirs** —
    /// `resolveError(requestID:)` gives the change up and the entity becomes `server`; **merge** —
    /// change the entity (`update`), which revives the refused request, merges into it, and
    /// sends the result against the service's version.
    public struct Conflict: Sendable, Hashable {
        public var requestID: Int64
        public var entitySet: String
        /// The key as in a URL.
        public var entityKey: String
        /// The service's entity the change was made on.
        public var base: Properties?
        /// The entity as changed here.
        public var local: Properties?
        /// The service's entity when the refusal came; nil: deleted there.
        public var server: Properties?
        /// The ETag of `server`, which the change goes against when it is sent again.
        public var serverETag: String?
        /// The properties where `local` and `server` differ.
        public var differences: [String]
    }

    /// The conflict recorded for ErrorArchive entry `requestID`; nil when the entry is not a
    /// conflict (another refusal, or an entry written before conflicts were kept).
    public func conflict(requestID: Int64) throws -> Conflict? {
        guard let row = try get(set: SystemSets.errorArchive, key: [.int(requestID)]),
            case .string(let affected)? = row["AffectedEntity"], row["Differences"] != nil,
            row["Differences"] != .null
        else { return nil }
        let paren = affected.firstIndex(of: "(") ?? affected.endIndex
        let set = String(affected[..<paren])
        let handle = try entities.set(set)
        func entity(_ name: String) throws -> Properties? {
            guard case .string(let text)? = row[name] else { return nil }
            return try ValueJSON(schema: schema).properties(
                from: try JSON.parse(Array(text.utf8)), properties: handle.type.properties, owner: set)
        }
        var differences: [String] = []
        if case .string(let d)? = row["Differences"], !d.isEmpty {
            differences = d.split(separator: ",").map(String.init)
        }
        var etag: String? = nil
        if case .string(let e)? = row["ServerETag"] { etag = e }
        return Conflict(
            requestID: requestID, entitySet: set,
            entityKey: String(affected[paren...].dropFirst().dropLast()), base: try entity("BaseEntity"),
            local: try entity("LocalEntity"), server: try entity("ServerEntity"), serverETag: etag,
            differences: differences)
    }
}

/// Decides conflicts in code, without a person (issue 38): flush and refresh give it each
/// conflict of its set — the three versions — in the transaction that records it, and do what
/// it returns. It must be quick and must not use the store (it runs inside a write).
///
/// ```swift
/// struct LongerTitleWins: ConflictResolver {
///     func resolve(_ c: OfflineStore.Conflict) -> ConflictResolution {
///         let mine = "\(c.local?["Title"] ?? .null)", theirs = "\(c.server?["Title"] ?? .null)"
///         return mine.count >= theirs.count ? .keepMine : .takeTheirs
///     }
/// }
/// store.setConflictResolver(LongerTitleWins(), forSet: "Notes")
/// ```
public protocol ConflictResolver: Sendable {
    func resolve(_ conflict: OfflineStore.Conflict) -> ConflictResolution
}

extension OfflineStore {
    /// Registers `resolver` for the conflicts of `set` in this process (nil removes it); it takes
    /// precedence over the set's `conflictPolicies`. `keepMine` and `merged` send the change again
    /// against the service's version, at most `StoreConfiguration.maxClientWinsAttempts` times
    /// in a row for one change (then it waits for a person); `manual` leaves it in the
    /// ErrorArchive. The outcome record says which decided (`RequestHistory`).
    public func setConflictResolver(_ resolver: (any ConflictResolver)?, forSet set: String) {
        guard let resolver else {
            entities.conflictResolvers.set(nil, forSet: set)
            return
        }
        entities.conflictResolvers.set(
            { v in
                resolver.resolve(
                    Conflict(
                        requestID: v.requestID, entitySet: v.set, entityKey: v.keyText, base: v.base, local: v.local,
                        server: v.server, serverETag: v.serverETag, differences: v.differences))
            }, forSet: set)
    }
}
