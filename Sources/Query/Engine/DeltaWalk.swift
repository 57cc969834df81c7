import LMDB
import Storage

/// A request's expand tree as a delta response follows it (`QueryEngine.delta(_:entityChanges:…)`):
/// one level per `$expand` item, each with its set, options and how its entries are written.
final class DeltaTree {
    final class Level {
        let set: EntitySetHandle
        /// The options at this level (its `$filter` decides the scope).
        let options: BoundOptions
        /// How an entry of this level is written at the top of the response: `@odata.id` always,
        /// its own expansions; below the top, its `$select` widened to its key and its `$expand`'s
        /// foreign key.
        let shape: EntityShape
        /// The level above and the `$expand` item that leads from it here; nil at the top.
        let parent: Level?
        let expand: BoundExpand?
        private(set) var children: [Level] = []

        init(
            set: EntitySetHandle, options: BoundOptions, shape: EntityShape, parent: Level?, expand: BoundExpand?
        ) {
            (self.set, self.options, self.shape, self.parent, self.expand) = (set, options, shape, parent, expand)
            parent?.children.append(self)
        }
    }

    let root: Level
    /// Every level, by set name (a set may be at more than one level).
    private(set) var levels: [String: [Level]] = [:]

    init(root set: EntitySetHandle, options: BoundOptions, store: EntityStore, etags: Bool) throws {
        root = Level(
            set: set, options: options,
            shape: try EntityShape(set: set, options: options, store: store, etags: etags, alwaysID: true),
            parent: nil, expand: nil)
        levels[set.name] = [root]
        var pending = [root]
        while let level = pending.popLast() {
            for e in level.options.expand {
                let child = try store.set(e.entitySet)
                var entryOptions = e.options
                if var select = entryOptions.select {
                    let wanted = child.type.key + e.navigation.principalConstraints.map(\.property)
                    let have = Set(select.properties.compactMap { $0.steps.count == 1 ? $0.steps[0].name : nil })
                    for name in wanted where !have.contains(name) {
                        guard let p = child.type.properties.first(where: { $0.name == name }) else { continue }
                        select.properties.append(PropertyPath(steps: [.property(p)]))
                    }
                    entryOptions.select = select
                }
                let next = Level(
                    set: child, options: e.options,
                    shape: try EntityShape(
                        set: child, options: entryOptions, store: store, etags: etags, alwaysID: true),
                    parent: level, expand: e)
                levels[child.name, default: []].append(next)
                pending.append(next)
            }
        }
    }
}

/// One delta response: what each change means for the request's scope, decided first for every
/// change (with every look-up and every entity the entries will expand counted against the
/// budget, so a response too large is refused before its first byte), then written.
struct DeltaWalk {
    /// One entry of the response.
    enum Entry {
        /// The entity of `set` with key `keyBytes`, written as at `level`.
        case entity(DeltaTree.Level, keyBytes: [UInt8])
        /// A removal.
        case removed(EntitySetHandle, id: String, reason: StaticString)
    }

    let tree: DeltaTree
    let executor: QueryExecutor
    /// Spent while deciding: look-ups of the entities above, entities found below a removal, and
    /// the entities each written entry's expansion will write.
    let budget: ExpansionBudget
    private(set) var entries: [Entry] = []
    /// Entities already decided (set name ‖ key bytes).
    private var reported: Set<[UInt8]> = []

    init(tree: DeltaTree, executor: QueryExecutor, budget: ExpansionBudget) {
        (self.tree, self.executor, self.budget) = (tree, executor, budget)
    }

    /// Decides one changed entity: itself if it is in scope, else its removal and that of what
    /// is below it in the tree and now in scope nowhere.
    mutating func decide(_ change: QueryEngine.DeltaChange, keyBytes: [UInt8], writer: ResultWriter) throws {
        guard let levels = tree.levels[change.set], let set = levels.first?.set else { return }
        guard reported.insert(set.entityKey(keyBytes)).inserted else { return }
        let id = EntityShape.canonicalURL(set, change.key)
        guard let row = try set.row(executor.t, key: keyBytes) else {
            entries.append(.removed(set, id: id, reason: "deleted"))
            try removeBelow(levels, key: Dictionary(uniqueKeysWithValues: zip(set.type.key, change.key)))
            return
        }
        let level = try keyBytes.withUnsafeBytes { pk -> DeltaTree.Level? in
            let entity = try EntityRef(set: set, row: row, primaryKey: pk)
            for level in levels where try inScope(entity, level) {
                try countExpanded(entity, level.shape, writer: writer)
                return level
            }
            return nil
        }
        if let level {
            entries.append(.entity(level, keyBytes: keyBytes))
            return
        }
        entries.append(.removed(set, id: id, reason: "changed"))
        try removeBelow(levels, key: Dictionary(uniqueKeysWithValues: zip(set.type.key, change.key)))
    }

    /// Writes the decided entries (an entity is read again: the same snapshot, so it is there).
    func write(to out: inout ResultWriter) throws {
        let root = tree.root.set.name
        for entry in entries {
            switch entry {
            case .entity(let level, let keyBytes):
                guard let row = try level.set.row(executor.t, key: keyBytes) else { continue }
                try keyBytes.withUnsafeBytes { pk in
                    let e = try EntityRef(set: level.set, row: row, primaryKey: pk)
                    if level.set.name == root {
                        try out.entity(e, shape: level.shape, executor: executor)
                    } else {
                        try out.entity(e, context: level.set.name, shape: level.shape, executor: executor)
                    }
                }
            case .removed(let set, let id, let reason):
                if set.name == root {
                    try out.removed(id: id, reason: reason)
                } else {
                    try out.removed(id: id, context: set.name, reason: reason)
                }
            }
        }
    }

    /// Counts against the budget the entities `shape`'s expansions write below `e`, at every depth,
    /// through the writer's own plans (`ResultWriter.expansionPlan`).
    private func countExpanded(_ e: EntityRef, _ shape: EntityShape, writer: ResultWriter) throws {
        for expansion in shape.expansions {
            guard let plan = try writer.expansionPlan(e, expansion, executor: executor) else { continue }
            let single = !expansion.expand.navigation.isCollection
            _ = try executor.run(plan) { child in
                try budget.spend(on: expansion.expand)
                try countExpanded(child, expansion.shape, writer: writer)
                return !single
            }
        }
    }

    /// Whether `e` is in the request's scope at `level`: it satisfies the level's `$filter`, and
    /// below the top, an entity it belongs to is in scope at the level above.
    func inScope(_ e: EntityRef, _ level: DeltaTree.Level) throws -> Bool {
        if let filter = level.options.filter, try !executor.evaluator.matches(filter, e) { return false }
        guard let parent = level.parent, let expand = level.expand else { return true }
        var found = false
        try executor.evaluator.navigator.sources(of: e, via: expand.navigation, from: parent.set) { p in
            try budget.spend(on: expand)
            found = try inScope(p, parent)
            return !found
        }
        return found
    }

    /// Removes (reason `changed`) what is below an entity of `levels`' set with key `key` that left
    /// the scope or is gone: the entities each child level's `$expand` reaches from it, unless
    /// they are in scope at some level, and what is below them in turn.
    private mutating func removeBelow(_ levels: [DeltaTree.Level], key: [String: Value]) throws {
        for level in levels {
            for child in level.children {
                guard let expand = child.expand else { continue }
                let equalities = expand.navigation.principalConstraints.compactMap { c in
                    key[c.referencedProperty].map { (c.property, $0) }
                }
                guard equalities.count == expand.navigation.principalConstraints.count else { continue }
                // Gathered first, then decided, each with what is below it.
                var gone: [(levels: [DeltaTree.Level], key: [Value], keyBytes: [UInt8])] = []
                let childLevels = tree.levels[child.set.name] ?? [child]
                try executor.evaluator.navigator.find(child.set, equalities) { c in
                    try budget.spend(on: expand)
                    for l in childLevels where try inScope(c, l) { return true }
                    let k = try child.set.type.key.map { try c.value($0) }
                    gone.append((childLevels, k, try child.set.encodeKey(k)))
                    return true
                }
                for g in gone {
                    guard reported.insert(child.set.entityKey(g.keyBytes)).inserted
                    else { continue }
                    entries.append(
                        .removed(child.set, id: EntityShape.canonicalURL(child.set, g.key), reason: "changed"))
                    try removeBelow(g.levels, key: Dictionary(uniqueKeysWithValues: zip(child.set.type.key, g.key)))
                }
            }
        }
    }
}
