import Storage

/// Parses the values of `$orderby`, `$select`, `$expand`, `$top`/`$skip` and `$count`, and the
/// `;`-separated options nested in `$expand` items. Ranges are scalar indices into `text`, the
/// decoded text of the top-level option named `option`.
struct OptionsParser {
    static let maxExpandDepth = 32
    static let maxPathLength = 32

    let text: [Unicode.Scalar]
    let option: String
    let version: ODataVersion

    func lexer(_ start: Int, _ end: Int) -> Lexer {
        Lexer(text, from: start, to: end, option: option, version: version)
    }

    func error(_ message: QueryError.Message, at index: Int) -> QueryError {
        QueryError(message, option: option, column: index + 1)
    }

    func filter(_ start: Int, _ end: Int) throws(QueryError) -> Expr {
        try ExpressionParser.parse(text, from: start, to: end, option: option, version: version)
    }

    func orderBy(_ start: Int, _ end: Int) throws(QueryError) -> [OrderByItem] {
        var parser = try ExpressionParser(lexer(start, end))
        var items: [OrderByItem] = []
        while true {
            let expr = try parser.parseExpression()
            var descending = false
            if parser.token.isKeyword("asc") || parser.token.isKeyword("desc") {
                descending = parser.token.isKeyword("desc")
                try parser.advance()
            }
            items.append(OrderByItem(expr, descending: descending))
            if parser.token.isSymbol(",") {
                try parser.advance()
                continue
            }
            try parser.expectEnd()
            return items
        }
    }

    func select(_ start: Int, _ end: Int) throws(QueryError) -> [SelectItem] {
        var lex = lexer(start, end)
        var items: [SelectItem] = []
        var token = try lex.next()
        while true {
            var path: [PathSegment] = []
            while true {
                if token.isSymbol("*") {
                    path.append(PathSegment("*", at: token.start + 1))
                } else if let name = token.identifier {
                    path.append(PathSegment(name, at: token.start + 1))
                } else {
                    throw error(
                        token.kind == .end
                            ? "expected a property name" : "unexpected '\(lex.excerpt(token.start, token.end))'",
                        at: token.start)
                }
                token = try lex.next()
                guard token.isSymbol("/"), path.last?.name != "*" else { break }
                guard path.count < Self.maxPathLength else { throw error("path too long", at: token.start) }
                token = try lex.next()
            }
            items.append(SelectItem(path))
            if token.isSymbol(",") {
                token = try lex.next()
                continue
            }
            guard token.kind == .end else {
                throw error("unexpected '\(lex.excerpt(token.start, token.end))'", at: token.start)
            }
            return items
        }
    }

    func expand(_ start: Int, _ end: Int, depth: Int = 0) throws(QueryError) -> [ExpandItem] {
        guard depth < Self.maxExpandDepth else { throw error("$expand nested too deeply", at: start) }
        var lex = lexer(start, end)
        var items: [ExpandItem] = []
        var token = try lex.next()
        while true {
            var path: [PathSegment] = []
            while true {
                if token.isSymbol("*") {
                    path.append(PathSegment("*", at: token.start + 1))
                } else if let name = token.identifier {
                    path.append(PathSegment(name, at: token.start + 1))
                } else if case .dollar(let name) = token.kind {
                    throw error("'\(name)' is not supported", at: token.start)
                } else {
                    throw error(
                        token.kind == .end
                            ? "expected a navigation property" : "unexpected '\(lex.excerpt(token.start, token.end))'",
                        at: token.start)
                }
                token = try lex.next()
                guard token.isSymbol("/") else { break }
                guard path.count < Self.maxPathLength else { throw error("path too long", at: token.start) }
                token = try lex.next()
            }
            var item = ExpandItem(path)
            if token.isSymbol("(") {
                item.options = try nestedOptions(&lex, depth: depth)
                token = try lex.next()
            }
            items.append(item)
            if token.isSymbol(",") {
                token = try lex.next()
                continue
            }
            guard token.kind == .end else {
                throw error("unexpected '\(lex.excerpt(token.start, token.end))'", at: token.start)
            }
            return items
        }
    }

    /// `$filter=…;$top=…` up to and including the closing `)`; `lex` is just after the `(`.
    private func nestedOptions(_ lex: inout Lexer, depth: Int) throws(QueryError) -> QueryOptions {
        var options = QueryOptions()
        var seen: Set<String> = []
        var token = try lex.next()
        if token.isSymbol(")") { return options }
        while true {
            let nameAt = token.start
            var name: String
            switch token.kind {
            case .dollar(let n): name = n.lowercased()
            case .identifier(let n): name = "$" + n.lowercased()
            default: throw error("expected a query option", at: token.start)
            }
            let equals = try lex.next()
            guard equals.isSymbol("=") else { throw error("expected '='", at: equals.start) }
            guard seen.insert(name).inserted else { throw error("duplicate option \(name)", at: nameAt) }
            let valueStart = lex.pos
            let valueEnd = nestedValueEnd(from: valueStart, to: lex.end)
            try apply(name, valueStart, valueEnd, to: &options, at: nameAt, depth: depth)
            lex.pos = valueEnd
            token = try lex.next()
            if token.isSymbol(";") {
                token = try lex.next()
                continue
            }
            guard token.isSymbol(")") else { throw error("expected ')'", at: token.start) }
            return options
        }
    }

    private func apply(
        _ name: String, _ start: Int, _ end: Int, to options: inout QueryOptions, at nameAt: Int,
        depth: Int
    ) throws(QueryError) {
        switch name {
        case "$filter": options.filter = try filter(start, end)
        case "$orderby": options.orderBy = try orderBy(start, end)
        case "$select": options.select = try select(start, end)
        case "$expand": options.expand = try expand(start, end, depth: depth + 1)
        case "$top": options.top = try nonNegativeInteger(start, end)
        case "$skip": options.skip = try nonNegativeInteger(start, end)
        case "$count": options.count = try boolean(start, end)
        case "$search": options.search = String(String.UnicodeScalarView(text[start..<end]))
        default: throw error("unsupported nested option '\(name)'", at: nameAt)
        }
    }

    /// The end of a nested option value: the next `;` or unbalanced `)` outside quotes.
    private func nestedValueEnd(from start: Int, to end: Int) -> Int {
        var i = start, depth = 0
        while i < end {
            let c = text[i]
            if c == "'" {
                i += 1
                while i < end {
                    if text[i] == "'" {
                        guard i + 1 < end, text[i + 1] == "'" else { break }
                        i += 1
                    }
                    i += 1
                }
            } else if c == "\"" {
                i += 1
                while i < end, text[i] != "\"" {
                    if text[i] == "\\" { i += 1 }
                    i += 1
                }
            } else if c == "(" {
                depth += 1
            } else if c == ")" {
                if depth == 0 { return i }
                depth -= 1
            } else if c == ";", depth == 0 {
                return i
            }
            i += 1
        }
        return end
    }

    func nonNegativeInteger(_ start: Int, _ end: Int) throws(QueryError) -> Int {
        let s = String(String.UnicodeScalarView(text[start..<end])).trimmingSpaces
        guard !s.isEmpty, s.unicodeScalars.allSatisfy({ isDigit($0) }), let n = Int(s) else {
            throw error("expected a non-negative integer", at: start)
        }
        return n
    }

    func boolean(_ start: Int, _ end: Int) throws(QueryError) -> Bool {
        switch String(String.UnicodeScalarView(text[start..<end])).trimmingSpaces.lowercased() {
        case "true": return true
        case "false": return false
        default: throw error("expected true or false", at: start)
        }
    }
}

extension String {
    /// Without leading and trailing spaces and tabs.
    var trimmingSpaces: String {
        let scalars = Array(unicodeScalars)
        var a = 0, b = scalars.count
        while a < b, scalars[a] == " " || scalars[a] == "\t" { a += 1 }
        while b > a, scalars[b - 1] == " " || scalars[b - 1] == "\t" { b -= 1 }
        return String(String.UnicodeScalarView(scalars[a..<b]))
    }
}
