import Storage

/// Recursive-descent parser for `$filter` / `$orderby` expressions.
///
/// Precedence, loosest first: `or`, `and`, `not`, comparison (`eq ne gt ge lt le has in`),
/// additive (`add sub`), multiplicative (`mul div divby mod`), unary `-`, primary.
/// Keywords are case-insensitive. Nesting is capped at `maxDepth` so no input exhausts the stack.
struct ExpressionParser {
    static let maxDepth = 100

    var lexer: Lexer
    /// The current (lookahead) token.
    var token: Token
    private var nesting = 0

    init(_ lexer: Lexer) throws(QueryError) {
        self.lexer = lexer
        token = try self.lexer.next()
    }

    /// Parses the whole range as one expression.
    static func parse(
        _ text: [Unicode.Scalar], from start: Int = 0, to end: Int? = nil, option: String,
        version: ODataVersion
    ) throws(QueryError) -> Expr {
        var parser = try ExpressionParser(Lexer(text, from: start, to: end, option: option, version: version))
        let expr = try parser.parseExpression()
        try parser.expectEnd()
        return expr
    }

    mutating func advance() throws(QueryError) { token = try lexer.next() }

    func error(_ message: QueryError.Message, at index: Int) -> QueryError { lexer.error(message, at: index) }

    func unexpected(_ t: Token) -> QueryError {
        if t.kind == .end {
            // A nested option ends at a `;` or `)` of the enclosing text: name that character.
            guard t.start < lexer.text.count else { return error("unexpected end of input", at: t.start) }
            return error("unexpected '\(lexer.text[t.start])'", at: t.start)
        }
        return error("unexpected '\(lexer.excerpt(t.start, t.end))'", at: t.start)
    }

    mutating func expect(_ c: Unicode.Scalar) throws(QueryError) {
        guard token.isSymbol(c) else { throw error("expected '\(c)'", at: token.start) }
        try advance()
    }

    func expectEnd() throws(QueryError) {
        guard token.kind == .end else { throw unexpected(token) }
    }

    private func make(_ kind: Expr.Kind, at index: Int) throws(QueryError) -> Expr {
        let e = Expr(kind, at: index + 1)
        guard e.depth <= Self.maxDepth else { throw error("expression nested too deeply", at: index) }
        return e
    }

    private mutating func enter() throws(QueryError) {
        nesting += 1
        guard nesting <= Self.maxDepth else { throw error("expression nested too deeply", at: token.start) }
    }

    private mutating func leave() { nesting -= 1 }

    mutating func parseExpression() throws(QueryError) -> Expr { try parseOr() }

    private mutating func parseOr() throws(QueryError) -> Expr {
        let first = try parseAnd()
        guard token.isKeyword("or") else { return first }
        let at = token.start
        var items = [first]
        while token.isKeyword("or") {
            try advance()
            items.append(try parseAnd())
        }
        return try make(.or(items), at: at)
    }

    private mutating func parseAnd() throws(QueryError) -> Expr {
        let first = try parseNot()
        guard token.isKeyword("and") else { return first }
        let at = token.start
        var items = [first]
        while token.isKeyword("and") {
            try advance()
            items.append(try parseNot())
        }
        return try make(.and(items), at: at)
    }

    private mutating func parseNot() throws(QueryError) -> Expr {
        guard token.isKeyword("not"), try !lexer.peek().isSymbol("/") else { return try parseComparison() }
        let at = token.start
        try enter()
        try advance()
        let operand = try parseNot()
        leave()
        return try make(.not(operand), at: at)
    }

    private static let comparisons: [String: BinaryOperator] = [
        "eq": .eq, "ne": .ne, "gt": .gt, "ge": .ge, "lt": .lt, "le": .le, "has": .has,
    ]

    private mutating func parseComparison() throws(QueryError) -> Expr {
        var lhs = try parseAdditive()
        while let word = token.identifier?.lowercased() {
            let at = token.start
            if let op = Self.comparisons[word] {
                try advance()
                lhs = try make(.binary(op, lhs, try parseAdditive()), at: at)
            } else if word == "in" {
                try advance()
                lhs = try make(.in(lhs, try parseList()), at: at)
            } else {
                break
            }
        }
        return lhs
    }

    private mutating func parseAdditive() throws(QueryError) -> Expr {
        var lhs = try parseMultiplicative()
        while let word = token.identifier?.lowercased(), word == "add" || word == "sub" {
            let at = token.start
            try advance()
            lhs = try make(.binary(word == "add" ? .add : .sub, lhs, try parseMultiplicative()), at: at)
        }
        return lhs
    }

    private static let multiplicative: [String: BinaryOperator] = [
        "mul": .mul, "div": .div, "divby": .divby, "mod": .mod,
    ]

    private mutating func parseMultiplicative() throws(QueryError) -> Expr {
        var lhs = try parseUnary()
        while let word = token.identifier?.lowercased(), let op = Self.multiplicative[word] {
            let at = token.start
            try advance()
            lhs = try make(.binary(op, lhs, try parseUnary()), at: at)
        }
        return lhs
    }

    private mutating func parseUnary() throws(QueryError) -> Expr {
        guard token.kind == .minus else { return try parsePrimary() }
        let at = token.start
        try enter()
        try advance()
        let operand = try parseUnary()
        leave()
        return try make(.negate(operand), at: at)
    }

    private mutating func parsePrimary() throws(QueryError) -> Expr {
        let at = token.start
        switch token.kind {
        case .literal(let literal):
            try advance()
            return try make(.literal(literal), at: at)
        case .symbol("("):
            try enter()
            try advance()
            let inner = try parseExpression()
            try expect(")")
            leave()
            return inner
        case .identifier(let name):
            if try lexer.peek().isSymbol("(") {
                let lower = name.lowercased()
                if lower == "any" || lower == "all" {
                    throw error("'\(name)' must follow a collection path", at: at)
                }
                return try parseCall(name)
            }
            return try parsePath()
        case .dollar(let name):
            guard name == "$it" else { throw error("'\(name)' is not supported", at: at) }
            return try parsePath()
        case .alias(let name):
            try advance()
            return try make(.alias(name), at: at)
        default:
            throw unexpected(token)
        }
    }

    private mutating func parseCall(_ name: String) throws(QueryError) -> Expr {
        let at = token.start
        try enter()
        try advance()
        try advance()
        var args: [Expr] = []
        if token.isSymbol(")") {
            try advance()
        } else {
            while true {
                args.append(try parseExpression())
                if token.isSymbol(",") {
                    try advance()
                    continue
                }
                try expect(")")
                break
            }
        }
        leave()
        return try make(.call(name, args), at: at)
    }

    /// `segment(/segment)*`, possibly ending in `$count` or a lambda.
    private mutating func parsePath() throws(QueryError) -> Expr {
        let at = token.start
        var segments = [PathSegment(token.identifier ?? "$it", at: token.start + 1)]
        try advance()
        while token.isSymbol("/") {
            try advance()
            let segmentAt = token.start
            switch token.kind {
            case .identifier(let name):
                if try lexer.peek().isSymbol("(") {
                    let lower = name.lowercased()
                    guard lower == "any" || lower == "all" else {
                        throw error("function calls in paths are not supported", at: segmentAt)
                    }
                    return try parseLambda(lower == "any" ? .any : .all, path: segments, at: at)
                }
                segments.append(PathSegment(name, at: segmentAt + 1))
                try advance()
            case .dollar("$count"):
                segments.append(PathSegment("$count", at: segmentAt + 1))
                try advance()
                if token.isSymbol("/") || token.isSymbol("(") { throw unexpected(token) }
                return try make(.path(segments), at: at)
            default:
                throw error("expected a property name after '/'", at: segmentAt)
            }
        }
        return try make(.path(segments), at: at)
    }

    /// `any(v:predicate)`, `any()`, `all(v:predicate)`; `token` is the `any`/`all` identifier.
    private mutating func parseLambda(_ kind: LambdaKind, path: [PathSegment], at: Int) throws(QueryError) -> Expr {
        try advance()
        try advance()
        if token.isSymbol(")") {
            guard kind == .any else { throw error("'all' requires a lambda expression", at: token.start) }
            try advance()
            return try make(.lambda(.any, path: path, variable: nil, predicate: nil), at: at)
        }
        guard case .identifier(let name) = token.kind, !name.contains(".") else {
            throw error("expected a lambda variable name after '\(kind)('", at: token.start)
        }
        let variable = PathSegment(name, at: token.start + 1)
        try advance()
        try expect(":")
        try enter()
        let predicate = try parseExpression()
        try expect(")")
        leave()
        return try make(.lambda(kind, path: path, variable: variable, predicate: predicate), at: at)
    }

    /// The list after `in`: `(lit, …)` or `[lit, …]` (JSON strings allowed in brackets).
    private mutating func parseList() throws(QueryError) -> [Expr] {
        let close: Unicode.Scalar
        if token.isSymbol("(") {
            close = ")"
        } else if token.isSymbol("[") {
            close = "]"
        } else {
            throw error("expected '(' after 'in'", at: token.start)
        }
        try advance()
        var items: [Expr] = []
        if token.isSymbol(close) {
            try advance()
            return items
        }
        while true {
            let at = token.start
            switch token.kind {
            case .literal(let l): items.append(try make(.literal(l), at: at))
            case .quoted(let s) where close == "]":
                items.append(try make(.literal(.primitive(.string(s), .string)), at: at))
            default: throw error("expected a literal in list", at: at)
            }
            try advance()
            if token.isSymbol(",") {
                try advance()
                continue
            }
            try expect(close)
            return items
        }
    }
}
