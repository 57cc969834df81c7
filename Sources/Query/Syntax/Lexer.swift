import Storage

/// A token of the URL expression syntax, with its half-open range of scalar indices.
struct Token: Sendable {
    enum Kind: Sendable, Equatable {
        /// An OData identifier, possibly qualified with dots (`Name`, `geo.distance`, `Edm.String`).
        case identifier(String)
        /// `$it`, `$count`, `$filter`, … (text includes the `$`).
        case dollar(String)
        /// `@alias`.
        case alias(String)
        case literal(Literal)
        /// A JSON `"…"` string, allowed in `[…]` lists only.
        case quoted(String)
        /// One of `( ) , / : = ; [ ] * { }`.
        case symbol(Unicode.Scalar)
        /// A `-` that does not start a numeric literal: unary negation.
        case minus
        case end
    }

    var kind: Kind
    var start: Int
    var end: Int

    func isSymbol(_ c: Unicode.Scalar) -> Bool { kind == .symbol(c) }

    /// The identifier text when the token is one (keywords are identifiers until a parser says so).
    var identifier: String? {
        if case .identifier(let s) = kind { return s }
        return nil
    }

    func isKeyword(_ word: String) -> Bool {
        guard let s = identifier else { return false }
        return s.lowercased() == word
    }
}

/// Splits an option's decoded text into tokens; `pos` and `end` are scalar indices into `text`,
/// so a nested option can be lexed in place and columns stay relative to the whole option.
struct Lexer: Sendable {
    let text: [Unicode.Scalar]
    let end: Int
    var pos: Int
    let option: String?
    let version: ODataVersion

    init(
        _ text: [Unicode.Scalar], from start: Int = 0, to end: Int? = nil, option: String?,
        version: ODataVersion
    ) {
        self.text = text
        self.end = min(end ?? text.count, text.count)
        self.pos = max(0, min(start, self.end))
        self.option = option
        self.version = version
    }

    func error(_ message: QueryError.Message, at index: Int) -> QueryError {
        QueryError(message, option: option, column: index + 1)
    }

    func scalar(_ i: Int) -> Unicode.Scalar? { i >= 0 && i < end ? text[i] : nil }

    /// Source text of `start..<stop`.
    func slice(_ start: Int, _ stop: Int) -> String {
        let lower = max(0, min(start, text.count)), upper = max(lower, min(stop, text.count))
        return makeString(text[lower..<upper])
    }

    /// Source text of `start..<end`, shortened for messages.
    func excerpt(_ start: Int, _ stop: Int) -> String {
        let upper = min(stop, start + 24, text.count)
        guard start < upper else { return "" }
        var s = String(String.UnicodeScalarView(text[start..<upper]))
        if stop > upper { s += "…" }
        return s
    }

    mutating func skipSpace() {
        while pos < end, text[pos] == " " || text[pos] == "\t" { pos += 1 }
    }

    mutating func next() throws(QueryError) -> Token {
        skipSpace()
        let start = pos
        guard pos < end else { return Token(kind: .end, start: end, end: end) }
        let c = text[pos]
        if let literal = try scanLiteralIfAny() {
            return Token(kind: .literal(literal), start: start, end: pos)
        }
        switch c {
        case "(", ")", ",", "/", ":", "=", ";", "[", "]", "*", "{", "}":
            pos += 1
            return Token(kind: .symbol(c), start: start, end: pos)
        case "-":
            pos += 1
            return Token(kind: .minus, start: start, end: pos)
        case "\"":
            return Token(kind: .quoted(try scanJSONString()), start: start, end: pos)
        case "$", "@":
            pos += 1
            let name = scanIdentifierChars()
            guard !name.isEmpty else { throw error("unexpected '\(c)'", at: start) }
            return Token(kind: c == "$" ? .dollar("$" + name) : .alias(name), start: start, end: pos)
        default:
            if isIdentifierStart(c) {
                let name = scanQualifiedIdentifier()
                if pos < end, text[pos] == "'" {
                    return Token(kind: .literal(try prefixedLiteral(name, start: start)), start: start, end: pos)
                }
                if let keyword = keywordLiteral(name) {
                    return Token(kind: .literal(keyword), start: start, end: pos)
                }
                return Token(kind: .identifier(name), start: start, end: pos)
            }
            throw error("unexpected '\(c)'", at: start)
        }
    }

    /// Peeks at the next token without consuming it.
    func peek() throws(QueryError) -> Token {
        var copy = self
        return try copy.next()
    }

    mutating func scanIdentifierChars() -> String {
        let start = pos
        while pos < end, isIdentifierChar(text[pos]) { pos += 1 }
        return makeString(text[start..<pos])
    }

    /// `Ident(.Ident)*`.
    mutating func scanQualifiedIdentifier() -> String {
        var name = scanIdentifierChars()
        while pos + 1 < end, text[pos] == ".", isIdentifierStart(text[pos + 1]) {
            pos += 1
            name += "." + scanIdentifierChars()
        }
        return name
    }

    private func keywordLiteral(_ name: String) -> Literal? {
        switch name {
        case "INF": return .primitive(.double(.infinity), .double)
        case "NaN": return .primitive(.double(.nan), .double)
        default: break
        }
        switch name.lowercased() {
        case "true": return .primitive(.bool(true), .boolean)
        case "false": return .primitive(.bool(false), .boolean)
        case "null": return .null
        default: return nil
        }
    }

    /// `"…"` with JSON escapes.
    private mutating func scanJSONString() throws(QueryError) -> String {
        let start = pos
        pos += 1
        var out = String.UnicodeScalarView()
        while pos < end {
            let c = text[pos]
            pos += 1
            if c == "\"" { return String(out) }
            guard c == "\\" else { out.append(c); continue }
            guard pos < end else { break }
            let e = text[pos]
            pos += 1
            switch e {
            case "\"", "\\", "/": out.append(e)
            case "b": out.append("\u{8}")
            case "f": out.append("\u{C}")
            case "n": out.append("\n")
            case "r": out.append("\r")
            case "t": out.append("\t")
            case "u":
                guard pos + 4 <= end, let v = UInt32(String(String.UnicodeScalarView(text[pos..<pos + 4])), radix: 16),
                    let u = Unicode.Scalar(v)
                else { throw error("invalid escape in string", at: pos - 2) }
                out.append(u)
                pos += 4
            default: throw error("invalid escape in string", at: pos - 2)
            }
        }
        throw error("unterminated string literal", at: start)
    }
}

/// A String from scalars; ASCII (the usual case) goes through bytes, which is much faster than
/// appending scalars one by one.
func makeString(_ scalars: ArraySlice<Unicode.Scalar>) -> String {
    if scalars.allSatisfy(\.isASCII) {
        return String(unsafeUninitializedCapacity: scalars.count) { buffer in
            for (i, c) in scalars.enumerated() { buffer[i] = UInt8(truncatingIfNeeded: c.value) }
            return scalars.count
        }
    }
    return String(String.UnicodeScalarView(scalars))
}

func isIdentifierStart(_ c: Unicode.Scalar) -> Bool {
    c == "_" || (c.isASCII ? (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") : c.properties.isAlphabetic)
}

func isIdentifierChar(_ c: Unicode.Scalar) -> Bool {
    isIdentifierStart(c) || (c >= "0" && c <= "9")
}

func isDigit(_ c: Unicode.Scalar?) -> Bool {
    guard let c else { return false }
    return c >= "0" && c <= "9"
}
