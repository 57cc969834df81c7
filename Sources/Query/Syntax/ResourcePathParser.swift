import Storage

/// Parses a decoded resource path: `Set`, `Set(key)`, `Set(K1=…,K2=…)/Nav(key)/Nav`, `…/$count`.
struct ResourcePathParser {
    var lexer: Lexer
    var token: Token

    static func parse(_ path: String, version: ODataVersion) throws(QueryError) -> ResourcePath {
        var parser = try ResourcePathParser(lexer: Lexer(Array(path.unicodeScalars), option: nil, version: version))
        return try parser.parsePath()
    }

    private init(lexer: Lexer) throws(QueryError) {
        self.lexer = lexer
        token = try self.lexer.next()
    }

    private mutating func advance() throws(QueryError) { token = try lexer.next() }

    private func unexpected() -> QueryError {
        if token.kind == .end { return lexer.error("unexpected end of path", at: token.start) }
        return lexer.error("unexpected '\(lexer.excerpt(token.start, token.end))'", at: token.start)
    }

    private mutating func parsePath() throws(QueryError) -> ResourcePath {
        guard token.kind != .end else { throw lexer.error("missing entity set name", at: 0) }
        var segments: [ResourceSegment] = []
        while true {
            let at = token.start
            switch token.kind {
            case .identifier(let name):
                try advance()
                var segment = ResourceSegment(name, at: at + 1)
                if token.isSymbol("(") { segment.key = try parseKey() }
                segments.append(segment)
            case .dollar("$count") where !segments.isEmpty:
                try advance()
                if token.isSymbol("/") { try advance() }
                guard token.kind == .end else { throw unexpected() }
                return ResourcePath(segments, isCount: true)
            case .dollar(let name):
                throw lexer.error("path segment '\(name)' is not supported", at: at)
            case .end where !segments.isEmpty:
                return ResourcePath(segments)
            default:
                throw unexpected()
            }
            if token.kind == .end { return ResourcePath(segments) }
            guard token.isSymbol("/") else { throw unexpected() }
            try advance()
        }
    }

    /// `(literal)` or `(Name=literal,…)`; `token` is the `(`.
    private mutating func parseKey() throws(QueryError) -> [KeyValue] {
        try advance()
        var values: [KeyValue] = []
        if case .literal(let literal) = token.kind {
            values.append(KeyValue(name: nil, value: literal, at: token.start + 1))
            try advance()
        } else if case .alias(let alias) = token.kind {
            values.append(KeyValue(name: nil, value: .null, alias: alias, at: token.start + 1))
            try advance()
        } else {
            while true {
                guard let name = token.identifier else {
                    throw lexer.error(
                        token.isSymbol(")") ? "empty key predicate" : "expected a key value", at: token.start)
                }
                try advance()
                guard token.isSymbol("=") else { throw lexer.error("expected '='", at: token.start) }
                try advance()
                switch token.kind {
                case .literal(let literal): values.append(KeyValue(name: name, value: literal, at: token.start + 1))
                case .alias(let alias):
                    values.append(KeyValue(name: name, value: .null, alias: alias, at: token.start + 1))
                default: throw lexer.error("expected a key value", at: token.start)
                }
                try advance()
                guard token.isSymbol(",") else { break }
                try advance()
            }
        }
        guard token.isSymbol(")") else { throw lexer.error("expected ')'", at: token.start) }
        try advance()
        return values
    }
}
