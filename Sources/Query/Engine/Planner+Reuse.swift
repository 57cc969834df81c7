import Storage
import Synchronization

/// What the planner's choice depends on, and nothing else: the entity set (its indexes), what the
/// caller reads, `$skip`/`$top`, and for each sargable condition its property, its kind, its
/// conjunct and whether it is exact — but not its value, except whether an equality compares with
/// null (the key is never probed for null). Two runs of one prepared query whose alias values give
/// the same shape get the same access path, residual and sort, with their own values in them.
struct PlanShape: Equatable, Sendable {
    struct Condition: Equatable, Sendable {
        var property: String
        var kind: UInt8
        var conjunct: Int?
        var exact: Bool
    }
    let set: EntitySetHandle
    let reading: ResultReading
    let skip: Int?
    let top: Int?
    let conjuncts: Int
    let conditions: [Condition]

    init(
        _ set: EntitySetHandle, _ sargables: [Planner.Sargable], options: BoundOptions, conjuncts: Int,
        reading: ResultReading
    ) {
        self.set = set
        self.reading = reading
        skip = options.skip
        top = options.top
        self.conjuncts = conjuncts
        conditions = sargables.map { s in
            let kind: UInt8 =
                switch s.kind {
                case .eq(let v): v.isNull ? 1 : 0
                case .lower(let b): b.inclusive ? 2 : 3
                case .upper(let b): b.inclusive ? 4 : 5
                case .in: 6
                case .prefix: 7
                }
            return Condition(property: s.property, kind: kind, conjunct: s.conjunct, exact: s.exact)
        }
    }

    static func == (a: PlanShape, b: PlanShape) -> Bool {
        a.set === b.set && a.reading == b.reading && a.skip == b.skip && a.top == b.top && a.conjuncts == b.conjuncts
            && a.conditions == b.conditions
    }
}

/// The planner's choice, without values: the ordering (the primary key, or an index) whose
/// candidate won, or a scan that no condition narrows.
enum PlanChoice: Sendable {
    case ordering(IndexHandle?)
    case scan(IndexHandle?, reverse: Bool, ordered: Bool, tieGroups: Bool)

    /// A winning candidate that uses no condition (a full scan, or a whole index read in order).
    static func scan(_ c: Planner.Candidate) -> PlanChoice {
        switch c.access {
        case .index(let i, _, _): .scan(i, reverse: false, ordered: c.ordered, tieGroups: c.tieGroups)
        case .fullScan(let reverse): .scan(nil, reverse: reverse, ordered: c.ordered, tieGroups: c.tieGroups)
        default: preconditionFailure("a value-free choice is a scan, not \(c.access)")
        }
    }
}

/// A prepared query's last plan choice and result columns, reused while the alias values give the
/// same `PlanShape`: a run of a prepared covering query spent an eighth of its time choosing the
/// plan again (`PerfTests/results`). Changing the set's indexes makes a new set handle, so a new
/// shape. Thread-safe; a run with another shape plans in full and replaces the entry.
package final class PlanCache: Sendable {
    private struct Entry: Sendable {
        let shape: PlanShape
        let choice: PlanChoice
        let covering: Bool
    }
    private let entry = Mutex<Entry?>(nil)
    private let columns = Mutex<ResultColumns?>(nil)
    private let reused = Atomic<Int>(0)

    package init() {}

    /// How many plans were made from a remembered choice (for tests).
    package var reuses: Int { reused.load(ordering: .relaxed) }

    func choice(for shape: PlanShape) -> (PlanChoice, Bool)? {
        let found = entry.withLock { e -> (PlanChoice, Bool)? in
            guard let e, e.shape == shape else { return nil }
            return (e.choice, e.covering)
        }
        if found != nil { reused.add(1, ordering: .relaxed) }
        return found
    }

    func remember(_ shape: PlanShape, _ choice: PlanChoice, covering: Bool) {
        entry.withLock { $0 = Entry(shape: shape, choice: choice, covering: covering) }
    }

    /// The result columns of `select` over `set`: made once per set handle.
    func columns(_ select: BoundSelect?, _ set: EntitySetHandle) -> ResultColumns {
        if let c = columns.withLock({ $0 }), c.set === set { return c }
        let c = ResultColumns(select, set)
        columns.withLock { $0 = c }
        return c
    }
}

extension Planner {
    /// The candidate `choice` gives for these conditions (nil if it no longer applies).
    static func replay(
        _ choice: PlanChoice, set: EntitySetHandle, sargables: [Sargable], orderBy: [BoundOrderBy]
    ) -> Candidate? {
        switch choice {
        case .ordering(let index):
            let columns =
                index.map { $0.definition.components.map { ($0.path[0], $0.descending) } }
                ?? set.type.key.map { ($0, false) }
            return candidate(index: index, columns: columns, sargables: sargables, set: set, orderBy: orderBy)
        case .scan(let index, let reverse, let ordered, let tieGroups):
            return Candidate(
                access: index.map { .index($0, prefix: [], range: nil) } ?? .fullScan(reverse: reverse), used: [],
                score: 0, ordered: ordered, tieGroups: tieGroups)
        }
    }
}
