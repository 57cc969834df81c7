import CLMDBBench
import Foundation
import GRDB
import OfflineStore

// MARK: Covering-index query (issue 12): `$filter=ProductID eq '…'&$select=Quantity,NetAmount`
//
// Each contestant gets a covering index for the query, built after the other read workloads and
// removed again before the commit and local-change workloads (which would otherwise maintain it):
// OfflineStore rebuilds its `ProductID` index as `ProductID INCLUDE Quantity, NetAmount`; SQLite
// gets `CREATE INDEX … ON SalesOrderItems (ProductID, Quantity, NetAmount)` (a WITHOUT ROWID table:
// the index holds the key columns too, so the query is answered from the index alone); raw LMDB a
// second index database `ProductID ‖ key → Quantity ‖ NetAmount`. No contestant reads a row.

/// What the covering query returns per item: the key and the two selected properties.
struct SlimItem: Hashable, CustomStringConvertible {
    var salesOrderID: String
    var itemPosition: Int32
    var quantity: Int32
    /// Thousandths.
    var netAmount: Int64
    var description: String { "\(salesOrderID)/\(itemPosition): \(quantity) × \(netAmount)" }
}

enum CoveringWorkload {
    /// The covering query with the product as a parameter alias, for `store.prepare`.
    static let preparedURL = "\(BenchSchema.set)?$filter=ProductID eq @p&$select=Quantity,NetAmount"
    static let preparedName = "OfflineStore, prepared"

    /// The prepared covering query, its rows read by column index (`PreparedQuery.forEachRow`).
    struct Prepared {
        let query: PreparedQuery
        let id: Int, position: Int, quantity: Int, netAmount: Int

        init(_ store: OfflineStore) throws {
            query = try store.prepare(preparedURL)
            let columns = try query.columns
            func index(_ name: String) throws -> Int {
                guard let i = columns.firstIndex(of: name) else { throw BenchError("no column \(name) in \(columns)") }
                return i
            }
            (id, position, quantity, netAmount) = (
                try index("SalesOrderID"), try index("ItemPosition"), try index("Quantity"), try index("NetAmount")
            )
        }

        func run(_ productID: String, _ body: (SlimItem) -> Void) throws {
            try query.forEachRow(aliases: ["p": .string(productID)]) { row in
                guard case .string(let s) = try row.value(id), case .int(let p) = try row.value(position),
                    case .int(let q) = try row.value(quantity), case .decimal(let d) = try row.value(netAmount)
                else { throw BenchError("not a covering answer") }
                body(SlimItem(salesOrderID: s, itemPosition: Int32(p), quantity: Int32(q), thousandths: d))
                return true
            }
        }
    }
}

/// The covering-index workload: builds the three covering indexes, compares the contestants'
/// answers for the first products, times `products` (median of 5 rounds), and drops the indexes.
func runCoveringWorkload(
    raw: RawLMDB, offline: OfflineStoreContestant, sqlite: SQLiteContestant, products: [String],
    record: (_ workload: String, _ unit: String, _ c: any Contestant, _ ns: Double, _ ops: Int, _ name: String?) ->
        Void,
    plans: (_ workload: String, _ url: String, _ plans: [(String, String)]) -> Void
) throws {
    let urls = products.map { "\(BenchSchema.set)?$filter=ProductID eq '\($0)'&$select=Quantity,NetAmount" }
    var start = now()
    try offline.store.addIndex(set: BenchSchema.set, definition: "ProductID INCLUDE Quantity, NetAmount")
    log(
        "covering index: OfflineStore rebuilt ProductID INCLUDE Quantity, NetAmount in \(fixed(Double(now() - start) / 1e9)) s"
    )
    start = now()
    try sqlite.pool.write { db in try db.execute(sql: SQLiteContestant.createCovering) }
    log("covering index: SQLite created (ProductID, Quantity, NetAmount) in \(fixed(Double(now() - start) / 1e9)) s")
    start = now()
    let coveringDBI = try raw.buildCoveringIndex()
    log(
        "covering index: raw LMDB built ProductID ‖ key → Quantity ‖ NetAmount in \(fixed(Double(now() - start) / 1e9)) s"
    )

    let answer: [(any Contestant, (Int, (SlimItem) -> Void) throws -> Int)] = [
        (raw, { i, body in try raw.coveringQuery(coveringDBI, products[i], body) }),
        (
            offline,
            { i, body in
                let found = try offline.store.entities(urls[i])
                for p in found { body(SlimItem(p)) }
                return found.count
            }
        ),
        (sqlite, { i, body in try sqlite.coveringQuery(products[i], body) }),
    ]
    var rowsPerQuery = 0
    let preparedCheck = try CoveringWorkload.Prepared(offline.store)
    for i in 0..<min(5, products.count) {
        var sets = try answer.map { _, run in
            var got: [SlimItem] = []
            _ = try run(i) { got.append($0) }
            return Set(got)
        }
        var streamed: Set<SlimItem> = []
        try preparedCheck.run(products[i]) { streamed.insert($0) }
        sets.append(streamed)
        guard Set(sets).count == 1 else {
            throw BenchError(
                "contestants disagree on \(urls[i]): "
                    + zip(answer.map(\.0.name) + [CoveringWorkload.preparedName], sets).map {
                        "\($0): \($1.count) rows"
                    }
                    .joined(separator: "; "))
        }
        rowsPerQuery += sets[0].count
    }
    rowsPerQuery /= max(1, min(5, products.count))
    let workload = "query: covering index, ~\(rowsPerQuery) rows, 2 properties"
    log(workload)
    let explained = [
        (
            raw.name,
            "cursor on i/ProductID+cover from the product; Quantity and NetAmount from the entry's value, no mdb_get"
        ),
        (offline.name, try offline.store.explain(urls[0])),
        (sqlite.name, try sqlite.explainCovering(products[0])),
    ]
    for (name, plan) in explained { log("  plan, \(name): " + plan.replacingOccurrences(of: "\n", with: "; ")) }
    plans(workload, urls[0], explained)
    guard explained[1].1.contains("covering") else {
        throw BenchError("OfflineStore does not use the covering index: \(explained[1].1)")
    }
    var totals: [Int] = []
    for (c, run) in answer {
        for i in 0..<max(1, products.count / 10) { _ = try run(i) { blackHole($0) } }
        var rows = 0
        let ns = try medianNanos(rounds: 5, ops: products.count) {
            rows = 0
            for i in products.indices { rows += try run(i) { blackHole($0) } }
        }
        totals.append(rows)
        guard rows == totals[0] else {
            throw BenchError("\(c.name) returned \(rows) rows, \(answer[0].0.name) \(totals[0])")
        }
        record(workload, "query", c, ns, products.count * 5, nil)
        if c === offline {
            let nsJSON = try medianNanos(rounds: 5, ops: products.count) {
                for url in urls {
                    var bytes = 0
                    try offline.store.query(url, format: .json) { chunk in bytes += chunk.utf8.count }
                    blackHole(bytes)
                }
            }
            record(workload, "query", c, nsJSON, products.count * 5, offline.name + ", JSON")
            // What SQLite does: a statement prepared once, its rows stepped through, columns by index.
            let prepared = try CoveringWorkload.Prepared(offline.store)
            let nsPrepared = try medianNanos(rounds: 5, ops: products.count) {
                for p in products { try prepared.run(p) { blackHole($0) } }
            }
            record(workload, "query", c, nsPrepared, products.count * 5, CoveringWorkload.preparedName)
        }
    }

    // Back to the three plain indexes for the workloads after this one.
    try offline.store.addIndex(set: BenchSchema.set, definition: "ProductID")
    try sqlite.pool.write { db in try db.execute(sql: "DROP INDEX ItemsByProductCovering") }
    try raw.write { txn in try check(mdb_drop(txn, coveringDBI, 1)) }
}

extension SlimItem {
    init(_ p: Properties) {
        guard case .string(let id)? = p["SalesOrderID"], case .int(let pos)? = p["ItemPosition"],
            case .int(let q)? = p["Quantity"], case .decimal(let d)? = p["NetAmount"]
        else { fatalError("not a covering answer: \(p)") }
        self.init(salesOrderID: id, itemPosition: Int32(pos), quantity: Int32(q), thousandths: d)
    }

    init(salesOrderID: String, itemPosition: Int32, quantity: Int32, thousandths d: EDMDecimal) {
        var s = d.significand, scale = d.scale
        while scale < 3 { s *= 10; scale += 1 }
        while scale > 3 { s /= 10; scale -= 1 }
        self.init(salesOrderID: salesOrderID, itemPosition: itemPosition, quantity: quantity, netAmount: Int64(s))
    }
}

extension RawLMDB {
    /// Builds `i/ProductID+cover`: `ProductID ‖ key → Quantity (i32) ‖ NetAmount (i64)`, from every row.
    func buildCoveringIndex() throws -> MDB_dbi {
        var dbi = MDB_dbi()
        let buf = UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 8)
        defer { buf.deallocate() }
        try write { txn in
            try check(mdb_dbi_open(txn, "i/ProductID+cover", UInt32(MDB_CREATE), &dbi))
            var c: OpaquePointer?
            try check(mdb_cursor_open(txn, items, &c))
            defer { mdb_cursor_close(c) }
            var k = MDB_val(), v = MDB_val()
            var rc = mdb_cursor_get(c, &k, &v, MDB_FIRST)
            while rc == 0 {
                let p = UnsafeRawPointer(v.mv_data!)
                buf.copyMemory(from: p, byteCount: 10)
                (buf + 10).copyMemory(from: k.mv_data!, byteCount: Self.keySize)
                (buf + 24).copyMemory(from: p + 10, byteCount: 4)  // Quantity
                (buf + 28).copyMemory(from: p + 22, byteCount: 8)  // NetAmount
                var ek = MDB_val(mv_size: 24, mv_data: buf), ev = MDB_val(mv_size: 12, mv_data: buf + 24)
                try check(mdb_put(txn, dbi, &ek, &ev, 0))
                rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)
            }
            if rc != MDB_NOTFOUND { try check(rc) }
        }
        return dbi
    }

    /// The items of one product from the covering index alone; returns how many.
    func coveringQuery(_ dbi: MDB_dbi, _ productID: String, _ body: (SlimItem) -> Void) throws -> Int {
        try withUnsafeTemporaryAllocation(byteCount: 16, alignment: 8) { buf in
            let scratch = buf.baseAddress!
            Self.putFixed(productID, 10, scratch)
            return try read { txn in
                var c: OpaquePointer?
                try check(mdb_cursor_open(txn, dbi, &c))
                defer { mdb_cursor_close(c) }
                var k = MDB_val(mv_size: 10, mv_data: scratch), v = MDB_val()
                var n = 0
                var rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE)
                while rc == 0, k.mv_size >= 10, memcmp(k.mv_data, scratch, 10) == 0 {
                    let kp = UnsafeRawPointer(k.mv_data!) + 10, p = UnsafeRawPointer(v.mv_data!)
                    body(
                        SlimItem(
                            salesOrderID: Self.getFixed(kp, 10),
                            itemPosition: Int32(
                                bitPattern: UInt32(bigEndian: kp.loadUnaligned(fromByteOffset: 10, as: UInt32.self))
                                    ^ 0x8000_0000),
                            quantity: Int32(littleEndian: p.loadUnaligned(as: Int32.self)),
                            netAmount: Int64(littleEndian: p.loadUnaligned(fromByteOffset: 4, as: Int64.self))))
                    n += 1
                    rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)
                }
                if rc != 0 && rc != MDB_NOTFOUND { try check(rc) }
                return n
            }
        }
    }
}

extension SQLiteContestant {
    static let createCovering =
        "CREATE INDEX ItemsByProductCovering ON SalesOrderItems (ProductID, Quantity, NetAmount)"
    static let byProductCovering =
        "SELECT SalesOrderID, ItemPosition, Quantity, NetAmount FROM SalesOrderItems WHERE ProductID = ?"

    /// The items of one product, four columns from the covering index; returns how many.
    func coveringQuery(_ productID: String, _ body: (SlimItem) -> Void) throws -> Int {
        try pool.read { db in
            let rows = try Row.fetchCursor(db.cachedStatement(sql: Self.byProductCovering), arguments: [productID])
            var n = 0
            while let row = try rows.next() {
                body(SlimItem(salesOrderID: row[0], itemPosition: row[1], quantity: row[2], netAmount: row[3]))
                n += 1
            }
            return n
        }
    }

    func explainCovering(_ productID: String) throws -> String {
        try pool.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + Self.byProductCovering, arguments: [productID])
                .map { ($0["detail"] as String?) ?? "?" }.joined(separator: "; ")
        }
    }
}
