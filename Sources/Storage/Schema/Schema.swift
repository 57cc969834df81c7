import LMDB
/// The OData protocol version a `$metadata` document was written for.
public enum ODataVersion: String, Sendable, Hashable {
    case v2 = "2.0"
    case v3 = "3.0"
    case v4 = "4.0"
}

/// A structural property of an entity or complex type.
public struct Property: Sendable, Hashable {
    public var name: String
    public var type: TypeRef
    public var nullable: Bool
    public var maxLength: Int?
    public var precision: Int?
    public var scale: Int?
    /// The service computes the value (`Core.Computed`, V2 `sap:creatable="false"`): a create
    /// may leave it out; for a key property the store then makes a local key.
    public var computed: Bool
    /// V2 `ConcurrencyMode="Fixed"`: the service makes the entity's ETag from this property.
    public var concurrencyToken: Bool

    public init(
        name: String, type: TypeRef, nullable: Bool = true, maxLength: Int? = nil,
        precision: Int? = nil, scale: Int? = nil, computed: Bool = false, concurrencyToken: Bool = false
    ) {
        self.name = name
        self.type = type
        self.nullable = nullable
        self.maxLength = maxLength
        self.precision = precision
        self.scale = scale
        self.computed = computed
        self.concurrencyToken = concurrencyToken
    }
}

/// A pair of a referential constraint: `property` on the dependent (the type that holds the foreign
/// key) refers to `referencedProperty` on the principal.
/// Properties of an entity (`ReferentialConstraint.property`) that hold the key
/// (`referencedProperty`) of an entity of set `target`.
package struct ForeignKey: Sendable, Hashable {
    package var target: String
    package var constraints: [ReferentialConstraint]
}

public struct ReferentialConstraint: Sendable, Hashable {
    public var property: String
    public var referencedProperty: String

    public init(property: String, referencedProperty: String) {
        self.property = property
        self.referencedProperty = referencedProperty
    }
}

/// A navigation property, resolved to its target type and the foreign keys that implement it.
public struct NavigationProperty: Sendable, Hashable {
    public var name: String
    /// Qualified name of the target entity type.
    public var targetType: String
    public var isCollection: Bool
    public var nullable: Bool
    /// Name of the navigation property on the target that points back, if declared.
    public var partner: String?
    /// Constraints with the foreign key on the *source* type (to-one navigation to a principal):
    /// `source.property == target.referencedProperty`.
    public var dependentConstraints: [ReferentialConstraint]
    /// Constraints with the foreign key on the *target* type (to-many navigation to dependents):
    /// `target.property == source.referencedProperty`.
    public var principalConstraints: [ReferentialConstraint]

    public init(
        name: String, targetType: String, isCollection: Bool, nullable: Bool = true,
        partner: String? = nil, dependentConstraints: [ReferentialConstraint] = [],
        principalConstraints: [ReferentialConstraint] = []
    ) {
        self.name = name
        self.targetType = targetType
        self.isCollection = isCollection
        self.nullable = nullable
        self.partner = partner
        self.dependentConstraints = dependentConstraints
        self.principalConstraints = principalConstraints
    }
}

/// A complex type, with base-type properties already flattened in.
public struct ComplexType: Sendable, Hashable {
    public var name: String
    public var qualifiedName: String
    public var properties: [Property]

    public init(name: String, qualifiedName: String, properties: [Property]) {
        self.name = name
        self.qualifiedName = qualifiedName
        self.properties = properties
    }

    public func property(_ name: String) -> Property? { properties.first { $0.name == name } }
}

/// An enum type: members and their integer values.
public struct EnumType: Sendable, Hashable {
    public var name: String
    public var qualifiedName: String
    public var underlying: EDMPrimitive
    public var isFlags: Bool
    public var members: [(name: String, value: Int64)]

    public init(
        name: String, qualifiedName: String, underlying: EDMPrimitive = .int32, isFlags: Bool = false,
        members: [(name: String, value: Int64)]
    ) {
        self.name = name
        self.qualifiedName = qualifiedName
        self.underlying = underlying
        self.isFlags = isFlags
        self.members = members
    }

    public func value(of member: String) -> Int64? { members.first { $0.name == member }?.value }
    public func name(of value: Int64) -> String? { members.first { $0.value == value }?.name }

    public static func == (a: Self, b: Self) -> Bool {
        a.qualifiedName == b.qualifiedName && a.members.map(\.name) == b.members.map(\.name)
            && a.members.map(\.value) == b.members.map(\.value)
    }

    public func hash(into h: inout Hasher) { h.combine(qualifiedName) }
}

/// An entity type, with base-type key, properties and navigation properties flattened in.
public struct EntityType: Sendable, Hashable {
    public var name: String
    public var qualifiedName: String
    /// Names of the key properties, in key order.
    public var key: [String]
    /// All structural properties; a row stores them in this order.
    public var properties: [Property]
    public var navigationProperties: [NavigationProperty]
    public var baseType: String?
    public var isAbstract: Bool
    public var isOpen: Bool
    /// A media entity type (V4 `HasStream="true"`, V2 `m:HasStream="true"`): each entity has a
    /// stream of bytes, its media resource (`Set(key)/$value`), beside its properties.
    public var hasStream: Bool
    /// Its named stream properties (`Edm.Stream`), in document order: each a stream of bytes of
    /// its own (`Set(key)/Name`), not a value in the row.
    public var streamProperties: [String]

    public init(
        name: String, qualifiedName: String, key: [String], properties: [Property],
        navigationProperties: [NavigationProperty] = [], baseType: String? = nil,
        isAbstract: Bool = false, isOpen: Bool = false, hasStream: Bool = false, streamProperties: [String] = []
    ) {
        self.name = name
        self.qualifiedName = qualifiedName
        self.key = key
        self.properties = properties
        self.navigationProperties = navigationProperties
        self.baseType = baseType
        self.isAbstract = isAbstract
        self.isOpen = isOpen
        self.hasStream = hasStream
        self.streamProperties = streamProperties
    }

    /// Whether its entities have streams: a media resource or stream properties.
    public var hasStreams: Bool { hasStream || !streamProperties.isEmpty }

    public func property(_ name: String) -> Property? { properties.first { $0.name == name } }
    public func propertyIndex(_ name: String) -> Int? { properties.firstIndex { $0.name == name } }
    public func navigationProperty(_ name: String) -> NavigationProperty? {
        navigationProperties.first { $0.name == name }
    }
}

/// An entity set (or V4 singleton, which is stored as a one-row set).
public struct EntitySet: Sendable, Hashable {
    public var name: String
    /// Qualified name of its entity type.
    public var entityType: String
    /// Navigation property path → name of the entity set it binds to.
    public var navigationBindings: [String: String]
    public var isSingleton: Bool
    /// V4 `Core.OptimisticConcurrency` on the set (inside it, or in an `Annotations` element
    /// targeting it): the service gives its entities ETags and checks `If-Match`.
    public var optimisticConcurrency: Bool

    public init(
        name: String, entityType: String, navigationBindings: [String: String] = [:],
        isSingleton: Bool = false, optimisticConcurrency: Bool = false
    ) {
        self.name = name
        self.entityType = entityType
        self.navigationBindings = navigationBindings
        self.isSingleton = isSingleton
        self.optimisticConcurrency = optimisticConcurrency
    }
}

/// A service's data model, read from its CSDL `$metadata` document.
public struct Schema: Sendable, Hashable {
    public var version: ODataVersion
    /// Entity types by qualified name (`Namespace.Name`); aliases are resolved.
    public var entityTypes: [String: EntityType]
    public var complexTypes: [String: ComplexType]
    public var enumTypes: [String: EnumType]
    /// Entity sets by name, in document order in `entitySetNames`.
    public var entitySets: [String: EntitySet]
    public var entitySetNames: [String]
    /// The operations the service offers (actions, functions, V2 function imports), in document
    /// order: every overload.
    public var operations: [ServiceOperation] = []

    public init(
        version: ODataVersion, entityTypes: [String: EntityType], complexTypes: [String: ComplexType],
        enumTypes: [String: EnumType], entitySets: [EntitySet]
    ) {
        self.version = version
        self.entityTypes = entityTypes
        self.complexTypes = complexTypes
        self.enumTypes = enumTypes
        self.entitySets = Dictionary(entitySets.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        self.entitySetNames = entitySets.map(\.name)
    }

    public func entitySet(_ name: String) -> EntitySet? { entitySets[name] }

    /// Whether the `$metadata` declares concurrency control for the set's entities: V4
    /// `Core.OptimisticConcurrency` on the set, or V2 `ConcurrencyMode="Fixed"` on a property of
    /// its type. A set without it is last-writer-wins for concurrent updates, unless the
    /// service sends ETags anyway.
    public func declaresConcurrencyControl(ofSet name: String) -> Bool {
        guard let set = entitySets[name] else { return false }
        return set.optimisticConcurrency
            || (entityType(ofSet: name)?.properties.contains(where: \.concurrencyToken) ?? false)
    }

    /// The entity type of an entity set.
    public func entityType(ofSet name: String) -> EntityType? {
        entitySets[name].flatMap { entityTypes[$0.entityType] }
    }

    /// The entity set that a navigation property of `set` leads to: the binding if declared, else the
    /// only set of the target type.
    /// The foreign keys of entity set `set`: properties of its entities that hold the key of an
    /// entity of another set, from referential constraints on either side — its own navigation
    /// properties' dependent constraints, and the principal constraints of other types' navigation
    /// properties that lead to it (V2 services such as SAP's GWSAMPLE_BASIC declare the order →
    /// line item association only from the order's side). Each once.
    package func foreignKeys(ofSet set: String) -> [ForeignKey] {
        var out: [ForeignKey] = []
        func add(_ fk: ForeignKey) { if !fk.constraints.isEmpty, !out.contains(fk) { out.append(fk) } }
        guard let type = entityType(ofSet: set) else { return [] }
        for nav in type.navigationProperties where !nav.dependentConstraints.isEmpty {
            if let target = targetSet(of: nav, from: set) {
                add(ForeignKey(target: target, constraints: nav.dependentConstraints))
            }
        }
        for other in entitySetNames {
            guard let otherType = entityType(ofSet: other) else { continue }
            for nav in otherType.navigationProperties where !nav.principalConstraints.isEmpty {
                guard targetSet(of: nav, from: other) == set else { continue }
                // The constraint's properties must be this type's and the referenced ones the other's.
                guard
                    nav.principalConstraints.allSatisfy({ c in
                        type.property(c.property) != nil && otherType.property(c.referencedProperty) != nil
                    })
                else { continue }
                add(ForeignKey(target: other, constraints: nav.principalConstraints))
            }
        }
        return out
    }

    public func targetSet(of navigation: NavigationProperty, from set: String) -> String? {
        if let bound = entitySets[set]?.navigationBindings[navigation.name] { return bound }
        let candidates = entitySetNames.filter { entitySets[$0]?.entityType == navigation.targetType }
        return candidates.first
    }
}
