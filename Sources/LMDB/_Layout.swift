// LMDB 0.9's file format, as `mdb.c` (LMDB_0.9.24, the version Debian ships) lays it out on a
// 64-bit little-endian host, where `pgno_t`, `txnid_t` and `size_t` are 8 bytes and
// `MDB_DEVEL` is off (`PAGEBASE` is 0: node offsets count from the start of the page).
#if _endian(big) || !_pointerBitWidth(_64)
#error("the page audit reads LMDB's 64-bit little-endian layout")
#endif

/// Sizes, offsets and flags of `data.mdb`'s pages, for the audit that reads it without LMDB.
enum _Layout {
    /// `PAGEHDRSZ`: `mp_pgno` (8), `mp_pad` (2), `mp_flags` (2), `mp_lower` and `mp_upper` (2 + 2),
    /// which an overflow page uses as one 4-byte `mp_pages`.
    static let pageHeaderSize = 16
    static let pageNumberOffset = 0
    static let pageFlagsOffset = 10
    static let lowerOffset = 12
    static let upperOffset = 14
    static let overflowCountOffset = 12

    /// `NODESIZE`: `mn_lo`, `mn_hi` (data size, or with `mn_flags` a branch child's page number),
    /// `mn_flags`, `mn_ksize`; the key and then the data follow.
    static let nodeHeaderSize = 8
    /// `sizeof(MDB_db)`: the record a named database's node holds (`F_SUBDATA`).
    static let databaseRecordSize = 48
    /// `PAGEHDRSZ + sizeof(MDB_meta)`: what LMDB reads of each meta page before it knows the page size.
    static let metaReadSize = 152

    static let magic: UInt32 = 0xBEEF_C0DE
    /// `MDB_DATA_VERSION` without `MDB_DEVEL`.
    static let dataVersion: UInt32 = 1
    /// `P_INVALID`: the root of an empty tree.
    static let invalidPage = UInt64.max
    /// `MDB_MAXKEYSIZE`.
    static let maxKeySize = 511
    /// `CURSOR_STACK`: LMDB cannot walk a deeper tree.
    static let maxDepth = 32
    /// Page sizes LMDB can have written: a power of two up to `MAX_PAGESIZE` (0x8000 when
    /// `PAGEBASE` is 0); 512 is below any real system page.
    static let pageSizes = 512...0x8000

    // Page flags (`mp_flags`).
    static let branch: UInt16 = 0x01  // P_BRANCH
    static let leaf: UInt16 = 0x02  // P_LEAF
    static let overflow: UInt16 = 0x04  // P_OVERFLOW
    static let meta: UInt16 = 0x08  // P_META

    // Leaf node flags (`mn_flags`).
    static let bigData: UInt16 = 0x01  // F_BIGDATA: the data is on overflow pages
    static let subData: UInt16 = 0x02  // F_SUBDATA: the data is a named database's MDB_db
    static let dupData: UInt16 = 0x04  // F_DUPDATA: duplicates (MDB_DUPSORT), never ours

    /// The free list's database flags (`md_flags`), which double as the environment's persistent
    /// ones: `MDB_INTEGERKEY`, and nothing else in a store we made (no `MDB_FIXEDMAP`).
    static let integerKey: UInt16 = 0x08

    /// `OVPAGES`: how many pages an overflow run needs for `size` bytes of data.
    static func overflowPages(_ size: Int, pageSize: Int) -> Int {
        (pageHeaderSize - 1 + size) / pageSize + 1
    }
}

/// Little-endian loads from bytes whose bounds the caller has already checked.
extension UnsafeRawBufferPointer {
    @inline(__always) func _u16(_ offset: Int) -> UInt16 {
        UInt16(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt16.self))
    }
    @inline(__always) func _u32(_ offset: Int) -> UInt32 {
        UInt32(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }
    @inline(__always) func _u64(_ offset: Int) -> UInt64 {
        UInt64(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }
}

/// An `MDB_db`: one B+tree's root and counts.
struct _DatabaseRecord: Sendable, Equatable {
    var flags: UInt16
    var depth: Int
    var branchPages: UInt64
    var leafPages: UInt64
    var overflowPages: UInt64
    var entries: UInt64
    var root: UInt64

    /// Reads the 48-byte record at `offset`: `md_pad` (4), `md_flags` (2), `md_depth` (2),
    /// then branch, leaf and overflow page counts, entries and root (8 each).
    init(_ bytes: UnsafeRawBufferPointer, at offset: Int) {
        flags = bytes._u16(offset + 4)
        depth = Int(bytes._u16(offset + 6))
        branchPages = bytes._u64(offset + 8)
        leafPages = bytes._u64(offset + 16)
        overflowPages = bytes._u64(offset + 24)
        entries = bytes._u64(offset + 32)
        root = bytes._u64(offset + 40)
    }
}

/// An `MDB_meta`, read from the start of page 0 or 1: after the page header come `mm_magic`,
/// `mm_version`, `mm_address`, `mm_mapsize`, the free list's and the main database's `MDB_db`
/// (whose `md_pad` is the page size), `mm_last_pg` and `mm_txnid`.
struct _Meta: Sendable {
    var pageSize: Int
    var lastPage: UInt64
    var txnid: UInt64
    var free: _DatabaseRecord
    var main: _DatabaseRecord
    /// What is wrong with this meta page although it passes LMDB's own tests; nil when sound.
    var flaw: _MetaFlaw?

    /// The number of pages the meta page says the file has.
    var pages: UInt64 { lastPage &+ 1 }

    /// Parses meta page `index` from its first `_Layout.metaReadSize` bytes. Fails as
    /// `mdb_env_read_header` does (no `P_META` flag, magic number or version wrong), or when the
    /// file ends first; anything else wrong is the meta page's `implausibility`.
    static func parse(_ bytes: UnsafeRawBufferPointer, index: Int) -> Result<_Meta, _MetaProblem> {
        guard bytes.count >= _Layout.metaReadSize else {
            return .failure(.init("meta page \(index) is cut off by the end of the file"))
        }
        let h = _Layout.pageHeaderSize
        let pgno = bytes._u64(_Layout.pageNumberOffset), flags = bytes._u16(_Layout.pageFlagsOffset)
        let magic = bytes._u32(h), version = bytes._u32(h + 4)
        guard magic == _Layout.magic else {
            return .failure(.init("meta page \(index) has magic number 0x\(String(magic, radix: 16)), not 0xbeefc0de"))
        }
        guard version == _Layout.dataVersion else {
            return .failure(
                .init("meta page \(index) has format version \(version); LMDB 0.9 writes \(_Layout.dataVersion)"))
        }
        guard flags & _Layout.meta != 0 else {
            return .failure(
                .init(
                    "meta page \(index) has page flags 0x\(String(flags, radix: 16)), without that of a meta page (0x8)"
                ))
        }
        let pageSize = Int(bytes._u32(h + 24))  // md_pad of the free list's record
        var meta = _Meta(
            pageSize: pageSize, lastPage: bytes._u64(h + 120), txnid: bytes._u64(h + 128),
            free: _DatabaseRecord(bytes, at: h + 24), main: _DatabaseRecord(bytes, at: h + 72))
        let (bytesNeeded, overflow) = meta.pages.multipliedReportingOverflow(by: UInt64(pageSize))
        if !_Layout.pageSizes.contains(pageSize) || pageSize & (pageSize - 1) != 0 {
            meta.flaw = .pageSize(pageSize)
        } else if meta.lastPage < 1 || meta.lastPage == .max || overflow || bytesNeeded > UInt64(Int.max) {
            meta.flaw = .lastPage(meta.lastPage)
        } else if flags != _Layout.meta {
            meta.flaw = .flags(flags)
        } else if pgno != UInt64(index) {
            meta.flaw = .pageNumber(pgno)
        }
        return .success(meta)
    }
}

/// What is wrong with a meta page that passes LMDB's own tests.
enum _MetaFlaw: Sendable, Equatable {
    /// Not a page size LMDB can have written: it would divide by it, or read every page at the
    /// wrong place.
    case pageSize(Int)
    /// A last page whose file size overflows: LMDB sizes its map from it.
    case lastPage(UInt64)
    /// Page flags beyond `P_META`.
    case flags(UInt16)
    /// The page says it is another page.
    case pageNumber(UInt64)

    /// True when LMDB cannot work from a meta page with this flaw.
    var misleadsLMDB: Bool {
        switch self {
        case .pageSize, .lastPage: true
        case .flags, .pageNumber: false
        }
    }

    func describe(_ index: Int) -> String {
        switch self {
        case .pageSize(let size): "meta page \(index) gives a page size of \(size) bytes"
        case .lastPage(let page): "meta page \(index) gives \(page) as the last page"
        case .flags(let flags):
            "meta page \(index) has page flags 0x\(String(flags, radix: 16)), not just those of a meta page (0x8)"
        case .pageNumber(let page): "meta page \(index) says it is page \(page)"
        }
    }
}

/// Why a meta page is not valid.
struct _MetaProblem: Error, Sendable {
    var reason: String
    init(_ reason: String) { self.reason = reason }
}
