package import LMDB
package import Storage

/// Delta responses of requests with `$expand`: the changes of every entity set the request's
/// expand tree reaches, not only of its own set.
extension QueryEngine {
    /// One change a delta response reports: an entity of `set` changed (or was deleted) after the
    /// token.
    package struct DeltaChange: Sendable, Hashable {
        package var set: String
        package var key: [Value]

        package init(set: String, key: [Value]) {
            self.set = set
            self.key = key
        }
    }

    /// The entity sets whose changes a delta response of `url` reports: the request's set first,
    /// then each set its `$expand` tree reaches (each once).
    ///
    /// - Throws: `QueryError` when `url` is not a request a delta response can answer (see
    ///   `delta(_:changed:options:writeBytes:)`), or when its `$expand` is not one it can follow
    ///   (see `delta(_:entityChanges:options:writeBytes:)`).
    package func deltaSets(_ url: String) throws -> [String] {
        let query = try bind(url)
        try Self.checkDelta(query)
        let root = try store.set(query.path.entitySet)
        try Self.checkExpandDelta(query.options, parent: root.type, schema: store.schema)
        return query.setsReached
    }

    /// Writes the delta response of `url` for the changes `entityChanges` reads inside the
    /// response's read transaction — changes of the request's set and of every set its `$expand`
    /// tree reaches (`deltaSets(_:)`; changes of other sets are passed over).
    ///
    /// An entity is in the request's scope when it satisfies the `$filter` of its level of the tree
    /// and, below the top, one entity it belongs to (found through the navigation property of its
    /// `$expand`, read backwards) is in scope at the level above. For each change, in order, once:
    /// - in scope: the entity, written as at its level (its `$select`, and below it its own
    ///   expansion, so an entity that entered the scope brings what it expands). An entity of
    ///   another set than the request's carries `"@odata.context":"$metadata#Set/$entity"`, and
    ///   always its key and the foreign key of its `$expand`, so a child that moved to another
    ///   parent says so even under a `$select` that leaves them out;
    /// - gone, or out of scope: removed (reason `deleted` or `changed`; OData 4.0's
    ///   `$deletedEntity` form with `id` and `reason` for another set's entity), and then every
    ///   entity below it in the tree that is now in scope nowhere, removed with reason `changed`.
    ///
    /// Only expansions the delta can follow from the change log alone are allowed: each
    /// `$expand` of the tree goes down a navigation property whose referential constraint puts the
    /// foreign key on the expanded entity and refers to the key of the entity above (an order's
    /// items, a partner's orders), whose values never change; and no `$top`, `$skip` or `$count`
    /// inside it. A to-one expansion (an item's product) is refused: when the item changes its
    /// product, the product it left is named nowhere in the log.
    ///
    /// Parents looked up, entities found below a removal and expanded entities count against
    /// `limits.maxExpandedEntities`, all of them before the first byte is written: a delta too
    /// large is refused with a `QueryError` (400 from `serve`, and a client reads the request in
    /// full, in pages), never cut off midway.
    package func delta(
        _ url: String, entityChanges: (ReadView) throws -> [DeltaChange], options: ResultOptions = ResultOptions(),
        writeBytes write: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        try delta(url, page: { t in DeltaPage(changes: try entityChanges(t)) }, options: options, writeBytes: write)
    }

    /// One page of a delta response: its changes and, when more pages follow, its
    /// `@odata.nextLink` (then it carries no `@odata.deltaLink`; the last page does).
    package struct DeltaPage: Sendable {
        package var changes: [DeltaChange]
        package var nextLink: String?

        package init(changes: [DeltaChange], nextLink: String? = nil) {
            self.changes = changes
            self.nextLink = nextLink
        }
    }

    /// `delta(_:entityChanges:options:writeBytes:)` for one page of a delta read in pages: `page`
    /// reads the page's changes, and its next link when more follow, inside the response's read
    /// transaction. Each change is written as there (with its subtree, or the removals below
    /// it), so a page holds one top-level entry per change and, below a removal, the removals
    /// of its subtree. `options.deltaLink` is asked only for a page without a next link.
    package func delta(
        _ url: String, page: (ReadView) throws -> DeltaPage, options: ResultOptions = ResultOptions(),
        writeBytes write: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let query = try bind(url)
        try Self.checkDelta(query)
        let root = try store.set(query.path.entitySet)
        try Self.checkExpandDelta(query.options, parent: root.type, schema: store.schema)
        try store.read { t in
            let current = try page(t)
            let changes = current.changes
            let deltaLink = current.nextLink == nil ? try options.deltaLink?(t) : nil
            let executor = deltaExecutor(t)
            let tree = try DeltaTree(root: root, options: query.options, store: store, etags: options.etags)
            // Every key is checked before anything is written.
            let encoded = try changes.compactMap { c -> (DeltaChange, [UInt8])? in
                guard let level = tree.levels[c.set]?.first else { return nil }
                return (c, try level.set.encodeKey(c.key))
            }
            var out = ResultWriter(schema: store.schema, format: .json, options: options, sink: write)
            // Every entry decided, and its cost counted, before the first byte.
            var walk = DeltaWalk(
                tree: tree, executor: executor, budget: ExpansionBudget(limit: limits.maxExpandedEntities))
            for (change, keyBytes) in encoded { try walk.decide(change, keyBytes: keyBytes, writer: out) }
            try out.beginCollection(context: root.name + "/$delta", count: nil)
            try walk.write(to: &out)
            try out.endCollection(nextLink: current.nextLink, deltaLink: deltaLink)
            try out.flush()
        }
    }

    /// What a delta response's `$expand` may be: see `delta(_:entityChanges:options:writeBytes:)`.
    static func checkExpandDelta(_ options: BoundOptions, parent: EntityType, schema: Schema) throws(QueryError) {
        for e in options.expand {
            let nav = e.navigation
            guard nav.dependentConstraints.isEmpty, !nav.principalConstraints.isEmpty,
                nav.principalConstraints.allSatisfy({ parent.key.contains($0.referencedProperty) })
            else {
                throw QueryError(
                    "a delta response follows $expand only down a navigation property whose foreign key is on the expanded entity and refers to the key of the one above (an order's items); '\(nav.name)' is not one",
                    option: "$expand", column: e.position)
            }
            for (name, present) in [
                ("$top", e.options.top != nil), ("$skip", e.options.skip != nil), ("$count", e.options.count),
            ]
            where present {
                throw QueryError(
                    "\(name) inside $expand is not allowed in a delta request: which entities it keeps depends on others that did not change",
                    option: "$expand", column: e.position)
            }
            guard let type = schema.entityType(ofSet: e.entitySet) else { continue }
            try checkExpandDelta(e.options, parent: type, schema: schema)
        }
    }
}
