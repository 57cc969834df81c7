import Query
public import Storage

extension OfflineStore {
    /// Parses `Set(key)` (single or composite key, V4 or V2 literals) into the set's name and typed
    /// key values. Throws `QueryError` with the position for a bad path.
    public func parseEntityPath(_ text: String) throws -> (set: String, key: [Value]) {
        try QueryEngine(store: entities).entityPath(text)
    }
}
