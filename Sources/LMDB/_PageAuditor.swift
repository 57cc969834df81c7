/// The walk behind `PageAudit`: one snapshot's trees, read page by page with `pread`.
final class _PageAuditor {
    let file: _DataFile
    let meta: _Meta
    let pageSize: Int
    let maxProblems: Int
    /// Pages found in a tree (and the two meta pages).
    var used: _PageBitmap
    /// Pages the free list holds.
    var free: _PageBitmap
    private(set) var problems: [String] = []
    private(set) var problemCount = 0
    /// Each named database walked, with the entries found.
    var databases: [(name: String, entries: Int)] = []
    /// One page, reused for every page read.
    let page: UnsafeMutableRawBufferPointer
    /// Overflow page headers and the free list's overflow data, read in pieces of this size.
    let chunk: UnsafeMutableRawBufferPointer

    init(file: _DataFile, meta: _Meta, maxProblems: Int) {
        self.file = file
        self.meta = meta
        self.pageSize = meta.pageSize
        self.maxProblems = maxProblems
        let filePages = UInt64(file.size / meta.pageSize)
        used = _PageBitmap(pages: meta.pages, filePages: filePages)
        free = _PageBitmap(pages: meta.pages, filePages: filePages)
        page = .allocate(byteCount: meta.pageSize, alignment: 8)
        chunk = .allocate(byteCount: 64 << 10, alignment: 8)
        _ = used.insert(0)
        _ = used.insert(1)
    }

    deinit {
        page.deallocate()
        chunk.deallocate()
    }

    func problem(_ text: String) {
        problemCount += 1
        if problems.count < maxProblems { problems.append(text) }
    }

    /// The free list, the main database, every named database; then every page must be in
    /// exactly one of them or free.
    func auditEverything() {
        var freeList = _Tree(name: "the free list", kind: .freeList, record: meta.free)
        walk(&freeList)
        var main = _Tree(name: "the main database", kind: .main, record: meta.main)
        walk(&main)
        var damaged = freeList.damaged || main.damaged
        for (name, record) in main.subDatabases {
            var tree = _Tree(name: name, kind: .named, record: record)
            walk(&tree)
            damaged = damaged || tree.damaged
            databases.append((name, Int(clamping: tree.entries)))
        }
        let both = used.intersection(free, limit: 5)
        if both.count > 0 {
            problem(
                "the free list holds \(both.count) page(s) that a tree uses (\(Self.list(both.pages, both.count))): LMDB would reuse them and overwrite live data"
            )
        }
        // After damage, pages below a bad one were never reached: counting them lost says nothing.
        guard !damaged else { return }
        let lost = used.missing(from: free, below: meta.pages, limit: 5)
        if lost.count > 0 {
            problem(
                "\(lost.count) page(s) are neither in a tree nor in the free list (\(Self.list(lost.pages, lost.count))) though the meta page counts \(meta.pages)"
            )
        }
    }

    /// Walks only the free list (for the check at open); returns the free pages, or the first
    /// problem found.
    func freeListOnly() -> Result<_PageBitmap, _MetaProblem> {
        var freeList = _Tree(name: "the free list", kind: .freeList, record: meta.free)
        walk(&freeList)
        if let first = problems.first { return .failure(.init(first)) }
        return .success(free)
    }

    static func list(_ pages: [UInt64], _ count: Int) -> String {
        "page" + (count == 1 ? " " : "s ") + pages.map(String.init).joined(separator: ", ")
            + (count > pages.count ? ", …" : "")
    }

    // MARK: Pages

    /// Marks `count` pages from `pgno` as used by `tree`: they must lie after the meta pages,
    /// within the last page the meta page gives and inside the file, and be used by nothing else.
    func claim(_ pgno: UInt64, count: UInt64 = 1, _ tree: inout _Tree, from: _Origin) -> Bool {
        let last = pgno &+ count &- 1
        guard pgno >= 2, count >= 1, last >= pgno, last <= meta.lastPage else {
            problem(
                "\(tree.name): \(from) points to page \(pgno)\(count > 1 ? " (\(count) pages)" : ""), outside pages 2…\(meta.lastPage)"
            )
            tree.damaged = true
            return false
        }
        guard (last + 1) * UInt64(pageSize) <= UInt64(file.size) else {
            problem(
                "\(tree.name): page \(last), reached from \(from), lies past the end of the file (\(file.size) bytes, \(UInt64(file.size) / UInt64(pageSize)) whole pages of the \(meta.pages) the meta page gives): data.mdb is truncated"
            )
            tree.damaged = true
            return false
        }
        for p in pgno...last where !used.insert(p) {
            problem(
                "\(tree.name): page \(p), reached from \(from), was already reached from elsewhere (a cycle or a shared page)"
            )
            tree.damaged = true
            return false
        }
        return true
    }

    /// Reads page `pgno` into `page`; a read error is a problem.
    func readPage(_ pgno: UInt64, _ tree: inout _Tree) -> Bool {
        do {
            let n = try file.read(into: page, at: Int(pgno) * pageSize)
            if n == pageSize { return true }
            problem("\(tree.name): page \(pgno) is cut off by the end of the file")
        } catch {
            problem("\(tree.name): page \(pgno): \(error)")
        }
        tree.damaged = true
        return false
    }
}

/// One B+tree being walked, and what was found in it.
struct _Tree {
    enum Kind {
        /// Keys are transaction ids (`MDB_INTEGERKEY`); data are lists of free pages.
        case freeList
        /// Keys are database names; every entry is a named database (`F_SUBDATA`).
        case main
        /// One of the store's databases: `memcmp` order, data inline or on overflow pages.
        case named
    }
    let name: String
    let kind: Kind
    let record: _DatabaseRecord
    var branchPages: UInt64 = 0
    var leafPages: UInt64 = 0
    var overflowPages: UInt64 = 0
    var entries: UInt64 = 0
    var damaged = false
    /// The named databases a main database's leaves hold.
    var subDatabases: [(String, _DatabaseRecord)] = []
    /// The free list's previous page number, to check each list is in descending order.
    var previousFreePage: UInt64 = 0

    init(name: String, kind: Kind, record: _DatabaseRecord) {
        self.name = name
        self.kind = kind
        self.record = record
    }
}

/// Where a page number was found; said only in a problem, so the walk builds no strings.
enum _Origin: CustomStringConvertible {
    case root
    case branch(UInt64, Int)
    case leaf(UInt64, Int)

    var description: String {
        switch self {
        case .root: "its root"
        case .branch(let page, let node): "branch page \(page) node \(node)"
        case .leaf(let page, let node): "leaf page \(page) node \(node)"
        }
    }
}
