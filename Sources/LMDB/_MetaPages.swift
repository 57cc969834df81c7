/// Both meta pages of `data.mdb`, read with `pread`, and the one LMDB would start from.
struct _MetaPages {
    /// Meta page 0 and 1, or why LMDB would refuse each.
    var pages: [Result<_Meta, _MetaProblem>]

    /// Reads both meta pages. Meta page 1 is looked for one page size in, with the size that meta
    /// page 0 gives, as LMDB does; when meta page 0 gives none it could use, at each page size
    /// LMDB can have written, so that a check still finds the survivor.
    ///
    /// - Throws: `DataFileError.tooShortForMetaPages` when the file ends before meta page 1 does,
    ///   or `.unreadable` when `pread` fails.
    static func read(_ file: _DataFile) throws(DataFileError) -> _MetaPages {
        guard file.size >= _Layout.metaReadSize else {
            throw .tooShortForMetaPages(path: file.path, fileSize: file.size)
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: _Layout.metaReadSize, alignment: 8)
        defer { buffer.deallocate() }
        func meta(_ index: Int, at offset: Int) throws(DataFileError) -> Result<_Meta, _MetaProblem> {
            let n = try file.read(into: buffer, at: offset)
            return _Meta.parse(UnsafeRawBufferPointer(rebasing: buffer[..<n]), index: index)
        }
        let first = try meta(0, at: 0)
        if case .success(let m0) = first, m0.flaw != .pageSize(m0.pageSize) {
            guard file.size >= m0.pageSize + _Layout.metaReadSize else {
                throw .tooShortForMetaPages(path: file.path, fileSize: file.size)
            }
            return _MetaPages(pages: [first, try meta(1, at: m0.pageSize)])
        }
        var second: Result<_Meta, _MetaProblem> = .failure(.init("meta page 1 is not at any page size LMDB uses"))
        var size = _Layout.pageSizes.lowerBound
        while size <= _Layout.pageSizes.upperBound && size + _Layout.metaReadSize <= file.size {
            if case .success(let m1) = try meta(1, at: size), m1.pageSize == size {
                second = .success(m1)
                break
            }
            size *= 2
        }
        return _MetaPages(pages: [first, second])
    }

    /// The meta page LMDB reads a snapshot from: of those passing LMDB's tests, the one with the
    /// larger transaction id, page 0 on a tie (`mdb_env_pick_meta`).
    var chosen: (index: Int, meta: _Meta)? {
        switch (pages[0], pages[1]) {
        case (.success(let m0), .success(let m1)): m1.txnid > m0.txnid ? (1, m1) : (0, m0)
        case (.success(let m0), .failure): (0, m0)
        case (.failure, .success(let m1)): (1, m1)
        case (.failure, .failure): nil
        }
    }

    /// The meta page holding transaction `txnid`, if one still does.
    func holding(_ txnid: UInt64) -> (index: Int, meta: _Meta)? {
        for (i, page) in pages.enumerated() {
            if case .success(let m) = page, m.txnid == txnid { return (i, m) }
        }
        return nil
    }

    /// Why LMDB must not open the file: it would refuse it itself (a meta page failing its tests),
    /// or misread it (the meta page it uses gives a page size or a last page it cannot work
    /// with, or the two give different page sizes). Damage to the other meta page's remaining
    /// fields does not stop LMDB, and is left to `check`.
    var refusal: String? {
        for case .failure(let p) in pages { return p.reason }
        if let (index, meta) = chosen, let flaw = meta.flaw, flaw.misleadsLMDB { return flaw.describe(index) }
        return pageSizeMismatch
    }

    /// Everything wrong with the pair: what LMDB would refuse, what is implausible, and whether
    /// they agree on the page size, hold consecutive transactions, and each hold transactions of
    /// its parity (a reader takes meta page `txnid & 1`).
    var problems: [String] {
        var out: [String] = []
        for (i, page) in pages.enumerated() {
            switch page {
            case .failure(let p): out.append(p.reason)
            case .success(let m): if let flaw = m.flaw { out.append(flaw.describe(i)) }
            }
        }
        guard case .success(let m0) = pages[0], case .success(let m1) = pages[1] else { return out }
        if let mismatch = pageSizeMismatch { out.append(mismatch) }
        for (i, m) in [(0, m0), (1, m1)] where m.txnid != 0 && m.txnid % 2 != UInt64(i) {
            out.append("meta page \(i) holds transaction \(m.txnid), which belongs on meta page \(1 - i)")
        }
        let (newer, older) = m0.txnid > m1.txnid ? (m0.txnid, m1.txnid) : (m1.txnid, m0.txnid)
        if newer - older != 1 && newer != 0 {
            out.append("the meta pages hold transactions \(m0.txnid) and \(m1.txnid), which are not consecutive")
        }
        return out
    }

    /// Two meta pages giving different page sizes: LMDB reads meta page 1 at meta page 0's size
    /// and then uses the newer one's, so every page would be read at the wrong place.
    var pageSizeMismatch: String? {
        guard case .success(let m0) = pages[0], case .success(let m1) = pages[1], m0.pageSize != m1.pageSize else {
            return nil
        }
        return "the meta pages disagree on the page size (\(m0.pageSize) and \(m1.pageSize) bytes)"
    }
}
