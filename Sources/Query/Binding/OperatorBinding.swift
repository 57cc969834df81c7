import Storage

/// Type checking of comparison, arithmetic, `has`, `in` and negation.
extension ExpressionBinder {
    func bindBinary(
        _ op: BinaryOperator, _ lhs: TypedExpr, _ rhs: TypedExpr, rhs syntax: Expr,
        at: Int
    ) throws(QueryError) -> TypedExpr {
        switch op {
        case .eq, .ne, .gt, .ge, .lt, .le:
            let cmp = ComparisonOperator(rawValue: op.rawValue)!
            if op == .eq || op == .ne {
                let other: TypedExpr? = isNullLiteral(rhs) ? lhs : isNullLiteral(lhs) ? rhs : nil
                if let other, !isNullLiteral(other) {
                    let test = TypedExpr(.isNull(other), type: TypedExpr.boolean, at: at)
                    return op == .eq ? test : TypedExpr(.not(test), type: TypedExpr.boolean, at: at)
                }
            }
            let (l, r) = try comparable(lhs, rhs, at: at)
            return TypedExpr(.compare(cmp, l, r), type: TypedExpr.boolean, at: at)
        case .has:
            guard case .enumeration(let name) = lhs.type, let e = schema.enumTypes[name] else {
                throw error("'has' requires an enum operand, not \(lhs.type?.description ?? "null")", at: at)
            }
            guard case .literal(let value) = rhs.kind,
                let converted = TypeRules.convertLiteral(value, from: rhs.type, to: .enumeration(name), schema: schema),
                case .enumMember(let bits) = converted
            else {
                throw error("'has' requires a member of \(e.qualifiedName)", at: rhs.position)
            }
            return TypedExpr(.has(lhs, bits), type: TypedExpr.boolean, at: at)
        case .add, .sub, .mul, .div, .divby, .mod:
            return try arithmetic(ArithmeticOperator(rawValue: op.rawValue)!, lhs, rhs, at: at)
        }
    }

    func isNullLiteral(_ e: TypedExpr) -> Bool {
        if case .literal(.null) = e.kind { return true }
        return false
    }

    private func isLiteral(_ e: TypedExpr) -> Bool {
        if case .literal = e.kind { return true }
        return false
    }

    private func requireComparable(_ a: TypeRef, _ b: TypeRef, at: Int) throws(QueryError) {
        func ok(_ t: TypeRef) -> Bool {
            switch t {
            case .primitive(let p): p != .json
            case .enumeration: true
            default: false
            }
        }
        guard ok(a), ok(b) else { throw error("cannot compare \(a) with \(b)", at: at) }
    }

    /// Both operands in one comparable representation, converting a literal side where possible.
    func comparable(_ l: TypedExpr, _ r: TypedExpr, at: Int) throws(QueryError) -> (TypedExpr, TypedExpr) {
        guard let lt = l.type, let rt = r.type else { return (l, r) }
        try requireComparable(lt, rt, at: at)
        if lt == rt { return (l, r) }
        if let lp = lt.primitive, let rp = rt.primitive, TypeRules.numericClass(lp) != nil,
            TypeRules.numericClass(rp) != nil
        {
            let (a, b, _) = numericPair(l, r, widenOnly: false)
            return (a, b)
        }
        if case .literal(let v) = r.kind, let c = TypeRules.convertLiteral(v, from: rt, to: lt, schema: schema) {
            return (l, TypedExpr(.literal(c), type: lt, at: r.position))
        }
        if case .literal(let v) = l.kind, let c = TypeRules.convertLiteral(v, from: lt, to: rt, schema: schema) {
            return (TypedExpr(.literal(c), type: rt, at: l.position), r)
        }
        if let lp = lt.primitive, let rp = rt.primitive, TypeRules.sameRepresentation(lp, rp) { return (l, r) }
        throw error("cannot compare \(lt) with \(rt)", at: at)
    }

    /// Numeric operands promoted to a common type. A literal converts to the other side's type when
    /// it fits (only widening when `widenOnly`), so the non-literal side keeps its type.
    func numericPair(_ l: TypedExpr, _ r: TypedExpr, widenOnly: Bool) -> (TypedExpr, TypedExpr, EDMPrimitive) {
        let lp = l.type!.primitive!, rp = r.type!.primitive!
        if isLiteral(l) != isLiteral(r) {
            let (lit, other) = isLiteral(l) ? (l, r) : (r, l)
            let target = isLiteral(l) ? rp : lp
            let source = isLiteral(l) ? lp : rp
            if case .literal(let v) = lit.kind, !widenOnly || TypeRules.promote(source, target) == target,
                let c = TypeRules.convertNumeric(v, to: target)
            {
                let converted = TypedExpr(.literal(c), type: .primitive(target), at: lit.position)
                return isLiteral(l) ? (converted, other, target) : (other, converted, target)
            }
        }
        let t = TypeRules.promote(lp, rp)
        return (coerce(l, to: t), coerce(r, to: t), t)
    }

    /// `e` in the representation of numeric type `t` (a converted literal or a `convert` node).
    func coerce(_ e: TypedExpr, to t: EDMPrimitive) -> TypedExpr {
        guard let p = e.type?.primitive, p != t else { return e }
        if case .literal(let v) = e.kind, let c = TypeRules.convertNumeric(v, to: t) {
            return TypedExpr(.literal(c), type: .primitive(t), at: e.position)
        }
        guard TypeRules.numericClass(p) != TypeRules.numericClass(t) else { return e }
        return TypedExpr(.convert(e), type: .primitive(t), at: e.position)
    }

    private func arithmetic(
        _ op: ArithmeticOperator, _ l: TypedExpr, _ r: TypedExpr, at: Int
    ) throws(QueryError) -> TypedExpr {
        func fail() -> QueryError {
            error(
                "operator '\(op.rawValue)' cannot be applied to \(l.type?.description ?? "null") and \(r.type?.description ?? "null")",
                at: at)
        }
        let lp = l.type?.primitive, rp = r.type?.primitive
        if l.type == nil || r.type == nil {
            guard let known = l.type ?? r.type else { return TypedExpr(.arithmetic(op, l, r), type: nil, at: at) }
            guard let p = known.primitive,
                TypeRules.numericClass(p) != nil || [.duration, .date, .dateTimeOffset, .dateTime].contains(p)
            else { throw fail() }
            return TypedExpr(.arithmetic(op, l, r), type: known, at: at)
        }
        guard let lp, let rp else { throw fail() }
        if TypeRules.numericClass(lp) != nil, TypeRules.numericClass(rp) != nil {
            var (a, b, t) = numericPair(l, r, widenOnly: true)
            if op == .divby, TypeRules.numericClass(t) == .integer {
                t = .decimal
                (a, b) = (coerce(a, to: t), coerce(b, to: t))
            }
            return TypedExpr(.arithmetic(op, a, b), type: .primitive(t), at: at)
        }
        let instants: Set<EDMPrimitive> = [.dateTimeOffset, .dateTime]
        let result: EDMPrimitive?
        switch op {
        case .add, .sub:
            if instants.contains(lp) || lp == .date, rp == .duration {
                result = lp
            } else if lp == .duration, rp == .duration {
                result = .duration
            } else if op == .sub, (instants.contains(lp) && instants.contains(rp)) || (lp == .date && rp == .date) {
                result = .duration
            } else {
                result = nil
            }
        default:
            result = nil
        }
        guard let result else { throw fail() }
        return TypedExpr(.arithmetic(op, l, r), type: .primitive(result), at: at)
    }

    func negate(_ operand: TypedExpr, at: Int) throws(QueryError) -> TypedExpr {
        guard let type = operand.type else { return TypedExpr(.negate(operand), type: nil, at: at) }
        guard let p = type.primitive, TypeRules.numericClass(p) != nil || p == .duration else {
            throw error("cannot negate \(type)", at: at)
        }
        if case .literal(let v) = operand.kind {
            switch v {
            case .int(let i) where i != .min: return TypedExpr(.literal(.int(-i)), type: type, at: at)
            case .decimal(let d):
                return TypedExpr(
                    .literal(.decimal(EDMDecimal(significand: -d.significand, scale: d.scale))), type: type, at: at)
            case .double(let d): return TypedExpr(.literal(.double(-d)), type: type, at: at)
            case .duration(let d) where d.ticks != .min:
                return TypedExpr(.literal(.duration(EDMDuration(ticks: -d.ticks))), type: type, at: at)
            default: break
            }
        }
        return TypedExpr(.negate(operand), type: type, at: at)
    }

    func bindIn(_ operand: TypedExpr, _ list: [Expr], at: Int) throws(QueryError) -> TypedExpr {
        guard let type = operand.type else { throw error("left operand of 'in' cannot be null", at: operand.position) }
        var values: [Value] = []
        for item in list {
            guard case .literal(let literal) = item.kind else {
                throw error("expected a literal in list", at: item.position)
            }
            let typed = try bindLiteral(literal, at: item.position)
            guard case .literal(let v) = typed.kind else { continue }
            if let t = typed.type { try requireComparable(type, t, at: item.position) }
            guard let c = TypeRules.convertLiteral(v, from: typed.type, to: type, schema: schema) else {
                throw error("cannot compare \(type) with \(typed.type!)", at: item.position)
            }
            values.append(c)
        }
        return TypedExpr(.in(operand, values), type: TypedExpr.boolean, at: at)
    }
}
