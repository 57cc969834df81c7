import OfflineStore

/// The prepared point read: `SalesOrderItems(SalesOrderID=@id,ItemPosition=@pos)` prepared once
/// (`store.prepare`), executed per key with `entities(aliases:)` — no URL parsing or binding per
/// read — beside the plain `get` and the URL point read, on the same keys.
enum PreparedReads {
    static let url = "\(BenchSchema.set)(SalesOrderID=@id,ItemPosition=@pos)"
    static let workload = "query: prepared point read by key"

    /// Checks the first 20 answers against `get`, then times every key (median of 5 rounds, the
    /// alias dictionary built inside the timing as a caller would); returns ns per read.
    static func pointRead(_ offline: OfflineStoreContestant, keys: [ItemKey]) throws -> Double {
        let prepared = try offline.store.prepare(url)
        func read(_ k: ItemKey) throws -> [Properties] {
            try prepared.entities(aliases: ["id": .string(k.salesOrderID), "pos": .int(Int64(k.itemPosition))])
        }
        for k in keys.prefix(20) {
            let found = try read(k).map { "\(Item($0))" }
            let expected = try offline.item(k).map { ["\($0)"] } ?? []
            guard found == expected else { throw BenchError("prepared point read of \(k): \(found), get: \(expected)") }
        }
        for k in keys.prefix(1_000) { _ = try read(k) }
        return try medianNanos(rounds: 5, ops: keys.count) {
            for k in keys {
                let found = try read(k)
                guard found.count == 1 else { throw BenchError("prepared point read: \(k) missing") }
                blackHole(found)
            }
        }
    }
}
