import LMDB
package import Storage

/// Answers OData request URLs from an `EntityStore`.
///
/// ```swift
/// let engine = QueryEngine(store: store)
/// try engine.execute("BusinessPartners?$filter=Country eq 'US'&$top=20") { chunk in print(chunk, terminator: "") }
/// print(try engine.explain("SalesOrders('0500000001')/Items"))
/// ```
/// Everything happens in one read transaction; output streams to `write` in chunks.
///
/// A request is refused, with a `QueryError` and before any output, when it asks for what the
/// engine does not do (`$search`, a `$format` other than JSON, a skip token it did not write) or
/// for more work than `limits` allow.
package struct QueryEngine: Sendable {
    package let store: EntityStore
    /// Sort entries kept in memory before a sort writes a sorted run to a scratch file (`ExternalSort`).
    package let memorySortLimit: Int
    /// Bound queries by URL, shared by engines over the same store; nil binds every time.
    package let cache: BoundQueryCache?
    /// Where a spilling sort puts its scratch file; nil is `TMPDIR` (else `/tmp`).
    package let scratchDirectory: String?
    /// Bounds on the work of one request; by default the store configuration's.
    package let limits: QueryLimits

    package init(
        store: EntityStore, memorySortLimit: Int = 200_000, cache: BoundQueryCache? = nil,
        limits: QueryLimits? = nil, scratchDirectory: String? = nil
    ) {
        self.store = store
        self.memorySortLimit = max(1, memorySortLimit)
        self.cache = cache
        self.limits = limits ?? store.configuration.limits
        self.scratchDirectory = scratchDirectory
    }

    /// Output shapes of `execute`.
    package typealias Format = QueryFormat

    /// Parses and binds `url` against the store's schema, and checks it against what the engine
    /// runs and its `limits`. Throws `QueryError` with the position.
    package func bind(_ url: String) throws -> BoundQuery {
        let query =
            try cache.map { cache in try cache.query(url) { try Binder(schema: store.schema).bind(url) } }
            ?? Binder(schema: store.schema).bind(url)
        try check(query)
        return query
    }

    /// The plan chosen for `url`, as text: access path, index, residual filter, sort.
    package func explain(_ url: String) throws -> String { try explain(try bind(url)) }

    func explain(_ query: BoundQuery) throws -> String {
        try store.read { t in
            let target = try resolve(query, t)
            switch target {
            case .single(let set, let eqs, _):
                return "single entity of \(set.name)\naccess: \(AccessPath.forEqualities(set, eqs))"
            case .collection(let set, let eqs, let keys):
                var text = Self.plan(
                    set, options: query.options, equalities: eqs, keys: keys,
                    reading: query.path.isCount ? .count : .selected
                ).description
                if query.path.isCount { text += "\nresult: count only" }
                for e in query.options.expand { text += "\nexpand \(e.navigation.name): " + (try expandAccess(e)) }
                return text
            case .missing: return "the resource path addresses no entity"
            case .noRelated(let nav): return "no related entity (the foreign key of '\(nav)' is null)"
            case .empty(let set): return "empty collection of \(set.name) (null foreign key)"
            }
        }
    }

    /// Runs `url` and writes the result in `format`; with `pageSize`, at most that many entities
    /// and an `@odata.nextLink` to the rest. `options` adds what a server needs (see `ResultOptions`).
    @discardableResult
    package func execute(
        _ url: String, format: Format = .json, pageSize: Int? = nil, options: ResultOptions = ResultOptions(),
        write: @escaping (String) throws -> Void
    ) throws -> ResultSummary {
        try execute(
            url, format: format, pageSize: pageSize, options: options,
            writeBytes: { try write(String(decoding: $0, as: UTF8.self)) })
    }

    /// Runs `url` and hands the result to `writeBytes` as UTF-8 chunks of about 64 KiB, valid only
    /// during the call.
    ///
    /// An entity object starts with `@odata.id` (its canonical URL, `Products('HT-1000')`) when the
    /// selected properties leave out a key property, then `@odata.etag` with `options.etags`. The
    /// last page of a collection ends with `@odata.deltaLink` when `options.deltaLink` is set.
    /// Returns the ETag of a single entity (`Set(key)`), read with the body.
    @discardableResult
    package func execute(
        _ url: String, format: Format = .json, pageSize: Int? = nil, options: ResultOptions = ResultOptions(),
        writeBytes write: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws -> ResultSummary {
        try Paging.check(pageSize: pageSize)
        return try execute(
            try bind(url), url: { url }, format: format, pageSize: pageSize, options: options, writeBytes: write)
    }

    /// Runs a bound `query`; `url` gives the URL a next link continues (called only for one).
    func execute(
        _ query: BoundQuery, url: () -> String, format: Format, pageSize: Int?, options: ResultOptions,
        writeBytes write: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws -> ResultSummary {
        try Paging.check(pageSize: pageSize)
        return try store.read { t in
            try execute(query, t, url: url, format: format, pageSize: pageSize, options: options, writeBytes: write)
        }
    }

    /// `execute` inside read transaction `t`.
    private func execute(
        _ query: BoundQuery, _ t: ReadView, url: () -> String, format: Format, pageSize: Int?,
        options: ResultOptions, writeBytes write: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws -> ResultSummary {
        let token = try Paging.token(query.skipToken)
        var offset = 0
        if case .offset(let n) = token { offset = n }
        var summary = ResultSummary()
        var out = ResultWriter(schema: store.schema, format: format, options: options, sink: write)
        let executor = QueryExecutor(
            store: store, t: t, memorySortLimit: memorySortLimit, scratchDirectory: scratchDirectory,
            expansions: ExpansionBudget(limit: limits.maxExpandedEntities))
        // The delta link of a collection, made before any output from this transaction's snapshot.
        func deltaLink() throws -> String? {
            guard format == .json, let make = options.deltaLink else { return nil }
            return try make(t)
        }
        switch try resolve(query, t) {
        case .missing:
            throw EntityError.notFound(set: query.path.entitySet, key: "")
        case .noRelated(let nav):
            if query.path.isCount { try out.raw("0"); try out.flush(); return summary }
            throw NoRelatedEntity(navigation: nav)
        case .empty(let set):
            if query.path.isCount {
                try out.raw("0")
            } else {
                let delta = try deltaLink()
                try out.beginCollection(context: set.name, count: query.options.count ? 0 : nil)
                try out.endCollection(nextLink: nil, deltaLink: delta)
            }
        case .single(let set, let eqs, let context):
            var found: EntityRef? = nil
            try executor.evaluator.navigator.find(set, eqs) { e in
                // Not its primary key: those bytes live only as long as this call (a point
                // read encodes them into a temporary), the row as long as the transaction.
                found = try e.rowBytes.map { try EntityRef(set: e.set, row: $0, primaryKey: nil) } ?? e
                return false
            }
            guard let found else {
                if query.path.isCount { try out.raw("0"); try out.flush(); return summary }
                // The key comes from the URL: escaped, so the message cannot carry terminal escapes.
                let key = eqs.map { "\($0.0)=\(EntitySetHandle.literal($0.1))" }.joined(separator: ",")
                throw EntityError.notFound(set: set.name, key: QueryError.quoting(key, limit: 600))
            }
            if query.path.isCount { try out.raw("1"); try out.flush(); return summary }
            let shape = try EntityShape(set: set, options: query.options, store: store, etags: options.etags)
            summary.etag = try found.etag()
            try out.single(found, context: context, shape: shape, executor: executor)
        case .collection(let set, let eqs, let keys):
            let queryOptions = query.options
            // A response without ETags reads only what $select, $filter and $orderby name.
            let reading: ResultReading = query.path.isCount ? .count : options.etags ? .entities : .selected
            let plan = Self.plan(set, options: queryOptions, equalities: eqs, keys: keys, reading: reading)
            if query.path.isCount {
                try out.raw(String(try countWithin(plan, executor)))
                try out.flush()
                return summary
            }
            let delta = try deltaLink()
            let shape = try EntityShape(set: set, options: queryOptions, store: store, etags: options.etags)
            let total = queryOptions.count ? try countWithin(plan, executor) : nil
            // Server-driven paging: the skip token is the offset already delivered, or — for a
            // plan read in key order — the last key delivered (keyset: a page costs its own rows).
            var paged = plan
            let keyset = pageSize != nil && plan.keysetPageable
            if case .after(let key) = token {
                guard plan.keysetPageable else {
                    throw QueryError(
                        "this skip token continues a read in key order; the request is not one",
                        option: "$skiptoken", column: 1)
                }
                paged.after = key
            }
            paged.skip = Paging.sum(plan.skip, offset)
            let remaining = plan.top.map { max(0, $0 - offset) }
            var pageLimit = remaining
            if let pageSize { pageLimit = min(remaining ?? Int.max, Paging.sum(pageSize, 1)) }
            paged.top = pageLimit
            if case .topN = plan.sort { paged.sort = .topN(Paging.sum(paged.skip, pageLimit ?? 0)) }
            try out.beginCollection(context: set.name, count: total)
            var n = 0
            var more = false
            var lastKey: [UInt8] = []
            try executor.run(paged) { e in
                if let pageSize, n == pageSize { more = true; return false }
                // A server-driven page ends before an entity whose expansions would pass
                // `limits.maxExpandedEntities`: the next link continues at that entity. Only
                // a first entity that passes it alone fails the request.
                if pageSize != nil && n > 0 {
                    guard try out.entityWithinBudget(e, shape: shape, executor: executor) else {
                        more = true
                        return false
                    }
                } else {
                    try out.entity(e, shape: shape, executor: executor)
                }
                n += 1
                if keyset {
                    lastKey =
                        try e.primaryKey.map { Array($0) }
                        ?? e.set.encodeKey(e.set.type.key.map { try e.value($0) })
                }
                return true
            }
            let next =
                !more
                ? nil
                : keyset
                    ? Paging.nextLink(url(), token: Paging.keysetToken(lastKey))
                    : Paging.nextLink(url(), offset: Paging.sum(offset, n))
            summary.nextLink = next
            try out.endCollection(nextLink: next, deltaLink: delta)
        }
        try out.flush()
        return summary
    }

    /// `entities(_:)` of `query`, and its answer written as `execute` writes it (no server-driven
    /// paging), from one read transaction: both show the same snapshot. A live query compares
    /// both; read in two transactions, a commit between them gave a result whose entities were
    /// the last one's and whose rendering was new — an element equal to the one before it.
    package func entities(
        _ query: BoundQuery, url: String, format: Format = .json, options: ResultOptions = ResultOptions(),
        writeBytes write: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws -> [Properties] {
        try store.read { t in
            var result: [Properties] = []
            try visit(query, t) { columns, e in
                result.append(try columns.properties(e))
                return true
            }
            _ = try execute(query, t, url: { url }, format: format, pageSize: nil, options: options, writeBytes: write)
            return result
        }
    }

    /// The ETag of the entity of `set` with key `key` (`EntityTag.of(row:)` of its stored row), or
    /// nil when there is none. For a response header or an `If-None-Match` check on a read; a
    /// write must compare `If-Match` inside its own write transaction. `execute` returns the tag
    /// of a single-entity response read with the body, which is what `GET Set(key)` should send.
    package func etag(set: String, key: [Value]) throws -> String? {
        let handle = try store.set(set)
        let keyBytes = try handle.encodeKey(key)
        return try store.read { t in try handle.row(t, key: keyBytes).map { EntityTag.of(row: $0) } }
    }

    /// The matching entities, decoded (for tests and small results); with `$select`, only the
    /// selected properties and the key properties.
    package func entities(_ url: String) throws -> [Properties] { try entities(try bind(url)) }

    /// `entities(_:)` of a URL bound already (a live query runs its own binding: no cache to miss).
    package func entities(_ query: BoundQuery) throws -> [Properties] {
        var result: [Properties] = []
        try forEach(query) {
            result.append($0); return true
        }
        return result
    }

    /// Hands each entity of the result to `body`, in result order, inside one read transaction,
    /// until `body` returns false: `entities(_:)` without the array, for results of any size.
    package func forEach(_ url: String, _ body: (Properties) throws -> Bool) throws {
        try forEach(try bind(url), body)
    }

    func forEach(_ query: BoundQuery, _ body: (Properties) throws -> Bool) throws {
        try visit(query) { columns, e in try body(try columns.properties(e)) }
    }

    /// The result's entities in order, each with the columns `entities` reads (`ResultColumns`),
    /// inside one read transaction, until `body` returns false.
    /// A prepared query passes its `PlanCache` as `reuse`: the plan choice and the columns of its
    /// last run are used again when the alias values cannot change them.
    func visit(
        _ query: BoundQuery, reuse: PlanCache? = nil, _ body: (ResultColumns, EntityRef) throws -> Bool
    ) throws {
        try store.read { t in try visit(query, t, reuse: reuse, body) }
    }

    /// `visit` inside read transaction `t`.
    private func visit(
        _ query: BoundQuery, _ t: ReadView, reuse: PlanCache? = nil, _ body: (ResultColumns, EntityRef) throws -> Bool
    ) throws {
        let executor = QueryExecutor(
            store: store, t: t, memorySortLimit: memorySortLimit, scratchDirectory: scratchDirectory)
        switch try resolve(query, t) {
        case .missing, .empty, .noRelated: break
        case .single(let set, let eqs, _):
            let columns = reuse?.columns(query.options.select, set) ?? ResultColumns(query.options.select, set)
            try executor.evaluator.navigator.find(set, eqs) {
                _ = try body(columns, $0); return false
            }
        case .collection(let set, let eqs, let keys):
            let plan = Self.plan(
                set, options: query.options, equalities: eqs, keys: keys,
                reading: query.options.select == nil ? .entities : .selected, reuse: reuse)
            let columns = reuse?.columns(query.options.select, set) ?? ResultColumns(query.options.select, set)
            try executor.run(plan) { try body(columns, $0) }
        }
    }

    /// The number of entities `url` addresses, ignoring `$top`/`$skip`.
    package func count(_ url: String) throws -> Int {
        let query = try bind(url)
        return try store.read { t in
            let executor = QueryExecutor(
                store: store, t: t, memorySortLimit: memorySortLimit, scratchDirectory: scratchDirectory)
            switch try resolve(query, t) {
            case .missing, .empty, .noRelated: return 0
            case .single(let set, let eqs, _):
                var n = 0
                try executor.evaluator.navigator.find(set, eqs) { _ in
                    n = 1; return false
                }
                return n
            case .collection(let set, let eqs, let keys):
                return try executor.count(
                    Self.plan(set, options: query.options, equalities: eqs, keys: keys, reading: .count))
            }
        }
    }

    func countWithin(_ plan: QueryPlan, _ executor: QueryExecutor) throws -> Int { try executor.count(plan) }

    /// The plan of a collection: by equalities, or by keys (links).
    static func plan(
        _ set: EntitySetHandle, options: BoundOptions, equalities: [(String, Value)], keys: [[Value]]?,
        reading: ResultReading, reuse: PlanCache? = nil
    ) -> QueryPlan {
        if let keys { return Planner.plan(set, options: options, keys: keys) }
        return Planner.plan(set, options: options, equalities: equalities, reading: reading, reuse: reuse)
    }

    /// What a resource path addresses.
    enum Target {
        case single(EntitySetHandle, [(String, Value)], context: String)
        /// A collection: the entities of the set with these property values, or — for a navigation
        /// without a referential constraint, answered from links — those with these keys.
        case collection(EntitySetHandle, [(String, Value)], keys: [[Value]]? = nil)
        /// A collection that is empty without looking (a null foreign key).
        case empty(EntitySetHandle)
        /// A single-valued navigation, last in the path, whose foreign key is null: no entity is
        /// related (OData: 204 No Content, not 404).
        case noRelated(navigation: String)
        case missing
    }

    /// Walks the resource path: every segment but the last must address one entity, which is read
    /// to find the next segment's foreign-key values.
    func resolve(_ query: BoundQuery, _ t: ReadView) throws -> Target {
        let navigator = Navigator(store: store, t: t)
        var parent: EntityRef? = nil
        let segments = query.path.segments
        for (i, segment) in segments.enumerated() {
            let set = try store.set(segment.entitySet)
            var eqs: [(String, Value)] = []
            if let nav = segment.navigation, let p = parent {
                guard let c = try navigator.constraints(of: p, nav) else {
                    // Links (`LinkStore`); `related` throws when the store has none for `nav`.
                    let keys = try navigator.related(p, nav, targetSet: set.name).map {
                        try set.keyValues(try $0.properties())
                    }
                    var chosen = keys
                    if let key = segment.key {
                        chosen = keys.filter { k in
                            zip(set.type.key, k).allSatisfy { name, v in
                                key.contains { $0.name == name && $0.value == v }
                            }
                        }
                    }
                    let last = i == segments.count - 1
                    if segment.isSingle {
                        guard let one = chosen.first else {
                            return last && segment.key == nil ? .noRelated(navigation: nav.name) : .missing
                        }
                        let eqs = Array(zip(set.type.key, one))
                        if last { return .single(set, eqs, context: set.name + "/$entity") }
                        var found: EntityRef? = nil
                        try navigator.find(set, eqs) {
                            found = EntityRef(set: $0.set, properties: try $0.properties()); return false
                        }
                        guard let found else { return .missing }
                        parent = found
                        continue
                    }
                    guard last else { return .missing }
                    return .collection(set, [], keys: chosen)
                }
                if c.contains(where: { $0.1.isNull }) {
                    if segment.isSingle && i == segments.count - 1 { return .noRelated(navigation: nav.name) }
                    return segment.isSingle ? .missing : .empty(set)
                }
                eqs = c
            }
            if let key = segment.key { eqs += key.map { ($0.name, $0.value) } }
            if i == segments.count - 1 {
                return segment.isSingle ? .single(set, eqs, context: set.name + "/$entity") : .collection(set, eqs)
            }
            var found: EntityRef? = nil
            try navigator.find(set, eqs) {
                found = EntityRef(set: $0.set, properties: try $0.properties()); return false
            }
            guard let found else { return .missing }
            parent = found
        }
        return .missing
    }

    /// How `$expand` finds an entity's related entities: the target's key, a key prefix or an index
    /// on the foreign key.
    func expandAccess(_ e: BoundExpand) throws -> String {
        let target = try store.set(e.entitySet)
        let nav = e.navigation
        let props =
            nav.dependentConstraints.isEmpty
            ? nav.principalConstraints.map(\.property) : nav.dependentConstraints.map(\.referencedProperty)
        if props.isEmpty { return "no referential constraint: not expanded locally" }
        let by = props.joined(separator: ",")
        switch AccessPath.forEqualities(target, props.map { ($0, Value.null) }) {
        case .key: return "point read by key of \(e.entitySet)"
        case .keyRange: return "key prefix scan of \(e.entitySet) on \(by)"
        case .index(let i, _, _): return "index '\(i.definition.name)' of \(e.entitySet)"
        default: return "full scan of \(e.entitySet) for \(by) (no index)"
        }
    }
}

/// A read of a single-valued navigation property whose foreign key is null: no entity is related.
/// `serve` answers it with 204 No Content (OData 4.01 Part 1, "Requesting Related Entities").
package struct NoRelatedEntity: Error, Sendable, Hashable, CustomStringConvertible {
    package var navigation: String
    package var description: String { "no entity is related through '\(navigation)' (its foreign key is null)" }
}

extension QueryEngine {
    /// Parses `Set(key)` (single or composite key, V4 or V2 literals) into the set's name and typed
    /// key values. Throws `QueryError` with the position for a bad path.
    package func entityPath(_ text: String) throws -> (set: String, key: [Value]) {
        let query = try bind(text)
        guard query.path.segments.count == 1, let segment = query.path.segments.first, let key = segment.key else {
            throw QueryError("expected Set(key), e.g. Products('HT-1000')", option: nil, column: 1)
        }
        return (segment.entitySet, key.map(\.value))
    }
}

/// The shape a query's answer is written in.
public enum QueryFormat: String, Sendable, CaseIterable {
    /// OData V4 JSON: `{"@odata.context":…,"value":[…]}`.
    case json
    /// One entity per line.
    case jsonl
    /// An aligned text table.
    case table
}
