import CLMDBBench
import Foundation
import Synchronization

/// The physical limit: LMDB's C API with a fixed binary layout, no schema, no validation.
///
/// ```
/// key    SalesOrderID (10 bytes, zero-padded) · ItemPosition (u32 big-endian, sign flipped)   14 bytes
/// value  ProductID[10] · Quantity i32 · QuantityUnit[3] · CurrencyCode[5] · Net, Tax, Gross i64
///        (thousandths) · DeliveryDate i32 · ChangedAt i64 · offset i16 · GUID 16 · Note u16 length
///        (0xFFFF = null) + bytes                                                          78 + note
/// index  ProductID[10] ‖ key;  DeliveryDate (big-endian) ‖ key;  ~Quantity (big-endian) ‖ ProductID[10] ‖ key
/// queue  request id (u64 big-endian) → method, status, created-at, repeatability id, key, body (`RawLMDB+Changes.swift`)
/// ```
/// Every commit is synced (LMDB's default), like the other two contestants' durable mode.
final class RawLMDB: Contestant, @unchecked Sendable {
    // @unchecked: the env is thread-safe with MDB_NOTLS; the dbis are set once in init.
    let name = "raw LMDB"
    let env: OpaquePointer
    private(set) var items = MDB_dbi()
    private(set) var byProduct = MDB_dbi()
    private(set) var byDate = MDB_dbi()
    private(set) var byQuantity = MDB_dbi()
    private(set) var queue = MDB_dbi()
    /// Serializes the local changes' write transactions and holds the next request id.
    let changeLock = Mutex<UInt64>(1)

    init(path: String) throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        var e: OpaquePointer?
        try check(mdb_env_create(&e))
        env = e!
        try check(
            mdb_env_set_maxdbs(
                env, MDB_dbi(ProcessInfo.processInfo.environment["PERF_RAW_MAXDBS"].flatMap { UInt32($0) } ?? 8)))
        try check(mdb_env_set_mapsize(env, 64 << 30))
        try check(mdb_env_open(env, path, UInt32(MDB_NOTLS), 0o644))
        try write { txn in
            try check(mdb_dbi_open(txn, "items", UInt32(MDB_CREATE), &items))
            try check(mdb_dbi_open(txn, "i/ProductID", UInt32(MDB_CREATE), &byProduct))
            try check(mdb_dbi_open(txn, "i/DeliveryDate", UInt32(MDB_CREATE), &byDate))
            try check(mdb_dbi_open(txn, "i/Quantity DESC,ProductID", UInt32(MDB_CREATE), &byQuantity))
            try check(mdb_dbi_open(txn, "queue", UInt32(MDB_CREATE), &queue))
        }
    }

    deinit { mdb_env_close(env) }

    // MARK: Layout

    static let keySize = 14
    static let fixedSize = 78

    @inline(__always)
    static func putFixed(_ s: String, _ width: Int, _ out: UnsafeMutableRawPointer) {
        var n = 0
        for b in s.utf8 where n < width { out.storeBytes(of: b, toByteOffset: n, as: UInt8.self); n += 1 }
        while n < width { out.storeBytes(of: 0, toByteOffset: n, as: UInt8.self); n += 1 }
    }

    @inline(__always)
    static func getFixed(_ p: UnsafeRawPointer, _ width: Int) -> String {
        var n = 0
        while n < width && p.load(fromByteOffset: n, as: UInt8.self) != 0 { n += 1 }
        return String(decoding: UnsafeRawBufferPointer(start: p, count: n), as: UTF8.self)
    }

    @inline(__always)
    static func putBE(_ v: UInt32, _ out: UnsafeMutableRawPointer) {
        out.storeBytes(of: v.bigEndian, as: UInt32.self)
    }

    static func encodeKey(_ orderID: String, _ position: Int32, _ out: UnsafeMutableRawPointer) {
        putFixed(orderID, 10, out)
        putBE(UInt32(bitPattern: position) ^ 0x8000_0000, out + 10)
    }

    static func valueSize(_ item: Item) -> Int { fixedSize + (item.note?.utf8.count ?? 0) }

    static func encodeValue(_ item: Item, _ out: UnsafeMutableRawPointer) {
        putFixed(item.productID, 10, out)
        out.storeBytes(of: item.quantity.littleEndian, toByteOffset: 10, as: Int32.self)
        putFixed(item.quantityUnit, 3, out + 14)
        putFixed(item.currencyCode, 5, out + 17)
        out.storeBytes(of: item.netAmount.littleEndian, toByteOffset: 22, as: Int64.self)
        out.storeBytes(of: item.taxAmount.littleEndian, toByteOffset: 30, as: Int64.self)
        out.storeBytes(of: item.grossAmount.littleEndian, toByteOffset: 38, as: Int64.self)
        out.storeBytes(of: item.deliveryDate.littleEndian, toByteOffset: 46, as: Int32.self)
        out.storeBytes(of: item.changedAt.littleEndian, toByteOffset: 50, as: Int64.self)
        out.storeBytes(of: item.changedAtOffset.littleEndian, toByteOffset: 58, as: Int16.self)
        out.storeBytes(of: item.itemGUID.high.littleEndian, toByteOffset: 60, as: UInt64.self)
        out.storeBytes(of: item.itemGUID.low.littleEndian, toByteOffset: 68, as: UInt64.self)
        if let note = item.note {
            out.storeBytes(of: UInt16(note.utf8.count).littleEndian, toByteOffset: 76, as: UInt16.self)
            var n = 78
            for b in note.utf8 { out.storeBytes(of: b, toByteOffset: n, as: UInt8.self); n += 1 }
        } else {
            out.storeBytes(of: UInt16.max, toByteOffset: 76, as: UInt16.self)
        }
    }

    static func decode(key k: MDB_val, value v: MDB_val) -> Item {
        let kp = UnsafeRawPointer(k.mv_data!), p = UnsafeRawPointer(v.mv_data!)
        let noteLength = UInt16(littleEndian: p.loadUnaligned(fromByteOffset: 76, as: UInt16.self))
        return Item(
            salesOrderID: getFixed(kp, 10),
            itemPosition: Int32(
                bitPattern: UInt32(bigEndian: kp.loadUnaligned(fromByteOffset: 10, as: UInt32.self)) ^ 0x8000_0000),
            productID: getFixed(p, 10),
            note: noteLength == .max
                ? nil : String(decoding: UnsafeRawBufferPointer(start: p + 78, count: Int(noteLength)), as: UTF8.self),
            quantity: Int32(littleEndian: p.loadUnaligned(fromByteOffset: 10, as: Int32.self)),
            quantityUnit: getFixed(p + 14, 3),
            netAmount: Int64(littleEndian: p.loadUnaligned(fromByteOffset: 22, as: Int64.self)),
            taxAmount: Int64(littleEndian: p.loadUnaligned(fromByteOffset: 30, as: Int64.self)),
            grossAmount: Int64(littleEndian: p.loadUnaligned(fromByteOffset: 38, as: Int64.self)),
            currencyCode: getFixed(p + 17, 5),
            deliveryDate: Int32(littleEndian: p.loadUnaligned(fromByteOffset: 46, as: Int32.self)),
            changedAt: Int64(littleEndian: p.loadUnaligned(fromByteOffset: 50, as: Int64.self)),
            changedAtOffset: Int16(littleEndian: p.loadUnaligned(fromByteOffset: 58, as: Int16.self)),
            itemGUID: (
                UInt64(littleEndian: p.loadUnaligned(fromByteOffset: 60, as: UInt64.self)),
                UInt64(littleEndian: p.loadUnaligned(fromByteOffset: 68, as: UInt64.self))
            ))
    }

    /// The three index entries of a row: (dbi, key bytes) written into `buf` (64 bytes).
    /// `value` is the encoded row, so old entries come straight from the stored bytes.
    func indexEntries(
        key: UnsafeRawPointer, value: UnsafeRawPointer, _ buf: UnsafeMutableRawPointer,
        _ body: (MDB_dbi, inout MDB_val) throws -> Void
    ) rethrows {
        // ProductID ‖ key
        buf.copyMemory(from: value, byteCount: 10)
        (buf + 10).copyMemory(from: key, byteCount: 14)
        var k = MDB_val(mv_size: 24, mv_data: buf)
        try body(byProduct, &k)
        // DeliveryDate ‖ key
        let date = Int32(littleEndian: value.loadUnaligned(fromByteOffset: 46, as: Int32.self))
        Self.putBE(UInt32(bitPattern: date) ^ 0x8000_0000, buf)
        (buf + 4).copyMemory(from: key, byteCount: 14)
        k = MDB_val(mv_size: 18, mv_data: buf)
        try body(byDate, &k)
        // ~Quantity ‖ ProductID ‖ key
        let quantity = Int32(littleEndian: value.loadUnaligned(fromByteOffset: 10, as: Int32.self))
        Self.putBE(~(UInt32(bitPattern: quantity) ^ 0x8000_0000), buf)
        (buf + 4).copyMemory(from: value, byteCount: 10)
        (buf + 14).copyMemory(from: key, byteCount: 14)
        k = MDB_val(mv_size: 28, mv_data: buf)
        try body(byQuantity, &k)
    }

    // MARK: Transactions

    func write(_ body: (OpaquePointer) throws -> Void) throws {
        var txn: OpaquePointer?
        try check(mdb_txn_begin(env, nil, 0, &txn))
        do {
            try body(txn!)
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
        try check(mdb_txn_commit(txn))
    }

    @inline(__always)
    func read<R>(_ body: (OpaquePointer) throws -> R) throws -> R {
        var txn: OpaquePointer?
        try check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn))
        defer { mdb_txn_abort(txn) }
        return try body(txn!)
    }

    /// Puts one row and its index entries, removing the old entries of a row it replaces.
    func put(_ txn: OpaquePointer, _ item: Item, replacing: Bool, _ scratch: UnsafeMutableRawPointer) throws {
        let key = scratch, value = scratch + 64, index = scratch + 32
        Self.encodeKey(item.salesOrderID, item.itemPosition, key)
        Self.encodeValue(item, value)
        var k = MDB_val(mv_size: Self.keySize, mv_data: key)
        if replacing {
            var old = MDB_val()
            let rc = mdb_get(txn, items, &k, &old)
            if rc == 0 {
                try indexEntries(key: key, value: old.mv_data!, index) { dbi, e in
                    let d = mdb_del(txn, dbi, &e, nil)
                    if d != MDB_NOTFOUND { try check(d) }
                }
            } else if rc != MDB_NOTFOUND {
                try check(rc)
            }
        }
        var v = MDB_val(mv_size: Self.valueSize(item), mv_data: value)
        try check(mdb_put(txn, items, &k, &v, 0))
        var empty = MDB_val(mv_size: 0, mv_data: nil)
        try indexEntries(key: key, value: value, index) { dbi, e in try check(mdb_put(txn, dbi, &e, &empty, 0)) }
    }

    // MARK: Contestant

    func load(_ batch: ArraySlice<Item>) throws {
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: 64 + 78 + 1024, alignment: 8)
        defer { scratch.deallocate() }
        try write { txn in
            for item in batch { try put(txn, item, replacing: false, scratch) }
        }
    }

    func upsert(_ item: Item) throws {
        try withUnsafeTemporaryAllocation(byteCount: 64 + 78 + 1024, alignment: 8) { buf in
            try write { txn in try put(txn, item, replacing: true, buf.baseAddress!) }
        }
    }

    func count() throws -> Int {
        try read { txn in
            var st = MDB_stat()
            try check(mdb_stat(txn, items, &st))
            return st.ms_entries
        }
    }

    func get(_ key: ItemKey) throws -> Bool {
        try lookUp(key) { k, v in blackHole(Self.decode(key: k, value: v)) } != nil
    }

    func item(_ key: ItemKey) throws -> Item? {
        try lookUp(key) { k, v in Self.decode(key: k, value: v) }
    }

    @inline(__always)
    private func lookUp<R>(_ key: ItemKey, _ body: (MDB_val, MDB_val) -> R) throws -> R? {
        try withUnsafeTemporaryAllocation(byteCount: 16, alignment: 8) { buf in
            Self.encodeKey(key.salesOrderID, key.itemPosition, buf.baseAddress!)
            return try read { txn in
                var k = MDB_val(mv_size: Self.keySize, mv_data: buf.baseAddress), v = MDB_val()
                let rc = mdb_get(txn, items, &k, &v)
                if rc == MDB_NOTFOUND { return nil }
                try check(rc)
                return body(k, v)
            }
        }
    }

    func find(productID: String) throws -> Int {
        try withUnsafeTemporaryAllocation(byteCount: 16, alignment: 8) { buf in
            let prefix = buf.baseAddress!
            Self.putFixed(productID, 10, prefix)
            return try read { txn in
                var cursor: OpaquePointer?
                try check(mdb_cursor_open(txn, byProduct, &cursor))
                defer { mdb_cursor_close(cursor) }
                var k = MDB_val(mv_size: 10, mv_data: prefix), v = MDB_val()
                var rc = mdb_cursor_get(cursor, &k, &v, MDB_SET_RANGE)
                var n = 0
                while rc == 0, k.mv_size >= 10, memcmp(k.mv_data, prefix, 10) == 0 {
                    var pk = MDB_val(mv_size: Self.keySize, mv_data: k.mv_data! + 10), row = MDB_val()
                    try check(mdb_get(txn, items, &pk, &row))
                    blackHole(Self.decode(key: pk, value: row))
                    n += 1
                    rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)
                }
                if rc != 0 && rc != MDB_NOTFOUND { try check(rc) }
                return n
            }
        }
    }

    func scan() throws -> Int {
        try read { txn in
            var cursor: OpaquePointer?
            try check(mdb_cursor_open(txn, items, &cursor))
            defer { mdb_cursor_close(cursor) }
            var k = MDB_val(), v = MDB_val()
            var rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST)
            var n = 0
            while rc == 0 {
                blackHole(Self.decode(key: k, value: v))
                n += 1
                rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)
            }
            if rc != MDB_NOTFOUND { try check(rc) }
            return n
        }
    }
}

@inline(__always)
func check(_ rc: Int32) throws {
    if rc != 0 { throw BenchError("LMDB: \(String(cString: mdb_strerror(rc)))") }
}
