import Storage

/// Checking a bound request against `QueryLimits` before it runs, so a request whose work could
/// grow without bound fails at once, before any output. (The expanded-entity budget is counted
/// while the response is written: see `ExpansionBudget`.)
extension QueryLimits {
    /// Throws a `QueryError` naming the first limit `query` exceeds.
    func check(_ query: BoundQuery) throws(QueryError) {
        let depth = Self.expansionDepth(query.options)
        if depth > maxExpansionDepth {
            throw QueryError(
                "$expand is nested \(depth) levels deep; the limit is \(maxExpansionDepth) (limits.maxExpansionDepth)",
                option: "$expand", column: nil)
        }
        let nodes = Self.nodeCount(query.options)
        if nodes > maxNodeCount {
            throw QueryError(
                "the request's $filter, $orderby and $expand have \(nodes) nodes; the limit is \(maxNodeCount) (limits.maxNodeCount)",
                option: nil, column: nil)
        }
        try checkLambdas(query.options, option: nil)
    }

    /// Levels of nested `$expand` below `options` (0 without `$expand`).
    static func expansionDepth(_ options: BoundOptions) -> Int {
        options.expand.reduce(0) { max($0, 1 + expansionDepth($1.options)) }
    }

    /// Nodes of the `$filter`, `$orderby` and `$expand` trees of `options` and everything nested.
    static func nodeCount(_ options: BoundOptions) -> Int {
        var n = options.filter.map(nodeCount) ?? 0
        for o in options.orderBy { n += nodeCount(o.expression) }
        for e in options.expand { n += 1 + nodeCount(e.options) }
        return n
    }

    /// Nodes of one expression: every operator, operand and argument, each `in` list item, and each
    /// step of a member path (a navigation step is a read per row).
    static func nodeCount(_ e: TypedExpr) -> Int {
        switch e.kind {
        case .literal: 1
        case .property(let path), .count(let path): max(1, path.steps.count)
        case .compare(_, let a, let b), .arithmetic(_, let a, let b): 1 + nodeCount(a) + nodeCount(b)
        case .isNull(let x), .not(let x), .negate(let x), .convert(let x), .has(let x, _): 1 + nodeCount(x)
        case .and(let xs), .or(let xs), .function(_, let xs): xs.reduce(1) { $0 + nodeCount($1) }
        case .any(let path, _, let p): max(1, path.steps.count) + (p.map(nodeCount) ?? 0)
        case .all(let path, _, let p): max(1, path.steps.count) + nodeCount(p)
        case .in(let x, let values): 1 + nodeCount(x) + values.count
        }
    }

    /// How deeply `any`, `all` and `/$count` — each ranges over a collection, so each level
    /// multiplies the work per row — nest in `e`.
    static func anyAllDepth(_ e: TypedExpr) -> Int {
        switch e.kind {
        case .literal, .property: 0
        case .count: 1
        case .compare(_, let a, let b), .arithmetic(_, let a, let b): max(anyAllDepth(a), anyAllDepth(b))
        case .isNull(let x), .not(let x), .negate(let x), .convert(let x), .has(let x, _): anyAllDepth(x)
        case .and(let xs), .or(let xs), .function(_, let xs): xs.reduce(0) { max($0, anyAllDepth($1)) }
        case .any(_, _, let p): 1 + (p.map(anyAllDepth) ?? 0)
        case .all(_, _, let p): 1 + anyAllDepth(p)
        case .in(let x, _): anyAllDepth(x)
        }
    }

    private func checkLambdas(_ options: BoundOptions, option: String?) throws(QueryError) {
        var exprs: [(TypedExpr, String)] = options.filter.map { [($0, option ?? "$filter")] } ?? []
        exprs += options.orderBy.map { ($0.expression, option ?? "$orderby") }
        for (e, name) in exprs {
            let depth = Self.anyAllDepth(e)
            if depth > maxAnyAllDepth {
                throw QueryError(
                    "any/all (and /$count) are nested \(depth) deep; the limit is \(maxAnyAllDepth) (limits.maxAnyAllDepth)",
                    option: name, column: e.position)
            }
        }
        for e in options.expand { try checkLambdas(e.options, option: "$expand") }
    }
}

/// The related entities `$expand` may still write in one response (`QueryLimits.maxExpandedEntities`).
/// A reference type because the writer's recursive, non-mutating expansion code spends from it;
/// not `Sendable` — it lives in one request on one thread.
final class ExpansionBudget {
    let limit: Int
    private(set) var spent = 0
    /// Whether `spend` has thrown: the response would have passed the limit.
    private(set) var exhausted = false

    init(limit: Int) { self.limit = limit }

    /// Counts one expanded entity of `expand`; throws once the response would pass the limit.
    func spend(on expand: BoundExpand) throws(QueryError) {
        guard spent < limit else {
            exhausted = true
            throw QueryError(
                "the response expands more than \(limit) related entities (limits.maxExpandedEntities); page it or narrow '\(expand.navigation.name)' with $filter or $top",
                option: "$expand", column: expand.position)
        }
        spent += 1
    }
}
