public import Storage

/// A request URL parsed, bound and checked once, run many times with new parameter alias values
/// and no parsing:
///
/// ```swift
/// let byProduct = try engine.prepare("SalesOrderItems?$filter=ProductID eq @p&$orderby=ItemPosition")
/// let items = try byProduct.entities(aliases: ["p": .string("HT-1001")])
/// let item = try engine.prepare("SalesOrderItems(SalesOrderID=@order,ItemPosition=@pos)")
///     .entities(aliases: ["order": .string("0500000001"), "pos": .int(10)])
/// ```
///
/// Each alias without a value in the URL is a parameter with the type of its use (`parameters`):
/// what it is compared with, the function parameter it is passed as, Edm.Boolean as a predicate,
/// the key property in a key predicate. A value is converted to that type as a URL literal would
/// be (an integer to Decimal, a string to an enum member), and refused with a `QueryError` naming
/// the alias when it does not fit; a parameter left out is null (as in a URL), except in a key.
/// A value equal to null makes `X eq @p` the test `X eq null` is. `Sendable`: prepare once, run
/// from any thread; each run is its own read transaction, as `execute(_:)` is.
public struct PreparedQuery: Sendable {
    package let engine: QueryEngine
    package let statement: PreparedStatement
    /// The last run's plan choice and result columns (`PlanCache`), shared by copies of this value.
    package let plans = PlanCache()

    /// The parameters (alias names without `@`) and the type each takes.
    public var parameters: [String: TypeRef] { statement.parameters }
    /// The URL as prepared.
    public var url: String { statement.url }

    /// The matching entities, decoded (as `QueryEngine.entities(_:)`).
    public func entities(aliases: [String: Value] = [:]) throws -> [Properties] {
        if let read = statement.pointRead {
            return try engine.entities(read, key: try statement.pointReadKey(read, aliases), reuse: plans)
        }
        var found: [Properties] = []
        try engine.visit(try statement.bind(aliases), reuse: plans) { columns, e in
            found.append(try columns.properties(e)); return true
        }
        return found
    }

    /// Hands each matching entity to `body` in result order, inside one read transaction, until
    /// `body` returns false (as `QueryEngine.forEach(_:_:)`): no array of the whole result.
    public func forEach(aliases: [String: Value] = [:], _ body: (Properties) throws -> Bool) throws {
        try forEachRow(aliases: aliases) { try body(try $0.properties()) }
    }

    /// Hands each matching entity to `body` as a `ResultRow`, whose columns are read from the
    /// stored row (or covering index entry) only when asked for: the fastest way to read a
    /// result, as a SQLite program steps a prepared statement and reads its columns by index.
    /// The row is valid only during the call that hands it over.
    ///
    /// ```swift
    /// let q = try store.prepare("SalesOrderItems?$filter=ProductID eq @p&$select=Quantity")
    /// let quantity = try q.columns.firstIndex(of: "Quantity")!
    /// try q.forEachRow(aliases: ["p": .string("HT-1001")]) { row in
    ///     if case .int(let q) = try row.value(quantity) { total += q }
    ///     return true
    /// }
    /// ```
    public func forEachRow(aliases: [String: Value] = [:], _ body: (ResultRow) throws -> Bool) throws {
        if let read = statement.pointRead {
            return try engine.visit(read, key: try statement.pointReadKey(read, aliases), reuse: plans) { columns, e in
                try body(ResultRow(entity: e, columns: columns))
            }
        }
        try engine.visit(try statement.bind(aliases), reuse: plans) { columns, e in
            try body(ResultRow(entity: e, columns: columns))
        }
    }

    /// The names of a `ResultRow`'s columns, in order: with `$select`, the selected properties and
    /// the key properties; without, every structural property — in declaration order.
    public var columns: [String] {
        get throws {
            guard let name = statement.template.path.segments.last?.entitySet else { return [] }
            return ResultColumns(statement.template.options.select, try engine.store.set(name)).names
        }
    }

    /// Runs the query with `aliases` and hands the result to `writeBytes` (as `QueryEngine.execute`);
    /// a next link carries the alias values as `@name=literal` options.
    @discardableResult
    public func execute(
        aliases: [String: Value] = [:], format: QueryFormat = .json, pageSize: Int? = nil,
        options: ResultOptions = ResultOptions(),
        writeBytes: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws -> ResultSummary {
        let query = try statement.bind(aliases)
        return try engine.execute(
            query, url: { statement.url(with: aliases) }, format: format, pageSize: pageSize, options: options,
            writeBytes: writeBytes)
    }

    /// The plan for `aliases` (the access path can depend on them, as on literals).
    public func explain(aliases: [String: Value] = [:]) throws -> String {
        try engine.explain(try statement.bind(aliases))
    }
}

extension QueryEngine {
    /// A prepared point read (`PreparedStatement.PointRead`): the row under the key, decoded, and
    /// nothing else — what `entities(_:)` gives for the bound query, without resolving its path.
    func entities(_ read: PreparedStatement.PointRead, key: [Value], reuse: PlanCache? = nil) throws -> [Properties] {
        var found: [Properties] = []
        try visit(read, key: key, reuse: reuse) { columns, e in
            found.append(try columns.properties(e)); return false
        }
        return found
    }

    /// The row under the key, if any, handed to `body` with its columns.
    func visit(
        _ read: PreparedStatement.PointRead, key: [Value], reuse: PlanCache? = nil,
        _ body: (ResultColumns, EntityRef) throws -> Bool
    ) throws {
        let set = try store.set(read.entitySet)
        let columns = reuse?.columns(read.select, set) ?? ResultColumns(read.select, set)
        let bytes = try set.encodeKey(key)
        try store.read { t in
            guard let row = try set.row(t, key: bytes) else { return }
            try bytes.withUnsafeBytes { pk in _ = try body(columns, try EntityRef(set: set, row: row, primaryKey: pk)) }
        }
    }

    /// Parses, binds and checks `url` once: see `PreparedQuery`. Throws a `QueryError` as `bind`
    /// does, and where an alias's use does not tell its type (`@a eq @b`, `round(@p)`).
    package func prepare(_ url: String) throws -> PreparedQuery {
        let statement = try Binder(schema: store.schema).prepare(url)
        try check(statement.template)
        return PreparedQuery(engine: self, statement: statement)
    }
}

extension PreparedStatement {
    /// The prepared URL with `values` as alias options (`…&@p='HT-1001'`), percent-encoded.
    func url(with values: [String: Value]) -> String {
        var out = url
        var separator = url.contains("?") ? "&" : "?"
        for name in values.keys.sorted() {
            let literal = Literal.format(values[name]!, parameters[name]?.primitive)
            out += separator + "@" + name + "=" + Self.percentEncoded(literal)
            separator = "&"
        }
        return out
    }

    /// `text` with every byte outside RFC 3986's unreserved set and `'(),:` percent-encoded.
    static func percentEncoded(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        for b in text.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "'"),
                UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: ","), UInt8(ascii: ":"):
                bytes.append(b)
            default:
                bytes += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 15)]]
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
