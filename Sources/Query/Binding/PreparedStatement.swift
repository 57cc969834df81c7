package import Storage

/// A request URL parsed and bound once, whose parameter aliases without a value in the URL
/// (`@p`) are filled in per execution with no parsing: `bind(_:)` puts values into the bound tree.
///
///     let statement = try Binder(schema: schema).prepare("Products?$filter=Category eq @c and Price lt @max")
///     statement.parameters            // ["c": Edm.String, "max": Edm.Decimal]
///     let query = try statement.bind(["c": .string("Notebooks"), "max": .int(1000)])
///
/// Each alias has the type of its use (see `ExpressionBinder`'s alias binding); `bind` converts a
/// value to it as a URL literal would be converted (an integer to Decimal, a string to an enum
/// member, a date to a DateTimeOffset) and refuses one that does not fit. An alias left out is
/// null, as in a URL (a key value cannot be null). Aliases given a value in the prepared URL
/// itself (`&@c='Notebooks'`) are fixed, like literals.
package struct PreparedStatement: Sendable {
    /// The URL as prepared.
    package let url: String
    /// The bound query with a placeholder where each alias is used.
    let template: BoundQuery
    /// Each alias and the type its uses require.
    package let parameters: [String: TypeRef]
    /// Where aliases stand in key predicates: segment, key component, alias.
    let keySlots: [(segment: Int, component: Int, alias: String)]
    /// Whether an alias stands in `$filter`, `$orderby` or `$expand`'s options.
    let inOptions: Bool

    /// The schema the URL was bound against (for converting values to enum members).
    let schema: Schema

    /// A point read by the full key of one entity set with no option but `$select`
    /// (`Items(SalesOrderID=@id,ItemPosition=@pos)`), which `PreparedQuery.entities` runs without
    /// binding a query or planning: the key with placeholders, and where each alias goes.
    struct PointRead: Sendable {
        let entitySet: String
        let key: [Value]
        let select: BoundSelect?
        let slots: [(component: Int, alias: String, type: TypeRef)]
    }
    let pointRead: PointRead?

    init(
        url: String, schema: Schema, template: BoundQuery, parameters: [String: TypeRef],
        keySlots: [(Int, Int, String)], inOptions: Bool
    ) {
        self.url = url
        self.schema = schema
        self.template = template
        self.parameters = parameters
        self.keySlots = keySlots.map { (segment: $0.0, component: $0.1, alias: $0.2) }
        self.inOptions = inOptions
        var others = template.options
        others.select = nil
        if template.path.segments.count == 1, !template.path.isCount, let segment = template.path.segments.first,
            segment.isSingle, segment.navigation == nil, let key = segment.key, others == BoundOptions(), !inOptions
        {
            pointRead = PointRead(
                entitySet: segment.entitySet, key: key.map(\.value), select: template.options.select,
                // In alias order, as `bind` converts: the first bad value is the same one.
                slots: keySlots.sorted { $0.2 < $1.2 }.map { (component: $0.1, alias: $0.2, type: parameters[$0.2]!) })
        } else {
            pointRead = nil
        }
    }

    /// The point read's key with `values` in place of its aliases: the checks and errors of `bind`.
    func pointReadKey(_ read: PointRead, _ values: [String: Value]) throws(QueryError) -> [Value] {
        var key = read.key
        var found = 0
        for (i, slot) in read.slots.enumerated() {
            let given = values[slot.alias]
            // An alias used twice is counted once: at its first slot.
            if given != nil && !read.slots[..<i].contains(where: { $0.alias == slot.alias }) { found += 1 }
            key[slot.component] = given ?? .null
        }
        // Every value named an alias of the key, or one did not: then `bind`'s error for it, first.
        if found != values.count { try checkNames(values) }
        for slot in read.slots {
            key[slot.component] = try Self.convert(
                key[slot.component], to: slot.type, alias: slot.alias, schema: schema)
        }
        // The first null in key order, as `bind` finds it.
        if let i = key.firstIndex(where: \.isNull), let slot = read.slots.first(where: { $0.component == i }) {
            throw QueryError("a key value cannot be null", option: "@" + slot.alias, column: nil)
        }
        return key
    }

    /// Throws for a value whose name is not an alias of the query.
    func checkNames(_ values: [String: Value]) throws(QueryError) {
        for name in values.keys where parameters[name] == nil {
            let known = parameters.keys.sorted().map { "@" + $0 }.joined(separator: ", ")
            throw QueryError(
                "the query has no alias '@\(name)' (it has \(known.isEmpty ? "none" : known))", option: "@" + name,
                column: nil)
        }
    }

    /// The query with `values` (by alias name, without `@`) in place of the aliases. Throws a
    /// `QueryError` (option `@name`) for an alias the query does not use, a value that does not
    /// fit the alias's type, or a null key value.
    package func bind(_ values: [String: Value]) throws(QueryError) -> BoundQuery {
        try checkNames(values)
        var converted: [String: Value] = [:]
        converted.reserveCapacity(parameters.count)
        // In name order, so a call with two bad values always names the same one.
        for (name, type) in parameters.sorted(by: { $0.key < $1.key }) {
            converted[name] = try Self.convert(values[name] ?? .null, to: type, alias: name, schema: schema)
        }
        var query = template
        for slot in keySlots {
            let value = converted[slot.alias]!
            if value.isNull { throw QueryError("a key value cannot be null", option: "@" + slot.alias, column: nil) }
            query.path.segments[slot.segment].key![slot.component].value = value
        }
        if inOptions { query.options = Self.substitute(query.options, converted) }
        return query
    }

    /// `value` as a value of `type`, or a `QueryError` naming the alias.
    static func convert(_ value: Value, to type: TypeRef, alias: String, schema: Schema) throws(QueryError) -> Value {
        if value.isNull { return value }
        let source: TypeRef?
        switch value {
        case .bool: source = .primitive(.boolean)
        case .int: source = .primitive(.int64)
        case .double: source = .primitive(.double)
        case .decimal: source = .primitive(.decimal)
        case .string: source = .primitive(.string)
        case .date: source = .primitive(.date)
        case .dateTimeOffset: source = .primitive(.dateTimeOffset)
        case .timeOfDay: source = .primitive(.timeOfDay)
        case .duration: source = .primitive(.duration)
        case .guid: source = .primitive(.guid)
        case .binary: source = .primitive(.binary)
        case .enumMember: if case .enumeration = type { source = type } else { source = nil }
        case .null, .json, .complex, .collection: source = nil
        }
        guard let source, let result = TypeRules.convertLiteral(value, from: source, to: type, schema: schema) else {
            throw QueryError(
                "value \(Literal.format(value, nil)) does not fit the alias's type \(type)", option: "@" + alias,
                column: nil)
        }
        return result
    }

    static func substitute(_ options: BoundOptions, _ values: [String: Value]) -> BoundOptions {
        var out = options
        out.filter = options.filter.map { substitute($0, values) }
        out.orderBy = options.orderBy.map {
            BoundOrderBy(expression: substitute($0.expression, values), descending: $0.descending)
        }
        out.expand = options.expand.map { e in
            var e = e
            e.options = substitute(e.options, values)
            return e
        }
        return out
    }

    /// `e` with each placeholder replaced by its value. `x eq @p` with a null `@p` becomes
    /// `isnull(x)` (and `ne` its negation), as `x eq null` binds.
    static func substitute(_ e: TypedExpr, _ values: [String: Value]) -> TypedExpr {
        func value(_ x: TypedExpr) -> Value? {
            guard case .literal(let v) = x.kind, let name = ExpressionBinder.placeholderName(v) else { return nil }
            return values[name]
        }
        func rebuilt(_ kind: TypedExpr.Kind) -> TypedExpr { TypedExpr(kind, type: e.type, at: e.position) }
        switch e.kind {
        case .literal:
            guard let v = value(e) else { return e }
            return TypedExpr(.literal(v), type: v.isNull ? nil : e.type, at: e.position)
        case .property, .count: return e
        case .compare(let op, let a, let b):
            if op == .eq || op == .ne {
                let other: TypedExpr? = value(a)?.isNull == true ? b : value(b)?.isNull == true ? a : nil
                if let other {
                    if value(other)?.isNull == true {
                        return TypedExpr(.literal(.bool(op == .eq)), type: TypedExpr.boolean, at: e.position)
                    }
                    let test = TypedExpr(.isNull(substitute(other, values)), type: TypedExpr.boolean, at: e.position)
                    return op == .eq ? test : TypedExpr(.not(test), type: TypedExpr.boolean, at: e.position)
                }
            }
            return rebuilt(.compare(op, substitute(a, values), substitute(b, values)))
        case .isNull(let x): return rebuilt(.isNull(substitute(x, values)))
        case .and(let xs): return rebuilt(.and(xs.map { substitute($0, values) }))
        case .or(let xs): return rebuilt(.or(xs.map { substitute($0, values) }))
        case .not(let x): return rebuilt(.not(substitute(x, values)))
        case .arithmetic(let op, let a, let b):
            return rebuilt(.arithmetic(op, substitute(a, values), substitute(b, values)))
        case .negate(let x): return rebuilt(.negate(substitute(x, values)))
        case .convert(let x): return rebuilt(.convert(substitute(x, values)))
        case .function(let name, let args): return rebuilt(.function(name, args.map { substitute($0, values) }))
        case .any(let path, let variable, let predicate):
            return rebuilt(.any(path, variable: variable, predicate: predicate.map { substitute($0, values) }))
        case .all(let path, let variable, let predicate):
            return rebuilt(.all(path, variable: variable, predicate: substitute(predicate, values)))
        case .in(let x, let list): return rebuilt(.in(substitute(x, values), list))
        case .has(let x, let bits): return rebuilt(.has(substitute(x, values), bits))
        }
    }

    /// Each placeholder in `e` with its type, in tree order.
    static func placeholders(in e: TypedExpr, into found: inout [(String, TypeRef?, Int)]) {
        switch e.kind {
        case .literal(let v):
            if let name = ExpressionBinder.placeholderName(v) { found.append((name, e.type, e.position)) }
        case .property, .count: break
        case .compare(_, let a, let b), .arithmetic(_, let a, let b):
            placeholders(in: a, into: &found)
            placeholders(in: b, into: &found)
        case .isNull(let x), .not(let x), .negate(let x), .convert(let x), .has(let x, _), .in(let x, _):
            placeholders(in: x, into: &found)
        case .and(let xs), .or(let xs), .function(_, let xs): for x in xs { placeholders(in: x, into: &found) }
        case .any(_, _, let p): if let p { placeholders(in: p, into: &found) }
        case .all(_, _, let p): placeholders(in: p, into: &found)
        }
    }

    static func placeholders(
        in options: BoundOptions, option: String?, into found: inout [(String, TypeRef?, Int, String)]
    ) {
        var exprs: [(TypedExpr, String)] = options.filter.map { [($0, option ?? "$filter")] } ?? []
        exprs += options.orderBy.map { ($0.expression, option ?? "$orderby") }
        for (e, name) in exprs {
            var list: [(String, TypeRef?, Int)] = []
            placeholders(in: e, into: &list)
            found += list.map { ($0.0, $0.1, $0.2, name) }
        }
        for e in options.expand { placeholders(in: e.options, option: option ?? "$expand", into: &found) }
    }
}

extension Binder {
    /// Parses and binds `url` once for `PreparedStatement.bind`: each alias without a value in the
    /// URL becomes a parameter typed by its use. Throws a `QueryError` where a use does not tell
    /// the type (`@a eq @b`, `round(@p)`), or one alias is used with two types.
    package func prepare(_ url: String, serviceRoot: String? = nil) throws(QueryError) -> PreparedStatement {
        let parsed = try ODataURL.parse(url, serviceRoot: serviceRoot, version: schema.version)
        var binder = self
        binder.aliases = parsed.aliases
        binder.preparing = true
        try Self.checkAliasExpansion(parsed)
        let template = try binder.bindAll(parsed)
        var parameters: [String: TypeRef] = [:]
        func add(_ name: String, _ type: TypeRef?, option: String?, at column: Int?) throws(QueryError) {
            guard let type else {
                throw QueryError("cannot tell the type of alias '@\(name)'", option: option, column: column)
            }
            if let known = parameters[name], known != type {
                throw QueryError("alias '@\(name)' is used as \(known) and as \(type)", option: option, column: column)
            }
            parameters[name] = type
        }
        var keySlots: [(Int, Int, String)] = []
        for (i, segment) in template.path.segments.enumerated() {
            for (j, component) in (segment.key ?? []).enumerated() {
                guard let name = ExpressionBinder.placeholderName(component.value) else { continue }
                let type = schema.entityTypes[segment.entityType]?.property(component.name)?.type
                try add(name, type, option: nil, at: parsed.path.segments[i].position)
                keySlots.append((i, j, name))
            }
        }
        var found: [(String, TypeRef?, Int, String)] = []
        PreparedStatement.placeholders(in: template.options, option: nil, into: &found)
        for (name, type, column, option) in found { try add(name, type, option: option, at: column) }
        return PreparedStatement(
            url: url, schema: schema, template: template, parameters: parameters, keySlots: keySlots,
            inOptions: !found.isEmpty)
    }
}
