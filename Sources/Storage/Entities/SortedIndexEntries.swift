import Foundation

/// Index entries gathered from a set's entities and handed out in key order, for a backfill that
/// writes them as a sorted stream instead of one random insert per entity.
///
/// Why: an index's order is not its set's key order, so a backfill that puts each entry as it
/// scans the entities lands on a random leaf each time. Sorted, the entries fill the index's
/// leaves one after the other, and into an empty index each goes at the end (`MDB_APPEND`)
/// without a search (`EntityStore.backfillSorted` has the figures).
///
/// Each entry is appended to one byte arena (key length and value length as `UInt32`, then the
/// key and the value); the arena is sorted through `(prefix, offset)` slots, the prefix being the
/// key's first 8 bytes big-endian, so most comparisons read no arena byte. Keys compare bytewise,
/// a shorter key first when it is a prefix of the other: `mdb_cmp`'s default order.
struct SortedIndexEntries {
    private var arena: [UInt8] = []
    private var slots: [Slot] = []

    private struct Slot {
        var prefix: UInt64
        var offset: Int
    }

    /// Entries held.
    var count: Int { slots.count }
    /// Memory held, about: the arena and the slots.
    var bytes: Int { arena.count + slots.count * MemoryLayout<Slot>.stride }

    mutating func add(key: [UInt8], value: [UInt8]) {
        let start = arena.count
        withUnsafeBytes(of: UInt32(key.count).littleEndian) { arena.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(value.count).littleEndian) { arena.append(contentsOf: $0) }
        arena.append(contentsOf: key)
        arena.append(contentsOf: value)
        var prefix: UInt64 = 0
        for i in 0..<8 { prefix = prefix << 8 | UInt64(i < key.count ? key[i] : 0) }
        slots.append(Slot(prefix: prefix, offset: start))
    }

    /// Calls `body` with every entry's key and value in key order, then empties the arena
    /// (keeping its capacity for the next batch).
    mutating func drain(_ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void) throws {
        var slots = self.slots
        self.slots = []
        defer {
            slots.removeAll(keepingCapacity: true)
            self.slots = slots
            arena.removeAll(keepingCapacity: true)
        }
        try arena.withUnsafeBytes { a in
            slots.sort { x, y in
                x.prefix != y.prefix ? x.prefix < y.prefix : Self.less(Self.key(a, x.offset), Self.key(a, y.offset))
            }
            for s in slots { try body(Self.key(a, s.offset), Self.value(a, s.offset)) }
        }
    }

    private static func key(_ a: UnsafeRawBufferPointer, _ offset: Int) -> UnsafeRawBufferPointer {
        let n = Int(UInt32(littleEndian: a.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
        return UnsafeRawBufferPointer(rebasing: a[(offset + 8)..<(offset + 8 + n)])
    }

    private static func value(_ a: UnsafeRawBufferPointer, _ offset: Int) -> UnsafeRawBufferPointer {
        let n = Int(UInt32(littleEndian: a.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
        let m = Int(UInt32(littleEndian: a.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)))
        return UnsafeRawBufferPointer(rebasing: a[(offset + 8 + n)..<(offset + 8 + n + m)])
    }

    /// Bytewise, a proper prefix first.
    static func less(_ x: UnsafeRawBufferPointer, _ y: UnsafeRawBufferPointer) -> Bool {
        let n = min(x.count, y.count)
        if n > 0 {
            let c = memcmp(x.baseAddress!, y.baseAddress!, n)
            if c != 0 { return c < 0 }
        }
        return x.count < y.count
    }
}
