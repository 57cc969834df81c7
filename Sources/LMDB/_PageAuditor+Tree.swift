#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension _PageAuditor {
    /// Checks `tree`'s record, walks it from its root, and compares what it found with the counts
    /// the record gives.
    func walk(_ tree: inout _Tree) {
        let r = tree.record
        if tree.kind == .freeList, r.flags != _Layout.integerKey {
            problem("\(tree.name) has database flags 0x\(String(r.flags, radix: 16)), not MDB_INTEGERKEY (0x8)")
            tree.damaged = true
            return
        }
        if tree.kind != .freeList, r.flags != 0 {
            problem(
                "\(tree.name) has database flags 0x\(String(r.flags, radix: 16)); OfflineStore opens every database without flags (no DUPSORT, INTEGERKEY or REVERSEKEY)"
            )
            tree.damaged = true
            return
        }
        if r.root == _Layout.invalidPage {
            if r.depth != 0 || r.entries != 0 || r.branchPages != 0 || r.leafPages != 0 || r.overflowPages != 0 {
                problem(
                    "\(tree.name) has no root page, yet its record gives depth \(r.depth), \(r.entries) entries and \(r.branchPages + r.leafPages + r.overflowPages) pages"
                )
                tree.damaged = true
            }
            return
        }
        guard (1..._Layout.maxDepth).contains(r.depth) else {
            problem("\(tree.name) has depth \(r.depth) in its record (LMDB walks at most \(_Layout.maxDepth) levels)")
            tree.damaged = true
            return
        }
        visit(r.root, level: 1, lower: nil, upper: nil, from: .root, &tree)
        guard !tree.damaged else { return }
        var wrong: [String] = []
        if tree.entries != r.entries { wrong.append("\(r.entries) entries (found \(tree.entries))") }
        if tree.branchPages != r.branchPages {
            wrong.append("\(r.branchPages) branch pages (found \(tree.branchPages))")
        }
        if tree.leafPages != r.leafPages { wrong.append("\(r.leafPages) leaf pages (found \(tree.leafPages))") }
        if tree.overflowPages != r.overflowPages {
            wrong.append("\(r.overflowPages) overflow pages (found \(tree.overflowPages))")
        }
        if !wrong.isEmpty {
            problem("\(tree.name): its record gives " + wrong.joined(separator: ", "))
            tree.damaged = true
        }
    }

    /// Visits page `pgno` at `level` (the root is level 1) of `tree`, whose keys must lie in
    /// `lower ..< upper` (nil: unbounded), and everything below it.
    func visit(_ pgno: UInt64, level: Int, lower: [UInt8]?, upper: [UInt8]?, from: _Origin, _ tree: inout _Tree) {
        guard claim(pgno, &tree, from: from), readPage(pgno, &tree) else { return }
        let p = UnsafeRawBufferPointer(page)
        let depth = tree.record.depth
        let isLeaf = level == depth
        func bad(_ what: String) {
            problem(
                "\(tree.name): \(isLeaf ? "leaf" : "branch") page \(pgno) (level \(level) of \(depth), from \(from)) \(what)"
            )
            tree.damaged = true
        }
        if p._u64(_Layout.pageNumberOffset) != pgno {
            return bad("says it is page \(p._u64(_Layout.pageNumberOffset))")
        }
        let flags = p._u16(_Layout.pageFlagsOffset), expected = isLeaf ? _Layout.leaf : _Layout.branch
        guard flags == expected else {
            return bad(
                "has page flags 0x\(String(flags, radix: 16)); a \(isLeaf ? "leaf (0x2)" : "branch (0x1)") page belongs at this level"
            )
        }
        let lowerEdge = Int(p._u16(_Layout.lowerOffset)), upperEdge = Int(p._u16(_Layout.upperOffset))
        guard lowerEdge >= _Layout.pageHeaderSize, (lowerEdge - _Layout.pageHeaderSize) % 2 == 0,
            lowerEdge <= upperEdge, upperEdge <= pageSize
        else {
            return bad(
                "has mp_lower \(lowerEdge) and mp_upper \(upperEdge): no valid layout of a \(pageSize)-byte page")
        }
        let n = (lowerEdge - _Layout.pageHeaderSize) / 2
        // LMDB asserts a branch has two (ITS#8336 spares the free list)
        let fewest = isLeaf || tree.kind == .freeList ? 1 : 2
        guard n >= fewest else { return bad("holds \(n) node(s); a page at this level holds at least \(fewest)") }

        // Every node inside the page, and together exactly filling mp_upper ..< page end.
        var filled = 0
        for i in 0..<n {
            let offset = Int(p._u16(_Layout.pageHeaderSize + 2 * i))
            guard offset >= upperEdge, offset % 2 == 0, offset + _Layout.nodeHeaderSize <= pageSize else {
                return bad("has node \(i) at offset \(offset), outside its node area \(upperEdge)..<\(pageSize)")
            }
            let size = nodeSize(p, at: offset, isLeaf: isLeaf)
            guard offset + size <= pageSize else {
                return bad("has node \(i) of \(size) bytes at offset \(offset), past the end of the page")
            }
            filled += (size + 1) & ~1
        }
        guard filled == pageSize - upperEdge else {
            return bad(
                "has nodes filling \(filled) bytes where mp_upper leaves \(pageSize - upperEdge): nodes overlap or are lost"
            )
        }

        // Keys: sizes, order within the page, and inside the bounds the separators above give.
        // A branch's first key is never compared by LMDB and is not checked.
        let firstKey = isLeaf ? 0 : 1
        for i in firstKey..<n {
            let k = key(p, i).count
            if tree.kind == .freeList ? k != 8 : !(1..._Layout.maxKeySize).contains(k) {
                bad("has a key of \(k) bytes at node \(i)")
            } else if i > firstKey, compare(key(p, i - 1), key(p, i), tree.kind) >= 0 {
                bad("has keys out of order at node \(i)")
            }
        }
        if n > firstKey {
            if let lower, lower.withUnsafeBytes({ compare($0, key(p, firstKey), tree.kind) }) > 0 {
                bad("has a key below the separator that leads to it (node \(firstKey))")
            }
            if let upper, upper.withUnsafeBytes({ compare(key(p, n - 1), $0, tree.kind) }) >= 0 {
                bad("has a key at or above the next separator of its parent (node \(n - 1))")
            }
        }

        if isLeaf {
            tree.leafPages += 1
            leafNodes(p, count: n, pgno: pgno, &tree)
            return
        }
        tree.branchPages += 1
        // The page buffer is reused below: copy the children and separators out first.
        var children: [(pgno: UInt64, key: [UInt8])] = []
        children.reserveCapacity(n)
        for i in 0..<n {
            let offset = Int(p._u16(_Layout.pageHeaderSize + 2 * i))
            let child = UInt64(p._u16(offset)) | UInt64(p._u16(offset + 2)) << 16 | UInt64(p._u16(offset + 4)) << 32
            children.append((child, i == 0 ? [] : Array(key(p, i))))
        }
        for (i, child) in children.enumerated() {
            visit(
                child.pgno, level: level + 1, lower: i == 0 ? lower : child.key,
                upper: i + 1 < n ? children[i + 1].key : upper, from: .branch(pgno, i), &tree)
        }
    }

    /// The bytes node at `offset` takes: header and key, and on a leaf its data, or the page
    /// number of its overflow run (`F_BIGDATA`).
    func nodeSize(_ p: UnsafeRawBufferPointer, at offset: Int, isLeaf: Bool) -> Int {
        let keySize = Int(p._u16(offset + 6))
        guard isLeaf else { return _Layout.nodeHeaderSize + keySize }
        let big = p._u16(offset + 4) & _Layout.bigData != 0
        return _Layout.nodeHeaderSize + keySize + (big ? 8 : dataSize(p, at: offset))
    }

    /// A leaf node's data size: `mn_lo | mn_hi << 16`.
    func dataSize(_ p: UnsafeRawBufferPointer, at offset: Int) -> Int {
        Int(p._u16(offset)) | Int(p._u16(offset + 2)) << 16
    }

    /// Node `i`'s key (already checked to lie inside the page).
    func key(_ p: UnsafeRawBufferPointer, _ i: Int) -> UnsafeRawBufferPointer {
        let offset = Int(p._u16(_Layout.pageHeaderSize + 2 * i))
        let start = offset + _Layout.nodeHeaderSize
        return UnsafeRawBufferPointer(rebasing: p[start..<start + Int(p._u16(offset + 6))])
    }

    /// LMDB's default order (`mdb_cmp_memn`: `memcmp`, then the shorter first); the free list
    /// compares its 8-byte keys as integers.
    func compare(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer, _ kind: _Tree.Kind) -> Int {
        if kind == .freeList, a.count == 8, b.count == 8 {
            let x = a._u64(0), y = b._u64(0)
            return x < y ? -1 : x > y ? 1 : 0
        }
        let common = min(a.count, b.count)
        if common > 0 {
            let c = memcmp(a.baseAddress!, b.baseAddress!, common)
            if c != 0 { return Int(c) }
        }
        return a.count - b.count
    }
}
