import LMDB
import Foundation
import HeapModule
import Storage

/// Runs a `QueryPlan` inside one read transaction: candidates from the access path, the residual
/// filter on each row's bytes, then ordering, `$skip` and `$top`; matches go to `emit` one by one,
/// so a result of any size streams in bounded memory.
package struct QueryExecutor {
    let store: EntityStore
    let t: ReadView
    let evaluator: ExpressionEvaluator
    /// Sort entries kept in memory before a sorted run is written to a scratch file (`ExternalSort`).
    let memorySortLimit: Int
    let scratchDirectory: String?
    /// What `$expand` may still write in this response.
    let expansions: ExpansionBudget

    init(
        store: EntityStore, t: ReadView, memorySortLimit: Int = 200_000, scratchDirectory: String? = nil,
        expansions: ExpansionBudget = ExpansionBudget(limit: .max)
    ) {
        self.scratchDirectory = scratchDirectory
        self.store = store
        self.t = t
        self.memorySortLimit = memorySortLimit
        self.expansions = expansions
        evaluator = ExpressionEvaluator(navigator: Navigator(store: store, t: t))
    }

    /// Visits every entity that passes the plan's filters, in access order, until `body` returns false.
    /// The residual filter is compiled once per call (`CompiledFilter`).
    func matches(_ plan: QueryPlan, _ body: (EntityRef) throws -> Bool) throws {
        // A covering entry is a row of the same layout cut after its last carried property: the
        // compiled filter reads it like the entity's row (the planner covers only filters on carried properties).
        let filter = plan.residual.map { CompiledFilter($0, set: plan.set, evaluator: evaluator) }
        let set = plan.set
        guard filter != nil || !plan.residualEqualities.isEmpty else {
            // Nothing left to test: every row the access path gives is a match.
            try AccessPath.run(plan.access, set: set, t: t, covering: plan.covering, after: plan.after) { pk, row in
                try body(EntityRef(set: set, view: try EntityRef.view(row, set: set), primaryKey: pk))
            }
            return
        }
        // A plain closure, not an optional one (called through a thunk) nor the class's property
        // (retained and released around each call).
        let root: CompiledFilter.Node
        if let filter { root = filter.root } else { root = { _, _ in .yes } }
        // Taken out of the plan, which a closure would otherwise copy whole.
        let residualEqualities = plan.residualEqualities
        try AccessPath.run(plan.access, set: set, t: t, covering: plan.covering, after: plan.after) { pk, row in
            let view = try EntityRef.view(row, set: set)
            // The compiled filter first, on the row: an entity is made only for the rows it passes.
            if try root(view, pk) != .yes { return true }
            let e = EntityRef(set: set, view: view, primaryKey: pk)
            for (name, v) in residualEqualities where !odataEqual(try e.value(name), v) { return true }
            return try body(e)
        }
    }

    /// How many entities match, ignoring `$skip`/`$top`; never materializes them.
    func count(_ plan: QueryPlan) throws -> Int {
        if case .fullScan = plan.access, plan.residual == nil, plan.residualEqualities.isEmpty {
            return try plan.set.count(t)
        }
        var n = 0
        try matches(plan) { _ in
            n += 1; return true
        }
        return n
    }

    /// Emits the plan's result in order, after `$skip`, at most `$top`. Returns how many were emitted.
    @discardableResult
    func run(_ plan: QueryPlan, _ emit: (EntityRef) throws -> Bool) throws -> Int {
        let limit = plan.top ?? Int.max
        if limit == 0 { return 0 }
        var emitted = 0
        switch plan.sort {
        case .stream:
            var seen = 0
            let skip = plan.skip
            try matches(plan) { e in
                seen += 1
                if seen <= skip { return true }
                emitted += 1
                return try emit(e) && emitted < limit
            }
        case .streamInTieGroups:
            // Rows come in $orderby order; a run of equal sort keys is sorted by primary key.
            var group: [(pk: [UInt8], entity: EntityRef)] = []
            var groupKey: [UInt8]? = nil
            var seen = 0
            var done = false
            func flush() throws {
                group.sort { $0.pk.lexicographicallyPrecedes($1.pk) }
                for (_, e) in group where !done {
                    seen += 1
                    if seen <= plan.skip { continue }
                    emitted += 1
                    if try !emit(e) || emitted >= limit { done = true }
                }
                group.removeAll(keepingCapacity: true)
            }
            try matches(plan) { e in
                let entry = try sortEntry(plan, e)
                if entry.sortKey != groupKey {
                    try flush()
                    if done { return false }
                    groupKey = entry.sortKey
                }
                group.append((entry.primaryKey, e))
                return true
            }
            if !done { try flush() }
        case .topN(let n):
            var heap = Heap<SortEntry>()
            try matches(plan) { e in
                let entry = try sortEntry(plan, e)
                if heap.count < n {
                    heap.insert(entry)
                } else if let max = heap.max, entry < max {
                    heap.replaceMax(with: entry)
                }
                return true
            }
            var sorted: [SortEntry] = []
            sorted.reserveCapacity(heap.count)
            while let m = heap.popMin() { sorted.append(m) }
            emitted = try emitSorted(plan, sorted.dropFirst(plan.skip).prefix(limit), emit)
        case .sort:
            let sorter = ExternalSort(entryLimit: memorySortLimit, scratchDirectory: scratchDirectory)
            try matches(plan) { e in
                // `matches` makes every entity from its key and its row (or covering value) in the map.
                guard let pk = e.primaryKey, let row = e.rowBytes else { preconditionFailure("a match without a row") }
                try sorter.add(primaryKey: pk, row: row) { key in try appendSortKey(plan, e, to: &key) }
                return true
            }
            var skipped = 0
            try sorter.inOrder { r in
                if skipped < plan.skip {
                    skipped += 1
                    return true
                }
                emitted += 1
                return try emit(try EntityRef(set: plan.set, row: r.row, primaryKey: r.primaryKey)) && emitted < limit
            }
        }
        return emitted
    }

    private func emitSorted(
        _ plan: QueryPlan, _ entries: some Sequence<SortEntry>, _ emit: (EntityRef) throws -> Bool
    ) throws -> Int {
        var n = 0
        for entry in entries {
            guard let row = try entry.row ?? plan.set.row(t, key: entry.primaryKey) else { continue }
            n += 1
            let go = try entry.primaryKey.withUnsafeBytes { pk in
                try emit(try EntityRef(set: plan.set, row: row, primaryKey: pk))
            }
            if !go { break }
        }
        return n
    }

    /// The order-preserving encoding of the `$orderby` values, then the primary key (a tiebreak
    /// that keeps sorting stable and entries unique).
    func sortEntry(_ plan: QueryPlan, _ e: EntityRef) throws -> SortEntry {
        var key: [UInt8] = []
        try appendSortKey(plan, e, to: &key)
        let pk = Array(e.primaryKey ?? MappedBytes(start: nil, count: 0))
        // A covering plan's row is an index entry's value: kept, since the row is never read.
        return SortEntry(sortKey: key, primaryKey: pk, row: plan.covering ? e.rowBytes : nil)
    }

    /// Appends the order-preserving encoding (`KeyCodec`) of `e`'s `$orderby` values to `key`.
    func appendSortKey(_ plan: QueryPlan, _ e: EntityRef, to key: inout [UInt8]) throws {
        for o in plan.orderBy {
            let v = try evaluator.evaluate(o.expression, e)
            do { try KeyCodec.append(v, descending: o.descending, to: &key) } catch {
                throw QueryError(
                    "cannot order by \(o.expression) (a \(o.expression.type?.description ?? "null") value)",
                    option: "$orderby", column: o.expression.position)
            }
        }
    }
}

/// One row of a top-N heap or a tie group: its sort key and primary key, and for a covering plan
/// the bytes read as its row (in the read transaction's map).
struct SortEntry: Comparable {
    var sortKey: [UInt8]
    var primaryKey: [UInt8]
    var row: MappedBytes? = nil

    static func == (a: SortEntry, b: SortEntry) -> Bool { a.sortKey == b.sortKey && a.primaryKey == b.primaryKey }

    static func < (a: SortEntry, b: SortEntry) -> Bool {
        if a.sortKey != b.sortKey { return a.sortKey.lexicographicallyPrecedes(b.sortKey) }
        return a.primaryKey.lexicographicallyPrecedes(b.primaryKey)
    }
}
