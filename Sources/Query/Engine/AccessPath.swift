import LMDB
package import Storage

/// How a plan reaches candidate entities.
package enum AccessPath: CustomStringConvertible {
    /// One point read by the full primary key.
    case key([Value])
    /// Several point reads (`Key in (…)`), in key order.
    case keys([[Value]])
    /// A scan of the primary key: leading key properties equal `prefix`, the next one in `range`.
    case keyRange(prefix: [Value], range: ComponentRange?, reverse: Bool)
    /// An index scan: leading components equal `prefix`, the next one in `range`.
    case index(IndexHandle, prefix: [Value], range: ComponentRange?)
    /// Several equality probes of an index (`Prop in (…)`), in index order.
    case indexIn(IndexHandle, prefix: [Value], values: [Value])
    /// Every entity, in key order.
    case fullScan(reverse: Bool)

    package var description: String {
        func list(_ vs: [Value]) -> String { vs.map(EntitySetHandle.literal).joined(separator: ", ") }
        switch self {
        case .key(let k): return "point read by key (\(list(k)))"
        case .keys(let ks): return "\(ks.count) point reads by key"
        case .keyRange(let p, let r, let rev):
            return "key range scan" + (p.isEmpty ? "" : " with key prefix (\(list(p)))") + (r.map { ", \($0)" } ?? "")
                + (rev ? ", reversed" : "")
        case .index(let i, let p, let r):
            return "index scan on '\(i.definition.name)'" + (p.isEmpty ? "" : " equal to (\(list(p)))")
                + (r.map { ", \($0)" } ?? "")
        case .indexIn(let i, let p, let vs):
            return "\(vs.count) index probes on '\(i.definition.name)'" + (p.isEmpty ? "" : " after (\(list(p)))")
        case .fullScan(let rev): return "full scan in key order" + (rev ? ", reversed" : "")
        }
    }
}

/// The condition on the component after an equality prefix.
package enum ComponentRange: CustomStringConvertible {
    case bounds(ValueBound?, ValueBound?)
    case stringPrefix(String)

    package var description: String {
        switch self {
        case .bounds(let l, let u):
            let lo = l.map { ($0.inclusive ? "≥ " : "> ") + EntitySetHandle.literal($0.value) }
            let hi = u.map { ($0.inclusive ? "≤ " : "< ") + EntitySetHandle.literal($0.value) }
            return "range " + [lo, hi].compactMap { $0 }.joined(separator: " and ")
        case .stringPrefix(let s): return "prefix '\(s)'"
        }
    }
}

extension AccessPath {
    /// The best access for "these properties equal these values": the key, a key prefix, the
    /// index with the longest matching leading components, or a full scan.
    static func forEqualities(_ set: EntitySetHandle, _ equalities: [(String, Value)]) -> AccessPath {
        func value(_ name: String) -> Value? { equalities.first { $0.0 == name }?.1 }
        let keyPrefix = Array(set.type.key.prefix { value($0) != nil }.map { value($0)! })
        if keyPrefix.count == set.type.key.count { return .key(keyPrefix) }
        var best: (IndexHandle, [Value])? = nil
        for index in set.indexes {
            var prefix: [Value] = []
            for c in index.definition.components {
                guard c.path.count == 1, let v = value(c.path[0]) else { break }
                prefix.append(v)
            }
            if prefix.count > (best?.1.count ?? 0) { best = (index, prefix) }
        }
        if let best, best.1.count > keyPrefix.count { return .index(best.0, prefix: best.1, range: nil) }
        if !keyPrefix.isEmpty { return .keyRange(prefix: keyPrefix, range: nil, reverse: false) }
        return .fullScan(reverse: false)
    }

    /// Visits the candidates (primary key, row bytes) until `body` returns false. With `covering`
    /// (an index scan only), the row bytes are the index entries' carried values, not the rows.
    static func run(
        _ access: AccessPath, set: EntitySetHandle, t: ReadView, covering: Bool = false, after: [UInt8]? = nil,
        _ body: (MappedBytes, MappedBytes) throws -> Bool
    ) throws {
        func fetch(_ pk: MappedBytes) throws -> Bool {
            guard let row = try set.row(t, key: Array(pk)) else { return true }
            return try body(pk, row)
        }
        switch access {
        case .key(let values):
            let key = try set.encodeKey(values)
            if let row = try set.row(t, key: key) {
                try key.withUnsafeBytes { pk in _ = try body(pk, row) }
            }
        case .keys(let list):
            let keys = try Set(list.map { try set.encodeKey($0) }).sorted { $0.lexicographicallyPrecedes($1) }
            for key in keys {
                guard let row = try set.row(t, key: key) else { continue }
                let go = try key.withUnsafeBytes { pk in try body(pk, row) }
                if !go { return }
            }
        case .keyRange(let prefix, let range, let reverse):
            let p = try KeyCodec.encode(prefix)
            var (l, u) = try bounds(prefix: p, descending: false, range)
            // The smallest key above `after` is `after` followed by a 0 byte.
            if let after, !reverse, !(after + [0]).lexicographicallyPrecedes(l.bytes) { l = (after + [0], true) }
            try set.scanEntities(t, lower: l, upper: u, reverse: reverse, body)
        case .index(let index, let prefix, let range):
            let p = try index.encodeTuple(prefix)
            let desc =
                prefix.count < index.definition.components.count && index.definition.components[prefix.count].descending
            let (l, u) = try bounds(prefix: p, descending: desc, range)
            // An equality on every component: each entry's tuple is `p` (tuples are prefix-free).
            let whole = range == nil && prefix.count == index.definition.components.count ? p.count : nil
            if covering {
                try set.scanIndexEntries(t, index, lower: l, upper: u, tupleBytes: whole) { _, pk, carried in
                    try body(pk, carried)
                }
            } else {
                try set.scanIndex(t, index, lower: l, upper: u) { _, pk in try fetch(pk) }
            }
        case .indexIn(let index, let prefix, let values):
            let tuples = try Set(values.map { try index.encodeTuple(prefix + [$0]) }).sorted {
                $0.lexicographicallyPrecedes($1)
            }
            var go = true
            for tuple in tuples where go {
                let whole = prefix.count + 1 == index.definition.components.count ? tuple.count : nil
                try set.scanIndexEntries(t, index, lower: (tuple, true), upper: (tuple, true), tupleBytes: whole) {
                    _, pk, carried in
                    go = covering ? try body(pk, carried) : try fetch(pk)
                    return go
                }
            }
        case .fullScan(let reverse):
            try set.scanEntities(
                t, lower: reverse ? nil : after.map { ($0 + [0], true) }, upper: nil, reverse: reverse, body)
        }
    }

    static func bounds(
        prefix p: [UInt8], descending: Bool, _ range: ComponentRange?
    ) throws
        -> (lower: (bytes: [UInt8], inclusive: Bool), upper: (bytes: [UInt8], inclusive: Bool))
    {
        switch range {
        case nil: return ((p, true), (p, true))
        case .bounds(let l, let u)?:
            return try EntitySetHandle.byteBounds(prefix: p, descending: descending, lower: l, upper: u)
        case .stringPrefix(let s)?:
            let b = EntitySetHandle.stringPrefixBytes(prefix: p, descending: descending, s)
            return ((b, true), (b, true))
        }
    }
}
