/// Where the live structures of a healthy `data.mdb` lie, found by the test's own walk of the
/// file (independent of `PageAudit`, and trusting the file, which is healthy), so a damage can be
/// classed by what it hit: must `check` report it, must it pass, or may it do either.
///
/// Layout (LMDB 0.9, 64-bit): a page starts with `mp_pgno` (8), `mp_pad` (2), `mp_flags` (2),
/// `mp_lower` and `mp_upper` (2 + 2; an overflow page's count of pages in their place); then the
/// node offsets. A node is `mn_lo`, `mn_hi`, `mn_flags`, `mn_ksize` (2 each), the key, the data.
public struct DataFileMap: Sendable {
    public enum Tree: Sendable { case freeList, main, named }
    public enum Kind: Sendable { case branch, leaf, overflowHead, overflowBody }
    public struct Node: Sendable {
        public var offset: Int
        public var keySize: Int
        /// The data's size (a leaf's; on an overflow run when `big`).
        public var dataSize: Int
        public var flags: Int
        public var big: Bool
        /// Header, key and data (or the 8-byte overflow page number) in the page.
        public var size: Int
    }
    public struct Page: Sendable {
        public var kind: Kind
        public var tree: Tree
        /// The database's name ("" for the free list and the main database).
        public var database = ""
        public var lower = 0
        public var upper = 0
        public var nodes: [Node] = []
        /// For an overflow run's pages: where in the file its data starts, and how long it is.
        public var dataStart = 0
        public var dataCount = 0
    }

    public let bytes: [UInt8]
    public let pageSize: Int
    /// `mm_last_pg + 1` of the newer meta page.
    public let pages: Int
    /// The meta page LMDB uses (the larger transaction id).
    public let newerMeta: Int
    public let txnids: [UInt64]
    public private(set) var live: [Int: Page] = [:]
    public private(set) var roots: [Int] = []

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
        let size = Int(Self.u32(bytes, 16 + 24))
        pageSize = size
        txnids = [Self.u64(bytes, 144), Self.u64(bytes, size + 144)]
        newerMeta = txnids[1] > txnids[0] ? 1 : 0
        let meta = newerMeta * size
        pages = Int(Self.u64(bytes, meta + 136)) + 1
        walk(Int(truncatingIfNeeded: Self.u64(bytes, meta + 40 + 40)), .freeList, "")
        walk(Int(truncatingIfNeeded: Self.u64(bytes, meta + 88 + 40)), .main, "")
    }

    public static func u16(_ b: [UInt8], _ o: Int) -> Int { Int(b[o]) | Int(b[o + 1]) << 8 }
    public static func u32(_ b: [UInt8], _ o: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(b[o + $1]) << (8 * $1) }
    }
    public static func u64(_ b: [UInt8], _ o: Int) -> UInt64 {
        (0..<8).reduce(0) { $0 | UInt64(b[o + $1]) << (8 * $1) }
    }

    private mutating func walk(_ pgno: Int, _ tree: Tree, _ name: String) {
        guard pgno >= 2, pgno < pages else { return }  // an empty tree (P_INVALID)
        roots.append(pgno)
        visit(pgno, tree, name)
    }

    private mutating func visit(_ pgno: Int, _ tree: Tree, _ name: String) {
        let base = pgno * pageSize
        let isBranch = Self.u16(bytes, base + 10) == 1
        var page = Page(
            kind: isBranch ? .branch : .leaf, tree: tree, database: name,
            lower: Self.u16(bytes, base + 12), upper: Self.u16(bytes, base + 14))
        for i in 0..<(page.lower - 16) / 2 {
            let offset = Self.u16(bytes, base + 16 + 2 * i), at = base + offset
            let keySize = Self.u16(bytes, at + 6), flags = Self.u16(bytes, at + 4)
            let low = Self.u16(bytes, at), high = Self.u16(bytes, at + 2)
            if isBranch {
                page.nodes.append(
                    Node(offset: offset, keySize: keySize, dataSize: 0, flags: flags, big: false, size: 8 + keySize))
                visit(low | high << 16 | flags << 32, tree, name)
                continue
            }
            let dataSize = low | high << 16, big = flags & 1 != 0
            page.nodes.append(
                Node(
                    offset: offset, keySize: keySize, dataSize: dataSize, flags: flags, big: big,
                    size: 8 + keySize + (big ? 8 : dataSize)))
            let data = at + 8 + keySize
            if tree == .main {
                let key = String(decoding: bytes[at + 8..<at + 8 + keySize], as: UTF8.self)
                walk(Int(truncatingIfNeeded: Self.u64(bytes, data + 40)), .named, key)
            }
            if big {
                let run = Int(Self.u64(bytes, data)), count = Int(Self.u32(bytes, run * pageSize + 12))
                for (j, p) in (run..<run + count).enumerated() {
                    live[p] = Page(
                        kind: j == 0 ? .overflowHead : .overflowBody, tree: tree, database: name,
                        dataStart: run * pageSize + 16, dataCount: dataSize)
                }
            }
        }
        live[pgno] = page
    }

    /// Where the file's live pages end: a file cut shorter loses a page LMDB reads.
    public var liveEnd: Int { ((live.keys.max() ?? 1) + 1) * pageSize }

    /// Pages neither live nor meta, below `pages`: the free ones.
    public var freePages: [Int] { (2..<pages).filter { live[$0] == nil } }
}
