import Query
import Storage

extension OfflineStore {
    /// The query engine over this store.
    package var queries: QueryEngine { QueryEngine(store: entities, cache: boundQueries) }

    /// Runs an OData request URL (`Set?$filter=…&$orderby=…`) and streams the result to `write`.
    public func query(_ url: String, format: QueryFormat = .json, pageSize: Int? = nil,
                      write: @escaping (String) throws -> Void) throws {
        try queries.execute(url, format: format, pageSize: pageSize, write: write)
    }

    /// Runs an OData request URL and streams the result as UTF-8 byte chunks (valid during the call).
    public func query(_ url: String, format: QueryFormat = .json, pageSize: Int? = nil,
                      writeBytes: @escaping (UnsafeRawBufferPointer) throws -> Void) throws {
        try queries.execute(url, format: format, pageSize: pageSize, writeBytes: writeBytes)
    }

    /// The entities an OData request URL returns, decoded.
    public func entities(_ url: String) throws -> [Properties] { try queries.entities(url) }

    /// The plan the engine chooses for `url`.
    public func explain(_ url: String) throws -> String { try queries.explain(url) }
}
