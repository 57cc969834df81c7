import Foundation
import GRDB

/// What a Swift program would pick instead: SQLite through GRDB, a `DatabasePool` (WAL), every
/// commit synced (`synchronous=FULL`), the same primary key and indexes, cached prepared statements.
///
/// The table is `WITHOUT ROWID` (rows clustered by the composite key, as in LMDB), decimals are
/// integers of thousandths and dates integers — SQLite's fastest exact forms. Each connection gets
/// a 64 MiB page cache and a memory-mapped file, so reads come from memory as LMDB's do.
final class SQLiteContestant: Contestant, @unchecked Sendable {
    // @unchecked: DatabasePool is Sendable; `pool` is set once.
    let name = "SQLite (GRDB)"
    let pool: any DatabaseWriter

    static let columns =
        "SalesOrderID, ItemPosition, ProductID, Note, Quantity, QuantityUnit, NetAmount, TaxAmount, GrossAmount, CurrencyCode, DeliveryDate, ChangedAt, ChangedAtOffset, ItemGUID"
    static let insert = "INSERT INTO SalesOrderItems (\(columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    static let upsert =
        insert + """
             ON CONFLICT (SalesOrderID, ItemPosition) DO UPDATE SET ProductID = excluded.ProductID, Note = excluded.Note,
            Quantity = excluded.Quantity, QuantityUnit = excluded.QuantityUnit, NetAmount = excluded.NetAmount,
            TaxAmount = excluded.TaxAmount, GrossAmount = excluded.GrossAmount, CurrencyCode = excluded.CurrencyCode,
            DeliveryDate = excluded.DeliveryDate, ChangedAt = excluded.ChangedAt, ChangedAtOffset = excluded.ChangedAtOffset,
            ItemGUID = excluded.ItemGUID
            """
    static let byKey = "SELECT \(columns) FROM SalesOrderItems WHERE SalesOrderID = ? AND ItemPosition = ?"
    static let byProduct = "SELECT \(columns) FROM SalesOrderItems WHERE ProductID = ?"
    static let all = "SELECT \(columns) FROM SalesOrderItems ORDER BY SalesOrderID, ItemPosition"
    static let byDeliveryRange = """
        SELECT \(columns) FROM SalesOrderItems WHERE DeliveryDate >= ? AND DeliveryDate < ?
        ORDER BY DeliveryDate, SalesOrderID, ItemPosition LIMIT ?
        """
    static let byCurrencyAndNet = "SELECT \(columns) FROM SalesOrderItems WHERE CurrencyCode = ? AND NetAmount < ?"

    init(path: String) throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        var config = Configuration()
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA cache_size = -65536")
            try db.execute(sql: "PRAGMA mmap_size = 8589934592")
        }
        if ProcessInfo.processInfo.environment["PERF_SQLITE"] == "queue" {
            config.journalMode = .wal
            pool = try DatabaseQueue(path: path + "/items.sqlite", configuration: config)
        } else {
            pool = try DatabasePool(path: path + "/items.sqlite", configuration: config)
        }
        // GRDB sets synchronous=NORMAL when it turns WAL on; durable commits need FULL on the writer.
        try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        try pool.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE SalesOrderItems (
                      SalesOrderID TEXT NOT NULL, ItemPosition INTEGER NOT NULL, ProductID TEXT NOT NULL, Note TEXT,
                      Quantity INTEGER NOT NULL, QuantityUnit TEXT NOT NULL, NetAmount INTEGER NOT NULL, TaxAmount INTEGER NOT NULL,
                      GrossAmount INTEGER NOT NULL, CurrencyCode TEXT NOT NULL, DeliveryDate INTEGER NOT NULL,
                      ChangedAt INTEGER NOT NULL, ChangedAtOffset INTEGER NOT NULL, ItemGUID BLOB NOT NULL,
                      PRIMARY KEY (SalesOrderID, ItemPosition)) WITHOUT ROWID;
                    CREATE INDEX ItemsByProduct ON SalesOrderItems (ProductID);
                    CREATE INDEX ItemsByDeliveryDate ON SalesOrderItems (DeliveryDate);
                    CREATE INDEX ItemsByQuantity ON SalesOrderItems (Quantity DESC, ProductID);
                    """)
            try db.execute(sql: Self.createQueue)
        }
    }

    static func arguments(_ i: Item) -> StatementArguments {
        var guid = Data(count: 16)
        guid.withUnsafeMutableBytes { b in
            b.storeBytes(of: i.itemGUID.high.bigEndian, toByteOffset: 0, as: UInt64.self)
            b.storeBytes(of: i.itemGUID.low.bigEndian, toByteOffset: 8, as: UInt64.self)
        }
        return [
            i.salesOrderID, i.itemPosition, i.productID, i.note, i.quantity, i.quantityUnit, i.netAmount, i.taxAmount,
            i.grossAmount, i.currencyCode, i.deliveryDate, i.changedAt, i.changedAtOffset, guid,
        ]
    }

}

extension Item: FetchableRecord {
    /// Decodes the columns in `SQLiteContestant.columns` order, by index.
    init(row: Row) throws {
        let guid = try row.withUnsafeData(atIndex: 13) { d -> (UInt64, UInt64) in
            guard let d, d.count == 16 else { return (0, 0) }
            return d.withUnsafeBytes { b in
                (
                    UInt64(bigEndian: b.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                    UInt64(bigEndian: b.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
                )
            }
        }
        self.init(
            salesOrderID: row[0], itemPosition: row[1], productID: row[2], note: row[3], quantity: row[4],
            quantityUnit: row[5], netAmount: row[6], taxAmount: row[7], grossAmount: row[8], currencyCode: row[9],
            deliveryDate: row[10], changedAt: row[11], changedAtOffset: row[12], itemGUID: guid)
    }
}

extension SQLiteContestant {
    func load(_ items: ArraySlice<Item>) throws {
        try pool.write { db in
            let statement = try db.cachedStatement(sql: Self.insert)
            for item in items { try statement.execute(arguments: Self.arguments(item)) }
        }
    }

    /// Moves the write-ahead log into the database file, as an idle application would.
    func checkpoint() throws {
        _ = try pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
    }

    func count() throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM SalesOrderItems") ?? 0 }
    }

    func get(_ key: ItemKey) throws -> Bool {
        try pool.read { db in
            let statement = try db.cachedStatement(sql: Self.byKey)
            guard let item = try Item.fetchOne(statement, arguments: [key.salesOrderID, key.itemPosition]) else {
                return false
            }
            blackHole(item)
            return true
        }
    }

    func item(_ key: ItemKey) throws -> Item? {
        try pool.read { db in
            try Item.fetchOne(db.cachedStatement(sql: Self.byKey), arguments: [key.salesOrderID, key.itemPosition])
        }
    }

    func find(productID: String) throws -> Int {
        try pool.read { db in
            let statement = try db.cachedStatement(sql: Self.byProduct)
            let items = try Item.fetchAll(statement, arguments: [productID])
            blackHole(items)
            return items.count
        }
    }

    func scan() throws -> Int {
        try pool.read { db in
            let items = try Item.fetchCursor(db.cachedStatement(sql: Self.all))
            var n = 0
            while let item = try items.next() {
                blackHole(item)
                n += 1
            }
            return n
        }
    }

    func upsert(_ item: Item) throws {
        try pool.write { db in try db.cachedStatement(sql: Self.upsert).execute(arguments: Self.arguments(item)) }
    }
}

// MARK: Queries: prepared statements, rows decoded into `Item`

extension SQLiteContestant {
    func sql(_ query: BenchQuery) -> (String, StatementArguments) {
        switch query.kind {
        case .key(let k): (Self.byKey, [k.salesOrderID, k.itemPosition])
        case .product(let p): (Self.byProduct, [p])
        case .deliveries(let from, let until, let top): (Self.byDeliveryRange, [from, until, top])
        case .cheapInCurrency: (Self.byCurrencyAndNet, [BenchQuery.filterCurrency, BenchQuery.filterNetBelow])
        }
    }

    @inline(__always)
    func each(_ query: BenchQuery, _ body: (Item) -> Void) throws -> Int {
        let (sql, arguments) = sql(query)
        return try pool.read { db in
            let items = try Item.fetchCursor(db.cachedStatement(sql: sql), arguments: arguments)
            var n = 0
            while let item = try items.next() {
                body(item)
                n += 1
            }
            return n
        }
    }

    func query(_ query: BenchQuery) throws -> Int {
        switch query.kind {
        case .key:
            return try get(ItemKeyOf(query)) ? 1 : 0
        default:
            return try each(query) { blackHole($0) }
        }
    }

    func queryItems(_ query: BenchQuery) throws -> [Item] {
        var items: [Item] = []
        _ = try each(query) { items.append($0) }
        return items
    }

    func plan(_ query: BenchQuery) throws -> String {
        let (sql, arguments) = sql(query)
        return try pool.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: arguments)
                .map { ($0["detail"] as String?) ?? "?" }.joined(separator: "; ")
        }
    }

    /// `SELECT` every row in key order and build each row's JSON from its columns (text and blobs
    /// read in place).
    func streamJSON(_ sink: @escaping (UnsafeRawBufferPointer) -> Void) throws { try streamJSON(sql: Self.all, sink) }

    /// `streamJSON` for the rows of another `SELECT` of the same columns (the sort workload's).
    func streamJSON(sql: String, _ sink: @escaping (UnsafeRawBufferPointer) -> Void) throws {
        try pool.read { db in
            var out = JSONOut(sink: sink)
            out.begin()
            let rows = try Row.fetchCursor(db.cachedStatement(sql: sql))
            var first = true
            while let row = try rows.next() {
                if first { first = false } else { out.byte(0x2C) }
                out.ascii("{\"SalesOrderID\":")
                try row.withUnsafeData(atIndex: 0) { d in d!.withUnsafeBytes { out.string($0) } }
                out.ascii(",\"ItemPosition\":")
                out.int(row[1])
                out.ascii(",\"ProductID\":")
                try row.withUnsafeData(atIndex: 2) { d in d!.withUnsafeBytes { out.string($0) } }
                out.ascii(",\"Note\":")
                try row.withUnsafeData(atIndex: 3) { d in
                    if let d { d.withUnsafeBytes { out.string($0) } } else { out.ascii("null") }
                }
                out.ascii(",\"Quantity\":")
                out.int(row[4])
                out.ascii(",\"QuantityUnit\":")
                try row.withUnsafeData(atIndex: 5) { d in d!.withUnsafeBytes { out.string($0) } }
                out.ascii(",\"NetAmount\":")
                out.thousandths(row[6])
                out.ascii(",\"TaxAmount\":")
                out.thousandths(row[7])
                out.ascii(",\"GrossAmount\":")
                out.thousandths(row[8])
                out.ascii(",\"CurrencyCode\":")
                try row.withUnsafeData(atIndex: 9) { d in d!.withUnsafeBytes { out.string($0) } }
                out.ascii(",\"DeliveryDate\":")
                out.date(days: row[10])
                out.ascii(",\"ChangedAt\":")
                out.dateTimeOffset(ticks: row[11], offsetMinutes: row[12])
                out.ascii(",\"ItemGUID\":")
                try row.withUnsafeData(atIndex: 13) { d in
                    d!.withUnsafeBytes { b in
                        out.guid(
                            high: UInt64(bigEndian: b.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                            low: UInt64(bigEndian: b.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
                    }
                }
                out.byte(0x7D)
                out.flushIfFull()
            }
            out.end()
        }
    }
}

/// The key of a `.key` query.
func ItemKeyOf(_ query: BenchQuery) -> ItemKey {
    guard case .key(let k) = query.kind else { fatalError("not a key query: \(query)") }
    return k
}
