package import Storage

/// A key property and its value, converted to the property's type.
package struct KeyComponent: Sendable, Hashable {
    package var name: String
    package var value: Value

    package init(name: String, value: Value) {
        self.name = name
        self.value = value
    }
}

/// One resolved resource path segment: the entity set it addresses, how it was reached, and its key.
package struct BoundSegment: Sendable, Hashable {
    /// nil for the first segment (the entity set itself).
    package var navigation: NavigationProperty?
    package var entitySet: String
    /// Qualified name of the entity type.
    package var entityType: String
    /// Key values in key order, when the segment has a key predicate.
    package var key: [KeyComponent]?
    /// Whether the segment addresses at most one entity (key, singleton, single-valued navigation).
    package var isSingle: Bool
}

/// The resolved resource path.
package struct BoundPath: Sendable, Hashable {
    package var segments: [BoundSegment]
    /// `…/$count`: the request asks for the number of entities only.
    package var isCount: Bool

    /// The entity set of the last segment: where the result entities live.
    package var entitySet: String { segments.last?.entitySet ?? "" }
    package var isSingle: Bool { segments.last?.isSingle ?? false }
}

/// One bound `$orderby` item.
package struct BoundOrderBy: Sendable, Hashable {
    package var expression: TypedExpr
    package var descending: Bool
}

/// A bound `$select` (absent or `*` means every structural property: `BoundOptions.select` is nil).
package struct BoundSelect: Sendable, Hashable {
    /// Selected structural properties, each a path of `.property` steps (through complex types).
    package var properties: [PropertyPath] = []
    /// Navigation properties named in `$select`.
    package var navigations: [String] = []
}

/// A bound `$expand` item: the navigation property, where its targets live, and nested options.
/// V2 paths (`SalesOrders/Items`) become nested expands.
package struct BoundExpand: Sendable, Hashable {
    package var navigation: NavigationProperty
    package var entitySet: String
    package var entityType: String
    package var options: BoundOptions
    package var position: Int
}

/// The options that apply to a collection, at the top level or nested in `$expand`.
package struct BoundOptions: Sendable, Hashable {
    package var filter: TypedExpr?
    package var orderBy: [BoundOrderBy] = []
    /// nil: all structural properties.
    package var select: BoundSelect?
    package var expand: [BoundExpand] = []
    package var top: Int?
    package var skip: Int?
    /// `$count=true` / `$inlinecount=allpages`: include the total count.
    package var count = false
    package var search: String?

    package init() {}

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
package struct BoundQuery: Sendable, Hashable {
    package var path: BoundPath
    package var options: BoundOptions
    package var skipToken: String?
    package var format: String?
    package var customOptions: [CustomOption]

    package subscript<T>(dynamicMember keyPath: WritableKeyPath<BoundOptions, T>) -> T {
        get { options[keyPath: keyPath] }
        set { options[keyPath: keyPath] = newValue }
    }

    /// The sets the request reads: its own, then those its `$expand` reaches, each once.
    package var setsReached: [String] {
        var sets = [path.entitySet]
        func walk(_ options: BoundOptions) {
            for e in options.expand {
                if !sets.contains(e.entitySet) { sets.append(e.entitySet) }
                walk(e.options)
            }
        }
        walk(options)
        return sets
    }
}
