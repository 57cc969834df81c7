import TestSupport

/// What `check` must say about a change, by what the change hit.
extension DataFileMap {
    func describe(_ p: Int) -> String {
        if p < 2 { return p == newerMeta ? "the newer meta page" : "the older meta page" }
        guard let page = live[p] else { return p < pages ? "free" : "past the last page" }
        return "\(page.kind) of \(page.tree)"
    }

    /// One byte at file offset `o` changed to `v`.
    func expectation(changingByteAt o: Int, to v: UInt8) -> Expectation {
        let p = o / pageSize, q = o % pageSize
        if p >= pages { return .ok }
        if p < 2 {
            return metaExpectation(
                p, q,
                changed: {
                    var b = bytes; b[o] = v; return b
                })
        }
        guard let page = live[p] else { return .ok }
        if q < 16 && page.kind != .overflowBody {  // the pages after an overflow run's first have no header
            // mp_pad is read by nobody (LEAF2 pages only); an overflow page's count sits where
            // lower/upper would.
            return q == 8 || q == 9 ? .ok : .reported
        }
        switch page.kind {
        case .overflowHead, .overflowBody:
            // slack after the data
            guard o >= page.dataStart && o < page.dataStart + page.dataCount else { return .ok }
            return page.tree == .freeList ? .reported : .either
        case .branch, .leaf:
            if q < page.lower { return .reported }
            if q < page.upper { return .ok }  // the unused middle of the page
            guard let node = page.nodes.first(where: { q >= $0.offset && q < $0.offset + ($0.size + 1) & ~1 }) else {
                return .reported
            }
            let r = q - node.offset
            if r >= node.size { return .ok }  // a node's padding byte
            if r < 8 {
                var header = Array(bytes[p * pageSize + node.offset..<p * pageSize + node.offset + 8])
                header[r] = v
                return expectation(ofNode: node, at: p, newHeader: header)
            }
            if r < 8 + node.keySize {
                // A branch's first key is never compared; other keys may still sort.
                return page.kind == .branch && node.offset == page.nodes.first?.offset ? .ok : .either
            }
            if node.big { return .reported }  // the overflow run's page number
            switch page.tree {
            case .main: return r - 8 - node.keySize < 4 ? .ok : .reported  // MDB_db; its md_pad is unused
            case .freeList: return .reported
            case .named: return .either
            }
        }
    }

    /// A whole page overwritten (random bytes or zeros).
    func expectation(ofPage p: Int) -> Expectation {
        if p < 2 { return .reported }
        guard let page = live[p] else { return .ok }
        switch page.kind {
        case .branch, .leaf, .overflowHead: return .reported
        case .overflowBody:
            let hasData = page.dataStart + page.dataCount > p * pageSize
            return !hasData ? .ok : page.tree == .freeList ? .reported : .either
        }
    }

    /// A node's 8-byte header changed to `header`. Nodes are laid out at even offsets, so a size
    /// one byte larger or smaller can stay inside the node's padding and change no other node:
    /// then only the key or the data has one byte more or less, which nothing can tell.
    func expectation(ofNode node: Node, at p: Int, newHeader h: [UInt8]) -> Expectation {
        let page = live[p]!
        let u16 = { (i: Int) in Int(h[i]) | Int(h[i + 1]) << 8 }
        let keySize = u16(6), flags = u16(4), dataSize = u16(0) | u16(2) << 16
        let even = { (n: Int) in (n + 1) & ~1 }
        if page.kind == .branch {
            let at = p * pageSize + node.offset
            if h[0..<6] != bytes[at..<at + 6] { return .reported }  // the child's page number
            let isFirst = node.offset == page.nodes.first?.offset
            if even(8 + keySize) != even(node.size) || node.offset + 8 + keySize > pageSize { return .reported }
            if !isFirst && (keySize == 0 || keySize > 511) { return .reported }
            return .either
        }
        let validFlags = page.tree == .main ? flags == 2 : flags & ~1 == 0
        if !validFlags { return .reported }
        let size = 8 + keySize + (flags & 1 != 0 ? 8 : dataSize)
        if even(size) != even(node.size) || node.offset + size > pageSize { return .reported }
        if keySize == 0 || keySize > 511 || (page.tree == .freeList && keySize != 8) { return .reported }
        if page.tree == .main && dataSize != 48 { return .reported }
        return .either
    }

    /// The meta pages' transaction ids changed to `ids`: still a valid pair (each on the page of
    /// its parity, consecutive) means LMDB may now take the older, intact snapshot as the newer —
    /// a rollback nothing can tell from a crash before the last commit.
    func expectation(ofTxnids ids: [UInt64]) -> Expectation {
        let parity = (0..<2).allSatisfy { ids[$0] == 0 || ids[$0] % 2 == UInt64($0) }
        let (newer, older) = (max(ids[0], ids[1]), min(ids[0], ids[1]))
        return parity && (newer - older == 1 || newer == 0) ? .either : .reported
    }

    /// Byte `q` of meta page `p` changed (`changed` gives the whole file after the change).
    private func metaExpectation(_ p: Int, _ q: Int, changed: () -> [UInt8]) -> Expectation {
        let newer = p == newerMeta
        switch q {
        case 0..<8, 10..<12, 16..<24, 40..<44: return .reported  // pgno, flags, magic, version, page size
        case 8..<10, 12..<16, 24..<40: return .ok  // unused header, address, map size
        case 88..<92: return .ok  // the main database's md_pad
        case 44..<136: return newer ? .reported : .ok  // the records: only the newer one's are read
        case 136..<144: return newer ? .reported : .either  // the older one's last page: only an absurd one is told
        case 144..<152:
            let b = changed()
            return expectation(ofTxnids: [DataFileMap.u64(b, 144), DataFileMap.u64(b, pageSize + 144)])
        default: return .ok
        }
    }
}

/// What `check` must say about a damage.
enum Expectation: String {
    /// It hit a live structure the audit verifies: `check` must exit 1.
    case reported
    /// It hit only bytes nothing reads (a free page, a page's unused middle, padding):
    /// `check` must exit 0 with "ok".
    case ok
    /// It hit data without checksums (a value, a key that may still sort), or could make a
    /// consistent older snapshot look newest: either answer is honest.
    case either
}
