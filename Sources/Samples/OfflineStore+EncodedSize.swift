public import OfflineStore
public import Storage

extension OfflineStore {
    /// The bytes `entity` takes in `set`'s database: its encoded primary key and its row (LMDB's
    /// page overhead and the index entries not counted). What the benchmarks report as a row's size.
    ///
    /// - Throws: `EntityError` when `set` is unknown or the entity lacks its key.
    public func encodedSize(set: String, entity: Properties) throws -> Int {
        let h = try entities.set(set)
        return try KeyCodec.encode(h.keyValues(entity)).count + h.codec.encode(entity).count
    }
}
