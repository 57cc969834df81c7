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
        (0..<8).map { UInt8(truncatingIfNeeded: high >> (56 - 8 * UInt64($0))) }
            + (0..<8).map { UInt8(truncatingIfNeeded: low >> (56 - 8 * UInt64($0))) }
    }

    public var description: String {
        let hex = bytes.map { b in
            let s = String(b, radix: 16)
            return s.count == 1 ? "0" + s : s
        }.joined()
        let c = Array(hex)
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-"
            + String(c[16..<20]) + "-" + String(c[20..<32])
    }

    public static func < (a: Self, b: Self) -> Bool { (a.high, a.low) < (b.high, b.low) }
}
