extension _PageAuditor {
    /// Checks a leaf's nodes by what its tree holds: named databases in the main database, plain
    /// values (inline or on an overflow run) in ours, lists of free pages in the free list.
    func leafNodes(_ p: UnsafeRawBufferPointer, count n: Int, pgno: UInt64, _ tree: inout _Tree) {
        for i in 0..<n {
            let offset = Int(p._u16(_Layout.pageHeaderSize + 2 * i))
            let flags = p._u16(offset + 4), size = dataSize(p, at: offset)
            let dataStart = offset + _Layout.nodeHeaderSize + Int(p._u16(offset + 6))
            let here = _Origin.leaf(pgno, i)
            tree.entries += 1
            switch tree.kind {
            case .main:
                guard flags == _Layout.subData, size == _Layout.databaseRecordSize else {
                    problem(
                        "\(tree.name): \(here) is not a named database (node flags 0x\(String(flags, radix: 16)), \(size) bytes of data)"
                    )
                    tree.damaged = true
                    continue
                }
                tree.subDatabases.append(
                    (String(decoding: key(p, i), as: UTF8.self), _DatabaseRecord(p, at: dataStart)))
            case .named, .freeList:
                guard flags & ~_Layout.bigData == 0 else {
                    problem(
                        "\(tree.name): \(here) has node flags 0x\(String(flags, radix: 16)); only F_BIGDATA (0x1) belongs here"
                    )
                    tree.damaged = true
                    continue
                }
                let big = flags & _Layout.bigData != 0
                let run = big ? p._u64(dataStart) : 0
                if big, !overflowRun(run, size: size, &tree, from: here) { continue }
                if tree.kind == .freeList {
                    freeListEntry(p, node: i, inline: big ? nil : dataStart, run: run, size: size, &tree, from: here)
                }
            }
        }
    }

    /// Checks the overflow run at `pgno` that holds `size` bytes of a node's data: its first page
    /// says it is that page and an overflow page, and its page count covers the data and stays
    /// inside the file. Claims the run's pages.
    func overflowRun(_ pgno: UInt64, size: Int, _ tree: inout _Tree, from: _Origin) -> Bool {
        guard pgno >= 2, pgno <= meta.lastPage, (pgno + 1) * UInt64(pageSize) <= UInt64(file.size) else {
            return claim(pgno, &tree, from: from)  // says what is wrong with the page number
        }
        let header = UnsafeMutableRawBufferPointer(rebasing: chunk[..<_Layout.pageHeaderSize])
        do {
            _ = try file.read(into: header, at: Int(pgno) * pageSize)
        } catch {
            problem("\(tree.name): overflow page \(pgno): \(error)")
            tree.damaged = true
            return false
        }
        let h = UnsafeRawBufferPointer(header)
        let count = UInt64(h._u32(_Layout.overflowCountOffset)),
            needed = _Layout.overflowPages(size, pageSize: pageSize)
        var wrong: String?
        if h._u64(_Layout.pageNumberOffset) != pgno {
            wrong = "says it is page \(h._u64(_Layout.pageNumberOffset))"
        } else if h._u16(_Layout.pageFlagsOffset) != _Layout.overflow {
            wrong =
                "has page flags 0x\(String(h._u16(_Layout.pageFlagsOffset), radix: 16)), not those of an overflow page (0x4)"
        } else if count < UInt64(needed) {
            wrong = "counts \(count) page(s); the \(size) bytes of data need \(needed)"
        }
        if let wrong {
            problem("\(tree.name): overflow page \(pgno), from \(from), \(wrong)")
            tree.damaged = true
            return false
        }
        guard claim(pgno, count: count, &tree, from: from) else { return false }
        tree.overflowPages += count
        return true
    }

    /// Reads one free-list entry: its key is the transaction that freed the pages, its data a
    /// count and then that many page numbers in descending order (an `MDB_IDL`). The data is in
    /// the page at `inline`, or read piece by piece from the overflow run at `run`.
    func freeListEntry(
        _ p: UnsafeRawBufferPointer, node i: Int, inline: Int?, run: UInt64, size: Int,
        _ tree: inout _Tree, from: _Origin
    ) {
        let key = key(p, i)
        guard key.count == 8 else { return }  // a key of another size was reported with its page
        let txn = key._u64(0)
        func bad(_ what: String) {
            problem("\(tree.name): \(from) (transaction \(txn)) \(what)")
            tree.damaged = true
        }
        guard txn >= 1, txn <= meta.txnid else {
            return bad("is keyed after the snapshot's own transaction \(meta.txnid)")
        }
        guard size >= 8, size % 8 == 0 else {
            return bad("has \(size) bytes of data, not a list of 8-byte page numbers")
        }
        var list = _FreeList(expected: UInt64(size / 8 - 1))
        if let inline {
            guard
                list.take(
                    UnsafeRawBufferPointer(rebasing: p[inline..<inline + size]), into: &free, lastPage: meta.lastPage)
            else {
                return bad(list.problem)
            }
            return
        }
        var done = 0
        while done < size {
            let n = min(chunk.count, size - done)
            let piece = UnsafeMutableRawBufferPointer(rebasing: chunk[..<n])
            do {
                guard try file.read(into: piece, at: Int(run) * pageSize + _Layout.pageHeaderSize + done) == n else {
                    return bad("has data cut off by the end of the file")
                }
            } catch {
                return bad("cannot be read: \(error)")
            }
            guard list.take(UnsafeRawBufferPointer(piece), into: &free, lastPage: meta.lastPage) else {
                return bad(list.problem)
            }
            done += n
        }
    }
}

/// One free-list entry's page numbers, taken a piece at a time.
struct _FreeList {
    /// How many page numbers the entry's size leaves room for.
    let expected: UInt64
    private var count: UInt64?
    private var previous = UInt64.max
    private(set) var problem = ""

    init(expected: UInt64) { self.expected = expected }

    /// Takes the next 8-byte words; false, with `problem` said, at the first wrong one.
    mutating func take(_ words: UnsafeRawBufferPointer, into free: inout _PageBitmap, lastPage: UInt64) -> Bool {
        for offset in stride(from: 0, to: words.count, by: 8) {
            let word = words._u64(offset)
            guard count != nil else {
                guard word == expected else {
                    problem = "counts \(word) free pages in room for \(expected)"
                    return false
                }
                count = word
                continue
            }
            guard word >= 2, word <= lastPage else {
                problem = "lists page \(word) as free, outside pages 2…\(lastPage)"
                return false
            }
            guard word < previous else {
                problem = "lists page \(word) after page \(previous), out of descending order"
                return false
            }
            previous = word
            // Pages past the end of the file are free ones LMDB never wrote; a transaction's worth
            // at most, never more than the file holds (nor may they make the audit grow by them).
            if word >= free.denseLimit, free.beyondCount >= max(Int(free.denseLimit), 1 << 16) {
                problem = "lists more free pages past the end of the file than the file holds"
                return false
            }
            guard free.insert(word) else {
                problem = "lists page \(word) as free, which another entry already lists"
                return false
            }
        }
        return true
    }
}
