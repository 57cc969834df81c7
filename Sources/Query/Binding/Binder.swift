package import Storage

/// Binds parsed URLs against a `Schema`: resolves the resource path and keys, types `$filter` and
/// `$orderby`, and checks `$select` and `$expand`.
///
///     let binder = Binder(schema: schema)
///     let query = try binder.bind("SalesOrders?$filter=Items/any(i:i/Quantity gt 10)&$expand=Items")
package struct Binder: Sendable {
    package let schema: Schema
    /// The URL's parameter alias values, while it is bound.
    var aliases: [String: Expr] = [:]
    /// Binding for `prepare`: an alias without a value becomes a placeholder to fill in later
    /// (`PreparedStatement`), typed by its use, instead of null.
    var preparing = false

    package init(schema: Schema) {
        self.schema = schema
    }

    /// Parses (with the schema's OData version) and binds a relative URL.
    package func bind(_ url: String, serviceRoot: String? = nil) throws(QueryError) -> BoundQuery {
        try bind(ODataURL.parse(url, serviceRoot: serviceRoot, version: schema.version))
    }

    package func bind(_ url: ODataURL) throws(QueryError) -> BoundQuery {
        var binder = self
        binder.aliases = url.aliases
        try Self.checkAliasExpansion(url)
        return try binder.bindAll(url)
    }

    /// Nodes the alias values may add when put in place of their uses: a 4,000-node value used
    /// 4,000 times would be bound 16 million nodes deep before any query limit is checked.
    static let maxAliasExpansion = 10_000

    static func checkAliasExpansion(_ url: ODataURL) throws(QueryError) {
        guard !url.aliases.isEmpty else { return }
        var uses: [String: Int] = [:]
        url.options.countAliasUses(&uses)
        var total = 0
        for (name, n) in uses {
            total += n * (url.aliases[name]?.nodeCount ?? 1)
            if total > maxAliasExpansion {
                throw QueryError(
                    "parameter alias values put in place of their uses exceed \(maxAliasExpansion) nodes",
                    option: "@" + name, column: nil)
            }
        }
    }

    func bindAll(_ url: ODataURL) throws(QueryError) -> BoundQuery {
        let path = try bindPath(url.path)
        let last = path.segments[path.segments.count - 1]
        let type = schema.entityTypes[last.entityType]!
        let options = try bindOptions(url.options, type: type, set: last.entitySet, nestedIn: nil)
        return BoundQuery(
            path: path, options: options, skipToken: url.skipToken, format: url.format,
            customOptions: url.customOptions)
    }

    /// Binds a Boolean expression against an entity set, e.g. for a filter given on its own.
    package func bindFilter(_ expr: Expr, entitySet: String, option: String = "$filter") throws(QueryError) -> TypedExpr
    {
        guard let type = schema.entityType(ofSet: entitySet) else {
            throw QueryError("unknown entity set '\(entitySet)'", option: option, column: nil)
        }
        var binder = expressionBinder(option: option, entityType: type, entitySet: entitySet)
        return try binder.bindPredicate(expr)
    }

    func expressionBinder(option: String, entityType: EntityType, entitySet: String) -> ExpressionBinder {
        var binder = ExpressionBinder(schema: schema, option: option, entityType: entityType, entitySet: entitySet)
        binder.aliases = aliases
        binder.preparing = preparing
        return binder
    }

    // MARK: Resource path

    private func pathError(_ message: QueryError.Message, at column: Int) -> QueryError {
        QueryError(message, option: nil, column: column)
    }

    func bindPath(_ path: ResourcePath) throws(QueryError) -> BoundPath {
        guard !path.segments.isEmpty else { throw pathError("missing entity set name", at: 1) }
        var bound: [BoundSegment] = []
        for segment in path.segments {
            guard let previous = bound.last else {
                guard let set = schema.entitySet(segment.name), let type = schema.entityTypes[set.entityType] else {
                    throw pathError("unknown entity set '\(segment.name)'", at: segment.position)
                }
                if set.isSingleton, segment.key != nil {
                    throw pathError("a singleton has no key", at: segment.position)
                }
                let key = try segment.key.map { k throws(QueryError) in try bindKey(k, of: type, at: segment.position) }
                bound.append(
                    BoundSegment(
                        navigation: nil, entitySet: set.name, entityType: type.qualifiedName, key: key,
                        isSingle: key != nil || set.isSingleton))
                continue
            }
            let source = schema.entityTypes[previous.entityType]!
            guard let nav = source.navigationProperty(segment.name) else {
                if source.property(segment.name) != nil {
                    throw pathError("'\(segment.name)' is not a navigation property", at: segment.position)
                }
                throw pathError("unknown navigation property '\(segment.name)'", at: segment.position)
            }
            guard previous.isSingle else {
                throw pathError(
                    "'\(segment.name)' must follow a single entity; add a key to '\(path.segments[bound.count - 1].name)'",
                    at: segment.position)
            }
            guard let target = schema.entityTypes[nav.targetType],
                let set = schema.targetSet(of: nav, from: previous.entitySet)
            else {
                throw pathError("no entity set for navigation property '\(nav.name)'", at: segment.position)
            }
            if !nav.isCollection, segment.key != nil {
                throw pathError("single-valued navigation '\(nav.name)' takes no key", at: segment.position)
            }
            let key = try segment.key.map { k throws(QueryError) in try bindKey(k, of: target, at: segment.position) }
            bound.append(
                BoundSegment(
                    navigation: nav, entitySet: set, entityType: target.qualifiedName, key: key,
                    isSingle: !nav.isCollection || key != nil))
        }
        if path.isCount, bound.last?.isSingle == true {
            throw pathError("$count requires a collection", at: path.segments.last!.position)
        }
        return BoundPath(segments: bound, isCount: path.isCount)
    }

    /// Key values matched to key properties (by name, or by position for a single key) and converted.
    private func bindKey(_ values: [KeyValue], of type: EntityType, at: Int) throws(QueryError) -> [KeyComponent] {
        let names = type.key
        guard values.count == names.count else {
            throw pathError(
                "\(type.name) has \(names.count) key propert\(names.count == 1 ? "y" : "ies"), got \(values.count) value\(values.count == 1 ? "" : "s")",
                at: values.first?.position ?? at)
        }
        var byName: [String: KeyValue] = [:]
        for value in values {
            let name = value.name ?? names[0]
            guard value.name == nil ? names.count == 1 : names.contains(name) else {
                throw pathError(
                    value.name == nil
                        ? "key values of \(type.name) must be named"
                        : "'\(name)' is not a key property of \(type.name)",
                    at: value.position)
            }
            guard byName.updateValue(value, forKey: name) == nil else {
                throw pathError("duplicate key property '\(name)'", at: value.position)
            }
        }
        var result: [KeyComponent] = []
        for name in names {
            var value = byName[name]!
            guard let property = type.property(name) else {
                throw pathError("unknown key property '\(name)'", at: value.position)
            }
            if let alias = value.alias {
                if let given = aliases[alias] {
                    guard case .literal(let literal) = given.kind else {
                        throw pathError(
                            "the value of alias '@\(alias)', used as a key value, must be a literal", at: value.position
                        )
                    }
                    value.value = literal
                } else if preparing {
                    result.append(KeyComponent(name: name, value: ExpressionBinder.placeholder(alias)))
                    continue
                } else {
                    throw pathError("alias '@\(alias)' used as a key value has no value in the URL", at: value.position)
                }
            }
            guard case .primitive(let v, let p) = value.value,
                let c = TypeRules.convertLiteral(v, from: .primitive(p), to: property.type, schema: schema)
            else {
                throw pathError("key value \(value.value) does not match \(property.type)", at: value.position)
            }
            result.append(KeyComponent(name: name, value: c))
        }
        return result
    }
}
