import LMDB
package import Storage

/// Follows navigation properties through their referential constraints, using the target's key
/// or an index whose leading properties are the foreign key; a full scan only when neither exists.
package struct Navigator {
    let store: EntityStore
    let t: ReadView

    /// Property-value pairs a related entity must have, derived from `entity` and `nav`'s constraints.
    /// Nil when the navigation has no referential constraint (it cannot be resolved locally).
    func constraints(of entity: EntityRef, _ nav: NavigationProperty) throws -> [(String, Value)]? {
        if !nav.dependentConstraints.isEmpty {
            return try nav.dependentConstraints.map { ($0.referencedProperty, try entity.value($0.property)) }
        }
        if !nav.principalConstraints.isEmpty {
            return try nav.principalConstraints.map { ($0.property, try entity.value($0.referencedProperty)) }
        }
        return nil
    }

    /// The keys of the entities `expand`'s navigation (one without a referential constraint)
    /// links `entity` to (`LinkStore`): those it links to, and those whose partner navigation
    /// links to it. Nil when the store has no links.
    package func linked(_ entity: EntityRef, _ expand: BoundExpand) throws -> [[Value]]? {
        try linked(entity, expand.navigation, targetSet: expand.entitySet)
    }

    func linked(_ entity: EntityRef, _ nav: NavigationProperty, targetSet: String) throws -> [[Value]]? {
        guard let links = store.links else { return nil }
        let set = entity.set
        let keyBytes: [UInt8]
        if let pk = entity.primaryKey {
            keyBytes = Array(pk)
        } else {
            keyBytes = try set.encodeKey(try set.keyValues(try entity.properties()))
        }
        let source = set.entityKey(keyBytes)
        var found = Set(try links.targets(t, source: source, nav: nav.name))
        if let partner = nav.partner {
            found.formUnion(try links.sources(t, target: source, sourceSet: targetSet, nav: partner))
        }
        let target = try store.set(targetSet)
        return try found.sorted { $0.lexicographicallyPrecedes($1) }.map { bytes in
            try bytes.withUnsafeBytes { try KeyCodec.decode($0, count: target.type.key.count).values }
        }
    }

    /// The entities `nav` leads to from `entity`, in the target's key (or index) order.
    package func related(_ entity: EntityRef, _ nav: NavigationProperty, targetSet: String) throws -> [EntityRef] {
        guard let equalities = try constraints(of: entity, nav) else {
            // Links (`LinkStore`), when a refresh linked the navigation or its partner; else the
            // store cannot say which entities are related.
            guard let links = store.links,
                try links.isLinked(t, set: entity.set.name, nav: nav.name)
                    || (nav.partner.map { try links.isLinked(t, set: targetSet, nav: $0) } ?? false),
                let keys = try linked(entity, nav, targetSet: targetSet)
            else {
                throw QueryError(
                    "navigation property '\(nav.name)' has no referential constraint and no defining request expands it (or its partner), so the store has no links to follow it with",
                    option: nil, column: nil)
            }
            let set = try store.set(targetSet)
            var out: [EntityRef] = []
            for key in keys {
                if let p = try set.get(t, key: key) { out.append(EntityRef(set: set, properties: p)) }
            }
            return out
        }
        if equalities.contains(where: { $0.1.isNull }) { return [] }
        var out: [EntityRef] = []
        try find(try store.set(targetSet), equalities) {
            out.append(EntityRef(set: $0.set, properties: try $0.properties())); return true
        }
        return out
    }

    /// Visits entities of `set` whose properties equal the given values until `body` returns false.
    package func find(
        _ set: EntitySetHandle, _ equalities: [(String, Value)], _ body: (EntityRef) throws -> Bool
    ) throws {
        let access = AccessPath.forEqualities(set, equalities)
        try AccessPath.run(access, set: set, t: t) { pk, row in
            let e = try EntityRef(set: set, row: row, primaryKey: pk)
            for (name, v) in equalities where !odataEqual(try e.value(name), v) { return true }
            return try body(e)
        }
    }
}

extension Navigator {
    /// The way back along `nav`: visits the entities of `source` from which `nav` leads to
    /// `target` (its referential constraints read from the target's side) until `body` returns
    /// false. Nothing is visited when `nav` has no constraint or `target` has a null in one.
    ///
    /// ```swift
    /// // the sales order an item belongs to, through SalesOrder.Items
    /// try navigator.sources(of: item, via: items, from: salesOrders) { order in …; return true }
    /// ```
    package func sources(
        of target: EntityRef, via nav: NavigationProperty, from source: EntitySetHandle,
        _ body: (EntityRef) throws -> Bool
    ) throws {
        let equalities: [(String, Value)]
        if !nav.dependentConstraints.isEmpty {
            // source.property == target.referencedProperty
            equalities = try nav.dependentConstraints.map { ($0.property, try target.value($0.referencedProperty)) }
        } else if !nav.principalConstraints.isEmpty {
            // target.property == source.referencedProperty
            equalities = try nav.principalConstraints.map { ($0.referencedProperty, try target.value($0.property)) }
        } else {
            return
        }
        if equalities.contains(where: { $0.1.isNull }) { return }
        try find(source, equalities, body)
    }
}
