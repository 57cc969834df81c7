import Storage

extension OfflineStore {
    /// Imports already-typed server data into `set` (upsert each), in one transaction; nothing queued.
    @discardableResult
    public func load(set: String, entities rows: [Properties]) throws -> Int {
        try entities.load(set: set, entities: rows)
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

    /// Entities of `set` whose index `index` (its name, e.g. `"Country"`) starts with `values`,
    /// in index order.
    public func find(set: String, index: String, equals values: [Value]) throws -> [Properties] {
        let h = try entities.set(set)
        guard let i = h.index(named: index) else { throw EntityError.unknownIndex(set: set, index: index) }
        var out: [Properties] = []
        try entities.read { t in
            try h.findEqual(t, index: i, values) { pk in
                if let e = try h.entity(t, primaryKey: pk) { out.append(e) }
                return true
            }
        }
        return out
    }

    /// Entities of `set` whose index component after `prefix` lies between the bounds, in index order.
    public func find(set: String, index: String, prefix: [Value] = [], from lower: ValueBound?, to upper: ValueBound?) throws -> [Properties] {
        let h = try entities.set(set)
        guard let i = h.index(named: index) else { throw EntityError.unknownIndex(set: set, index: index) }
        var out: [Properties] = []
        try entities.read { t in
            try h.findRange(t, index: i, prefix: prefix, lower: lower, upper: upper) { pk in
                if let e = try h.entity(t, primaryKey: pk) { out.append(e) }
                return true
            }
        }
        return out
    }

    /// Entities of `set` whose (string) index component after `prefix` starts with `stringPrefix`.
    public func find(set: String, index: String, prefix: [Value] = [], startingWith stringPrefix: String) throws -> [Properties] {
        let h = try entities.set(set)
        guard let i = h.index(named: index) else { throw EntityError.unknownIndex(set: set, index: index) }
        var out: [Properties] = []
        try entities.read { t in
            try h.findPrefix(t, index: i, prefix: prefix, stringPrefix: stringPrefix) { pk in
                if let e = try h.entity(t, primaryKey: pk) { out.append(e) }
                return true
            }
        }
        return out
    }
}
