import Storage

/// Binds `$filter`/`$orderby` expressions of one entity set: resolves member paths, checks and
/// promotes operand types, converts literals. Errors name `option` and the node's column.
struct ExpressionBinder {
    /// What a path step has reached.
    enum Context {
        case entity(EntityType, set: String)
        case complex(ComplexType)
        case value(TypeRef)
    }

    let schema: Schema
    let option: String
    let rootType: EntityType
    let rootSet: String
    /// Lambda variables in scope, innermost last.
    var variables: [(name: String, context: Context)] = []
    /// Parameter alias values given in the URL (see `ODataURL.aliases`).
    var aliases: [String: Expr] = [:]
    /// Whether an alias without a value becomes a placeholder (`Binder.preparing`).
    var preparing = false

    init(schema: Schema, option: String, entityType: EntityType, entitySet: String) {
        self.schema = schema
        self.option = option
        self.rootType = entityType
        self.rootSet = entitySet
    }

    func error(_ message: QueryError.Message, at column: Int) -> QueryError {
        QueryError(message, option: option, column: column)
    }

    /// Binds a Boolean expression (a `$filter` or lambda predicate).
    mutating func bindPredicate(_ expr: Expr) throws(QueryError) -> TypedExpr {
        let typed = try bindOperand(expr, expecting: TypedExpr.boolean)
        try requireBoolean(typed, "expected a Boolean expression")
        return typed
    }

    func requireBoolean(_ e: TypedExpr, _ message: QueryError.Message) throws(QueryError) {
        guard e.type == nil || e.type == TypedExpr.boolean else {
            throw error("\(message), not \(e.type!)", at: e.position)
        }
    }

    mutating func bind(_ expr: Expr) throws(QueryError) -> TypedExpr {
        let at = expr.position
        switch expr.kind {
        case .literal(let literal):
            return try bindLiteral(literal, at: at)
        case .path(let segments):
            return try bindValuePath(segments, at: at)
        case .lambda(let kind, let path, let variable, let predicate):
            return try bindLambda(kind, path, variable, predicate, at: at)
        case .and(let items), .or(let items):
            var operands: [TypedExpr] = []
            let name = if case .and = expr.kind { "and" } else { "or" }
            for item in items {
                let typed = try bindOperand(item, expecting: TypedExpr.boolean)
                try requireBoolean(typed, "operand of '\(name)' must be Edm.Boolean")
                operands.append(typed)
            }
            return TypedExpr(name == "and" ? .and(operands) : .or(operands), type: TypedExpr.boolean, at: at)
        case .not(let operand):
            let typed = try bindOperand(operand, expecting: TypedExpr.boolean)
            try requireBoolean(typed, "operand of 'not' must be Edm.Boolean")
            return TypedExpr(.not(typed), type: TypedExpr.boolean, at: at)
        case .negate(let operand):
            return try negate(try bind(operand), at: at)
        case .binary(let op, let lhs, let rhs):
            if isParameter(lhs) || isParameter(rhs) { return try bindBinaryWithParameter(op, lhs, rhs, at: at) }
            return try bindBinary(op, try bind(lhs), try bind(rhs), rhs: rhs, at: at)
        case .in(let operand, let list):
            return try bindIn(try bind(operand), list, at: at)
        case .call(let name, let args):
            return try bindCall(name, args, at: at)
        case .alias(let name):
            return try bindAlias(name, at: at)
        }
    }

    func bindLiteral(_ literal: Literal, at: Int) throws(QueryError) -> TypedExpr {
        switch literal {
        case .null:
            return TypedExpr(.literal(.null), type: nil, at: at)
        case .primitive(let value, let type):
            return TypedExpr(.literal(value), type: .primitive(type), at: at)
        case .enumeration(let name, let members):
            guard let e = TypeRules.enumType(named: name, in: schema) else {
                throw error("unknown enum type '\(name)'", at: at)
            }
            guard let v = TypeRules.enumValue(members, of: e) else {
                throw error("unknown member '\(members)' of enum \(e.qualifiedName)", at: at)
            }
            return TypedExpr(.literal(.enumMember(v)), type: .enumeration(e.qualifiedName), at: at)
        }
    }

    // MARK: Paths

    /// Resolves `segments` to a path; `element` is set when the path ends at a collection.
    func resolve(
        _ segments: ArraySlice<PathSegment>
    ) throws(QueryError) -> (path: PropertyPath, context: Context, element: Context?) {
        var context = Context.entity(rootType, set: rootSet)
        var variable: String?
        var rest = segments
        if let first = rest.first {
            if first.name == "$it" {
                rest = rest.dropFirst()
            } else if let v = variables.last(where: { $0.name == first.name }) {
                variable = v.name
                context = v.context
                rest = rest.dropFirst()
            }
        }
        var steps: [PathStep] = []
        var element: Context?
        for segment in rest {
            if element != nil, let last = steps.last {
                throw error("'\(last.name)' is a collection; use any, all or $count", at: segment.position)
            }
            switch context {
            case .entity(let type, let set):
                if let p = type.property(segment.name) {
                    steps.append(.property(p))
                    (context, element) = try valueContext(p.type, at: segment.position)
                } else if let n = type.navigationProperty(segment.name) {
                    guard let target = schema.entityTypes[n.targetType] else {
                        throw error("unknown entity type '\(n.targetType)'", at: segment.position)
                    }
                    guard let targetSet = schema.targetSet(of: n, from: set) else {
                        throw error("no entity set for navigation property '\(n.name)'", at: segment.position)
                    }
                    steps.append(.navigation(n, targetSet: targetSet))
                    context = .entity(target, set: targetSet)
                    element = n.isCollection ? context : nil
                } else {
                    throw unknownProperty(segment)
                }
            case .complex(let type):
                guard let p = type.property(segment.name) else { throw unknownProperty(segment) }
                steps.append(.property(p))
                (context, element) = try valueContext(p.type, at: segment.position)
            case .value:
                throw unknownProperty(segment)
            }
        }
        return (PropertyPath(variable: variable, steps: steps), context, element)
    }

    private func unknownProperty(_ segment: PathSegment) -> QueryError {
        if segment.name.contains(".") {
            return error("type cast '\(segment.name)' is not supported", at: segment.position)
        }
        return error("unknown property '\(segment.name)'", at: segment.position)
    }

    private func valueContext(_ type: TypeRef, at: Int) throws(QueryError) -> (Context, element: Context?) {
        switch type {
        case .complex(let name):
            guard let c = schema.complexTypes[name] else { throw error("unknown complex type '\(name)'", at: at) }
            return (.complex(c), nil)
        case .collection(let inner):
            let (context, _) = try valueContext(inner, at: at)
            return (context, context)
        default:
            return (.value(type), nil)
        }
    }

    /// A path used as a value: a primitive, enum or complex property, or `Collection/$count`.
    private func bindValuePath(_ segments: [PathSegment], at: Int) throws(QueryError) -> TypedExpr {
        if segments.last?.name == "$count" {
            let (path, _, element) = try resolve(segments.dropLast())
            guard element != nil else { throw error("$count requires a collection", at: segments.last!.position) }
            return TypedExpr(.count(path), type: .primitive(.int64), at: at)
        }
        let (path, context, element) = try resolve(segments[...])
        let name = segments.last?.name ?? "$it"
        let lastAt = segments.last?.position ?? at
        if element != nil { throw error("'\(name)' is a collection; use any, all or $count", at: lastAt) }
        switch context {
        case .value(let type): return TypedExpr(.property(path), type: type, at: at)
        case .complex(let c): return TypedExpr(.property(path), type: .complex(c.qualifiedName), at: at)
        case .entity: throw error("'\(name)' is an entity, not a value", at: lastAt)
        }
    }

    private mutating func bindLambda(
        _ kind: LambdaKind, _ segments: [PathSegment], _ variable: PathSegment?,
        _ predicate: Expr?, at: Int
    ) throws(QueryError) -> TypedExpr {
        let (path, _, element) = try resolve(segments[...])
        guard let element else {
            throw error("'\(segments.last?.name ?? "$it")' is not a collection", at: segments.last?.position ?? at)
        }
        guard let variable, let predicate else {
            return TypedExpr(.any(path, variable: nil, predicate: nil), type: TypedExpr.boolean, at: at)
        }
        if variable.name == "$it" || variables.contains(where: { $0.name == variable.name }) {
            throw error("lambda variable '\(variable.name)' is already defined", at: variable.position)
        }
        variables.append((variable.name, element))
        let bound: TypedExpr
        do {
            bound = try bindPredicate(predicate)
        } catch {
            variables.removeLast()
            throw error
        }
        variables.removeLast()
        let node: TypedExpr.Kind =
            kind == .any
            ? .any(path, variable: variable.name, predicate: bound)
            : .all(path, variable: variable.name, predicate: bound)
        return TypedExpr(node, type: TypedExpr.boolean, at: at)
    }
}
