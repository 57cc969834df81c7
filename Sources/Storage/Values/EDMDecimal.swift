import LMDB
/// An exact decimal number: `significand × 10^(-scale)`, as `Edm.Decimal` requires for money.
///
/// The scale written is kept, so `1249.000` reads back as `1249.000`; equality and ordering compare
/// values, so `1249.000 == 1249`. Up to 38 significant digits.
public struct EDMDecimal: Sendable, Hashable, Comparable, CustomStringConvertible {
    // The significand as two words rather than an `Int128`, whose 16-byte alignment would make
    // every `Value` 48 bytes instead of 24.
    private var low: UInt64
    private var high: Int64
    public var scale: Int16

    public var significand: Int128 {
        get { Int128(high) << 64 | Int128(low) }
        set {
            low = UInt64(truncatingIfNeeded: newValue)
            high = Int64(truncatingIfNeeded: newValue >> 64)
        }
    }

    public init(significand: Int128, scale: Int16) {
        low = UInt64(truncatingIfNeeded: significand)
        high = Int64(truncatingIfNeeded: significand >> 64)
        self.scale = scale
    }

    public init(_ value: Int64) {
        self.init(significand: Int128(value), scale: 0)
    }

    /// Parses `-12.340`, `1e3`, `2.5E-2`. Returns nil for anything else or over 38 digits.
    public init?(_ text: some StringProtocol) {
        var bytes = Array(text.utf8)[...]
        guard !bytes.isEmpty else { return nil }
        var negative = false
        if bytes.first == UInt8(ascii: "-") || bytes.first == UInt8(ascii: "+") {
            negative = bytes.first == UInt8(ascii: "-")
            bytes = bytes.dropFirst()
        }
        var sig: Int128 = 0
        var digits = 0
        var scale = 0
        var sawDigit = false
        var sawPoint = false
        while let c = bytes.first, c != UInt8(ascii: "e"), c != UInt8(ascii: "E") {
            bytes = bytes.dropFirst()
            if c == UInt8(ascii: ".") {
                if sawPoint { return nil }
                sawPoint = true
                continue
            }
            guard c >= 48, c <= 57 else { return nil }
            sawDigit = true
            if sig != 0 || c != 48 { digits += 1 }
            if digits > 38 { return nil }
            sig = sig * 10 + Int128(c - 48)
            if sawPoint { scale += 1 }
        }
        guard sawDigit else { return nil }
        if !bytes.isEmpty {
            bytes = bytes.dropFirst()
            guard let exp = Int(String(decoding: bytes, as: UTF8.self)), exp.magnitude < 4000 else { return nil }
            scale -= exp
        }
        guard scale >= -400, scale <= 400 else { return nil }
        self.init(significand: negative ? -sig : sig, scale: Int16(scale))
    }

    /// The value with trailing zeros removed from the significand (scale may become negative).
    public var normalized: EDMDecimal {
        var s = significand, sc = scale
        if s == 0 { return EDMDecimal(significand: 0, scale: 0) }
        while s % 10 == 0 { s /= 10; sc -= 1 }
        return EDMDecimal(significand: s, scale: sc)
    }

    public var isZero: Bool { significand == 0 }

    public var description: String {
        let negative = significand < 0
        let magnitude = significand.magnitude
        var digits = String(magnitude)
        if scale <= 0 {
            if magnitude != 0 { digits += String(repeating: "0", count: Int(-scale)) }
            return (negative ? "-" : "") + digits
        }
        let s = Int(scale)
        if digits.count <= s { digits = String(repeating: "0", count: s - digits.count + 1) + digits }
        let point = digits.index(digits.endIndex, offsetBy: -s)
        return (negative ? "-" : "") + digits[..<point] + "." + digits[point...]
    }

    public var doubleValue: Double { Double(description) ?? .nan }

    public static func == (a: EDMDecimal, b: EDMDecimal) -> Bool {
        let x = a.normalized, y = b.normalized
        return x.significand == y.significand && x.scale == y.scale
    }

    public func hash(into hasher: inout Hasher) {
        let n = normalized
        hasher.combine(n.significand)
        hasher.combine(n.scale)
    }

    public static func < (a: EDMDecimal, b: EDMDecimal) -> Bool {
        if (a.significand < 0) != (b.significand < 0) { return a.significand < 0 }
        if a.significand == 0 || b.significand == 0 { return a.significand < b.significand }
        // Same sign, both non-zero: compare magnitudes digit-wise.
        let ma = a.normalized, mb = b.normalized
        let da = String(ma.significand.magnitude), db = String(mb.significand.magnitude)
        let ea = da.count - Int(ma.scale), eb = db.count - Int(mb.scale)
        let magnitudeLess: Bool
        if ea != eb {
            magnitudeLess = ea < eb
        } else {
            magnitudeLess = da.utf8.lexicographicallyPrecedes(db.utf8)
        }
        let magnitudeEqual = ea == eb && da == db
        if magnitudeEqual { return false }
        return a.significand > 0 ? magnitudeLess : !magnitudeLess
    }

    /// The decimal digits of the magnitude and the decimal exponent `e` with value = 0.d1d2… × 10^e.
    /// Trailing zeros removed; for zero, returns ("", 0).
    public var digitsAndExponent: (digits: [UInt8], exponent: Int) {
        let n = normalized
        if n.significand == 0 { return ([], 0) }
        let digits = Array(String(n.significand.magnitude).utf8).map { $0 - 48 }
        return (digits, digits.count - Int(n.scale))
    }

    /// How many digits `digitsAndExponent` has, and its exponent, without making them (validation
    /// checks precision and scale on every write).
    public var digitCountAndExponent: (count: Int, exponent: Int) {
        let n = normalized
        if n.significand == 0 { return (0, 0) }
        let m = n.significand.magnitude
        var count = 1
        var power: UInt128 = 10
        // UInt128.max has 39 digits; 10^39 does not fit.
        while count < 39 && m >= power { count += 1; if count < 39 { power *= 10 } }
        return (count, count - Int(n.scale))
    }
}
