package import Storage

/// Chooses an access path, residual filter and sort strategy for a collection request.
///
/// Key equality → point read; `in` on the key or an index → several points; equality, range or
/// `startswith` on the key's or an index's leading properties → a range scan; an `$orderby` that
/// the chosen order already satisfies → a stream that stops after `$skip + $top`; otherwise a
/// top-N heap when `$top` is given, else a full sort.
package struct Planner {
    /// One conjunct that an ordered structure can serve: `Prop op literal`, `Prop in (…)`,
    /// `startswith(Prop, '…')`, `Prop eq null`.
    struct Sargable {
        enum Kind {
            case eq(Value)
            case lower(ValueBound)
            case upper(ValueBound)
            case `in`([Value])
            case prefix(String)
        }
        var property: String
        var kind: Kind
        /// Index of the conjunct in the filter; nil for an equality from the resource path.
        var conjunct: Int?
        /// Whether the structure answers it exactly (not for doubles, whose NaN and -0 differ).
        var exact: Bool
    }

    /// Plans `options` over `set`, with `equalities` from the resource path. `reading` says what
    /// the caller reads of each result: when an index scan's entries carry all of it (a covering
    /// index, `INCLUDE`), the plan reads no entity row.
    package static func plan(
        _ set: EntitySetHandle, options: BoundOptions, equalities: [(String, Value)] = [],
        reading: ResultReading = .entities, reuse: PlanCache? = nil
    ) -> QueryPlan {
        let conjuncts = options.filter.map(flatten) ?? []
        var sargables: [Sargable] = equalities.map {
            Sargable(property: $0.0, kind: .eq($0.1), conjunct: nil, exact: true)
        }
        for (i, c) in conjuncts.enumerated() { sargables.append(contentsOf: sargable(c, index: i, set: set)) }
        let shape = reuse.map { _ in
            PlanShape(set, sargables, options: options, conjuncts: conjuncts.count, reading: reading)
        }
        if let reuse, let shape, let (choice, covering) = reuse.choice(for: shape),
            let best = replay(choice, set: set, sargables: sargables, orderBy: options.orderBy)
        {
            return finish(best, set, options, equalities, conjuncts, sargables, covering: covering)
        }
        let read = propertiesRead(set, options: options, equalities: equalities, reading: reading)
        var best = Candidate(access: .fullScan(reverse: false), used: [], score: 0, ordered: options.orderBy.isEmpty)
        var choice = PlanChoice.scan(best)
        let ordered = orderings(set)
        for (index, columns) in ordered {
            guard
                let c = candidate(
                    index: index, columns: columns, sargables: sargables, set: set, orderBy: options.orderBy)
            else { continue }
            let sameOrder = c.ordered == best.ordered && c.tieGroups == best.tieGroups
            if c.score > best.score
                || (c.score == best.score && c.ordered && (!best.ordered || (best.tieGroups && !c.tieGroups)))
                || (c.score == best.score && sameOrder && covers(c.access, read) && !covers(best.access, read))
            {
                best = c
                choice = .ordering(index)
            }
        }
        // No selective access: an ordered full scan still avoids sorting when $orderby matches.
        if best.score == 0 && !best.ordered {
            // Prefer an order needing no tie groups.
            let orders = ordered.compactMap { index, columns in
                satisfies(options.orderBy, columns: columns, fixed: [], isKey: index == nil).map { (index, $0) }
            }
            let preferred = orders.filter { $0.1 != .forwardInTieGroups }
            let covering = (preferred.isEmpty ? orders : preferred).first { o in
                o.0.map { covers(.index($0, prefix: [], range: nil), read) } ?? false
            }
            if let (index, order) = covering ?? preferred.first ?? orders.first {
                best.ordered = true
                best.tieGroups = order == .forwardInTieGroups
                best.access = index.map { .index($0, prefix: [], range: nil) } ?? .fullScan(reverse: order == .reverse)
            }
            choice = .scan(best)  // no value in it: the same for any alias values of this shape
        }
        let covering = covers(best.access, read)
        if let reuse, let shape { reuse.remember(shape, choice, covering: covering) }
        return finish(best, set, options, equalities, conjuncts, sargables, covering: covering)
    }

    /// The orderings a candidate can come from: the primary key, then every index on plain properties.
    static func orderings(_ set: EntitySetHandle) -> [(IndexHandle?, [(String, Bool)])] {
        var orderings: [(IndexHandle?, [(String, Bool)])] = [(nil, set.type.key.map { ($0, false) })]
        for index in set.indexes where index.definition.components.allSatisfy({ $0.path.count == 1 }) {
            orderings.append((index, index.definition.components.map { ($0.path[0], $0.descending) }))
        }
        return orderings
    }

    /// The plan from the chosen candidate: the conjuncts it does not answer stay as the residual filter.
    /// Plans `options` over the entities of `set` with these keys (the links of a navigation
    /// without a referential constraint): point reads by key, in key order, every condition
    /// checked on the rows, sorted when `$orderby` asks.
    package static func plan(_ set: EntitySetHandle, options: BoundOptions, keys: [[Value]]) -> QueryPlan {
        let conjuncts = options.filter.map(flatten) ?? []
        let best = Candidate(access: .keys(keys), used: [], score: 0, ordered: options.orderBy.isEmpty)
        return finish(best, set, options, [], conjuncts, [], covering: false)
    }

    private static func finish(
        _ best: Candidate, _ set: EntitySetHandle, _ options: BoundOptions, _ equalities: [(String, Value)],
        _ conjuncts: [TypedExpr], _ sargables: [Sargable], covering: Bool
    ) -> QueryPlan {
        // Arrays, not sets: a handful of conditions, and hashing them was a visible share of a
        // prepared query's run.
        let usedConjuncts = best.used.compactMap { sargables[$0].exact ? sargables[$0].conjunct : nil }
        let usedEqualities = best.used.filter { sargables[$0].conjunct == nil && sargables[$0].exact }.map {
            sargables[$0].property
        }
        let remaining = conjuncts.enumerated().filter { !usedConjuncts.contains($0.offset) }.map(\.element)
        let residual: TypedExpr? =
            remaining.isEmpty
            ? nil
            : remaining.count == 1
                ? remaining[0] : TypedExpr(.and(remaining), type: .primitive(.boolean), at: remaining[0].position)
        let skip = options.skip ?? 0
        let sort: SortStrategy =
            best.ordered
            ? (best.tieGroups ? .streamInTieGroups : .stream)
            : (options.top.map { .topN(Paging.sum(skip, $0)) } ?? .sort)
        return QueryPlan(
            set: set, access: best.access, residual: residual,
            residualEqualities: equalities.filter { !usedEqualities.contains($0.0) },
            orderBy: options.orderBy, sort: sort, skip: skip, top: options.top, covering: covering)
    }

    struct Candidate {
        var access: AccessPath
        var used: [Int]
        var score: Int
        var ordered: Bool
        var tieGroups = false
    }

    /// The access an ordering (the key or an index) offers for the sargable conjuncts.
    static func candidate(
        index: IndexHandle?, columns: [(String, Bool)], sargables: [Sargable],
        set: EntitySetHandle, orderBy: [BoundOrderBy]
    ) -> Candidate? {
        var prefix: [Value] = []
        var used: [Int] = []
        for (name, _) in columns {
            guard
                let i = sargables.firstIndex(where: { s in
                    if s.property == name, case .eq = s.kind { return true } else { return false }
                }), case .eq(let v) = sargables[i].kind, !(index == nil && v.isNull)
            else { break }
            prefix.append(v)
            used.append(i)
        }
        var range: ComponentRange? = nil
        var inValues: [Value]? = nil
        if prefix.count < columns.count {
            let name = columns[prefix.count].0
            var lower: (Int, ValueBound)? = nil, upper: (Int, ValueBound)? = nil
            var stringPrefix: (Int, String)? = nil, list: (Int, [Value])? = nil
            for (i, s) in sargables.enumerated() where s.property == name {
                switch s.kind {
                case .lower(let b) where lower == nil: lower = (i, b)
                case .upper(let b) where upper == nil: upper = (i, b)
                case .prefix(let p) where stringPrefix == nil: stringPrefix = (i, p)
                case .in(let vs) where list == nil: list = (i, vs)
                default: break
                }
            }
            // One condition on the column: bounds, else a string prefix, else an `in` list; the
            // others stay in the residual filter.
            if lower != nil || upper != nil {
                range = .bounds(lower?.1, upper?.1)
                used += [lower?.0, upper?.0].compactMap { $0 }
            } else if let (i, p) = stringPrefix {
                range = .stringPrefix(p)
                used.append(i)
            } else if let (i, vs) = list {
                inValues = vs
                used.append(i)
            }
        }
        // Only an $orderby asks which columns the prefix fixes.
        let fixed = orderBy.isEmpty ? [] : Set(columns.prefix(prefix.count).map(\.0))
        let isKey = index == nil
        if isKey && prefix.count == columns.count {
            return Candidate(access: .key(prefix), used: used, score: 1000, ordered: true)
        }
        if isKey && prefix.count == columns.count - 1, let vs = inValues {
            return Candidate(
                access: .keys(vs.map { prefix + [$0] }), used: used, score: 900,
                ordered: satisfies(orderBy, columns: columns, fixed: fixed, isKey: true) == .forward)
        }
        if let vs = inValues {
            guard let index else { return nil }
            return Candidate(
                access: .indexIn(index, prefix: prefix, values: vs), used: used, score: 10 * prefix.count + 3,
                ordered: orderBy.isEmpty)
        }
        let score = 10 * prefix.count + (range != nil ? 5 : 0)
        if score == 0 { return nil }
        let order = satisfies(orderBy, columns: columns, fixed: fixed, isKey: isKey)
        let access: AccessPath =
            index.map { .index($0, prefix: prefix, range: range) }
            ?? .keyRange(prefix: prefix, range: range, reverse: order == .reverse)
        return Candidate(
            access: access, used: used, score: score + (isKey ? 1 : 0), ordered: order != nil,
            tieGroups: order == .forwardInTieGroups)
    }

    /// How rows ordered by some columns come out in `$orderby` order.
    enum Order {
        /// Read forwards: `$orderby` order with ties by primary key.
        case forward
        /// Read forwards: `$orderby` order, but ties come by the index's further columns, so each
        /// group of equal sort keys is put in primary-key order before it is emitted.
        case forwardInTieGroups
        /// Read backwards.
        case reverse
    }

    /// Whether rows ordered by `columns` (after the `fixed` equality columns) come in `orderBy`
    /// order, and how; nil if not. The key breaks ties by its further columns, which is primary-key
    /// order; an index breaks them by its further columns first, so an `$orderby` over a prefix of
    /// an index needs tie groups.
    static func satisfies(
        _ orderBy: [BoundOrderBy], columns: [(String, Bool)], fixed: Set<String>, isKey: Bool
    ) -> Order? {
        if orderBy.isEmpty { return .forward }
        var wanted: [(String, Bool)] = []
        for o in orderBy {
            guard case .property(let path) = o.expression.kind, path.variable == nil, path.steps.count == 1,
                case .property(let p) = path.steps[0]
            else { return nil }
            if fixed.contains(p.name) { continue }
            wanted.append((p.name, o.descending))
        }
        let free = columns.filter { !fixed.contains($0.0) }
        guard wanted.count <= free.count else { return nil }
        if zip(wanted, free).allSatisfy({ $0.0 == $1.0 && $0.1 == $1.1 }) {
            return isKey || wanted.count == free.count ? .forward : .forwardInTieGroups
        }
        // Backwards only over every key column: then there are no ties, whose order (primary key
        // ascending everywhere else) reading backwards would reverse.
        if isKey, wanted.count == free.count, zip(wanted, free).allSatisfy({ $0.0 == $1.0 && $0.1 != $1.1 }) {
            return .reverse
        }
        return nil
    }

    /// The top-level conjuncts of a filter.
    static func flatten(_ e: TypedExpr) -> [TypedExpr] {
        if case .and(let xs) = e.kind { return xs.flatMap(flatten) }
        return [e]
    }

    /// The sargable forms of one conjunct (usually zero or one).
    static func sargable(_ e: TypedExpr, index: Int, set: EntitySetHandle) -> [Sargable] {
        func simple(_ x: TypedExpr) -> Property? {
            guard case .property(let path) = x.kind, path.variable == nil, path.steps.count == 1,
                case .property(let p) = path.steps[0],
                p.type.primitive != nil || { if case .enumeration = p.type { true } else { false } }(),
                p.type.primitive != .json
            else { return nil }
            return p
        }
        func exact(_ p: Property) -> Bool { p.type.primitive != .double && p.type.primitive != .single }
        /// A literal of the property's own value kind (so its key encoding matches stored keys).
        func literal(_ x: TypedExpr, for p: Property) -> Value? {
            guard case .literal(let v) = x.kind else { return nil }
            switch (v, p.type) {
            case (.int, .primitive(let t)) where t.isInteger: return v
            case (.decimal, .primitive(.decimal)), (.string, .primitive(.string)), (.bool, .primitive(.boolean)),
                (.date, .primitive(.date)), (.dateTimeOffset, .primitive(.dateTimeOffset)),
                (.dateTimeOffset, .primitive(.dateTime)),
                (.timeOfDay, .primitive(.timeOfDay)), (.timeOfDay, .primitive(.time)),
                (.duration, .primitive(.duration)),
                (.guid, .primitive(.guid)), (.binary, .primitive(.binary)), (.double, .primitive(.double)),
                (.double, .primitive(.single)), (.enumMember, .enumeration):
                return v
            default: return nil
            }
        }
        switch e.kind {
        case .compare(let op, let a, let b):
            var (lhs, rhs, o) = (a, b, op)
            if simple(lhs) == nil, simple(rhs) != nil {
                (lhs, rhs) = (rhs, lhs)
                o = [.gt: .lt, .ge: .le, .lt: .gt, .le: .ge][op] ?? op
            }
            guard let p = simple(lhs), let v = literal(rhs, for: p) else { return [] }
            switch o {
            case .eq: return [Sargable(property: p.name, kind: .eq(v), conjunct: index, exact: exact(p))]
            case .gt:
                return [
                    Sargable(
                        property: p.name, kind: .lower(ValueBound(v, inclusive: false)), conjunct: index,
                        exact: exact(p))
                ]
            case .ge:
                return [
                    Sargable(
                        property: p.name, kind: .lower(ValueBound(v, inclusive: true)), conjunct: index, exact: exact(p)
                    )
                ]
            case .lt:
                return [
                    Sargable(
                        property: p.name, kind: .upper(ValueBound(v, inclusive: false)), conjunct: index,
                        exact: exact(p))
                ]
            case .le:
                return [
                    Sargable(
                        property: p.name, kind: .upper(ValueBound(v, inclusive: true)), conjunct: index, exact: exact(p)
                    )
                ]
            case .ne: return []
            }
        case .isNull(let x):
            guard let p = simple(x) else { return [] }
            return [Sargable(property: p.name, kind: .eq(.null), conjunct: index, exact: true)]
        case .in(let x, let values):
            guard let p = simple(x), !values.isEmpty, values.allSatisfy({ !$0.isNull }) else { return [] }
            let typed = values.compactMap { literal(TypedExpr(.literal($0), type: p.type, at: 0), for: p) }
            guard typed.count == values.count else { return [] }
            return [Sargable(property: p.name, kind: .in(typed), conjunct: index, exact: exact(p))]
        case .function("startswith", let args) where args.count == 2:
            guard let p = simple(args[0]), p.type.primitive == .string, case .literal(.string(let s)) = args[1].kind
            else { return [] }
            return [Sargable(property: p.name, kind: .prefix(s), conjunct: index, exact: true)]
        default:
            return []
        }
    }
}
