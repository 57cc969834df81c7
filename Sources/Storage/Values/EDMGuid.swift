import LMDB
/// `Edm.Guid`: 16 bytes, ordered as their canonical lower-case text orders.
public struct EDMGuid: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Parses `01234567-89ab-cdef-0123-456789abcdef` (either case).
    public init?(_ text: some StringProtocol) {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return nil }
        var nibbles: [UInt64] = []
        nibbles.reserveCapacity(32)
        for (i, c) in bytes.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                guard c == UInt8(ascii: "-") else { return nil }
                continue
            }
            switch c {
            case 48...57: nibbles.append(UInt64(c - 48))
            case 97...102: nibbles.append(UInt64(c - 87))
            case 65...70: nibbles.append(UInt64(c - 55))
            default: return nil
            }
        }
        high = nibbles[0..<16].reduce(0) { $0 << 4 | $1 }
        low = nibbles[16..<32].reduce(0) { $0 << 4 | $1 }
    }

    public init(bytes: some Collection<UInt8>) {
        precondition(bytes.count == 16)
        let a = Array(bytes)
        high = a[0..<8].reduce(0) { $0 << 8 | UInt64($1) }
        low = a[8..<16].reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The 16 bytes, big-endian (text order).
    public var bytes: [UInt8] {
        var out = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 {
            out[i] = UInt8(truncatingIfNeeded: high >> (56 - 8 * UInt64(i)))
            out[8 + i] = UInt8(truncatingIfNeeded: low >> (56 - 8 * UInt64(i)))
        }
        return out
    }

    /// The canonical text, lower case: `01234567-89ab-cdef-0123-456789abcdef`.
    public var description: String {
        String(unsafeUninitializedCapacity: 36) { out in
            let digits: StaticString = "0123456789abcdef"
            var at = 0
            for nibble in 0..<32 {
                if nibble == 8 || nibble == 12 || nibble == 16 || nibble == 20 {
                    out[at] = UInt8(ascii: "-")
                    at += 1
                }
                let word = nibble < 16 ? high : low
                let shift = UInt64(60 - 4 * (nibble % 16))
                out[at] = digits.utf8Start[Int((word >> shift) & 0xF)]
                at += 1
            }
            return at
        }
    }

    public static func < (a: Self, b: Self) -> Bool { (a.high, a.low) < (b.high, b.low) }
}
