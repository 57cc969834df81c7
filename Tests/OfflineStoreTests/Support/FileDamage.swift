import TestSupport

/// One damaged copy of a healthy `data.mdb`, made the ways a hostile-input probe damaged files,
/// and what `check` must say about it.
struct FileDamage {
    enum Kind: String, CaseIterable {
        case bitFlip, randomPage, zeroPage, pageHeader, nodePointer, nodeHeader, branchChild, truncation, metaPage
    }
    var kind: Kind
    var detail: String
    var bytes: [UInt8]
    var expectation: Expectation

    static func make(_ kind: Kind, _ map: DataFileMap, _ r: inout SeededRandom) -> FileDamage {
        var d = FileDamage(kind: kind, detail: "", bytes: map.bytes, expectation: .reported)
        let ps = map.pageSize
        let livePages = map.live.keys.sorted()
        let treePages = livePages.filter { [.branch, .leaf].contains(map.live[$0]!.kind) }
        switch kind {
        case .bitFlip:
            let o = Int.random(in: 0..<d.bytes.count, using: &r), bit = Int.random(in: 0..<8, using: &r)
            d.bytes[o] ^= 1 << bit
            d.detail = "bit \(bit) of byte \(o) (page \(o / ps), \(map.describe(o / ps)), offset \(o % ps))"
            d.expectation = map.expectation(changingByteAt: o, to: d.bytes[o])
        case .randomPage, .zeroPage:
            let p = Int.random(in: 0..<d.bytes.count / ps, using: &r)
            for o in p * ps..<(p + 1) * ps { d.bytes[o] = kind == .zeroPage ? 0 : UInt8.random(in: 0...255, using: &r) }
            d.detail = "page \(p) (\(map.describe(p)))"
            d.expectation = map.expectation(ofPage: p)
        case .pageHeader:
            let p = (livePages.filter { map.live[$0]!.kind != .overflowBody } + [0, 1]).randomElement(using: &r)!
            let fields: [(String, Int, Int)] =
                map.live[p]?.kind == .overflowHead || p < 2
                ? [("pgno", 0, 8), ("flags", 10, 2), ("overflow count", 12, 4)]
                : [("pgno", 0, 8), ("flags", 10, 2), ("lower", 12, 2), ("upper", 14, 2)]
            let (name, at, width) = fields.randomElement(using: &r)!
            d.setDifferent(p * ps + at, width: width, &r)
            d.detail = "\(name) of page \(p) (\(map.describe(p)))"
            // A meta page's lower/upper slot holds nothing LMDB reads.
            d.expectation = p < 2 && at == 12 ? .ok : .reported
        case .nodePointer:
            let p = treePages.randomElement(using: &r)!, page = map.live[p]!
            let i = Int.random(in: 0..<page.nodes.count, using: &r)
            let choices = [
                Int.random(in: 0...0xFFFF, using: &r), page.nodes.randomElement(using: &r)!.offset,
                page.nodes[i].offset + 2, page.nodes[i].offset - 2, page.upper,
            ]
            d.setDifferent(p * ps + 16 + 2 * i, width: 2, &r, choices: choices)
            d.detail = "offset of node \(i) of page \(p) (\(map.describe(p)))"
        case .nodeHeader:
            let p = treePages.randomElement(using: &r)!, page = map.live[p]!
            let i = Int.random(in: 0..<page.nodes.count, using: &r), node = page.nodes[i]
            let fields: [(String, Int)] =
                page.kind == .branch ? [("key size", 6)] : [("data size", 0), ("flags", 4), ("key size", 6)]
            let (name, at) = fields.randomElement(using: &r)!
            let o = p * ps + node.offset + at
            let old = DataFileMap.u16(d.bytes, o)
            d.setDifferent(
                o, width: 2, &r,
                choices: [
                    Int.random(in: 0...0xFFFF, using: &r), old + 1, max(old - 1, 0),
                    old ^ 1 << Int.random(in: 0..<16, using: &r),
                ])
            d.detail = "\(name) of node \(i) of page \(p) (\(map.describe(p)))"
            d.expectation = map.expectation(
                ofNode: node, at: p, newHeader: Array(d.bytes[p * ps + node.offset..<p * ps + node.offset + 8]))
        case .branchChild:
            let branches = treePages.filter { map.live[$0]!.kind == .branch }
            let p = branches.randomElement(using: &r)!, page = map.live[p]!
            let i = Int.random(in: 0..<page.nodes.count, using: &r), at = p * ps + page.nodes[i].offset
            let free = map.freePages.randomElement(using: &r) ?? 0
            let target = [
                Int.random(in: 0..<map.pages + 16, using: &r), p, map.roots.randomElement(using: &r)!,
                livePages.randomElement(using: &r)!, free, 1 << 32 | p, 0, 1,
            ].randomElement(using: &r)!
            var old = 0
            for k in 0..<3 { old |= DataFileMap.u16(d.bytes, at + 2 * k) << (16 * k) }
            let new = target == old ? target + 1 : target
            for k in 0..<6 { d.bytes[at + k] = UInt8(truncatingIfNeeded: new >> (8 * k)) }
            d.detail = "child of node \(i) of branch page \(p) (\(map.describe(p))): \(old) → \(new)"
        case .truncation:
            let size = d.bytes.count
            let cut = [
                Int.random(in: 0..<size, using: &r),
                Int.random(in: 2..<size / ps, using: &r) * ps,
                2 * ps,
                Int.random(in: 0..<2 * ps, using: &r),
                Int.random(in: 2..<size / ps, using: &r) * ps + Int.random(in: 1..<ps, using: &r),
                map.liveEnd - ps + Int.random(in: 0..<ps, using: &r),
                Int.random(in: map.liveEnd...size, using: &r),
            ].randomElement(using: &r)!
            d.bytes.removeLast(size - cut)  // a cut at or after the last live page loses free pages only
            d.detail = "to \(cut) bytes (\(cut / ps) whole pages; live pages end at \(map.liveEnd))"
            d.expectation = cut < map.liveEnd ? .reported : .ok
        case .metaPage:
            d = metaDamage(map, &r)
        }
        return d
    }

    /// A meta page (0, 1 or both) overwritten, zeroed, or one field of it changed.
    static func metaDamage(_ map: DataFileMap, _ r: inout SeededRandom) -> FileDamage {
        var d = FileDamage(kind: .metaPage, detail: "", bytes: map.bytes, expectation: .reported)
        let ps = map.pageSize
        let targets = [[0], [1], [0, 1]].randomElement(using: &r)!
        let fields: [(String, Int, Int)] = [
            ("magic", 16, 4), ("version", 20, 4), ("page size", 40, 4), ("map size", 32, 8),
            ("free-list root", 80, 8), ("main root", 128, 8), ("main entries", 120, 8),
            ("last page", 136, 8), ("txnid", 144, 8),
        ]
        let mode = Int.random(in: 0..<3, using: &r)
        let field = fields.randomElement(using: &r)!
        var expectations: [Expectation] = []
        for m in targets {
            switch mode {
            case 0:
                for o in m * ps + 16..<m * ps + 152 { d.bytes[o] = UInt8.random(in: 0...255, using: &r) }
                expectations.append(.reported)
            case 1:
                for o in m * ps..<(m + 1) * ps { d.bytes[o] = 0 }
                expectations.append(.reported)
            default:
                let (name, at, width) = field
                d.setDifferent(m * ps + at, width: width, &r)
                switch name {
                case "magic", "version", "page size": expectations.append(.reported)
                case "map size": expectations.append(.ok)
                case "txnid":
                    expectations.append(
                        map.expectation(ofTxnids: [0, 1].map { DataFileMap.u64(d.bytes, $0 * ps + 144) }))
                case "last page": expectations.append(m == map.newerMeta ? .reported : .either)
                default: expectations.append(m == map.newerMeta ? .reported : .ok)
                }
            }
        }
        d.detail = "meta page(s) \(targets): " + ["random bytes", "zeroed", "\(field.0) changed"][mode]
        d.expectation = expectations.contains(.reported) ? .reported : expectations.contains(.either) ? .either : .ok
        if mode == 2, field.0 == "txnid", targets.count == 2 {
            d.expectation = map.expectation(ofTxnids: [0, 1].map { DataFileMap.u64(d.bytes, $0 * ps + 144) })
        }
        return d
    }

    /// Writes a little-endian value of `width` bytes at `offset` that differs from the one there:
    /// one of `choices`, else a random one.
    mutating func setDifferent(_ offset: Int, width: Int, _ r: inout SeededRandom, choices: [Int] = []) {
        let old = (0..<width).reduce(UInt64(0)) { $0 | UInt64(bytes[offset + $1]) << (8 * $1) }
        let mask: UInt64 = width == 8 ? .max : (1 << (8 * width)) - 1
        var new =
            choices.isEmpty
            ? UInt64.random(in: 0...mask, using: &r)
            : UInt64(truncatingIfNeeded: choices.randomElement(using: &r)!) & mask
        if new == old { new = (old &+ 1) & mask }
        for k in 0..<width { bytes[offset + k] = UInt8(truncatingIfNeeded: new >> (8 * k)) }
    }
}
