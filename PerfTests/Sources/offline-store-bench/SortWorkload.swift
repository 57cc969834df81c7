import CLMDBBench
import Foundation
import GRDB
import OfflineStore

// MARK: Sorts that do not fit (issue 12): `$orderby` on a property no contestant indexes, no `$top`
//
// Every row as one OData JSON response ordered by `NetAmount` (ties by key), streamed to a sink
// that counts the bytes, with the peak memory while it runs. OfflineStore: `query(url, format:
// .json)` — its external merge sort (`ExternalSort`) sorts 200,000 entries (sort key, primary key,
// the row's place in the map) at a time in memory, writes each sorted run to a scratch file and
// merges the runs, writing each row from the map. SQLite: `ORDER BY NetAmount, SalesOrderID,
// ItemPosition` (its own sorter, spilling to temporary files), each row's JSON built from the columns
// as in the streaming workload. Raw LMDB: every row's (NetAmount, key, row pointer) in an array,
// sorted in memory, then written from the map. The three streams are compared first.

func runSortWorkload(
    raw: RawLMDB, offline: OfflineStoreContestant, sqlite: SQLiteContestant, n: Int,
    record: (_ workload: String, _ c: any Contestant, _ ns: Double, _ ops: Int, _ peakMiB: Double?) -> Void,
    plans: (_ workload: String, _ url: String, _ plans: [(String, String)]) -> Void
) throws {
    let url = sortURL
    let runs: [(any Contestant, (@escaping (UnsafeRawBufferPointer) -> Void) throws -> Void)] = [
        (raw, sortedJSON(raw)), (offline, sortedJSON(offline)), (sqlite, sortedJSON(sqlite)),
    ]
    var digests: [StreamDigest] = []
    for (_, run) in runs {
        var digest = StreamDigest()
        try run { digest.add($0) }
        digests.append(digest)
    }
    guard Set(digests.map(\.description)).count == 1 else {
        throw BenchError(
            "the sorted JSON streams differ: "
                + zip(runs, digests).map { "\($0.0.name): \($1)" }.joined(separator: "; "))
    }
    let workload = "sort on an unindexed property, no $top, to JSON (per row)"
    log(workload + ": " + digests[0].description)
    let explained = [
        (
            raw.name,
            "cursor over every row into an array of (NetAmount, key, row), sorted in memory, rows written from the map"
        ),
        (offline.name, try offline.store.explain(url)),
        (sqlite.name, try sqlite.explainSQL(SQLiteContestant.allByNetAmount)),
    ]
    plans(workload, url, explained)
    for (c, run) in runs {
        var samples: [Double] = []
        var peakKiB: Int? = nil
        for _ in 0..<3 {
            var bytes = 0
            let (ns, delta) = try measureMemory { try run { bytes += $0.count } }
            guard bytes == digests[0].bytes else {
                throw BenchError("\(c.name) wrote \(bytes) bytes, expected \(digests[0].bytes)")
            }
            samples.append(Double(ns) / Double(n))
            if let delta { peakKiB = max(peakKiB ?? 0, delta) }
        }
        samples.sort()
        record(workload, c, samples[1], n * 3, peakKiB.map { Double($0) / 1024 })
    }
}

/// The sort workload's URL (OfflineStore).
let sortURL = "\(BenchSchema.set)?$orderby=NetAmount"

/// The sort workload of one contestant: every row ordered by NetAmount, as JSON into a sink.
func sortedJSON(_ c: any Contestant) -> (@escaping (UnsafeRawBufferPointer) -> Void) throws -> Void {
    switch c {
    case let raw as RawLMDB: return { sink in try raw.sortedJSON(sink) }
    case let offline as OfflineStoreContestant:
        return { sink in
            try offline.store.query(sortURL, format: .json) { chunk in
                var c = chunk
                c.withUTF8 { sink(UnsafeRawBufferPointer($0)) }
            }
        }
    case let sqlite as SQLiteContestant:
        return { sink in try sqlite.streamJSON(sql: SQLiteContestant.allByNetAmount, sink) }
    default: return { _ in throw BenchError("no sort workload for \(c.name)") }
    }
}

/// `--profile sort`: the sort workload run by one contestant until ten seconds are up, each run's
/// time per row and peak memory growth printed. One untimed run first, as the table's runs come
/// after the reads (the database's pages mapped already).
func profileSort(_ c: any Contestant, n: Int) throws {
    let run = sortedJSON(c)
    try run { _ in }
    let start = now()
    var runs = 0
    while now() - start < 10_000_000_000 || runs == 0 {
        var bytes = 0
        let (ns, delta) = try measureMemory { try run { bytes += $0.count } }
        runs += 1
        log(
            "\(c.name) sort: \(grouped(Double(ns) / Double(n))) ns/row, peak ΔRSS "
                + (delta.map { fixed(Double($0) / 1024) + " MiB" } ?? "?") + ", \(grouped(Double(bytes))) bytes")
    }
}

extension RawLMDB {
    /// Every row ordered by NetAmount (ties by key) as one JSON response: the rows' (NetAmount, key,
    /// row) gathered by a cursor and sorted in memory, then written straight from the map.
    func sortedJSON(_ sink: @escaping (UnsafeRawBufferPointer) -> Void) throws {
        try read { txn in
            var rows: [(net: Int64, key: UnsafeRawPointer, value: UnsafeRawPointer)] = []
            var cursor: OpaquePointer?
            try check(mdb_cursor_open(txn, items, &cursor))
            defer { mdb_cursor_close(cursor) }
            var k = MDB_val(), v = MDB_val()
            var rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST)
            while rc == 0 {
                let p = UnsafeRawPointer(v.mv_data!)
                rows.append(
                    (
                        Int64(littleEndian: p.loadUnaligned(fromByteOffset: 22, as: Int64.self)),
                        UnsafeRawPointer(k.mv_data!), p
                    ))
                rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)
            }
            if rc != MDB_NOTFOUND { try check(rc) }
            rows.sort { a, b in a.net != b.net ? a.net < b.net : memcmp(a.key, b.key, Self.keySize) < 0 }
            var out = JSONOut(sink: sink)
            out.begin()
            for (i, r) in rows.enumerated() {
                if i > 0 { out.byte(0x2C) }
                Self.writeJSON(key: r.key, value: r.value, &out)
                out.flushIfFull()
            }
            out.end()
        }
    }
}

extension SQLiteContestant {
    static let allByNetAmount = "SELECT \(columns) FROM SalesOrderItems ORDER BY NetAmount, SalesOrderID, ItemPosition"

    func explainSQL(_ sql: String) throws -> String {
        try pool.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql).map { ($0["detail"] as String?) ?? "?" }.joined(
                separator: "; ")
        }
    }
}
