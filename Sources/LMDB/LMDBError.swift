import CLMDB

/// A failure reported by LMDB, with its return code and `mdb_strerror` message.
///
/// Match on the named constants: `catch let e as LMDBError where e == .mapFull`.
public struct LMDBError: Error, Hashable, Sendable, CustomStringConvertible {
    public let code: Int32
    /// What was being done, e.g. "mdb_put on e/Products".
    public let context: String

    public init(code: Int32, context: String = "") {
        self.code = code
        self.context = context
    }

    public static func == (a: Self, b: Self) -> Bool { a.code == b.code }
    public func hash(into h: inout Hasher) { h.combine(code) }

    public var message: String { _lmdb.strerror(code) }

    public var description: String {
        context.isEmpty ? "LMDB error \(code): \(message)" : "LMDB error \(code) in \(context): \(message)"
    }

    public static let keyExists = LMDBError(code: MDB_KEYEXIST)
    public static let notFound = LMDBError(code: MDB_NOTFOUND)
    public static let pageNotFound = LMDBError(code: MDB_PAGE_NOTFOUND)
    public static let corrupted = LMDBError(code: MDB_CORRUPTED)
    public static let panic = LMDBError(code: MDB_PANIC)
    public static let versionMismatch = LMDBError(code: MDB_VERSION_MISMATCH)
    public static let invalid = LMDBError(code: MDB_INVALID)
    public static let mapFull = LMDBError(code: MDB_MAP_FULL)
    public static let dbsFull = LMDBError(code: MDB_DBS_FULL)
    public static let readersFull = LMDBError(code: MDB_READERS_FULL)
    public static let txnFull = LMDBError(code: MDB_TXN_FULL)
    public static let cursorFull = LMDBError(code: MDB_CURSOR_FULL)
    public static let pageFull = LMDBError(code: MDB_PAGE_FULL)
    public static let mapResized = LMDBError(code: MDB_MAP_RESIZED)
    public static let badTxn = LMDBError(code: MDB_BAD_TXN)
    public static let badValueSize = LMDBError(code: MDB_BAD_VALSIZE)
    public static let badDBI = LMDBError(code: MDB_BAD_DBI)
}

/// Runs one `mdb_*` call and turns a non-zero return code into a thrown `LMDBError`.
///
/// `MDB_BAD_TXN` and `MDB_BAD_DBI` are thrown too, not trapped as misuse: a damaged file gives
/// them. LMDB marks a transaction failed when a page it reads is damaged — even in a read it
/// ignores the error of (`mdb_cursor_init` reading a database's root) — and the next call then
/// answers `MDB_BAD_TXN` (a store cut off by a power failure without fsync crashed its opener
/// this way, in PowerLossTests).
@inline(__always)
func _check(_ rc: Int32, _ context: @autoclosure () -> String) throws(LMDBError) {
    guard rc != 0 else { return }
    throw LMDBError(code: rc, context: context())
}
