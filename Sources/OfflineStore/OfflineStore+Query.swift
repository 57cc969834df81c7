public import Query
public import Storage

extension OfflineStore {
    /// The query engine over this store.
    package var queries: QueryEngine { QueryEngine(store: entities, cache: boundQueries) }

    /// Runs an OData request URL (`Set?$filter=…&$orderby=…`) and streams the result to `write`.
    /// `options` adds what a server needs: absolute links, `@odata.etag`, a delta link
    /// (`ResultOptions`). Returns the ETag of a single-entity response.
    @discardableResult
    public func query(
        _ url: String, format: QueryFormat = .json, pageSize: Int? = nil, options: ResultOptions = ResultOptions(),
        write: @escaping (String) throws -> Void
    ) throws -> ResultSummary {
        try queries.execute(url, format: format, pageSize: pageSize, options: options, write: write)
    }

    /// Runs an OData request URL and streams the result as UTF-8 byte chunks (valid during the call).
    @discardableResult
    public func query(
        _ url: String, format: QueryFormat = .json, pageSize: Int? = nil, options: ResultOptions = ResultOptions(),
        writeBytes: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws -> ResultSummary {
        try queries.execute(url, format: format, pageSize: pageSize, options: options, writeBytes: writeBytes)
    }

    /// Writes the OData V4 delta response of collection `url` for the entities with keys
    /// `changed`; see `QueryEngine.delta(_:changed:options:writeBytes:)`.
    public func delta(
        _ url: String, changed: [[Value]], options: ResultOptions = ResultOptions(),
        writeBytes: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        try queries.delta(url, changed: changed, options: options, writeBytes: writeBytes)
    }

    /// The ETag of an entity (`W/"…"`, a hash of its stored row), or nil when there is none.
    public func etag(set: String, key: [Value]) throws -> String? { try queries.etag(set: set, key: key) }

    /// The entities an OData request URL returns, decoded.
    public func entities(_ url: String) throws -> [Properties] { try queries.entities(url) }

    /// Hands each entity `url` returns to `body`, decoded as `entities(_:)` decodes them, in result
    /// order and inside one read transaction, until `body` returns false. Memory stays that of one
    /// entity (and of a sort, when `$orderby` needs one), whatever the size of the result.
    public func forEach(_ url: String, _ body: (Properties) throws -> Bool) throws { try queries.forEach(url, body) }

    /// The plan the engine chooses for `url`.
    public func explain(_ url: String) throws -> String { try queries.explain(url) }
}

extension OfflineStore {
    /// Parses and binds an OData request URL once, for running many times with new parameter
    /// alias values and no parsing (see `PreparedQuery`):
    ///
    /// ```swift
    /// let item = try store.prepare("SalesOrderItems(SalesOrderID=@order,ItemPosition=@pos)")
    /// let rows = try item.entities(aliases: ["order": .string("0500000001"), "pos": .int(10)])
    /// ```
    public func prepare(_ url: String) throws -> PreparedQuery { try queries.prepare(url) }
}
