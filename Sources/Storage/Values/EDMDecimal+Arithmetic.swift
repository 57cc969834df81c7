import LMDB
import Foundation

extension EDMDecimal {
    /// Both values at the larger scale; nil if that overflows 38 digits.
    static func aligned(_ a: EDMDecimal, _ b: EDMDecimal) -> (Int128, Int128, Int16)? {
        let scale = max(a.scale, b.scale)
        func up(_ d: EDMDecimal) -> Int128? {
            var s = d.significand
            for _ in 0..<(Int(scale) - Int(d.scale)) {
                let (m, o) = s.multipliedReportingOverflow(by: 10)
                if o { return nil }
                s = m
            }
            return s
        }
        guard let x = up(a), let y = up(b) else { return nil }
        return (x, y, scale)
    }

    /// 10³⁸: a result's significand stays below it (38 digits, as parsed values), so negating or
    /// writing a result never overflows.
    static let significandLimit: UInt128 = (0..<38).reduce(1) { p, _ in p * 10 }

    /// `significand × 10^-scale`, or nil past 38 significant digits or a scale of ±32,000 (which
    /// leaves `normalized` room to move the scale without overflowing `Int16`).
    static func bounded(_ significand: Int128, scale: Int16) -> EDMDecimal? {
        guard scale.magnitude <= 32_000 else { return nil }
        let d = EDMDecimal(significand: significand, scale: scale)
        if significand.magnitude < significandLimit { return d }
        let n = d.normalized
        return n.significand.magnitude < significandLimit ? n : nil
    }

    /// `a + b`, exact; nil on overflow.
    public static func adding(_ a: EDMDecimal, _ b: EDMDecimal) -> EDMDecimal? {
        guard let (x, y, s) = aligned(a, b) else { return nil }
        let (r, o) = x.addingReportingOverflow(y)
        return o ? nil : bounded(r, scale: s)
    }

    /// `a - b`, exact; nil on overflow.
    public static func subtracting(_ a: EDMDecimal, _ b: EDMDecimal) -> EDMDecimal? {
        guard let (x, y, s) = aligned(a, b) else { return nil }
        let (r, o) = x.subtractingReportingOverflow(y)
        return o ? nil : bounded(r, scale: s)
    }

    /// `a × b`, exact; nil on overflow.
    public static func multiplying(_ a: EDMDecimal, _ b: EDMDecimal) -> EDMDecimal? {
        let x = a.normalized, y = b.normalized
        let (r, o) = x.significand.multipliedReportingOverflow(by: y.significand)
        guard !o, let scale = Int16(exactly: Int(x.scale) + Int(y.scale)) else { return nil }
        return bounded(r, scale: scale)
    }

    /// `a ÷ b` to 28 significant digits (Foundation's Decimal); nil when b is zero.
    public static func dividing(_ a: EDMDecimal, _ b: EDMDecimal) -> EDMDecimal? {
        guard !b.isZero, let x = Decimal(string: a.description), let y = Decimal(string: b.description) else {
            return nil
        }
        var q = x / y
        var rounded = Decimal()
        NSDecimalRound(&rounded, &q, 20, .plain)
        return EDMDecimal(NSDecimalNumber(decimal: rounded).stringValue).map(\.normalized)
    }

    /// The remainder of truncating division, with the sign of `a`; nil when b is zero.
    public static func remainder(_ a: EDMDecimal, _ b: EDMDecimal) -> EDMDecimal? {
        guard !b.isZero, let (x, y, s) = aligned(a, b) else { return nil }
        return bounded(x % y, scale: s)
    }

    /// Rounded to an integer: `.toNearestOrAwayFromZero` (round), `.down` (floor), `.up` (ceiling).
    public func rounded(_ rule: FloatingPointRoundingRule) -> EDMDecimal {
        guard scale > 0 else { return self }
        // p = 10^scale; past Int128 the value is a fraction, |value| < 1, with q = 0 and r = all of it.
        var p: Int128 = 1
        var fits = true
        for _ in 0..<Int(scale) {
            let (m, o) = p.multipliedReportingOverflow(by: 10)
            if o { fits = false; break }
            p = m
        }
        var q = fits ? significand / p : 0
        let r = fits ? significand % p : significand
        switch rule {
        case .down: if r < 0 { q -= 1 }
        case .up: if r > 0 { q += 1 }
        case .towardZero: break
        default:
            if fits, r.magnitude * 2 >= p.magnitude { q += significand < 0 ? -1 : 1 }
        }
        return EDMDecimal(significand: q, scale: 0)
    }
}
