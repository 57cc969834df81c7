import CLMDBBench
import Foundation
import GRDB
import OfflineStore

// MARK: Sorts that do not fit (issue 12): `$orderby` on a property no contestant indexes, no `$top`
//
// Every row as one OData JSON response ordered by `NetAmount` (ties by key), streamed to a sink
// that counts the bytes, with the peak memory while it runs. OfflineStore: `query(url, format:
// .json)` — its sort keeps 200,000 entries in memory and spills sorted runs to a temporary LMDB
// database past that, then reads each row again by key. SQLite: `ORDER BY NetAmount, SalesOrderID,
// ItemPosition` (its own sorter, spilling to temporary files), each row's JSON built from the columns
// as in the streaming workload. Raw LMDB: every row's (NetAmount, key, row pointer) in an array,
// sorted in memory, then written from the map. The three streams are compared first.

func runSortWorkload(
    raw: RawLMDB, offline: OfflineStoreContestant, sqlite: SQLiteContestant, n: Int,
    record: (_ workload: String, _ c: any Contestant, _ ns: Double, _ ops: Int, _ peakMiB: Double?) -> Void,
    plans: (_ workload: String, _ url: String, _ plans: [(String, String)]) -> Void
) throws {
    let url = "\(BenchSchema.set)?$orderby=NetAmount"
    let runs: [(any Contestant, (@escaping (UnsafeRawBufferPointer) -> Void) throws -> Void)] = [
        (raw, { sink in try raw.sortedJSON(sink) }),
        (
            offline,
            { sink in
                try offline.store.query(url, format: .json) { chunk in
                    var c = chunk
                    c.withUTF8 { sink(UnsafeRawBufferPointer($0)) }
                }
            }
        ),
        (sqlite, { sink in try sqlite.streamJSON(sql: SQLiteContestant.allByNetAmount, sink) }),
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
