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
    package func scanIndex(_ t: TxnRef, _ index: IndexHandle,
                           lower: (bytes: [UInt8], inclusive: Bool)?, upper: (bytes: [UInt8], inclusive: Bool)?,
                           _ body: (MappedBytes, MappedBytes) throws -> Bool) throws {
        var start: [UInt8]? = nil
        if let lower { start = lower.inclusive ? lower.bytes : Self.successor(lower.bytes) }
        if lower != nil && start == nil { return }  // nothing sorts after the maximum prefix
        let stop: [UInt8]? = upper.flatMap { $0.inclusive ? Self.successor($0.bytes) : $0.bytes }
        let tupleCount = index.definition.components.count
        let descending = index.descending
        try t.withCursor(index.database) { c in
            var e = try start.map { try c.seek($0) } ?? c.first()
            while let (k, _) = e {
                if let stop, !k.lexicographicallyPrecedes(stop) { return }
                let n = try KeyCodec.decode(k, count: tupleCount, descending: descending).length
                if try !body(k, MappedBytes(rebasing: k[n...])) { return }
                e = try c.next()
            }
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
    package func findEqual(_ t: TxnRef, index: IndexHandle, _ values: [Value], _ body: (MappedBytes) throws -> Bool) throws {
        let p = try index.encodeTuple(values)
        try scanIndex(t, index, lower: (p, true), upper: (p, true)) { _, pk in try body(pk) }
    }

    /// Primary keys of entities whose components equal `prefix` and whose next component lies
    /// between `lower` and `upper` (nulls never match a range), in index order.
    package func findRange(_ t: TxnRef, index: IndexHandle, prefix: [Value] = [], lower: ValueBound?, upper: ValueBound?,
                           _ body: (MappedBytes) throws -> Bool) throws {
        let p = try index.encodeTuple(prefix)
        let n = prefix.count
        precondition(n < index.definition.components.count, "range component beyond the index")
        let desc = index.definition.components[n].descending
        let low = lower ?? (upper != nil ? ValueBound(.null, inclusive: false) : nil)
        func bytes(_ b: ValueBound) throws -> (bytes: [UInt8], inclusive: Bool) {
            var out = p
            try KeyCodec.append(b.value, descending: desc, to: &out)
            return (out, b.inclusive)
        }
        var byteLower: (bytes: [UInt8], inclusive: Bool)? = (p, true)
        var byteUpper: (bytes: [UInt8], inclusive: Bool)? = (p, true)
        if let low { if desc { byteUpper = try bytes(low) } else { byteLower = try bytes(low) } }
        if let upper { if desc { byteLower = try bytes(upper) } else { byteUpper = try bytes(upper) } }
        try scanIndex(t, index, lower: byteLower, upper: byteUpper) { _, pk in try body(pk) }
    }

    /// Primary keys of entities whose components equal `prefix` and whose next (string) component
    /// starts with `stringPrefix`, in index order.
    package func findPrefix(_ t: TxnRef, index: IndexHandle, prefix: [Value] = [], stringPrefix: String,
                            _ body: (MappedBytes) throws -> Bool) throws {
        var p = try index.encodeTuple(prefix)
        let start = p.count
        p.append(KeyCodec.Tag.string.rawValue)
        KeyCodec.appendEscaped(stringPrefix.utf8, &p)
        p.removeLast(2)  // no terminator: a byte prefix of every longer string
        if index.definition.components[prefix.count].descending {
            for i in start..<p.count { p[i] = ~p[i] }
        }
        try scanIndex(t, index, lower: (p, true), upper: (p, true)) { _, pk in try body(pk) }
    }

    /// Decodes the entity stored under raw primary-key bytes (e.g. from an index entry).
    package func entity(_ t: TxnRef, primaryKey: MappedBytes) throws -> Properties? {
        guard let row = try t.get(entities, primaryKey) else { return nil }
        return try decodeRow(row, keyBytes: Array(primaryKey))
    }
}
