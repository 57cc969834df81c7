import Storage

/// A key property and its value, converted to the property's type.
public struct KeyComponent: Sendable, Hashable {
    public var name: String
    public var value: Value

    public init(name: String, value: Value) {
        self.name = name
        self.value = value
    }
}

/// One resolved resource path segment: the entity set it addresses, how it was reached, and its key.
public struct BoundSegment: Sendable, Hashable {
    /// nil for the first segment (the entity set itself).
    public var navigation: NavigationProperty?
    public var entitySet: String
    /// Qualified name of the entity type.
    public var entityType: String
    /// Key values in key order, when the segment has a key predicate.
    public var key: [KeyComponent]?
    /// Whether the segment addresses at most one entity (key, singleton, single-valued navigation).
    public var isSingle: Bool
}

/// The resolved resource path.
public struct BoundPath: Sendable, Hashable {
    public var segments: [BoundSegment]
    /// `…/$count`: the request asks for the number of entities only.
    public var isCount: Bool

    /// The entity set of the last segment: where the result entities live.
    public var entitySet: String { segments.last?.entitySet ?? "" }
    public var isSingle: Bool { segments.last?.isSingle ?? false }
}

/// One bound `$orderby` item.
public struct BoundOrderBy: Sendable, Hashable {
    public var expression: TypedExpr
    public var descending: Bool
}

/// A bound `$select` (absent or `*` means every structural property: `BoundOptions.select` is nil).
public struct BoundSelect: Sendable, Hashable {
    /// Selected structural properties, each a path of `.property` steps (through complex types).
    public var properties: [PropertyPath] = []
    /// Navigation properties named in `$select`.
    public var navigations: [String] = []
}

/// A bound `$expand` item: the navigation property, where its targets live, and nested options.
/// V2 paths (`SalesOrders/Items`) become nested expands.
public struct BoundExpand: Sendable, Hashable {
    public var navigation: NavigationProperty
    public var entitySet: String
    public var entityType: String
    public var options: BoundOptions
    public var position: Int
}

/// The options that apply to a collection, at the top level or nested in `$expand`.
public struct BoundOptions: Sendable, Hashable {
    public var filter: TypedExpr?
    public var orderBy: [BoundOrderBy] = []
    /// nil: all structural properties.
    public var select: BoundSelect?
    public var expand: [BoundExpand] = []
    public var top: Int?
    public var skip: Int?
    /// `$count=true` / `$inlinecount=allpages`: include the total count.
    public var count = false
    public var search: String?

    public init() {}

    /// Whether any option besides `expand` is set.
    var hasOwnOptions: Bool {
        filter != nil || !orderBy.isEmpty || select != nil || top != nil || skip != nil || count || search != nil
    }
}

/// A request URL bound against a `Schema`: resolved path, typed `$filter`, checked options.
///
///     let query = try Binder(schema: schema).bind("BusinessPartners?$filter=Country eq 'US'&$top=20")
///     query.path.entitySet      // "BusinessPartners"
///     query.filter?.description // "(eq Country 'US')"
@dynamicMemberLookup
public struct BoundQuery: Sendable, Hashable {
    public var path: BoundPath
    public var options: BoundOptions
    public var skipToken: String?
    public var format: String?
    public var customOptions: [CustomOption]

    public subscript<T>(dynamicMember keyPath: WritableKeyPath<BoundOptions, T>) -> T {
        get { options[keyPath: keyPath] }
        set { options[keyPath: keyPath] = newValue }
    }
}
