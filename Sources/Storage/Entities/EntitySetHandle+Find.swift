package import LMDB
/// A bound of a range on one index component, in value order.
public struct ValueBound: Sendable, Hashable {
    public var value: Value
    public var inclusive: Bool
    public init(_ value: Value, inclusive: Bool) {
        self.value = value
        self.inclusive = inclusive
    }
}

extension EntitySetHandle {
    /// Visits index entries between two byte bounds, in index order, until `body` returns false.
    ///
    /// A bound is a tuple prefix: an inclusive bound takes every entry that starts with it, an
    /// exclusive one none of them. `body` gets the entry and its primary-key part.
    package func scanIndex(
        _ t: ReadView, _ index: IndexHandle,
        lower: (bytes: [UInt8], inclusive: Bool)?, upper: (bytes: [UInt8], inclusive: Bool)?,
        _ body: (MappedBytes, MappedBytes) throws -> Bool
    ) throws {
        try scanIndexEntries(t, index, lower: lower, upper: upper) { entry, pk, _ in try body(entry, pk) }
    }

    /// `scanIndex`, with each entry's value too (a covering index's carried properties, as a row).
    /// `tupleBytes`: every entry in the range has an index tuple of exactly that many bytes (the
    /// bounds are one whole tuple: an equality on every component), so it is not decoded.
    package func scanIndexEntries(
        _ t: ReadView, _ index: IndexHandle,
        lower: (bytes: [UInt8], inclusive: Bool)?, upper: (bytes: [UInt8], inclusive: Bool)?,
        tupleBytes: Int? = nil, _ body: (MappedBytes, MappedBytes, MappedBytes) throws -> Bool
    ) throws {
        var start: [UInt8]? = nil
        if let lower { start = lower.inclusive ? lower.bytes : Self.successor(lower.bytes) }
        if lower != nil && start == nil { return }
        // LMDB refuses an empty key; the empty prefix is the start  // nothing sorts after the maximum prefix
        if start?.isEmpty == true { start = nil }
        let stop: [UInt8]? = upper.flatMap {
            $0.inclusive ? Self.successor($0.bytes) : ($0.bytes.isEmpty ? [] : $0.bytes)
        }
        let tupleCount = index.definition.components.count
        let descending = index.descending
        try t.withCursor(index.database) { c in
            var e = try start.map { try c.seek($0) } ?? c.first()
            while let (k, v) = e {
                if let stop, !Self.precedes(k, stop) { return }
                let n = try tupleBytes ?? KeyCodec.tupleLength(k, count: tupleCount, descending: descending)
                if try !body(k, MappedBytes(rebasing: k[n...]), v) { return }
                e = try c.next()
            }
        }
    }

    /// Whether `a` sorts before `b` bytewise (a prefix first), as `lexicographicallyPrecedes`
    /// says, eight bytes at a time: the stop test of every index entry a scan reads.
    @inline(__always)
    package static func precedes(_ a: UnsafeRawBufferPointer, _ b: [UInt8]) -> Bool {
        b.withUnsafeBytes { b in
            let n = Swift.min(a.count, b.count)
            var i = 0
            while i + 8 <= n {
                let x = UInt64(bigEndian: a.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                let y = UInt64(bigEndian: b.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                if x != y { return x < y }
                i += 8
            }
            while i < n {
                if a[i] != b[i] { return a[i] < b[i] }
                i += 1
            }
            return a.count < b.count
        }
    }

    /// The smallest byte string greater than every string that starts with `p`; nil if none.
    static func successor(_ p: [UInt8]) -> [UInt8]? {
        var s = p
        while let last = s.last, last == 0xFF { s.removeLast() }
        guard !s.isEmpty else { return nil }
        s[s.count - 1] += 1
        return s
    }

    /// Primary keys of entities whose first `values.count` index components equal `values`, in index order.
    package func findEqual(
        _ t: ReadView, index: IndexHandle, _ values: [Value], _ body: (MappedBytes) throws -> Bool
    ) throws {
        let p = try index.encodeTuple(values)
        try scanIndex(t, index, lower: (p, true), upper: (p, true)) { _, pk in try body(pk) }
    }

    /// Byte bounds for "components equal `prefix`, and the next one between `lower` and `upper`"
    /// (nulls never match a range), for a next component that is `descending` or not.
    package static func byteBounds(
        prefix p: [UInt8], descending desc: Bool, lower: ValueBound?, upper: ValueBound?
    ) throws
        -> (lower: (bytes: [UInt8], inclusive: Bool), upper: (bytes: [UInt8], inclusive: Bool))
    {
        let low = lower ?? (upper != nil ? ValueBound(.null, inclusive: false) : nil)
        func bytes(_ b: ValueBound) throws -> (bytes: [UInt8], inclusive: Bool) {
            var out = p
            try KeyCodec.append(b.value, descending: desc, to: &out)
            return (out, b.inclusive)
        }
        var byteLower: (bytes: [UInt8], inclusive: Bool) = (p, true)
        var byteUpper: (bytes: [UInt8], inclusive: Bool) = (p, true)
        if let low { if desc { byteUpper = try bytes(low) } else { byteLower = try bytes(low) } }
        if let upper { if desc { byteLower = try bytes(upper) } else { byteUpper = try bytes(upper) } }
        return (byteLower, byteUpper)
    }

    /// The byte prefix of "components equal `prefix`, then a string starting with `stringPrefix`".
    package static func stringPrefixBytes(prefix: [UInt8], descending: Bool, _ stringPrefix: String) -> [UInt8] {
        var p = prefix
        let start = p.count
        p.append(KeyCodec.Tag.string.rawValue)
        KeyCodec.appendEscaped(stringPrefix.utf8, &p)
        p.removeLast(2)  // no terminator: a byte prefix of every longer string
        if descending { for i in start..<p.count { p[i] = ~p[i] } }
        return p
    }

    /// Primary keys of entities whose components equal `prefix` and whose next component lies
    /// between `lower` and `upper` (nulls never match a range), in index order.
    package func findRange(
        _ t: ReadView, index: IndexHandle, prefix: [Value] = [], lower: ValueBound?, upper: ValueBound?,
        _ body: (MappedBytes) throws -> Bool
    ) throws {
        precondition(prefix.count < index.definition.components.count, "range component beyond the index")
        let (l, u) = try Self.byteBounds(
            prefix: try index.encodeTuple(prefix), descending: index.definition.components[prefix.count].descending,
            lower: lower, upper: upper)
        try scanIndex(t, index, lower: l, upper: u) { _, pk in try body(pk) }
    }

    /// Primary keys of entities whose components equal `prefix` and whose next (string) component
    /// starts with `stringPrefix`, in index order.
    package func findPrefix(
        _ t: ReadView, index: IndexHandle, prefix: [Value] = [], stringPrefix: String,
        _ body: (MappedBytes) throws -> Bool
    ) throws {
        let p = Self.stringPrefixBytes(
            prefix: try index.encodeTuple(prefix),
            descending: index.definition.components[prefix.count].descending, stringPrefix)
        try scanIndex(t, index, lower: (p, true), upper: (p, true)) { _, pk in try body(pk) }
    }

    /// Visits (primary key, row) pairs between two key byte bounds (tuple prefixes, as in
    /// `scanIndex`), in key order, or in reverse, until `body` returns false.
    package func scanEntities(
        _ t: ReadView, lower: (bytes: [UInt8], inclusive: Bool)?, upper: (bytes: [UInt8], inclusive: Bool)?,
        reverse: Bool = false, _ body: (MappedBytes, MappedBytes) throws -> Bool
    ) throws {
        var start: [UInt8]? = nil
        if let lower { start = lower.inclusive ? lower.bytes : Self.successor(lower.bytes) }
        if lower != nil && start == nil { return }
        if start?.isEmpty == true { start = nil }  // LMDB refuses an empty key; the empty prefix is the start
        let stop: [UInt8]? = upper.flatMap {
            $0.inclusive ? Self.successor($0.bytes) : ($0.bytes.isEmpty ? [] : $0.bytes)
        }
        try t.withCursor(entities) { c in
            if !reverse {
                var e = try start.map { try c.seek($0) } ?? c.first()
                while let (k, v) = e {
                    if let stop, !k.lexicographicallyPrecedes(stop) { return }
                    if try !body(k, v) { return }
                    e = try c.next()
                }
            } else {
                // From the last key below `stop` down to `start`.
                var e: (key: MappedBytes, value: MappedBytes)?
                if let stop {
                    // A key at or after `stop`: the one before it (none when `stop` precedes every
                    // key). No such key: the last key is below `stop`.
                    e = try c.seek(stop) != nil ? try c.previous() : try c.last()
                } else {
                    e = try c.last()
                }
                while let (k, v) = e {
                    if let start, k.lexicographicallyPrecedes(start) { return }
                    if try !body(k, v) { return }
                    e = try c.previous()
                }
            }
        }
    }

    /// Decodes the entity stored under raw primary-key bytes (e.g. from an index entry).
    package func entity(_ t: ReadView, primaryKey: MappedBytes) throws -> Properties? {
        guard let row = try t.get(entities, primaryKey) else { return nil }
        return try decodeRow(row, keyBytes: primaryKey)
    }
}
