extension OfflineStore {
    /// Parses `Set(key)` into the set's name and typed key values. Temporary until the Query
    /// module's URL parser serves `get`.
    public func parseEntityPath(_ text: String) throws -> (set: String, key: [Value]) {
        throw EntityError.badInput("not yet")
    }
}
