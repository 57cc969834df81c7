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
    /// Sort entries kept in memory before spilling to a temporary LMDB database.
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
        // A plain closure, not an optional one (called through a thunk) nor the class's property
        // (retained and released around each call).
        let root: CompiledFilter.Node
        if let filter { root = filter.root } else { root = { _, _ in .yes } }
        try AccessPath.run(plan.access, set: set, t: t, covering: plan.covering, after: plan.after) { pk, row in
            let view = try EntityRef.view(row, set: set)
            // The compiled filter first, on the row: an entity is made only for the rows it passes.
            if try root(view, pk) != .yes { return true }
            let e = EntityRef(set: set, view: view, primaryKey: pk)
            for (name, v) in plan.residualEqualities where !odataEqual(try e.value(name), v) { return true }
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
            try matches(plan) { e in
                seen += 1
                if seen <= plan.skip { return true }
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
            var entries: [SortEntry] = []
            var spill: _SortSpill? = nil
            try matches(plan) { e in
                entries.append(try sortEntry(plan, e))
                if entries.count >= memorySortLimit {
                    if spill == nil { spill = try _SortSpill(in: scratchDirectory) }
                    try spill!.add(entries)
                    entries.removeAll(keepingCapacity: true)
                }
                return true
            }
            if let spill {
                try spill.add(entries)
                var skipped = 0
                try spill.inOrder { entry in
                    if skipped < plan.skip { skipped += 1; return true }
                    guard let row = try entry.row ?? plan.set.row(t, key: entry.primaryKey) else { return true }
                    let go = try entry.primaryKey.withUnsafeBytes { pk in
                        try emit(try EntityRef(set: plan.set, row: row, primaryKey: pk))
                    }
                    emitted += 1
                    return go && emitted < limit
                }
            } else {
                entries.sort()
                emitted = try emitSorted(plan, entries.dropFirst(plan.skip).prefix(limit), emit)
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
        for o in plan.orderBy {
            let v = try evaluator.evaluate(o.expression, e)
            do { try KeyCodec.append(v, descending: o.descending, to: &key) } catch {
                throw QueryError(
                    "cannot order by \(o.expression) (a \(o.expression.type?.description ?? "null") value)",
                    option: "$orderby", column: o.expression.position)
            }
        }
        let pk = Array(e.primaryKey ?? MappedBytes(start: nil, count: 0))
        // A covering plan's row is an index entry's value: kept, since the row is never read.
        return SortEntry(sortKey: key, primaryKey: pk, row: plan.covering ? e.rowBytes : nil)
    }
}

/// One row to sort: its sort key and primary key, and for a covering plan the bytes read as its
/// row (in the read transaction's map, or the spill's while it is read back).
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

/// Sort entries spilled to a temporary LMDB environment, which keeps them in key order for us.
/// Its file is in `TMPDIR` and unlinked while open (`Environment(scratchIn:)`): nothing is left
/// behind, even by a SIGKILL, and a full `TMPDIR` is an error, not a crash.
///
/// LMDB keys are at most 511 bytes, so an entry's database key is the first 480 bytes of its sort
/// key and a sequence number; entries whose sort keys share those 480 bytes are put in order in
/// memory when read back.
final class _SortSpill {
    let env: Environment
    let db: Database
    var sequence: UInt64 = 0
    static let keyPrefix = 480

    init(in directory: String?) throws {
        env = try Environment(scratchIn: directory ?? FileManager.default.temporaryDirectory.path)
        db = try env.database(named: "sort", create: true)!
    }

    func add(_ entries: [SortEntry]) throws {
        // Encoded before the write: a covering plan's row is borrowed from the map, not Sendable.
        var pairs: [(key: [UInt8], value: [UInt8])] = []
        pairs.reserveCapacity(entries.count)
        for e in entries {
            var key = Array(e.sortKey.prefix(Self.keyPrefix))
            withUnsafeBytes(of: sequence.bigEndian) { key.append(contentsOf: $0) }
            sequence += 1
            // u32 sort-key length · sort key · primary key, or for a covering plan's entry
            // u32 sort-key length | 1 << 31 · sort key · u32 primary-key length · primary key · row.
            var value: [UInt8] = []
            let flag: UInt32 = e.row == nil ? 0 : 1 << 31
            withUnsafeBytes(of: (UInt32(e.sortKey.count) | flag).littleEndian) { value.append(contentsOf: $0) }
            value.append(contentsOf: e.sortKey)
            if let row = e.row {
                withUnsafeBytes(of: UInt32(e.primaryKey.count).littleEndian) { value.append(contentsOf: $0) }
                value.append(contentsOf: e.primaryKey)
                value.append(contentsOf: row)
            } else {
                value.append(contentsOf: e.primaryKey)
            }
            pairs.append((key, value))
        }
        let db = self.db
        let encoded = pairs
        try env.write { txn in
            for (key, value) in encoded { try txn.view.put(db, key, value) }
        }
    }

    func inOrder(_ body: (SortEntry) throws -> Bool) throws {
        try env.read { txn in
            try txn.view.withCursor(db) { c in
                var group: [SortEntry] = []
                var groupPrefix: [UInt8]? = nil
                func flush() throws -> Bool {
                    group.sort()
                    for g in group where try !body(g) { return false }
                    group.removeAll()
                    return true
                }
                var e = try c.first()
                while let (k, v) = e {
                    let word = Int(v[0]) | Int(v[1]) << 8 | Int(v[2]) << 16 | Int(v[3]) << 24
                    let n = word & 0x7FFF_FFFF
                    let entry: SortEntry
                    if word & (1 << 31) == 0 {
                        entry = SortEntry(sortKey: Array(v[4..<(4 + n)]), primaryKey: Array(v[(4 + n)...]))
                    } else {
                        let at = 4 + n
                        let m = Int(v[at]) | Int(v[at + 1]) << 8 | Int(v[at + 2]) << 16 | Int(v[at + 3]) << 24
                        entry = SortEntry(
                            sortKey: Array(v[4..<at]), primaryKey: Array(v[(at + 4)..<(at + 4 + m)]),
                            row: MappedBytes(rebasing: v[(at + 4 + m)...]))
                    }
                    let prefix = Array(k.prefix(k.count - 8))
                    if prefix != groupPrefix {
                        if try !flush() { return }
                        groupPrefix = prefix
                    }
                    group.append(entry)
                    e = try c.next()
                }
                _ = try flush()
            }
        }
    }
}
