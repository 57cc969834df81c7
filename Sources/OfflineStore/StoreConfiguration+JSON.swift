import Storage

extension StoreConfiguration {
    /// Reads a configuration file: the JSON form of the DocC article "Configuration" (`serviceRoot`, `definingRequests`,
    /// `indexes`, `requestQueueOptimization`, `durability`, `limits`,
    /// `repeatabilityWindowSeconds`).
    ///
    /// ```swift
    /// let configuration = try StoreConfiguration(json: Array(#"{"indexes":{"Products":["Category"]}}"#.utf8))
    /// ```
    /// - Throws: `JSONError` for bad JSON; `EntityError` for an unknown or mistyped member, so a
    ///   typo does not pass unnoticed, and for a `serviceRoot` or `tokenURL` that is not a URL to
    ///   send requests to (a port past 65535, a `user:password@`).
    public init(json bytes: [UInt8]) throws {
        try self.init(json: JSON.parse(bytes))
        try sync.checkURLs()
    }

    /// The configuration as the JSON text `init(json:)` reads (for an `--config` file).
    public var jsonText: String { json.text }
}
