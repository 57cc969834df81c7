import CLMDB

/// A handle to one named database inside an environment (`MDB_dbi`).
public struct Database: Sendable, Hashable {
    package let dbi: MDB_dbi
    public let name: String
}

/// Bytes borrowed from LMDB's memory map: valid only until the transaction that produced them ends.
public typealias MappedBytes = UnsafeRawBufferPointer

@inline(__always)
func _withVal<R>(_ bytes: UnsafeRawBufferPointer, _ body: (inout MDB_val) throws -> R) rethrows -> R {
    var v = MDB_val(mv_size: bytes.count, mv_data: UnsafeMutableRawPointer(mutating: bytes.baseAddress))
    return try body(&v)
}

@inline(__always)
func _bytes(_ v: MDB_val) -> MappedBytes {
    MappedBytes(start: v.mv_data, count: v.mv_size)
}

/// The raw transaction pointer shared by read and write transactions; what the storage layer's
/// readers take so one function serves both. Never outlives the transaction it came from.
package struct TxnRef {
    package let raw: OpaquePointer

    /// The transaction's id (`mdb_txn_id`): for a read transaction, the snapshot it reads.
    package var id: UInt64 { UInt64(UInt(bitPattern: mdb_txn_id(raw))) }  // size_t, imported as Int

    /// Looks up `key` (`mdb_get`). Returns nil when it is absent.
    package func get(_ db: Database, _ key: UnsafeRawBufferPointer) throws(LMDBError) -> MappedBytes? {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val()
        let rc = mdb_get(raw, db.dbi, &k, &v)
        if rc == MDB_NOTFOUND { return nil }
        try _check(rc, "mdb_get on \(db.name)")
        return _bytes(v)
    }

    package func get(_ db: Database, _ key: [UInt8]) throws(LMDBError) -> MappedBytes? {
        var k = MDB_val(mv_size: key.count, mv_data: nil)
        var v = MDB_val()
        let rc = key.withUnsafeBytes { kb in
            k.mv_data = UnsafeMutableRawPointer(mutating: kb.baseAddress)
            return mdb_get(raw, db.dbi, &k, &v)
        }
        if rc == MDB_NOTFOUND { return nil }
        try _check(rc, "mdb_get on \(db.name)")
        return _bytes(v)
    }

    /// Number of entries in `db` (`mdb_stat`).
    package func count(_ db: Database) throws(LMDBError) -> Int {
        var st = MDB_stat()
        try _check(mdb_stat(raw, db.dbi, &st), "mdb_stat on \(db.name)")
        return st.ms_entries
    }

    /// Runs `body` with a cursor over `db` (`mdb_cursor_open`), closed when `body` returns.
    package func withCursor<R>(_ db: Database, _ body: (inout Cursor) throws -> R) throws -> R {
        var c: OpaquePointer?
        try _check(mdb_cursor_open(raw, db.dbi, &c), "mdb_cursor_open on \(db.name)")
        defer { mdb_cursor_close(c) }
        var cursor = Cursor(raw: c!, db: db)
        return try body(&cursor)
    }

    /// Stores `value` under `key` (`mdb_put`). With `noOverwrite`, returns false if the key exists.
    @discardableResult
    package func put(_ db: Database, _ key: [UInt8], _ value: [UInt8], noOverwrite: Bool = false) throws(LMDBError) -> Bool {
        var k = MDB_val(), v = MDB_val()
        let rc = key.withUnsafeBytes { kb in
            value.withUnsafeBytes { vb in
                k = MDB_val(mv_size: kb.count, mv_data: UnsafeMutableRawPointer(mutating: kb.baseAddress))
                v = MDB_val(mv_size: vb.count, mv_data: UnsafeMutableRawPointer(mutating: vb.baseAddress))
                return mdb_put(raw, db.dbi, &k, &v, noOverwrite ? UInt32(MDB_NOOVERWRITE) : 0)
            }
        }
        if rc == MDB_KEYEXIST && noOverwrite { return false }
        try _check(rc, "mdb_put on \(db.name)")
        return true
    }

    /// Removes `key` (`mdb_del`). Returns false when it was absent.
    @discardableResult
    package func delete(_ db: Database, _ key: [UInt8]) throws(LMDBError) -> Bool {
        var k = MDB_val()
        let rc = key.withUnsafeBytes { kb in
            k = MDB_val(mv_size: kb.count, mv_data: UnsafeMutableRawPointer(mutating: kb.baseAddress))
            return mdb_del(raw, db.dbi, &k, nil)
        }
        if rc == MDB_NOTFOUND { return false }
        try _check(rc, "mdb_del on \(db.name)")
        return true
    }

    /// Removes every entry of `db` (`mdb_drop` with del = 0), keeping the database.
    package func clear(_ db: Database) throws(LMDBError) {
        try _check(mdb_drop(raw, db.dbi, 0), "mdb_drop on \(db.name)")
    }
}

/// A cursor over one database (`MDB_cursor`). Lives only inside `withCursor`.
package struct Cursor {
    let raw: OpaquePointer
    let db: Database

    @inline(__always)
    private mutating func op(_ o: MDB_cursor_op, key: UnsafeRawBufferPointer? = nil) throws(LMDBError) -> (key: MappedBytes, value: MappedBytes)? {
        var k = MDB_val(), v = MDB_val()
        if let key { k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress)) }
        let rc = mdb_cursor_get(raw, &k, &v, o)
        if rc == MDB_NOTFOUND { return nil }
        try _check(rc, "mdb_cursor_get on \(db.name)")
        return (_bytes(k), _bytes(v))
    }

    package mutating func first() throws(LMDBError) -> (key: MappedBytes, value: MappedBytes)? { try op(MDB_FIRST) }
    package mutating func last() throws(LMDBError) -> (key: MappedBytes, value: MappedBytes)? { try op(MDB_LAST) }
    package mutating func next() throws(LMDBError) -> (key: MappedBytes, value: MappedBytes)? { try op(MDB_NEXT) }
    package mutating func previous() throws(LMDBError) -> (key: MappedBytes, value: MappedBytes)? { try op(MDB_PREV) }

    /// Positions at the first key ≥ `key` (`MDB_SET_RANGE`).
    package mutating func seek(_ key: [UInt8]) throws(LMDBError) -> (key: MappedBytes, value: MappedBytes)? {
        var k = MDB_val(), v = MDB_val()
        let rc = key.withUnsafeBytes { kb in
            k = MDB_val(mv_size: kb.count, mv_data: UnsafeMutableRawPointer(mutating: kb.baseAddress))
            return mdb_cursor_get(raw, &k, &v, MDB_SET_RANGE)
        }
        if rc == MDB_NOTFOUND { return nil }
        try _check(rc, "mdb_cursor_get on \(db.name)")
        return (_bytes(k), _bytes(v))
    }
}

/// A read-only transaction (`mdb_txn_begin` with `MDB_RDONLY`). Ended when it goes out of scope.
///
/// Not `Sendable`: use it on the thread that opened it, inside `Environment.read`.
public struct ReadTransaction: ~Copyable {
    package let txn: TxnRef
    private let environment: Environment

    init(raw: OpaquePointer, environment: Environment) {
        txn = TxnRef(raw: raw)
        self.environment = environment
    }

    /// Ends the transaction (`mdb_txn_reset`, kept for reuse by the environment).
    deinit { environment._endRead(txn.raw) }
}

/// A read-write transaction. Only the environment's writer thread makes one; commit and abort are
/// the environment's job (`Environment.write` commits when the closure returns and aborts on throw).
public struct WriteTransaction: ~Copyable {
    package let txn: TxnRef

    init(raw: OpaquePointer) { txn = TxnRef(raw: raw) }
}
