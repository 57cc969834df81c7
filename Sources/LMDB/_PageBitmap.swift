/// A set of page numbers: one bit per page of the file (128 KiB covers a 4 GiB file of 4 KiB
/// pages), and a hash set for pages past its end, where only free pages can be (a page number
/// from a damaged meta page must not make the audit allocate by it).
struct _PageBitmap {
    private var words: [UInt64]
    /// Pages below this are bits in `words`; the rest are in `beyond`.
    let denseLimit: UInt64
    private var beyond: Set<UInt64> = []
    private(set) var count = 0
    /// How many pages at or past `denseLimit` are in the set.
    var beyondCount: Int { beyond.count }

    /// A set for pages `0 ..< pages` of a file holding `filePages` of them.
    init(pages: UInt64, filePages: UInt64) {
        denseLimit = min(pages, filePages + 1)
        words = Array(repeating: 0, count: Int((denseLimit + 63) / 64))
    }

    func contains(_ page: UInt64) -> Bool {
        guard page < denseLimit else { return beyond.contains(page) }
        return words[Int(page / 64)] & (1 << (page % 64)) != 0
    }

    /// Adds `page`; returns false if it was already there.
    mutating func insert(_ page: UInt64) -> Bool {
        if page >= denseLimit {
            guard beyond.insert(page).inserted else { return false }
        } else {
            let i = Int(page / 64), bit: UInt64 = 1 << (page % 64)
            if words[i] & bit != 0 { return false }
            words[i] |= bit
        }
        count += 1
        return true
    }

    /// The pages in both, in ascending order, at most `limit` of them, and how many there are.
    func intersection(_ other: _PageBitmap, limit: Int) -> (pages: [UInt64], count: Int) {
        var pages: [UInt64] = [], total = 0
        for (i, (a, b)) in zip(words, other.words).enumerated() where a & b != 0 {
            var both = a & b
            total += both.nonzeroBitCount
            while both != 0 && pages.count < limit {
                pages.append(UInt64(i * 64 + both.trailingZeroBitCount))
                both &= both - 1
            }
        }
        let far = beyond.intersection(other.beyond).sorted()
        return (pages + far.prefix(max(0, limit - pages.count)), total + far.count)
    }

    /// The pages below `end` in neither set, at most `limit` of them, and how many there are.
    func missing(from other: _PageBitmap, below end: UInt64, limit: Int) -> (pages: [UInt64], count: Int) {
        var pages: [UInt64] = [], total = 0
        let denseEnd = min(end, denseLimit)
        for (i, (a, b)) in zip(words, other.words).enumerated() {
            let base = UInt64(i * 64)
            guard base < denseEnd else { break }
            var neither = ~(a | b)
            if denseEnd - base < 64 { neither &= (1 << (denseEnd - base)) - 1 }
            total += neither.nonzeroBitCount
            while neither != 0 && pages.count < limit {
                pages.append(base + UInt64(neither.trailingZeroBitCount))
                neither &= neither - 1
            }
        }
        guard end > denseLimit else { return (pages, total) }
        let present = beyond.union(other.beyond).filter { $0 < end }
        total += Int(clamping: end - denseLimit) - present.count
        var page = denseLimit
        while pages.count < limit && page < end {
            if !present.contains(page) { pages.append(page) }
            page += 1
        }
        return (pages, total)
    }
}
