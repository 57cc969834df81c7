import Foundation
import OfflineStore

/// A hand-written OData V4 JSON writer for the raw LMDB and SQLite contestants: bytes into a
/// 64 KiB buffer, handed to `sink` whenever it fills (as OfflineStore's `query` hands over its
/// 64 KiB chunks). It writes exactly what OfflineStore writes for a `SalesOrderItem` — the same
/// members in the same order, the same number, date and string forms — so the three streams can
/// be compared byte for byte.
struct JSONOut: ~Copyable {
    static let chunk = 1 << 16
    /// Room past `chunk` for one entity: members are flushed only between entities.
    static let slack = 16 << 10
    let buffer: UnsafeMutablePointer<UInt8>
    var count = 0
    let sink: (UnsafeRawBufferPointer) -> Void

    init(sink: @escaping (UnsafeRawBufferPointer) -> Void) {
        buffer = .allocate(capacity: Self.chunk + Self.slack)
        self.sink = sink
    }

    deinit { buffer.deallocate() }

    mutating func flush() {
        if count > 0 { sink(UnsafeRawBufferPointer(start: buffer, count: count)); count = 0 }
    }

    /// Between entities.
    @inline(__always)
    mutating func flushIfFull() { if count >= Self.chunk { flush() } }

    @inline(__always)
    mutating func byte(_ b: UInt8) { buffer[count] = b; count += 1 }

    @inline(__always)
    mutating func ascii(_ s: StaticString) {
        (buffer + count).update(from: s.utf8Start, count: s.utf8CodeUnitCount)
        count += s.utf8CodeUnitCount
    }

    /// A JSON string from UTF-8 bytes, escaped as OfflineStore's `JSONWriter` escapes (quote,
    /// backslash, control characters; everything else verbatim).
    mutating func string(_ p: UnsafeRawPointer, _ n: Int) {
        if count + 6 * n + 2 > Self.chunk + Self.slack { flush() }
        byte(0x22)
        let bytes = p.assumingMemoryBound(to: UInt8.self)
        for i in 0..<n {
            let b = bytes[i]
            if b >= 0x20 && b != 0x22 && b != 0x5C { byte(b); continue }
            byte(0x5C)
            switch b {
            case 0x22: byte(0x22)
            case 0x5C: byte(0x5C)
            case 0x0A: byte(UInt8(ascii: "n"))
            case 0x0D: byte(UInt8(ascii: "r"))
            case 0x09: byte(UInt8(ascii: "t"))
            case 0x08: byte(UInt8(ascii: "b"))
            case 0x0C: byte(UInt8(ascii: "f"))
            default:
                ascii("u00")
                byte(Self.hex[Int(b >> 4)])
                byte(Self.hex[Int(b & 15)])
            }
        }
        byte(0x22)
    }

    mutating func string(_ b: UnsafeRawBufferPointer) { string(b.baseAddress ?? UnsafeRawPointer(buffer), b.count) }

    /// A fixed-width field, zero-padded: the bytes before the first zero.
    mutating func fixedString(_ p: UnsafeRawPointer, _ width: Int) {
        var n = 0
        while n < width && p.load(fromByteOffset: n, as: UInt8.self) != 0 { n += 1 }
        string(p, n)
    }

    static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    @inline(__always)
    mutating func int(_ v: Int64) {
        if v < 0 { byte(0x2D) }
        unsigned(v.magnitude, minimumDigits: 1)
    }

    @inline(__always)
    mutating func unsigned(_ v: UInt64, minimumDigits: Int) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for 20 digits
        var n = 0
        var x = v
        withUnsafeMutableBytes(of: &digits) { d in
            repeat {
                d[23 - n] = UInt8(truncatingIfNeeded: x % 10) + 0x30
                x /= 10
                n += 1
            } while x != 0 || n < minimumDigits
            (buffer + count).update(from: d.baseAddress!.assumingMemoryBound(to: UInt8.self) + 24 - n, count: n)
        }
        count += n
    }

    /// A decimal of scale 3 from its thousandths, as `EDMDecimal.description` writes it: `12.345`, `0.005`.
    mutating func thousandths(_ v: Int64) {
        if v < 0 { byte(0x2D) }
        let m = v.magnitude
        unsigned(m / 1000, minimumDigits: 1)
        byte(0x2E)
        unsigned(m % 1000, minimumDigits: 3)
    }

    /// `"YYYY-MM-DD"`, without the quotes.
    mutating func bareDate(days: Int) {
        let (y, m, d) = EDMDate(days: Int32(days)).components
        if y < 0 { byte(0x2D) }
        unsigned(UInt64(abs(y)), minimumDigits: 4)
        byte(0x2D)
        unsigned(UInt64(m), minimumDigits: 2)
        byte(0x2D)
        unsigned(UInt64(d), minimumDigits: 2)
    }

    mutating func date(days: Int32) {
        byte(0x22)
        bareDate(days: Int(days))
        byte(0x22)
    }

    /// `"2021-03-04T05:06:07.89Z"` (the fraction in 100 ns ticks, trailing zeros dropped) or with `+hh:mm`.
    mutating func dateTimeOffset(ticks: Int64, offsetMinutes: Int16) {
        let ticksPerSecond: Int64 = 10_000_000, ticksPerDay = 86_400 * ticksPerSecond
        let local = ticks + Int64(offsetMinutes) * 60 * ticksPerSecond
        let days = local >= 0 ? local / ticksPerDay : (local - ticksPerDay + 1) / ticksPerDay
        let tod = local - days * ticksPerDay
        byte(0x22)
        bareDate(days: Int(days))
        byte(UInt8(ascii: "T"))
        let seconds = UInt64(tod / ticksPerSecond)
        unsigned(seconds / 3600, minimumDigits: 2)
        byte(0x3A)
        unsigned(seconds / 60 % 60, minimumDigits: 2)
        byte(0x3A)
        unsigned(seconds % 60, minimumDigits: 2)
        var fraction = UInt64(tod % ticksPerSecond)
        if fraction != 0 {
            var digits = 7
            while fraction % 10 == 0 { fraction /= 10; digits -= 1 }
            byte(0x2E)
            unsigned(fraction, minimumDigits: digits)
        }
        if offsetMinutes == 0 {
            byte(UInt8(ascii: "Z"))
        } else {
            byte(offsetMinutes < 0 ? 0x2D : 0x2B)
            let m = UInt64(abs(Int(offsetMinutes)))
            unsigned(m / 60, minimumDigits: 2)
            byte(0x3A)
            unsigned(m % 60, minimumDigits: 2)
        }
        byte(0x22)
    }

    /// `"xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"`, lowercase.
    mutating func guid(high: UInt64, low: UInt64) {
        byte(0x22)
        for i in 0..<16 {
            if i == 4 || i == 6 || i == 8 || i == 10 { byte(0x2D) }
            let b = UInt8(truncatingIfNeeded: (i < 8 ? high : low) >> (56 - 8 * UInt64(i % 8)))
            byte(Self.hex[Int(b >> 4)])
            byte(Self.hex[Int(b & 15)])
        }
        byte(0x22)
    }

    mutating func begin() { ascii("{\"@odata.context\":\"$metadata#SalesOrderItems\",\"value\":[") }
    mutating func end() { ascii("]}\n"); flush() }
}

/// Byte count and FNV-1a hash of a JSON stream: what the contestants' streams are compared by.
struct StreamDigest: Equatable, CustomStringConvertible {
    var bytes = 0
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    mutating func add(_ b: UnsafeRawBufferPointer) {
        bytes += b.count
        for x in b { hash = (hash ^ UInt64(x)) &* 0x100_0000_01B3 }
    }
    var description: String { "\(bytes) bytes, FNV-1a \(String(hash, radix: 16))" }
}
