package import LMDB
package import Storage

/// OData V4 delta responses: what changed in a collection, from keys a change tracker recorded.
extension QueryEngine {
    /// Writes the delta response of the collection `url` (`Set?$filter=…&$select=…&$expand=…`) for
    /// the entities with keys `changed` (each in `Set`'s key order), in one read transaction:
    ///
    /// ```json
    /// {"@odata.context":"$metadata#Products/$delta","value":[
    ///   {"@odata.id":"Products('HT-1000')","Price":990.00},
    ///   {"@odata.id":"Products('HT-1001')","@removed":{"reason":"deleted"}}],
    ///  "@odata.deltaLink":"Products?$deltatoken=43"}
    /// ```
    /// One entry per key, in the order given (a key given twice is written twice): the entity as
    /// the snapshot has it, with `$select`/`$expand` applied, `@odata.id` always and
    /// `@odata.etag` with `options.etags`, when it exists and satisfies `$filter` (evaluated on
    /// that one entity, read by key); else `@removed` with reason `deleted` when it does not exist
    /// and `changed` when it exists but no longer satisfies `$filter`. The snapshot decides, not
    /// the tracker: an entity deleted and created again is written as it is. The delta link comes
    /// from `options.deltaLink`, made in the same transaction before anything is written.
    ///
    /// Refused with a `QueryError`, before any output: a path other than an entity set (a key, a
    /// navigation, `/$count`, a singleton), and `$orderby`, `$top`, `$skip`, `$count` and
    /// `$skiptoken`, which have no meaning for a list of changes (entries are in change order,
    /// and a cut-off or skipped change would be lost to the client for good).
    package func delta(
        _ url: String, changed: [[Value]], options: ResultOptions = ResultOptions(),
        writeBytes write: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        try delta(url, changes: { _ in changed }, options: options, writeBytes: write)
    }

    /// `delta(_:changed:…)` with the changed keys read by `changes` inside the response's read
    /// transaction, so that a tracker kept in the store gives keys, entities and delta link of
    /// one snapshot (with keys gathered before the transaction, a change committed in between
    /// could be covered by the delta link without being in the response).
    package func delta(
        _ url: String, changes: (ReadView) throws -> [[Value]], options: ResultOptions = ResultOptions(),
        writeBytes write: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let query = try bind(url)
        try Self.checkDelta(query)
        let set = try store.set(query.path.entitySet)
        try store.read { t in
            let keys = try changes(t)
            let deltaLink = try options.deltaLink?(t)
            let executor = deltaExecutor(t)
            let shape = try EntityShape(
                set: set, options: query.options, store: store, etags: options.etags, alwaysID: true)
            // Every key is checked before anything is written.
            let encoded = try keys.map { try set.encodeKey($0) }
            var out = ResultWriter(schema: store.schema, format: .json, options: options, sink: write)
            try out.beginCollection(context: set.name + "/$delta", count: nil)
            for (key, keyBytes) in zip(keys, encoded) {
                guard let row = try set.row(t, key: keyBytes) else {
                    try out.removed(id: EntityShape.canonicalURL(set, key), reason: "deleted")
                    continue
                }
                try keyBytes.withUnsafeBytes { pk in
                    let e = try EntityRef(set: set, row: row, primaryKey: pk)
                    if let filter = query.options.filter, try !executor.evaluator.matches(filter, e) {
                        try out.removed(id: EntityShape.canonicalURL(set, key), reason: "changed")
                    } else {
                        try out.entity(e, shape: shape, executor: executor)
                    }
                }
            }
            try out.endCollection(nextLink: nil, deltaLink: deltaLink)
            try out.flush()
        }
    }

    /// The executor a delta response evaluates `$filter` and writes `$expand` with, in `t`.
    func deltaExecutor(_ t: ReadView) -> QueryExecutor {
        QueryExecutor(
            store: store, t: t, memorySortLimit: memorySortLimit, scratchDirectory: scratchDirectory,
            expansions: ExpansionBudget(limit: limits.maxExpandedEntities))
    }

    /// What a delta request may not have: see `delta(_:changed:options:writeBytes:)`.
    static func checkDelta(_ query: BoundQuery) throws(QueryError) {
        guard query.path.segments.count == 1, let segment = query.path.segments.first, segment.key == nil,
            !segment.isSingle, !query.path.isCount
        else {
            throw QueryError(
                "a delta response is for an entity set ('Set?$filter=…'), not a key, navigation, singleton or /$count path",
                option: nil, column: nil)
        }
        let options = query.options
        for (name, present) in [
            ("$orderby", !options.orderBy.isEmpty), ("$top", options.top != nil), ("$skip", options.skip != nil),
            ("$count", options.count), ("$skiptoken", query.skipToken != nil),
        ] where present {
            throw QueryError(
                "\(name) is not allowed in a delta request: its entries are the changes, in the order they happened",
                option: name, column: nil)
        }
    }
}
