import CLMDBBench
import Foundation

/// The query workloads by hand: a `get`, an index cursor, an index range that stops at `$top`, a
/// scan that tests the predicate on the stored bytes and decodes only matches; JSON straight from
/// the fixed layout.
extension RawLMDB {
    /// Visits the rows `query` selects (key and value in the memory map), in one read transaction.
    /// Returns how many.
    func rows(_ query: BenchQuery, _ body: (MDB_val, MDB_val) -> Void) throws -> Int {
        try withUnsafeTemporaryAllocation(byteCount: 16, alignment: 8) { buf in
            let scratch = buf.baseAddress!
            return try read { txn in
                func cursor(_ dbi: MDB_dbi, _ body: (OpaquePointer) throws -> Void) throws {
                    var c: OpaquePointer?
                    try check(mdb_cursor_open(txn, dbi, &c))
                    defer { mdb_cursor_close(c) }
                    try body(c!)
                }
                func row(_ key: UnsafeMutableRawPointer) throws {
                    var pk = MDB_val(mv_size: Self.keySize, mv_data: key), row = MDB_val()
                    try check(mdb_get(txn, items, &pk, &row))
                    body(pk, row)
                }
                var n = 0
                switch query.kind {
                case .key(let key):
                    Self.encodeKey(key.salesOrderID, key.itemPosition, scratch)
                    var k = MDB_val(mv_size: Self.keySize, mv_data: scratch), v = MDB_val()
                    let rc = mdb_get(txn, items, &k, &v)
                    if rc == MDB_NOTFOUND { return 0 }
                    try check(rc)
                    body(k, v)
                    n = 1
                case .product(let productID):
                    Self.putFixed(productID, 10, scratch)
                    try cursor(byProduct) { c in
                        var k = MDB_val(mv_size: 10, mv_data: scratch), v = MDB_val()
                        var rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE)
                        while rc == 0, k.mv_size >= 10, memcmp(k.mv_data, scratch, 10) == 0 {
                            try row(k.mv_data! + 10)
                            n += 1
                            rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)
                        }
                        if rc != 0 && rc != MDB_NOTFOUND { try check(rc) }
                    }
                case .deliveries(let from, let until, let top):
                    // DeliveryDate ‖ key: start at `from`, stop at `until` or after `top` rows.
                    Self.putBE(UInt32(bitPattern: from) ^ 0x8000_0000, scratch)
                    let end = UInt32(bitPattern: until) ^ 0x8000_0000
                    try cursor(byDate) { c in
                        var k = MDB_val(mv_size: 4, mv_data: scratch), v = MDB_val()
                        var rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE)
                        while rc == 0, n < top, UInt32(bigEndian: k.mv_data!.loadUnaligned(as: UInt32.self)) < end {
                            try row(k.mv_data! + 4)
                            n += 1
                            rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)
                        }
                        if rc != 0 && rc != MDB_NOTFOUND { try check(rc) }
                    }
                case .cheapInCurrency:
                    // The predicate on the stored bytes; only matches are decoded.
                    Self.putFixed(BenchQuery.filterCurrency, 5, scratch)
                    let currency = scratch.loadUnaligned(as: UInt32.self),
                        currencyLast = scratch.load(fromByteOffset: 4, as: UInt8.self)
                    try cursor(items) { c in
                        var k = MDB_val(), v = MDB_val()
                        var rc = mdb_cursor_get(c, &k, &v, MDB_FIRST)
                        while rc == 0 {
                            let p = UnsafeRawPointer(v.mv_data!)
                            if p.loadUnaligned(fromByteOffset: 17, as: UInt32.self) == currency,
                                p.load(fromByteOffset: 21, as: UInt8.self) == currencyLast,
                                Int64(littleEndian: p.loadUnaligned(fromByteOffset: 22, as: Int64.self))
                                    < BenchQuery.filterNetBelow
                            {
                                body(k, v)
                                n += 1
                            }
                            rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)
                        }
                        if rc != MDB_NOTFOUND { try check(rc) }
                    }
                }
                return n
            }
        }
    }

    func query(_ query: BenchQuery) throws -> Int {
        try rows(query) { k, v in blackHole(Self.decode(key: k, value: v)) }
    }

    func queryItems(_ query: BenchQuery) throws -> [Item] {
        var items: [Item] = []
        _ = try rows(query) { k, v in items.append(Self.decode(key: k, value: v)) }
        return items
    }

    func plan(_ query: BenchQuery) throws -> String {
        switch query.kind {
        case .key: "mdb_get on the key"
        case .product: "cursor on i/ProductID from the product, mdb_get of each row"
        case .deliveries:
            "cursor on i/DeliveryDate from the lower bound, mdb_get of each row, stop at the upper bound or $top"
        case .cheapInCurrency: "cursor over every row, predicate on the stored bytes, matches decoded"
        }
    }

    /// A cursor over every row, each written as JSON straight from the fixed layout.
    func streamJSON(_ sink: @escaping (UnsafeRawBufferPointer) -> Void) throws {
        try read { txn in
            var out = JSONOut(sink: sink)
            out.begin()
            var cursor: OpaquePointer?
            try check(mdb_cursor_open(txn, items, &cursor))
            defer { mdb_cursor_close(cursor) }
            var k = MDB_val(), v = MDB_val()
            var rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST)
            var first = true
            while rc == 0 {
                if first { first = false } else { out.byte(0x2C) }
                Self.writeJSON(key: UnsafeRawPointer(k.mv_data!), value: UnsafeRawPointer(v.mv_data!), &out)
                out.flushIfFull()
                rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)
            }
            if rc != MDB_NOTFOUND { try check(rc) }
            out.end()
        }
    }

    /// One row as an OData JSON object, straight from the fixed layout (`kp`: the key, `p`: the row).
    static func writeJSON(key kp: UnsafeRawPointer, value p: UnsafeRawPointer, _ out: inout JSONOut) {
        out.ascii("{\"SalesOrderID\":")
        out.fixedString(kp, 10)
        out.ascii(",\"ItemPosition\":")
        out.int(
            Int64(
                Int32(
                    bitPattern: UInt32(bigEndian: kp.loadUnaligned(fromByteOffset: 10, as: UInt32.self)) ^ 0x8000_0000))
        )
        out.ascii(",\"ProductID\":")
        out.fixedString(p, 10)
        out.ascii(",\"Note\":")
        let noteLength = UInt16(littleEndian: p.loadUnaligned(fromByteOffset: 76, as: UInt16.self))
        if noteLength == .max { out.ascii("null") } else { out.string(p + 78, Int(noteLength)) }
        out.ascii(",\"Quantity\":")
        out.int(Int64(Int32(littleEndian: p.loadUnaligned(fromByteOffset: 10, as: Int32.self))))
        out.ascii(",\"QuantityUnit\":")
        out.fixedString(p + 14, 3)
        out.ascii(",\"NetAmount\":")
        out.thousandths(Int64(littleEndian: p.loadUnaligned(fromByteOffset: 22, as: Int64.self)))
        out.ascii(",\"TaxAmount\":")
        out.thousandths(Int64(littleEndian: p.loadUnaligned(fromByteOffset: 30, as: Int64.self)))
        out.ascii(",\"GrossAmount\":")
        out.thousandths(Int64(littleEndian: p.loadUnaligned(fromByteOffset: 38, as: Int64.self)))
        out.ascii(",\"CurrencyCode\":")
        out.fixedString(p + 17, 5)
        out.ascii(",\"DeliveryDate\":")
        out.date(days: Int32(littleEndian: p.loadUnaligned(fromByteOffset: 46, as: Int32.self)))
        out.ascii(",\"ChangedAt\":")
        out.dateTimeOffset(
            ticks: Int64(littleEndian: p.loadUnaligned(fromByteOffset: 50, as: Int64.self)),
            offsetMinutes: Int16(littleEndian: p.loadUnaligned(fromByteOffset: 58, as: Int16.self)))
        out.ascii(",\"ItemGUID\":")
        out.guid(
            high: UInt64(littleEndian: p.loadUnaligned(fromByteOffset: 60, as: UInt64.self)),
            low: UInt64(littleEndian: p.loadUnaligned(fromByteOffset: 68, as: UInt64.self)))
        out.byte(0x7D)
    }
}
