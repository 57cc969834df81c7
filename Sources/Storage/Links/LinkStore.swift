package import LMDB

/// Relationships the store cannot derive from foreign keys: navigation properties without a
/// referential constraint on either side (a many-to-many, a to-one whose key the service keeps to
/// itself), stored as links between entities.
///
/// A refresh stores the links an expanded navigation brings (`replace`), and records that the
/// navigation is linked (`markLinked`): a query then answers `$expand` over it, and over its
/// partner, from the links — both ways — while a navigation no defining request ever expanded is
/// an error, not an empty list (`isLinked`).
///
/// Three databases:
/// - `links`: source set ‖ source key ‖ navigation name ‖ target key → empty;
/// - `links/by-target`: target set ‖ target key ‖ source set ‖ navigation name ‖ source key →
///   empty (the same links read from their other end);
/// - `links/navs`: source set ‖ navigation name → empty (what a refresh has linked).
///
/// Deleting an entity deletes its links both ways (`removeAll`, from `EntitySetHandle.delete`).
package final class LinkStore: Sendable {
    package static let databaseNames = ["links", "links/by-target", "links/navs"]
    package let forward: Database
    package let backward: Database
    package let navs: Database
    /// The schema's sets with at least one navigation property `isUnconstrained`, or that one
    /// leads to: their deletes look for links.
    package let linkedSets: Set<String>

    init(forward: Database, backward: Database, navs: Database, schema: Schema) {
        self.forward = forward
        self.backward = backward
        self.navs = navs
        var sets: Set<String> = []
        for name in schema.entitySetNames {
            guard let type = schema.entityType(ofSet: name) else { continue }
            for nav in type.navigationProperties where Self.isUnconstrained(nav) {
                sets.insert(name)
                if let target = schema.targetSet(of: nav, from: name) { sets.insert(target) }
            }
        }
        linkedSets = sets
    }

    /// Whether the store cannot follow `nav` by foreign keys: it has no referential constraint of
    /// its own (the query engine's `Navigator` reads only those).
    package static func isUnconstrained(_ nav: NavigationProperty) -> Bool {
        nav.dependentConstraints.isEmpty && nav.principalConstraints.isEmpty
    }

    static func name(_ s: String) -> [UInt8] { (try? KeyCodec.encode([.string(s)])) ?? [] }

    // MARK: Reading

    /// Whether a refresh has linked `nav` of `set` (then its links are the whole answer).
    package func isLinked(_ t: ReadView, set: String, nav: String) throws -> Bool {
        try t.contains(navs, Self.name(set) + Self.name(nav))
    }

    /// The key bytes of the entities `nav` of the entity `sourceKey` (an `entityKey`) links to.
    package func targets(_ t: ReadView, source: [UInt8], nav: String) throws -> [[UInt8]] {
        try suffixes(t, forward, prefix: source + Self.name(nav))
    }

    /// The key bytes of the entities of `sourceSet` whose `nav` links to `target` (an `entityKey`).
    package func sources(_ t: ReadView, target: [UInt8], sourceSet: String, nav: String) throws -> [[UInt8]] {
        try suffixes(t, backward, prefix: target + Self.name(sourceSet) + Self.name(nav))
    }

    private func suffixes(_ t: ReadView, _ db: Database, prefix: [UInt8]) throws -> [[UInt8]] {
        var out: [[UInt8]] = []
        try t.withCursor(db) { c in
            var e = try c.seek(prefix)
            while let (k, _) = e, k.starts(with: prefix) {
                out.append(Array(k.dropFirst(prefix.count)))
                e = try c.next()
            }
        }
        return out
    }

    // MARK: Writing

    /// Records that a refresh links `nav` of `set`.
    package func markLinked(_ t: WriteView, set: String, nav: String) throws {
        let key = Self.name(set) + Self.name(nav)
        if try !t.contains(navs, key) { try t.put(navs, key, []) }
    }

    /// Makes `targets` (key bytes of entities of `targetSet`) the links of `nav` of the entity
    /// `sourceKeyBytes` of `sourceSet`; with `adding`, adds them to those there.
    package func replace(
        _ t: WriteView, sourceSet: String, sourceKeyBytes: [UInt8], nav: String, targetSet: String,
        targets: [[UInt8]], adding: Bool = false
    ) throws {
        let source = EntityStore.entityKey(set: sourceSet, keyBytes: sourceKeyBytes)
        let prefix = source + Self.name(nav)
        let old = Set(try self.targets(t.reader, source: source, nav: nav))
        let new = Set(targets)
        if !adding {
            for gone in old.subtracting(new) {
                try t.delete(forward, prefix + gone)
                try t.delete(backward, Self.backwardKey(targetSet, gone, sourceSet, nav, sourceKeyBytes))
            }
        }
        for added in new.subtracting(old) {
            try t.put(forward, prefix + added, [])
            try t.put(backward, Self.backwardKey(targetSet, added, sourceSet, nav, sourceKeyBytes), [])
        }
    }

    static func backwardKey(
        _ targetSet: String, _ targetKey: [UInt8], _ sourceSet: String, _ nav: String, _ sourceKey: [UInt8]
    ) -> [UInt8] {
        EntityStore.entityKey(set: targetSet, keyBytes: targetKey) + name(sourceSet) + name(nav) + sourceKey
    }

    /// Removes every link from or to the entity `keyBytes` of `set` (it is being deleted).
    package func removeAll(_ t: WriteView, set: String, keyBytes: [UInt8], schema: Schema) throws {
        let entity = EntityStore.entityKey(set: set, keyBytes: keyBytes)
        // From it: each navigation of its type without constraints.
        if let type = schema.entityType(ofSet: set) {
            for nav in type.navigationProperties where Self.isUnconstrained(nav) {
                guard let targetSet = schema.targetSet(of: nav, from: set) else { continue }
                try replace(
                    t, sourceSet: set, sourceKeyBytes: keyBytes, nav: nav.name, targetSet: targetSet, targets: [])
            }
        }
        // To it: the backward entries under its key, and their forward twins.
        var twins: [([UInt8], [UInt8])] = []
        try t.reader.withCursor(backward) { c in
            var e = try c.seek(entity)
            while let (k, _) = e, k.starts(with: entity) {
                let rest = Array(k.dropFirst(entity.count))
                if let (values, n) = try? rest.withUnsafeBytes({ try KeyCodec.decode($0, count: 2) }),
                    case .string(let sourceSet) = values[0], case .string(let nav) = values[1]
                {
                    let sourceKey = Array(rest[n...])
                    twins.append(
                        (
                            Array(k),
                            EntityStore.entityKey(set: sourceSet, keyBytes: sourceKey) + Self.name(nav) + keyBytes
                        ))
                }
                e = try c.next()
            }
        }
        for (b, f) in twins {
            try t.delete(backward, b)
            try t.delete(forward, f)
        }
    }
}

extension EntityStore {
    /// `check`'s part for links, in its read transaction: every link's source and target
    /// entities exist, its navigation is one without a referential constraint of the source's
    /// type leading to the target's set, and `links` and `links/by-target` hold each link once,
    /// both ways.
    func checkLinks(_ t: ReadView, problem: (String) -> Void) throws {
        guard let links else { return }
        var forwardCount = 0
        try t.withCursor(links.forward) { c in
            var e = try c.first()
            while let (k, _) = e {
                forwardCount += 1
                let key = Array(k)
                guard let split = key.withUnsafeBytes({ splitEntityKey($0) }),
                    let (values, n) = try? Array(key[split.length...]).withUnsafeBytes({
                        try KeyCodec.decode($0, count: 1)
                    }),
                    case .string(let navName) = values[0]
                else {
                    problem("links: an entry under key \(key.prefix(64)) is not a link of an entity of a service set")
                    e = try c.next()
                    continue
                }
                let source = split.set
                let what = "\(source.name)(\(source.describeKeyBytes(split.keyBytes)))/\(navName)"
                guard let nav = source.type.navigationProperty(navName), LinkStore.isUnconstrained(nav),
                    let targetName = schema.targetSet(of: nav, from: source.name), let target = try? set(targetName)
                else {
                    problem("links: \(what) is not a navigation property without a referential constraint")
                    e = try c.next()
                    continue
                }
                let targetKey = Array(key[(split.length + n)...])
                if try !t.contains(source.entities, split.keyBytes) { problem("links: \(what) links from no entity") }
                if try !t.contains(target.entities, targetKey) {
                    problem(
                        "links: \(what) links to \(targetName)(\(target.describeKeyBytes(targetKey))), which is not in the store"
                    )
                }
                let twin = LinkStore.backwardKey(targetName, targetKey, source.name, navName, split.keyBytes)
                if try !t.contains(links.backward, twin) {
                    problem(
                        "links: \(what) → \(targetName)(\(target.describeKeyBytes(targetKey))) has no links/by-target entry"
                    )
                }
                e = try c.next()
            }
        }
        let backwardCount = try t.count(links.backward)
        if backwardCount != forwardCount {
            problem("links: links/by-target has \(backwardCount) entries for \(forwardCount) links")
        }
    }
}
