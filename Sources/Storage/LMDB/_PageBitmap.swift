/// One bit per page of `data.mdb`: 128 KiB covers a 4 GiB file of 4 KiB pages.
struct _PageBitmap {
    private var words: [UInt64]
    private(set) var count = 0

    init(pages: UInt64) {
        words = Array(repeating: 0, count: Int((pages + 63) / 64))
    }

    func contains(_ page: UInt64) -> Bool {
        words[Int(page / 64)] & (1 << (page % 64)) != 0
    }

    /// Sets the bit of `page`; returns false if it was already set.
    mutating func insert(_ page: UInt64) -> Bool {
        let i = Int(page / 64), bit: UInt64 = 1 << (page % 64)
        if words[i] & bit != 0 { return false }
        words[i] |= bit
        count += 1
        return true
    }

    /// The pages set in both, in ascending order, at most `limit` of them, and how many there are.
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
        return (pages, total)
    }

    /// The pages below `end` set in neither, at most `limit` of them, and how many there are.
    func missing(from other: _PageBitmap, below end: UInt64, limit: Int) -> (pages: [UInt64], count: Int) {
        var pages: [UInt64] = [], total = 0
        for (i, (a, b)) in zip(words, other.words).enumerated() {
            let base = UInt64(i * 64)
            guard base < end else { break }
            var neither = ~(a | b)
            if end - base < 64 { neither &= (1 << (end - base)) - 1 }
            total += neither.nonzeroBitCount
            while neither != 0 && pages.count < limit {
                pages.append(base + UInt64(neither.trailingZeroBitCount))
                neither &= neither - 1
            }
        }
        return (pages, total)
    }
}
