import LMDB
/// A growing byte buffer that JSON is written into: no intermediate strings, digits and ISO dates
/// formatted straight into bytes.
package struct JSONBuffer: Sendable {
    package var bytes: [UInt8]

    package init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    package var count: Int { bytes.count }
    package var isEmpty: Bool { bytes.isEmpty }
    package mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }
    /// Drops what was appended after the buffer held `count` bytes.
    package mutating func truncate(to count: Int) { bytes.removeSubrange(count...) }

    /// The bytes as a String (they are always valid UTF-8).
    package var string: String { String(decoding: bytes, as: UTF8.self) }

    @inline(__always) package mutating func append(_ b: UInt8) { bytes.append(b) }

    @inline(__always) package mutating func append(_ s: StaticString) {
        s.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    @inline(__always) package mutating func appendRaw(_ s: String) {
        var s = s
        s.withUTF8 { bytes.append(contentsOf: $0) }
    }

    package mutating func append(contentsOf other: JSONBuffer) { bytes.append(contentsOf: other.bytes) }

    /// A JSON string literal: quotes, backslashes and control characters escaped.
    package mutating func appendString(_ s: String) {
        var s = s
        s.withUTF8 { appendEscaped(UnsafeRawBufferPointer($0)) }
    }

    @inline(__always) static func hexDigit(_ v: UInt64) -> UInt8 { v < 10 ? 0x30 + UInt8(v) : 0x57 + UInt8(v) }

    /// A JSON string literal from UTF-8 bytes; returns false (writing nothing) if they are not
    /// valid UTF-8. Bytes that need neither escaping nor validation (printable ASCII but `"` and
    /// `\\`, checked eight at a time) are copied in one piece.
    package mutating func appendString(utf8 raw: UnsafeRawBufferPointer) -> Bool {
        if Self.isPlainASCII(raw) {
            bytes.append(0x22)
            bytes.append(contentsOf: raw)
            bytes.append(0x22)
            return true
        }
        var ascii = true
        for b in raw where b >= 0x80 { ascii = false; break }
        if !ascii, String(validating: raw, as: UTF8.self) == nil { return false }
        appendEscaped(raw)
        return true
    }

    /// Whether every byte is ASCII from 0x20 and neither `"` nor `\\` (nothing to escape or validate).
    @inline(__always)
    static func isPlainASCII(_ raw: UnsafeRawBufferPointer) -> Bool {
        let n = raw.count
        var i = 0
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        while i + 8 <= n {
            let w = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            // A byte < 0x20, equal to 0x22 or 0x5C, or ≥ 0x80 sets its high bit in `bad`.
            let below20 = (w &- ones &* 0x20) & ~w
            let quote = w ^ (ones &* 0x22), backslash = w ^ (ones &* 0x5C)
            let bad = below20 | ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | w
            if bad & highs != 0 { return false }
            i += 8
        }
        while i < n {
            let c = raw[i]
            if c < 0x20 || c == 0x22 || c == 0x5C || c >= 0x80 { return false }
            i += 1
        }
        return true
    }

    /// Valid UTF-8 as a quoted, escaped JSON string.
    private mutating func appendEscaped(_ raw: UnsafeRawBufferPointer) {
        bytes.append(0x22)
        var start = 0
        for i in 0..<raw.count {
            let c = raw[i]
            guard c < 0x20 || c == 0x22 || c == 0x5C else { continue }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[start..<i]))
            appendEscape(c)
            start = i + 1
        }
        bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[start..<raw.count]))
        bytes.append(0x22)
    }

    @inline(__always) mutating func appendEscape(_ c: UInt8) {
        bytes.append(0x5C)
        switch c {
        case 0x22: bytes.append(0x22)
        case 0x5C: bytes.append(0x5C)
        case 0x0A: bytes.append(UInt8(ascii: "n"))
        case 0x0D: bytes.append(UInt8(ascii: "r"))
        case 0x09: bytes.append(UInt8(ascii: "t"))
        case 0x08: bytes.append(UInt8(ascii: "b"))
        case 0x0C: bytes.append(UInt8(ascii: "f"))
        default:
            bytes.append(UInt8(ascii: "u")); bytes.append(0x30); bytes.append(0x30)
            bytes.append(Self.hexDigit(UInt64(c >> 4))); bytes.append(Self.hexDigit(UInt64(c & 15)))
        }
    }

    /// Decimal digits of an integer.
    package mutating func appendInt(_ v: Int64) {
        if v < 0 { bytes.append(UInt8(ascii: "-")) }
        appendUInt(v.magnitude)
    }

    package mutating func appendUInt(_ v: UInt64) {
        if v < 10 { bytes.append(0x30 + UInt8(v)); return }
        var tmp: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for 20 digits
        var n = 0
        var x = v
        withUnsafeMutableBytes(of: &tmp) { buf in
            while x > 0 {
                buf[23 - n] = 0x30 + UInt8(x % 10)
                x /= 10
                n += 1
            }
            bytes.append(contentsOf: buf[(24 - n)...])
        }
    }

    /// An exact decimal with its scale (`1249.000`), as its description writes it.
    package mutating func appendDecimal(_ d: EDMDecimal) {
        let sig = d.significand
        guard let mag = UInt64(exactly: sig.magnitude) else { appendRaw(d.description); return }
        if sig < 0 { bytes.append(UInt8(ascii: "-")) }
        let scale = Int(d.scale)
        if scale <= 0 {
            appendUInt(mag)
            if mag != 0 { for _ in 0..<(-scale) { bytes.append(0x30) } }
            return
        }
        if scale > 20 {  // more fraction digits than a UInt64 has: the general form
            var digits: [UInt8] = []
            var x = mag
            repeat { digits.append(0x30 + UInt8(x % 10)); x /= 10 } while x > 0
            while digits.count <= scale { digits.append(0x30) }
            for i in stride(from: digits.count - 1, through: 0, by: -1) {
                if i == scale - 1 { bytes.append(UInt8(ascii: ".")) }
                bytes.append(digits[i])
            }
            return
        }
        // Digits right to left into 48 bytes on the stack: at most 20 digits, a point, and zeros
        // up to `scale` (≤ 20) and one before the point.
        var tmp: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &tmp) { buf in
            var at = 48
            var x = mag
            var n = 0
            while n < scale { at -= 1; buf[at] = 0x30 + UInt8(x % 10); x /= 10; n += 1 }
            at -= 1; buf[at] = UInt8(ascii: ".")
            repeat { at -= 1; buf[at] = 0x30 + UInt8(x % 10); x /= 10 } while x > 0
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buf[at...]))
        }
    }

    /// `v` zero-padded to `width` digits (for dates and times).
    @inline(__always) package mutating func appendPadded(_ v: Int, _ width: Int) {
        var v = v
        if v < 0 { bytes.append(UInt8(ascii: "-")); v = -v }
        var digits = 1, p = 10
        while v >= p, digits < 19 { digits += 1; p *= 10 }
        for _ in digits..<max(digits, width) { bytes.append(0x30) }
        var div = p / 10
        while div > 0 { bytes.append(0x30 + UInt8(v / div % 10)); div /= 10 }
    }

    /// `.fffffff` without trailing zeros, nothing for zero ticks.
    package mutating func appendFraction(_ ticks: Int64) {
        guard ticks != 0 else { return }
        var t = ticks
        var digits = 7
        while t % 10 == 0 { t /= 10; digits -= 1 }
        bytes.append(UInt8(ascii: "."))
        appendPadded(Int(t), digits)
    }

    package mutating func appendDate(_ d: EDMDate) {
        let (y, m, day) = d.components
        appendPadded(y, 4); bytes.append(0x2D); appendPadded(m, 2); bytes.append(0x2D); appendPadded(day, 2)
    }

    package mutating func appendTime(ticks: Int64) {
        let secs = Int(ticks / ticksPerSecond)
        appendPadded(secs / 3600, 2); bytes.append(0x3A); appendPadded(secs / 60 % 60, 2); bytes.append(0x3A)
        appendPadded(secs % 60, 2)
        appendFraction(ticks % ticksPerSecond)
    }

    package mutating func appendDateTimeOffset(_ d: EDMDateTimeOffset) {
        let local = d.localTicks
        let days = local >= 0 ? local / ticksPerDay : (local - ticksPerDay + 1) / ticksPerDay
        appendDate(EDMDate(days: Int32(clamping: days)))
        bytes.append(UInt8(ascii: "T"))
        appendTime(ticks: local - days * ticksPerDay)
        if d.offsetMinutes == 0 {
            bytes.append(UInt8(ascii: "Z"))
        } else {
            let m = Int(d.offsetMinutes.magnitude)
            bytes.append(d.offsetMinutes < 0 ? UInt8(ascii: "-") : UInt8(ascii: "+"))
            appendPadded(m / 60, 2); bytes.append(0x3A); appendPadded(m % 60, 2)
        }
    }

    package mutating func appendGuid(_ g: EDMGuid) {
        appendHexWord(g.high, dashesAfter: 8, 12)
        bytes.append(0x2D)
        appendHexWord(g.low, dashesAfter: 4, 16)
    }

    /// The 16 hex digits of `word`, a dash before digit `a` and before digit `b` (16: none).
    @inline(__always) mutating func appendHexWord(_ word: UInt64, dashesAfter a: Int, _ b: Int) {
        for i in 0..<16 {
            if i == a || i == b { bytes.append(0x2D) }
            bytes.append(Self.hexDigit(word >> (60 - 4 * UInt64(i)) & 15))
        }
    }
}
