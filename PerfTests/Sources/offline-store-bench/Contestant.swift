/// The key of a sales-order item.
struct ItemKey: Sendable {
    var salesOrderID: String
    var itemPosition: Int32
}

/// One way to store the items. Every method is one operation as a program would do it: its own
/// (read or write) transaction, results decoded into the contestant's entity type.
protocol Contestant: AnyObject, Sendable {
    var name: String { get }
    /// Loads items in one durable transaction, maintaining the three secondary indexes.
    func load(_ items: ArraySlice<Item>) throws
    func count() throws -> Int
    /// Reads and decodes one item; false when absent.
    func get(_ key: ItemKey) throws -> Bool
    /// Decoded items whose `ProductID` is `productID` (via its index); returns how many.
    func find(productID: String) throws -> Int
    /// Decodes every item in key order; returns how many.
    func scan() throws -> Int
    /// Inserts or replaces one item and its index entries in one durable transaction.
    func upsert(_ item: Item) throws
    /// The item as an `Item`, to check that every contestant holds the same data (not timed).
    func item(_ key: ItemKey) throws -> Item?

    // MARK: Queries (OfflineStore: through an OData URL)

    /// Runs `query` in one read transaction, its results decoded into the contestant's entity
    /// type; returns how many.
    func query(_ query: BenchQuery) throws -> Int
    /// The same results as `Item`s, in the contestant's order, to compare contestants (not timed).
    func queryItems(_ query: BenchQuery) throws -> [Item]
    /// Every row, in key order, as one OData V4 JSON response (`{"@odata.context":…,"value":[…]}`)
    /// written to `sink` in chunks of about 64 KiB, from one read transaction.
    func streamJSON(_ sink: @escaping (UnsafeRawBufferPointer) -> Void) throws
    /// How the contestant answers `query`: OfflineStore's `explain`, SQLite's `EXPLAIN QUERY PLAN`.
    func plan(_ query: BenchQuery) throws -> String

    // MARK: Local changes with their queue record (`LocalChanges.swift`)

    /// One local change as a user makes it: the item's new `Quantity` and `ChangedAt` (so its
    /// quantity index entry moves), and a request-queue record for it, in one durable transaction.
    func change(_ item: Item) throws
    /// `writers.count` writers at once, writer `w` making the changes `writers[w]` one per call
    /// (`change`); returns the wall time in ns. Raw LMDB and SQLite: one OS thread per writer.
    func changeConcurrently(_ writers: [[Item]]) throws -> UInt64
    /// All `items`' changes and their queue records in one durable transaction.
    func changeBatch(_ items: [Item]) throws
    /// How many queue records there are.
    func queueCount() throws -> Int
    /// The body (OData JSON) of queue record `id` (ids count from 1), to compare contestants.
    func queueBody(id: Int64) throws -> String?
}

extension Contestant {
    /// One OS thread per writer, each calling `change` for its items (raw LMDB, SQLite).
    func changeConcurrently(_ writers: [[Item]]) throws -> UInt64 {
        try runThreads(writers.count) { w in
            for item in writers[w] { try self.change(item) }
        }
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}
