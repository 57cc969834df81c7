package import CLMDB

/// A handle to one named database inside an environment (`MDB_dbi`).
package struct Database: Sendable, Hashable {
    package let dbi: MDB_dbi
    package let name: String
}

/// Bytes borrowed from LMDB's memory map: valid only until the transaction that produced them ends.
package typealias MappedBytes = UnsafeRawBufferPointer

@inline(__always)
func _val(_ bytes: UnsafeRawBufferPointer) -> MDB_val {
    MDB_val(mv_size: bytes.count, mv_data: UnsafeMutableRawPointer(mutating: bytes.baseAddress))
}

@inline(__always)
func _bytes(_ v: MDB_val) -> MappedBytes {
    MappedBytes(start: v.mv_data, count: v.mv_size)
}

/// Marks a transaction as ended, so that (in debug builds) a view used after its transaction
/// ended traps at once instead of reading freed memory.
final class _TxnLiveness: @unchecked Sendable {
    // @unchecked: written once, by the transaction's own thread, when it ends.
    var ended = false
}

/// What can be done in any transaction: look up, count, iterate. Storage's and Query's readers
/// take a `ReadView`; only a `WriteView` can change anything, so a write inside a read does not
/// compile.
///
/// A view is valid only inside the closure that received it (`Environment.read`/`write`), and so is
/// every `MappedBytes` it returns. Debug builds check that on every call.
package struct ReadView {
    package let raw: OpaquePointer
    #if DEBUG
    let liveness: _TxnLiveness
    #endif

    init(raw: OpaquePointer) {
        self.raw = raw
        #if DEBUG
        self.liveness = _TxnLiveness()
        #endif
    }

    /// Marks the transaction ended (debug builds check every later use of a copy of this view).
    func end() {
        #if DEBUG
        liveness.ended = true
        #endif
    }

    @inline(__always)
    func assertLive() {
        #if DEBUG
        precondition(!liveness.ended, "a transaction view was used after its transaction ended")
        #endif
    }

    /// The transaction's id (`mdb_txn_id`): for a read transaction, the snapshot it reads.
    package var id: UInt64 { _lmdb.txnID(raw) }

    /// Looks up `key` (`mdb_get`). Returns nil when it is absent.
    package func get(_ db: Database, _ key: UnsafeRawBufferPointer) throws(LMDBError) -> MappedBytes? {
        assertLive()
        var k = _val(key)
        var v = MDB_val()
        let rc = _lmdb.get(raw, db.dbi, &k, &v)
        if rc == MDB_NOTFOUND { return nil }
        try _check(rc, "mdb_get on \(db.name)")
        return _bytes(v)
    }

    package func get(_ db: Database, _ key: [UInt8]) throws(LMDBError) -> MappedBytes? {
        assertLive()
        var v = MDB_val()
        let rc = key.withUnsafeBytes { kb in
            var k = _val(kb)
            return _lmdb.get(raw, db.dbi, &k, &v)
        }
        if rc == MDB_NOTFOUND { return nil }
        try _check(rc, "mdb_get on \(db.name)")
        return _bytes(v)
    }

    /// Whether `key` is present: a look-up whose bytes do not leave this call.
    package func contains(_ db: Database, _ key: [UInt8]) throws(LMDBError) -> Bool {
        try get(db, key) != nil
    }

    /// Number of entries in `db` (`mdb_stat`).
    package func count(_ db: Database) throws(LMDBError) -> Int {
        assertLive()
        var st = MDB_stat()
        try _check(_lmdb.stat(raw, db.dbi, &st), "mdb_stat on \(db.name)")
        return st.ms_entries
    }

    /// Runs `body` with a cursor over `db` (`mdb_cursor_open`), closed when `body` returns.
    package func withCursor<R>(_ db: Database, _ body: (inout Cursor) throws -> R) throws -> R {
        assertLive()
        var c: OpaquePointer?
        try _check(_lmdb.cursorOpen(raw, db.dbi, &c), "mdb_cursor_open on \(db.name)")
        defer { _lmdb.cursorClose(c) }
        var cursor = Cursor(raw: c!, db: db)
        return try body(&cursor)
    }
}

/// A read view plus the operations that change data. Only the writer thread makes one, inside
/// `Environment.write`.
package struct WriteView {
    /// The same transaction, for reading.
    package let reader: ReadView
    let state: _WriteState

    init(raw: OpaquePointer, state: _WriteState) {
        reader = ReadView(raw: raw)
        self.state = state
    }

    package var raw: OpaquePointer { reader.raw }

    @inline(__always)
    package func get(_ db: Database, _ key: [UInt8]) throws(LMDBError) -> MappedBytes? { try reader.get(db, key) }

    @inline(__always)
    package func contains(_ db: Database, _ key: [UInt8]) throws(LMDBError) -> Bool { try reader.contains(db, key) }

    /// Runs `body` in a child transaction of this one (`mdb_txn_begin` with this one as its
    /// parent): what `body` wrote joins this transaction when it returns (`mdb_txn_commit`), and
    /// is undone when it throws (`mdb_txn_abort`), leaving this transaction as it was — so one
    /// step of a larger write can fail alone. `body` must not use this view (LMDB's rule: a parent
    /// is not used while it has a child), nor keep the child's.
    ///
    /// ```swift
    /// do { try t.nested { c in try apply(c, step) } } catch let e as EntityError { note(e) }
    /// ```
    /// Throws what `body` throws, and `LMDBError` when the child cannot begin or commit.
    package func nested<R>(_ body: (WriteView) throws -> R) throws -> R {
        reader.assertLive()
        var begun: OpaquePointer?
        try fail(_lmdb.txnBegin(_lmdb.txnEnv(raw), parent: raw, 0, &begun), "mdb_txn_begin (nested)")
        let child = begun!  // mdb_txn_begin returned 0: it set the child
        let result: R
        do {
            result = try body(WriteView(raw: child, state: state))
        } catch {
            _lmdb.txnAbort(child)
            throw error
        }
        // A failed commit frees the child (LMDB's mdb_txn_commit; the fault injector's does too).
        try fail(_lmdb.txnCommit(child), "mdb_txn_commit (nested)")
        return result
    }

    /// A failed write call: remembered when it means the map is full (the writer then grows the
    /// map and runs the batch again, whatever the body made of the error), then thrown.
    private func fail(_ rc: Int32, _ context: @autoclosure () -> String) throws(LMDBError) {
        if rc == MDB_MAP_FULL { state.mapFull = true }
        try _check(rc, context())
    }

    /// Stores `value` under `key` (`mdb_put`). With `noOverwrite`, returns false if the key exists.
    @discardableResult
    package func put(
        _ db: Database, _ key: [UInt8], _ value: [UInt8], noOverwrite: Bool = false
    ) throws(LMDBError) -> Bool {
        reader.assertLive()
        let rc = key.withUnsafeBytes { kb in
            state.keys.insert(db.dbi, kb)
            return value.withUnsafeBytes { vb in
                var k = _val(kb), v = _val(vb)
                return _lmdb.put(raw, db.dbi, &k, &v, noOverwrite ? UInt32(MDB_NOOVERWRITE) : 0)
            }
        }
        state.touched.insert(db.dbi)
        if rc == MDB_KEYEXIST && noOverwrite { return false }
        if rc != 0 { try fail(rc, "mdb_put on \(db.name)") }
        return true
    }

    /// Stores `value` under `key` unless the key is there (`mdb_put` with `MDB_NOOVERWRITE`, one
    /// search either way): nil when it stored, else the value the key holds, left as it was.
    package func putIfAbsent(_ db: Database, _ key: [UInt8], _ value: [UInt8]) throws(LMDBError) -> MappedBytes? {
        reader.assertLive()
        var v = MDB_val()
        let rc = key.withUnsafeBytes { kb in
            value.withUnsafeBytes { vb in
                var k = _val(kb)
                v = _val(vb)
                return _lmdb.put(raw, db.dbi, &k, &v, UInt32(MDB_NOOVERWRITE))
            }
        }
        if rc == 0 { key.withUnsafeBytes { state.keys.insert(db.dbi, $0) } }
        if rc == MDB_KEYEXIST { return _bytes(v) }  // LMDB points `v` at the stored value
        state.touched.insert(db.dbi)
        if rc != 0 { try fail(rc, "mdb_put on \(db.name)") }
        return nil
    }

    /// Stores `value` under `key`, which must sort after every key `db` holds (`mdb_put` with
    /// `MDB_APPEND`: the new entry goes at the end of the last leaf, which fills before a new one
    /// starts, without a search). A key out of order is `MDB_KEYEXIST`, thrown.
    package func append(
        _ db: Database, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer
    ) throws(LMDBError) {
        reader.assertLive()
        var k = _val(key), v = _val(value)
        let rc = _lmdb.put(raw, db.dbi, &k, &v, UInt32(MDB_APPEND))
        state.touched.insert(db.dbi)
        state.keys.insert(db.dbi, key)
        if rc != 0 { try fail(rc, "mdb_put (append) on \(db.name)") }
    }

    /// Removes `key` (`mdb_del`). Returns false when it was absent.
    @discardableResult
    package func delete(_ db: Database, _ key: [UInt8]) throws(LMDBError) -> Bool {
        reader.assertLive()
        let rc = key.withUnsafeBytes { kb in
            var k = _val(kb)
            return _lmdb.del(raw, db.dbi, &k)
        }
        if rc == MDB_NOTFOUND { return false }
        state.touched.insert(db.dbi)
        key.withUnsafeBytes { state.keys.insert(db.dbi, $0) }
        if rc != 0 { try fail(rc, "mdb_del on \(db.name)") }
        return true
    }

    /// Deletes `db` with its entries (`mdb_drop` with del = 1) as this transaction commits. The
    /// environment's handle of it must not be used again: a migration's, which closes the
    /// environment after.
    package func drop(_ db: Database) throws(LMDBError) { try drop(db, delete: true) }

    /// Removes every entry of `db` (`mdb_drop` with del = 0), keeping the database.
    package func clear(_ db: Database) throws(LMDBError) { try drop(db, delete: false) }

    private func drop(_ db: Database, delete: Bool) throws(LMDBError) {
        reader.assertLive()
        let rc = _lmdb.drop(raw, db.dbi, delete: delete)
        state.touched.insert(db.dbi)
        state.keys.overflow()
        if rc != 0 { try fail(rc, "mdb_drop\(delete ? " (delete)" : "") on \(db.name)") }
    }
}

/// What the writer learns from a batch's bodies besides their results.
final class _WriteState: @unchecked Sendable {
    // @unchecked: used only on the writer thread.
    var mapFull = false
    /// The databases written to (put, delete, clear), by any body of the batch: what a commit
    /// tells `Environment`'s commit listeners. A body undone keeps its marks (it may have written).
    var touched = DatabaseSet()
    /// The keys written, while they are few (`WrittenKeys.limit`): a listener watching one entity
    /// can tell whether a small commit wrote it.
    var keys = WrittenKeys()
}

/// The keys a write transaction wrote (put or deleted), by database, up to `limit` of them; past
/// that (or after a `clear`), only that there were more.
package struct WrittenKeys: Sendable {
    package static let limit = 256
    /// nil: more than `limit`, or a database cleared.
    package private(set) var keys: [(dbi: UInt32, key: [UInt8])]? = []

    @inline(__always)
    mutating func insert(_ dbi: UInt32, _ key: UnsafeRawBufferPointer) {
        guard keys != nil else { return }
        if keys!.count >= Self.limit {
            keys = nil
        } else {
            keys!.append((dbi, Array(key)))
        }
    }

    mutating func overflow() { keys = nil }

    /// Whether the transaction may have written `key` of `dbi`: it did, or the keys were too many to keep.
    package func mayContain(_ dbi: UInt32, _ key: [UInt8]) -> Bool {
        guard let keys else { return true }
        return keys.contains { $0.dbi == dbi && $0.key == key }
    }
}

/// A set of databases of one environment, by handle (`MDB_dbi`): those a commit wrote to.
package struct DatabaseSet: Sendable, Equatable {
    private var words: [UInt64] = []

    package init() {}

    @inline(__always)
    package mutating func insert(_ dbi: MDB_dbi) {
        let w = Int(dbi >> 6)
        if w >= words.count { words += [UInt64](repeating: 0, count: w + 1 - words.count) }
        words[w] |= 1 << UInt64(dbi & 63)
    }

    package func contains(_ dbi: MDB_dbi) -> Bool {
        let w = Int(dbi >> 6)
        return w < words.count && words[w] & (1 << UInt64(dbi & 63)) != 0
    }

    package var isEmpty: Bool { words.allSatisfy { $0 == 0 } }

    /// Whether any of `dbis` is in the set.
    package func containsAny(of dbis: some Sequence<MDB_dbi>) -> Bool { dbis.contains { contains($0) } }

    package static func += (a: inout DatabaseSet, b: DatabaseSet) {
        for (i, w) in b.words.enumerated() where w != 0 {
            if i >= a.words.count { a.words += [UInt64](repeating: 0, count: i + 1 - a.words.count) }
            a.words[i] |= w
        }
    }
}

/// A cursor over one database (`MDB_cursor`). Lives only inside `withCursor`.
package struct Cursor {
    let raw: OpaquePointer
    let db: Database

    @inline(__always)
    private mutating func op(_ o: MDB_cursor_op) throws(LMDBError) -> (key: MappedBytes, value: MappedBytes)? {
        var k = MDB_val(), v = MDB_val()
        let rc = _lmdb.cursorGet(raw, &k, &v, o)
        if rc == MDB_NOTFOUND { return nil }
        try _check(rc, "mdb_cursor_get on \(db.name)")
        return (_bytes(k), _bytes(v))
    }

    package mutating func first() throws(LMDBError) -> (key: MappedBytes, value: MappedBytes)? { try op(MDB_FIRST) }
    package mutating func last() throws(LMDBError) -> (key: MappedBytes, value: MappedBytes)? { try op(MDB_LAST) }
    /// The next entry; the CPU is asked to start loading the ones after it (`prefetch`).
    package mutating func next() throws(LMDBError) -> (key: MappedBytes, value: MappedBytes)? {
        let e = try op(MDB_NEXT)
        if let e { Self.prefetch(around: e.key, e.value, forward: true) }
        return e
    }

    /// The previous entry; the CPU is asked to start loading the ones before it (`prefetch`).
    package mutating func previous() throws(LMDBError) -> (key: MappedBytes, value: MappedBytes)? {
        let e = try op(MDB_PREV)
        if let e { Self.prefetch(around: e.key, e.value, forward: false) }
        return e
    }

    /// Asks the CPU to start loading the entries a scan reaches next, so a scan of a large database
    /// does not wait on memory for each. LMDB adds a leaf page's nodes from the page's end down and
    /// rewrites a page in key order when it splits, so the next entry in key order usually lies
    /// just below this one, the previous one just above it: about two entries' bytes (at most
    /// 1 KiB) on that side are prefetched. Only a hint: a wrong guess costs a few loads, and a
    /// prefetch never faults. (A scan with a filter over 200,000 rows, out of cache: 215 ns a row
    /// without, 90 with.)
    @inline(__always)
    static func prefetch(around key: MappedBytes, _ value: MappedBytes, forward: Bool) {
        guard let k = key.baseAddress else { return }
        let node = k - 8  // the node header, then the key, then the value
        let entry = 8 + key.count + min(value.count, 512)
        let span = min(2 * entry, 1024)
        // Nearest first: the entry needed next is the one waited for.
        if forward {
            var p = node - 64
            while p >= node - span { clmdb_prefetch(p); p -= 64 }
        } else {
            var p = node + entry
            while p < node + entry + span { clmdb_prefetch(p); p += 64 }
        }
    }

    /// Positions at the first key ≥ `key` (`MDB_SET_RANGE`).
    package mutating func seek(_ key: [UInt8]) throws(LMDBError) -> (key: MappedBytes, value: MappedBytes)? {
        var v = MDB_val()
        var k = MDB_val()
        let rc = key.withUnsafeBytes { kb in
            k = _val(kb)
            return _lmdb.cursorGet(raw, &k, &v, MDB_SET_RANGE)
        }
        if rc == MDB_NOTFOUND { return nil }
        try _check(rc, "mdb_cursor_get on \(db.name)")
        return (_bytes(k), _bytes(v))
    }
}

/// A read-only transaction (`mdb_txn_begin` with `MDB_RDONLY`). Ended when it goes out of scope.
///
/// Not `Sendable`: use it on the thread that opened it, inside `Environment.read`.
package struct ReadTransaction: ~Copyable {
    package let view: ReadView
    private let environment: Environment

    init(raw: OpaquePointer, environment: Environment) {
        view = ReadView(raw: raw)
        self.environment = environment
    }

    /// Ends the transaction (`mdb_txn_reset`, kept for reuse by the environment).
    deinit {
        view.end()
        environment._endRead(view.raw)
    }
}

/// A read-write transaction. Only the environment's writer thread makes one; commit and abort are
/// the environment's job (`Environment.write` commits when the closure returns and aborts on throw).
package struct WriteTransaction: ~Copyable {
    package let view: WriteView

    init(raw: OpaquePointer, state: _WriteState) {
        view = WriteView(raw: raw, state: state)
    }

    deinit { view.reader.end() }
}
