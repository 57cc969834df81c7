import CLMDBBench
import GRDB
import OfflineStore

/// `$count` with a non-indexed filter: how many items are in `BenchQuery.filterCurrency` with a net
/// amount below `filterNetBelow` (the non-indexed filter's predicate), without returning them.
/// OfflineStore answers `SalesOrderItems/$count?$filter=…` through `query` (the count as text);
/// SQLite runs `SELECT COUNT(*) … WHERE CurrencyCode = ? AND NetAmount < ?`; raw LMDB counts in its
/// cursor over every row, testing the predicate on the stored bytes and decoding nothing.
protocol FilteredCounting {
    func countCheapInCurrency() throws -> Int
}

extension RawLMDB: FilteredCounting {
    func countCheapInCurrency() throws -> Int { try rows(BenchQuery(.cheapInCurrency)) { _, _ in } }
}

extension OfflineStoreContestant: FilteredCounting {
    /// `SalesOrderItems/$count?$filter=…`, the non-indexed filter's URL with `/$count`.
    static let countURL: String = {
        let url = BenchQuery(.cheapInCurrency).url
        let query = url.firstIndex(of: "?")!
        return url[..<query] + "/$count" + url[query...]
    }()

    func countCheapInCurrency() throws -> Int {
        var text: [UInt8] = []
        try store.query(Self.countURL, format: .json, writeBytes: { text.append(contentsOf: $0) })
        guard let n = Int(String(decoding: text, as: UTF8.self)) else {
            throw BenchError("\(Self.countURL) answered \(String(decoding: text.prefix(100), as: UTF8.self))")
        }
        return n
    }
}

extension SQLiteContestant: FilteredCounting {
    static let countByCurrencyAndNet = "SELECT COUNT(*) FROM SalesOrderItems WHERE CurrencyCode = ? AND NetAmount < ?"

    func countCheapInCurrency() throws -> Int {
        try pool.read { db in
            try Int.fetchOne(
                db.cachedStatement(sql: Self.countByCurrencyAndNet),
                arguments: [BenchQuery.filterCurrency, BenchQuery.filterNetBelow]) ?? 0
        }
    }
}

/// The workload: the three counts compared (they must be equal), then each timed, median of
/// `rounds`, per row scanned. `record(contestant, ns per row)` adds the table row.
func filteredCountWorkload(
    _ contestants: [any Contestant], rows n: Int, rounds: Int = 5,
    record: (String, any Contestant, Double) -> Void
) throws {
    let counters = contestants.compactMap { $0 as? any FilteredCounting }
    guard counters.count == contestants.count else { throw BenchError("a contestant cannot count") }
    let counts = try counters.map { try $0.countCheapInCurrency() }
    guard Set(counts).count == 1 else {
        throw BenchError(
            "contestants disagree on the filtered count: "
                + zip(contestants, counts).map { "\($0.name) \($1)" }.joined(separator: ", "))
    }
    let workload = "query: $count, non-indexed filter, \(grouped(Double(counts[0]))) of \(grouped(Double(n)))"
    log(workload)
    log("  OfflineStore: \(OfflineStoreContestant.countURL); SQLite: \(SQLiteContestant.countByCurrencyAndNet)")
    for (c, counter) in zip(contestants, counters) {
        _ = try counter.countCheapInCurrency()
        var seen = 0
        let ns = try medianNanos(rounds: rounds, ops: n) { seen = try counter.countCheapInCurrency() }
        guard seen == counts[0] else { throw BenchError("\(c.name) counted \(seen), expected \(counts[0])") }
        record(workload, c, ns)
    }
}
