import Query
import Storage

extension OfflineStore {
    /// Parses `Set(key)` (single or composite key, V4 or V2 literals) into the set's name and typed
    /// key values. Throws `QueryError` with the position for a bad path.
    public func parseEntityPath(_ text: String) throws -> (set: String, key: [Value]) {
        let query = try QueryEngine(store: entities).bind(text)
        guard query.path.segments.count == 1, let segment = query.path.segments.first, let key = segment.key else {
            throw QueryError("expected Set(key), e.g. Products('HT-1000')", option: nil, column: 1)
        }
        return (segment.entitySet, key.map(\.value))
    }
}
