package import Storage

/// A query option without `$` (custom options, and `@alias` parameter values), kept as written.
package struct CustomOption: Sendable, Hashable {
    package var name: String
    /// nil when the option has no `=`.
    package var value: String?

    package init(name: String, value: String?) {
        self.name = name
        self.value = value
    }
}

/// A parsed OData request URL: resource path and query options, with source positions, not yet
/// checked against a schema (see `Binder`).
///
///     let url = try ODataURL.parse("BusinessPartners?$filter=Country eq 'US'&$top=20")
///     url.path.segments[0].name  // "BusinessPartners"
///     url.filter?.description    // "(eq Country 'US')"
///
/// Query options are percent-decoded (`+` is a space); system option names are
/// case-insensitive. The shared options (`$filter`, `$top`, …) live in `options` and can be read
/// directly on the URL (`url.top`).
@dynamicMemberLookup
package struct ODataURL: Sendable, Hashable, CustomStringConvertible {
    package var path: ResourcePath
    package var options: QueryOptions
    package var skipToken: String?
    package var format: String?
    package var customOptions: [CustomOption]
    /// Parameter alias values by name without `@` (`@p='HT-1001'` is `["p": 'HT-1001']`), each
    /// parsed as an expression whose columns count within its own value (errors name the option
    /// `@p`). OData URL Conventions 5.1.1.13: an alias stands for its value wherever it is used
    /// (`$filter`, `$orderby`, function arguments, key predicates); one used without a value is null.
    package var aliases: [String: Expr]

    package init(
        path: ResourcePath, options: QueryOptions = QueryOptions(), skipToken: String? = nil,
        format: String? = nil, customOptions: [CustomOption] = [], aliases: [String: Expr] = [:]
    ) {
        self.path = path
        self.options = options
        self.skipToken = skipToken
        self.format = format
        self.customOptions = customOptions
        self.aliases = aliases
    }

    package subscript<T>(dynamicMember keyPath: WritableKeyPath<QueryOptions, T>) -> T {
        get { options[keyPath: keyPath] }
        set { options[keyPath: keyPath] = newValue }
    }

    /// Parses a relative URL (`Set?$top=1`, `/Set(1)`), or an absolute one under `serviceRoot`
    /// (`http://host/service/`). `version` decides how `binary'…'` is read (V4 base64url, V2/V3 hex);
    /// all other V2 literal forms are accepted in any version.
    package static func parse(
        _ url: String, serviceRoot: String? = nil,
        version: ODataVersion = .v4
    ) throws(QueryError) -> ODataURL {
        var rest = Substring(url)
        // Byte searches: ASCII delimiters never occur inside a multi-byte UTF-8 character.
        if let hash = rest.utf8.firstIndex(of: UInt8(ascii: "#")) { rest = rest[..<hash] }
        rest = try relativePart(rest, serviceRoot: serviceRoot)
        let rawPath: Substring, rawQuery: Substring
        if let q = rest.utf8.firstIndex(of: UInt8(ascii: "?")) {
            rawPath = rest[..<q]
            rawQuery = rest[rest.utf8.index(after: q)...]
        } else {
            rawPath = rest
            rawQuery = ""
        }
        var result = ODataURL(
            path: try ResourcePathParser.parse(
                try percentDecode(rawPath, plusAsSpace: false, part: nil), version: version))
        var seen: Set<String> = []
        for pieceBytes in rawQuery.utf8.split(separator: UInt8(ascii: "&")) {
            let piece = Substring(pieceBytes)
            let eq = piece.utf8.firstIndex(of: UInt8(ascii: "="))
            let name = try percentDecode(piece[..<(eq ?? piece.endIndex)], plusAsSpace: true, part: "query option name")
            var value: String? = nil
            if let eq {
                value = try percentDecode(piece[piece.utf8.index(after: eq)...], plusAsSpace: true, part: name)
            }
            if name.hasPrefix("@") {
                try result.addAlias(name, value, version: version)
                continue
            }
            guard name.hasPrefix("$") else {
                result.customOptions.append(CustomOption(name: name, value: value))
                continue
            }
            let key = name.lowercased()
            guard let value else { throw QueryError("missing value", option: key, column: nil) }
            guard seen.insert(key).inserted else {
                throw QueryError("duplicate system query option", option: key, column: nil)
            }
            if (key == "$count" && seen.contains("$inlinecount")) || (key == "$inlinecount" && seen.contains("$count"))
            {
                throw QueryError("$count and $inlinecount cannot both be given", option: key, column: nil)
            }
            try result.apply(key, value, version: version)
        }
        return result
    }

    /// Longest alias name accepted (an OData identifier has at most 128 characters).
    static let maxAliasName = 128

    /// `@name=value`: the name an OData identifier, the value an expression with no alias in it,
    /// each alias given once.
    private mutating func addAlias(_ option: String, _ value: String?, version: ODataVersion) throws(QueryError) {
        let name = String(option.unicodeScalars.dropFirst())
        let scalars = Array(name.unicodeScalars)
        guard let first = scalars.first, isIdentifierStart(first) else {
            throw QueryError(
                "a parameter alias name must start with a letter or '_' after '@'", option: option, column: nil)
        }
        if let bad = scalars.firstIndex(where: { !isIdentifierChar($0) }) {
            throw QueryError(
                "unexpected '\(scalars[bad])' in parameter alias name (column \(bad + 2))", option: option, column: nil)
        }
        guard scalars.count <= Self.maxAliasName else {
            throw QueryError(
                "parameter alias name longer than \(Self.maxAliasName) characters", option: option, column: nil)
        }
        guard let value, !value.trimmingSpaces.isEmpty else {
            throw QueryError("missing value of parameter alias", option: option, column: nil)
        }
        guard aliases[name] == nil else { throw QueryError("parameter alias given twice", option: option, column: nil) }
        let text = Array(value.unicodeScalars)
        if let c = text.first(where: { $0 != " " && $0 != "\t" }), c == "[" || c == "{" {
            throw QueryError("JSON array and object alias values are not supported", option: option, column: 1)
        }
        let expr = try ExpressionParser.parse(text, option: option, version: version)
        if let inner = expr.firstAlias {
            throw QueryError(
                "an alias value cannot refer to another alias ('@\(inner.name)')", option: option,
                column: inner.position)
        }
        aliases[name] = expr
    }

    private mutating func apply(_ key: String, _ value: String, version: ODataVersion) throws(QueryError) {
        let text = Array(value.unicodeScalars)
        let parser = OptionsParser(text: text, option: key, version: version)
        switch key {
        case "$filter": options.filter = try parser.filter(0, text.count)
        case "$orderby": options.orderBy = try parser.orderBy(0, text.count)
        case "$select": options.select = try parser.select(0, text.count)
        case "$expand": options.expand = try parser.expand(0, text.count)
        case "$top": options.top = try parser.nonNegativeInteger(0, text.count)
        case "$skip": options.skip = try parser.nonNegativeInteger(0, text.count)
        case "$count": options.count = try parser.boolean(0, text.count)
        case "$inlinecount":
            switch value.trimmingSpaces.lowercased() {
            case "allpages": options.count = true
            case "none": options.count = false
            default: throw QueryError("expected allpages or none", option: key, column: 1)
            }
        case "$search": options.search = value
        case "$skiptoken": skipToken = value
        case "$format": format = value
        case "$apply", "$compute", "$deltatoken", "$id", "$index", "$levels", "$schemaversion":
            throw QueryError("system query option \(key) is not supported", option: nil, column: nil)
        default:
            throw QueryError("unknown system query option \(key)", option: nil, column: nil)
        }
    }

    /// The part after the service root, without a leading `/`.
    private static func relativePart(_ url: Substring, serviceRoot: String?) throws(QueryError) -> Substring {
        var rest = url
        let isAbsolute = containsScheme(rest.utf8.prefix { $0 != UInt8(ascii: "?") })
        if let serviceRoot, !serviceRoot.isEmpty {
            let root = serviceRoot.hasSuffix("/") ? serviceRoot : serviceRoot + "/"
            let rootPath = root.firstRange(of: "://").flatMap { r in
                root[r.upperBound...].firstIndex(of: "/").map { root[$0...] }
            }
            if let stripped = dropPrefix(root, from: rest) {
                rest = stripped
            } else if String(rest) + "/" == root || (rootPath.map { String(rest) + "/" == $0 } ?? false) {
                rest = ""
            } else if !isAbsolute, let rootPath, let stripped = dropPrefix(rootPath, from: rest) {
                rest = stripped
            } else if isAbsolute {
                throw QueryError("URL is not under the service root \(root)", option: nil, column: nil)
            }
        } else if isAbsolute {
            throw QueryError("an absolute URL needs a service root", option: nil, column: nil)
        }
        if rest.hasPrefix("/") { rest = rest.dropFirst() }
        return rest
    }

    /// Whether the bytes contain `://`.
    private static func containsScheme(_ bytes: Substring.UTF8View.SubSequence) -> Bool {
        var colon = 0  // 1 after ':', 2 after ':/'
        for b in bytes {
            switch (colon, b) {
            case (_, UInt8(ascii: ":")): colon = 1
            case (1, UInt8(ascii: "/")): colon = 2
            case (2, UInt8(ascii: "/")): return true
            default: colon = 0
            }
        }
        return false
    }

    /// `text` without `prefix` (ASCII case-insensitive), or nil when it does not start with it.
    private static func dropPrefix(_ prefix: some StringProtocol, from text: Substring) -> Substring? {
        var i = text.utf8.startIndex
        for p in prefix.utf8 {
            guard i < text.utf8.endIndex else { return nil }
            let t = text.utf8[i]
            guard t == p || (t | 0x20 == p | 0x20 && (p | 0x20) >= 97 && (p | 0x20) <= 122) else { return nil }
            i = text.utf8.index(after: i)
        }
        return text[i...]
    }

    /// The URL with decoded option values: `Set(1)/Nav?$filter=(eq a 1)&$top=2`.
    package var description: String {
        var parts: [String] = []
        if let filter = options.filter { parts.append("$filter=\(filter)") }
        if !options.orderBy.isEmpty {
            parts.append("$orderby=" + options.orderBy.map(\.description).joined(separator: ","))
        }
        if let select = options.select { parts.append("$select=" + select.map(\.description).joined(separator: ",")) }
        if !options.expand.isEmpty {
            parts.append("$expand=" + options.expand.map(\.description).joined(separator: ","))
        }
        if let top = options.top { parts.append("$top=\(top)") }
        if let skip = options.skip { parts.append("$skip=\(skip)") }
        if let count = options.count { parts.append("$count=\(count)") }
        if let search = options.search { parts.append("$search=\(search)") }
        if let skipToken { parts.append("$skiptoken=\(skipToken)") }
        if let format { parts.append("$format=\(format)") }
        for c in customOptions { parts.append(c.name + (c.value.map { "=" + $0 } ?? "")) }
        for name in aliases.keys.sorted() { parts.append("@\(name)=\(aliases[name]!)") }
        return path.description + (parts.isEmpty ? "" : "?" + parts.joined(separator: "&"))
    }
}
