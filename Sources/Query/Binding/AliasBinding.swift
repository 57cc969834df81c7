import Storage

/// Parameter aliases (`$filter=ProductID eq @p&@p='HT-1001'`, OData URL Conventions 5.1.1.13).
///
/// An alias with a value in the URL binds as its value would where the alias stands; one without
/// a value is null (the spec's rule). When preparing (`Binder.prepare`), an alias without a value
/// becomes a placeholder literal (`placeholder(_:)`) whose type is what its use requires: the
/// other operand's type in a comparison or arithmetic, the parameter type of a function argument,
/// Edm.Boolean as a predicate or operand of `and`/`or`/`not`, the key property's type in a key.
extension ExpressionBinder {
    /// Stands for alias `name` in a prepared tree until `PreparedStatement.bind` puts the value in.
    /// (No URL literal makes an `Edm.Untyped` value, so it cannot be confused with one.)
    static func placeholder(_ name: String) -> Value { .json("@" + name) }

    /// The alias name when `value` is a placeholder.
    static func placeholderName(_ value: Value) -> String? {
        guard case .json(let text) = value, text.hasPrefix("@") else { return nil }
        return String(text.dropFirst())
    }

    /// Whether `expr` is an alias that becomes a placeholder (preparing, no value in the URL).
    func isParameter(_ expr: Expr) -> Bool {
        guard preparing, case .alias(let name) = expr.kind else { return false }
        return aliases[name] == nil
    }

    private func cannotInfer(_ name: String, at: Int) -> QueryError {
        error(
            "cannot tell the type of alias '@\(name)' here: compare it with a property or pass it to a function", at: at
        )
    }

    /// `expr` bound where a value of type `expected` belongs: a prepared alias gets that type.
    mutating func bindOperand(_ expr: Expr, expecting expected: TypeRef?) throws(QueryError) -> TypedExpr {
        guard isParameter(expr), case .alias(let name) = expr.kind else { return try bind(expr) }
        guard let expected else { throw cannotInfer(name, at: expr.position) }
        return TypedExpr(.literal(Self.placeholder(name)), type: expected, at: expr.position)
    }

    /// An alias where no type is implied: its URL value bound in its place, or null.
    mutating func bindAlias(_ name: String, at: Int) throws(QueryError) -> TypedExpr {
        guard let value = aliases[name] else {
            if preparing { throw cannotInfer(name, at: at) }
            return TypedExpr(.literal(.null), type: nil, at: at)
        }
        var typed: TypedExpr
        do {
            typed = try bind(value)
        } catch {
            // Errors inside the value point into the value's own text.
            throw QueryError(.init(stringLiteral: error.message), option: "@" + name, column: error.column)
        }
        typed.position = at
        return typed
    }

    /// A comparison or arithmetic with a prepared alias on one side: the alias takes the other
    /// side's type.
    mutating func bindBinaryWithParameter(
        _ op: BinaryOperator, _ lhs: Expr, _ rhs: Expr, at: Int
    ) throws(QueryError) -> TypedExpr {
        let aliasOnLeft = isParameter(lhs)
        let (aliasSyntax, otherSyntax) = aliasOnLeft ? (lhs, rhs) : (rhs, lhs)
        guard case .alias(let name) = aliasSyntax.kind else {
            return try bindBinary(op, try bind(lhs), try bind(rhs), rhs: rhs, at: at)
        }
        if op == .has { throw error("a prepared alias cannot be the operand of 'has'", at: aliasSyntax.position) }
        if isParameter(otherSyntax) { throw cannotInfer(name, at: aliasSyntax.position) }
        let other = try bind(otherSyntax)
        guard let type = other.type else { throw cannotInfer(name, at: aliasSyntax.position) }
        let parameter = TypedExpr(.literal(Self.placeholder(name)), type: type, at: aliasSyntax.position)
        return aliasOnLeft
            ? try bindBinary(op, parameter, other, rhs: rhs, at: at)
            : try bindBinary(op, other, parameter, rhs: rhs, at: at)
    }
}
