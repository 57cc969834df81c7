package import LMDB
public import Storage

/// An entity to create with related entities created under it: a deep insert (OData 4.01 Part 1
/// §11.4.2.2, "Create Related Entities When Creating an Entity"; SAP Gateway's
/// `CREATE_DEEP_ENTITY`). An order with its items, say, where the service takes the items only
/// inline, or assigns their keys.
///
/// ```swift
/// let order = NewEntity(["CustomerID": .string("C1")], related: [
///     "Items": [NewEntity(["Product": .string("P1")]), NewEntity(["Product": .string("P2")])]
/// ])
/// let receipts = try await store.create(set: "Orders", deep: order)   // order first, then its items
/// ```
public struct NewEntity: Sendable, Hashable {
    /// The entity's own properties. Key properties left out get local keys, as in a create; a
    /// related entity's foreign key to this one is set from this one's key.
    public var properties: Properties
    /// Entities to create under this one, by navigation property, in order.
    public var related: [String: [NewEntity]]
    /// Existing entities to link this one to, by navigation property without a referential
    /// constraint (`Tags@odata.bind: ["Tags(1)"]`): their keys, in order.
    package var links: [String: [[Value]]] = [:]

    public init(_ properties: Properties, related: [String: [NewEntity]] = [:]) {
        self.properties = properties
        self.related = related
    }

    /// This entity and every one under it.
    public var count: Int { 1 + related.values.reduce(0) { $0 + $1.reduce(0) { $0 + $1.count } } }
}

extension RequestQueue {
    /// The most entities one deep insert creates: what one POST carries must stay a request a
    /// service takes (and an answer this store reads whole).
    package static let maxDeepInsertEntities = 1_000

    /// Creates `root` in `set` and every entity under it, each through `apply` (entity, indexes,
    /// request; a key left out gets a local key), in `t`: a deep insert. Each related entity's
    /// foreign key to its parent is set from the parent's key, by the navigation property's
    /// referential constraint (or its partner's), which must be on the parent's whole key. The
    /// requests share a transaction (`options.transactionID`, or a new one) and are marked
    /// `deepInsert`: flush sends them as one POST with the related entities inline, and a later
    /// change of any of them merges into its create (`Collapse`). Returns what each create did,
    /// the root's first, then depth first in navigation-name order. Without related entities it
    /// is a plain create.
    package func applyDeep(
        set: String, _ root: NewEntity, options: ChangeOptions, optimize: Bool, in t: WriteView
    ) throws -> [AppliedChange] {
        guard !root.related.isEmpty else {
            return [try apply(.create(set: set, entity: root.properties), options: options, optimize: optimize, in: t)]
        }
        guard root.count <= Self.maxDeepInsertEntities else {
            throw EntityError.badInput(
                "a deep insert of \(root.count) entities: at most \(Self.maxDeepInsertEntities) go in one")
        }
        var deep = options
        deep.deepInsert = true
        if deep.transactionID == nil { deep.transactionID = "deep-" + EDMGuid.random().description }
        var out: [AppliedChange] = []
        try createDeep(set: set, root, parent: nil, options: deep, optimize: optimize, in: t, into: &out)
        return out
    }

    private func createDeep(
        set: String, _ e: NewEntity, parent: AppliedChange?, options: ChangeOptions, optimize: Bool,
        in t: WriteView, into out: inout [AppliedChange]
    ) throws {
        let applied = try apply(.create(set: set, entity: e.properties), options: options, optimize: optimize, in: t)
        guard let entity = applied.entity, let id = applied.requestID else {
            throw EntityError.badInput("the create of an entity of \(set) in a deep insert left no request")
        }
        if let parent, let parentID = parent.requestID, let r = try record(t.reader, id: id),
            !r.dependencies.contains(parentID)
        {
            // `relate` set the foreign key, so `apply` found the parent's create: not reached.
            throw EntityError.badInput("an entity of \(set) in a deep insert does not refer to its parent's create")
        }
        out.append(applied)
        let type = try store.set(set).type
        for name in e.related.keys.sorted() {
            let children = e.related[name] ?? []
            guard let nav = type.navigationProperties.first(where: { $0.name == name }) else {
                throw EntityError.badInput("\(set) has no navigation property '\(name)' to create entities under")
            }
            guard nav.isCollection || children.count <= 1 else {
                throw EntityError.badInput(
                    "'\(name)' of \(set) is single-valued: one entity goes under it, not \(children.count)")
            }
            let (target, constraints) = try Self.deepTarget(nav, of: set, schema: store.schema)
            for child in children {
                let props = try Self.relate(child.properties, to: entity, by: constraints, under: name, of: set)
                try createDeep(
                    set: target, NewEntity(props, related: child.related), parent: applied, options: options,
                    optimize: optimize, in: t, into: &out)
            }
        }
    }

    /// `child` with its foreign key to `parent` set from `parent`'s key, by `constraints`
    /// (`deepTarget`'s); throws when `child` gives another value for it.
    package static func relate(
        _ child: Properties, to parent: Properties, by constraints: [ReferentialConstraint], under name: String,
        of set: String
    ) throws -> Properties {
        var props = child
        for c in constraints {
            let v = parent[c.referencedProperty] ?? .null
            if let given = props[c.property], !given.isNull, given != v {
                throw EntityError.badInput(
                    "an entity under '\(name)' of \(set) gives \(c.property) \(given), but its parent's \(c.referencedProperty) is \(v)"
                )
            }
            props[c.property] = v
        }
        return props
    }

    /// The set `nav` of `set` leads to and the referential constraint that relates an entity there
    /// to its parent (`property` on the child, `referencedProperty` on the parent): `nav`'s own
    /// (a to-many navigation to dependents) or its partner's. Throws when there is none on the
    /// parent's whole key — the store could not keep the relationship, nor name the parent.
    package static func deepTarget(
        _ nav: NavigationProperty, of set: String, schema: Schema
    ) throws -> (set: String, constraints: [ReferentialConstraint]) {
        guard let parentType = schema.entityType(ofSet: set), let target = schema.targetSet(of: nav, from: set),
            let childType = schema.entityType(ofSet: target)
        else {
            throw EntityError.badInput("'\(nav.name)' of \(set) leads to no entity set of this store")
        }
        var constraints = nav.principalConstraints
        if constraints.isEmpty, let partner = nav.partner,
            let back = childType.navigationProperties.first(where: { $0.name == partner })
        {
            constraints = back.dependentConstraints
        }
        if constraints.isEmpty, !nav.dependentConstraints.isEmpty {
            throw EntityError.badInput(
                "'\(nav.name)' of \(set) names the entity \(set) refers to: a deep insert creates only entities that refer to the new one; create it first and link it with \(nav.name)@odata.bind"
            )
        }
        guard !constraints.isEmpty, Set(constraints.map(\.referencedProperty)) == Set(parentType.key) else {
            throw EntityError.badInput(
                "a deep insert under '\(nav.name)' of \(set) needs a referential constraint from \(target) to \(set)'s key, which $metadata does not declare; create the entities with their own requests and link them"
            )
        }
        return (target, constraints)
    }
}
