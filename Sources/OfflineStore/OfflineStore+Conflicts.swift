import Queue
import Storage

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
