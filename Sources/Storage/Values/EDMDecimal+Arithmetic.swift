import Foundation

extension EDMDecimal {
    /// Both values at the larger scale; nil if that overflows 38 digits.
    static func aligned(_ a: EDMDecimal, _ b: EDMDecimal) -> (Int128, Int128, Int16)? {
        let scale = max(a.scale, b.scale)
        func up(_ d: EDMDecimal) -> Int128? {
            var s = d.significand
            for _ in 0..<Int(scale - d.scale) {
                let (m, o) = s.multipliedReportingOverflow(by: 10)
                if o { return nil }
                s = m
            }
            return s
        }
        guard let x = up(a), let y = up(b) else { return nil }
        return (x, y, scale)
    }

    /// `a + b`, exact; nil on overflow.
    public static func adding(_ a: EDMDecimal, _ b: EDMDecimal) -> EDMDecimal? {
        guard let (x, y, s) = aligned(a, b) else { return nil }
        let (r, o) = x.addingReportingOverflow(y)
        return o ? nil : EDMDecimal(significand: r, scale: s)
    }

    /// `a - b`, exact; nil on overflow.
    public static func subtracting(_ a: EDMDecimal, _ b: EDMDecimal) -> EDMDecimal? {
        guard let (x, y, s) = aligned(a, b) else { return nil }
        let (r, o) = x.subtractingReportingOverflow(y)
        return o ? nil : EDMDecimal(significand: r, scale: s)
    }

    /// `a × b`, exact; nil on overflow.
    public static func multiplying(_ a: EDMDecimal, _ b: EDMDecimal) -> EDMDecimal? {
        let x = a.normalized, y = b.normalized
        let (r, o) = x.significand.multipliedReportingOverflow(by: y.significand)
        guard !o, let scale = Int16(exactly: Int(x.scale) + Int(y.scale)) else { return nil }
        return EDMDecimal(significand: r, scale: scale)
    }

    /// `a ÷ b` to 28 significant digits (Foundation's Decimal); nil when b is zero.
    public static func dividing(_ a: EDMDecimal, _ b: EDMDecimal) -> EDMDecimal? {
        guard !b.isZero, let x = Decimal(string: a.description), let y = Decimal(string: b.description) else { return nil }
        var q = x / y
        var rounded = Decimal()
        NSDecimalRound(&rounded, &q, 20, .plain)
        return EDMDecimal(NSDecimalNumber(decimal: rounded).stringValue).map(\.normalized)
    }

    /// The remainder of truncating division, with the sign of `a`; nil when b is zero.
    public static func remainder(_ a: EDMDecimal, _ b: EDMDecimal) -> EDMDecimal? {
        guard !b.isZero, let (x, y, s) = aligned(a, b) else { return nil }
        return EDMDecimal(significand: x % y, scale: s)
    }

    /// Rounded to an integer: `.toNearestOrAwayFromZero` (round), `.down` (floor), `.up` (ceiling).
    public func rounded(_ rule: FloatingPointRoundingRule) -> EDMDecimal {
        guard scale > 0 else { return self }
        var p: Int128 = 1
        for _ in 0..<Int(scale) {
            let (m, o) = p.multipliedReportingOverflow(by: 10)
            if o { return EDMDecimal(significand: 0, scale: 0) }
            p = m
        }
        var q = significand / p
        let r = significand % p
        switch rule {
        case .down: if r < 0 { q -= 1 }
        case .up: if r > 0 { q += 1 }
        case .towardZero: break
        default:
            if r.magnitude * 2 >= p.magnitude { q += significand < 0 ? -1 : 1 }
        }
        return EDMDecimal(significand: q, scale: 0)
    }
}
