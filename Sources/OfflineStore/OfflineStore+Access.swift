import LMDB
public import Storage

extension OfflineStore {
    /// Imports already-typed server data into `set` (upsert each), in one transaction; nothing queued.
    ///
    /// - Returns: how many entities were written.
    /// - Throws: `EntityError` naming the entity and what is wrong with it; then nothing was written.
    @discardableResult
    public func load(set: String, entities rows: [Properties]) throws -> Int {
        try load(rows: rows.map { (set: set, entity: $0) })
    }

    /// Writes one entity of `set` (insert, or full replace of the one with the same key) and its
    /// index entries in one durable transaction; returns after the commit. Concurrent callers are
    /// group-committed: many changes, one fsync. Nothing is queued (local changes that flush to
    /// the service come with the request queue). Returns true when it replaced an entity.
    @discardableResult
    public func upsert(set: String, entity: Properties) async throws -> Bool {
        let store = entities
        return try await store.write { t in try store.set(set).upsert(t, entity) != nil }
    }

    /// The blocking form of `upsert(set:entity:) async`, for callers on their own threads.
    @discardableResult
    public func upsert(set: String, entity: Properties) throws -> Bool {
        let store = entities
        return try store.write { t in try store.set(set).upsert(t, entity) != nil }
    }

    /// Visits the entities of `set` in key order until `body` returns false.
    public func scan(set: String, _ body: (Properties) throws -> Bool) throws {
        let h = try entities.set(set)
        try entities.read { t in try h.scan(t, body) }
    }

    /// The entities of `set` that meet `condition` on its index `index` (the index's name, e.g.
    /// `"Country"` or `"Quantity DESC,ProductID"`), in index order.
    ///
    /// - Throws: `EntityError.unknownIndex` when `set` has no such index, `EntityError.badInput`
    ///   when the condition names more components than the index has.
    public func find(set: String, index: String, where condition: IndexCondition) throws -> [Properties] {
        let h = try entities.set(set)
        guard let i = h.index(named: index) else { throw EntityError.unknownIndex(set: set, index: index) }
        let components = i.definition.components.count
        let named =
            switch condition {
            case .equals(let values): values.count
            case .range(let prefix, _, _), .startsWith(let prefix, _): prefix.count + 1
            }
        guard named <= components else {
            throw EntityError.badInput(
                "find on index '\(index)' of '\(set)': the condition names \(named) components, the index has \(components)"
            )
        }
        var out: [Properties] = []
        try entities.read { t in
            func collect(_ primaryKey: MappedBytes) throws -> Bool {
                if let e = try h.entity(t, primaryKey: primaryKey) { out.append(e) }
                return true
            }
            switch condition {
            case .equals(let values):
                try h.findEqual(t, index: i, values, collect)
            case .range(let prefix, let lower, let upper):
                try h.findRange(t, index: i, prefix: prefix, lower: lower, upper: upper, collect)
            case .startsWith(let prefix, let string):
                try h.findPrefix(t, index: i, prefix: prefix, stringPrefix: string, collect)
            }
        }
        return out
    }
}
