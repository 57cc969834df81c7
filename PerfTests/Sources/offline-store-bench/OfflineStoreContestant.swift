import OfflineStore

/// OfflineStore through its public API: entities are `Properties` (`[String: Value]`), validated
/// against the schema on write, decoded from the row format on read.
final class OfflineStoreContestant: Contestant, @unchecked Sendable {
    // @unchecked: OfflineStore is Sendable; `store` is set once.
    let name = "OfflineStore"
    let store: OfflineStore
    let set = BenchSchema.set
    let productIndex = "ProductID"

    init(store: OfflineStore) {
        self.store = store
    }

    func load(_ items: ArraySlice<Item>) throws {
        try store.load(set: set, entities: items.map(\.properties))
    }

    func count() throws -> Int { try store.count(set: set) }

    func get(_ key: ItemKey) throws -> Bool {
        guard let e = try store.get(set: set, key: [.string(key.salesOrderID), .int(Int64(key.itemPosition))]) else {
            return false
        }
        blackHole(e)
        return true
    }

    func item(_ key: ItemKey) throws -> Item? {
        try store.get(set: set, key: [.string(key.salesOrderID), .int(Int64(key.itemPosition))]).map(Item.init)
    }

    func find(productID: String) throws -> Int {
        let found = try store.find(set: set, index: productIndex, where: .equals([.string(productID)]))
        blackHole(found)
        return found.count
    }

    func scan() throws -> Int {
        var n = 0
        try store.scan(set: set) { e in
            blackHole(e)
            n += 1
            return true
        }
        return n
    }

    func upsert(_ item: Item) throws {
        try store.upsert(set: set, entity: item.properties)
    }

    // MARK: Queries: OData URLs through the query engine

    func query(_ query: BenchQuery) throws -> Int {
        let found = try store.entities(query.url)
        blackHole(found)
        return found.count
    }

    func queryItems(_ query: BenchQuery) throws -> [Item] {
        try store.entities(query.url).map(Item.init)
    }

    /// The same query as OData JSON, as a server would send it: the bytes written.
    func queryJSON(_ query: BenchQuery) throws -> Int {
        var bytes = 0
        try store.query(query.url, format: .json) { chunk in bytes += chunk.utf8.count }
        return bytes
    }

    /// The byte-chunk form of `query` (what `serve` uses), as the other two hand their buffers over.
    func streamJSON(_ sink: @escaping (UnsafeRawBufferPointer) -> Void) throws {
        try store.query(set, format: .json, writeBytes: { sink($0) })
    }

    func plan(_ query: BenchQuery) throws -> String { try store.explain(query.url) }
}
