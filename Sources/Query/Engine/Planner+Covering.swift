import Storage

/// What a plan's consumer reads of each result entity, which decides whether a covering index
/// (`INCLUDE`) may answer the query without reading the entity rows.
package enum ResultReading: Sendable {
    /// Whole entities (decoded `Properties`, ETags, expansions): never covered.
    case entities
    /// Only what `$select`, `$filter` and `$orderby` name (and the key): a JSON/table response
    /// without ETags, or `entities(url)` projected on `$select`.
    case selected
    /// Only what `$filter` names: `$count`.
    case count
}

extension Planner {
    /// The top-level properties a query reads from each candidate entity (the key's always
    /// included), or nil when it reads more than properties of the entity itself (all of them, a
    /// navigation, an expansion).
    static func propertiesRead(
        _ set: EntitySetHandle, options: BoundOptions, equalities: [(String, Value)],
        reading: ResultReading
    ) -> Set<String>? {
        var names = Set(set.type.key)
        names.formUnion(equalities.map(\.0))
        switch reading {
        case .entities: return nil
        case .count: break
        case .selected:
            guard let select = options.select, select.navigations.isEmpty, options.expand.isEmpty else { return nil }
            for path in select.properties {
                guard let first = path.steps.first, case .property(let p) = first else { return nil }
                names.insert(p.name)
            }
            for o in options.orderBy { guard collect(o.expression, into: &names) else { return nil } }
        }
        if let filter = options.filter { guard collect(filter, into: &names) else { return nil } }
        return names
    }

    /// Adds the top-level properties of the current entity that `e` reads; false when it reads
    /// through a navigation property (other entities, found through foreign keys).
    static func collect(_ e: TypedExpr, into names: inout Set<String>) -> Bool {
        func path(_ p: PropertyPath) -> Bool {
            if p.variable != nil { return true }  // a lambda variable: an element, not the entity
            guard let first = p.steps.first else { return true }
            guard case .property(let prop) = first else { return false }
            if p.steps.dropFirst().contains(where: { if case .navigation = $0 { true } else { false } }) {
                return false
            }
            names.insert(prop.name)
            return true
        }
        switch e.kind {
        case .literal: return true
        case .property(let p), .count(let p): return path(p)
        case .compare(_, let a, let b), .arithmetic(_, let a, let b):
            return collect(a, into: &names) && collect(b, into: &names)
        case .isNull(let x), .not(let x), .negate(let x), .convert(let x), .in(let x, _), .has(let x, _):
            return collect(x, into: &names)
        case .and(let xs), .or(let xs), .function(_, let xs): return xs.allSatisfy { collect($0, into: &names) }
        case .any(let p, _, let predicate): return path(p) && (predicate.map { collect($0, into: &names) } ?? true)
        case .all(let p, _, let predicate): return path(p) && collect(predicate, into: &names)
        }
    }

    /// Whether `access` is an index scan whose entries carry every property in `read`.
    static func covers(_ access: AccessPath, _ read: Set<String>?) -> Bool {
        guard let read else { return false }
        switch access {
        case .index(let i, _, _), .indexIn(let i, _, _): return i.isCovering && read.isSubset(of: i.carried)
        default: return false
        }
    }
}
