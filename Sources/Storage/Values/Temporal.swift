import LMDB
/// Ticks are 100-nanosecond units, as OData services (.NET, SAP) count them; 7 fractional digits.
public let ticksPerSecond: Int64 = 10_000_000
public let ticksPerDay: Int64 = 86_400 * ticksPerSecond

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
public func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yoe = y - era * 400
    let mp = (month + 9) % 12
    let doy = (153 * mp + 2) / 5 + day - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    return era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Hinnant's `civil_from_days`).
public func civilFromDays(_ z0: Int) -> (year: Int, month: Int, day: Int) {
    let z = z0 + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let doe = z - era * 146_097
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let d = doy - (153 * mp + 2) / 5 + 1
    let m = mp < 10 ? mp + 3 : mp - 9
    return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
}

private func isLeap(_ y: Int) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }

private func daysIn(_ y: Int, _ m: Int) -> Int {
    [31, isLeap(y) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1]
}

/// A tiny scanner over ASCII bytes for the ISO 8601 forms OData uses.
struct _ISOScanner {
    var bytes: [UInt8]
    var i = 0
    init(_ s: some StringProtocol) { bytes = Array(s.utf8) }
    var atEnd: Bool { i == bytes.count }
    mutating func eat(_ c: Character) -> Bool {
        if i < bytes.count, bytes[i] == c.asciiValue! { i += 1; return true }
        return false
    }
    mutating func digits(_ n: Int) -> Int? {
        guard i + n <= bytes.count else { return nil }
        var v = 0
        for k in 0..<n {
            let c = bytes[i + k]
            guard c >= 48, c <= 57 else { return nil }
            v = v * 10 + Int(c - 48)
        }
        i += n
        return v
    }
    /// An unsigned integer of one or more digits.
    mutating func number() -> Int? {
        var v = 0, n = 0
        while i < bytes.count, bytes[i] >= 48, bytes[i] <= 57, n < 18 {
            v = v * 10 + Int(bytes[i] - 48); i += 1; n += 1
        }
        return n == 0 ? nil : v
    }
    /// Fraction digits after a '.', as ticks (first 7 digits; further digits must be zero).
    mutating func fractionTicks() -> Int64? {
        guard eat(".") else { return 0 }
        var ticks: Int64 = 0, n = 0
        while i < bytes.count, bytes[i] >= 48, bytes[i] <= 57 {
            if n < 7 { ticks = ticks * 10 + Int64(bytes[i] - 48) } else if bytes[i] != 48 { return nil }
            n += 1; i += 1
        }
        if n == 0 { return nil }
        for _ in n..<max(n, 7) { ticks *= 10 }
        return ticks
    }
}

/// `Edm.Date`: a calendar date, stored as days since 1970-01-01.
public struct EDMDate: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var days: Int32
    public init(days: Int32) { self.days = days }

    /// Parses `YYYY-MM-DD` (year 0001–9999, or a leading `-` for negative years).
    public init?(_ text: some StringProtocol) {
        var s = _ISOScanner(text)
        guard let d = s.date(), s.atEnd else { return nil }
        self.days = Int32(d)
    }

    public var components: (year: Int, month: Int, day: Int) { civilFromDays(Int(days)) }

    public var description: String {
        let (y, m, d) = components
        return _pad(y, 4) + "-" + _pad(m, 2) + "-" + _pad(d, 2)
    }

    public static func < (a: EDMDate, b: EDMDate) -> Bool { a.days < b.days }
}

extension _ISOScanner {
    mutating func date() -> Int? {
        let negative = eat("-")
        guard let y = digits(4), eat("-"), let m = digits(2), eat("-"), let d = digits(2),
            (1...12).contains(m)
        else { return nil }
        let year = negative ? -y : y
        guard d >= 1, d <= daysIn(year, m) else { return nil }
        return daysFromCivil(year: year, month: m, day: d)
    }

    /// `hh:mm[:ss[.fffffff]]` as ticks since midnight.
    mutating func timeOfDay(requireSeconds: Bool = false) -> Int64? {
        guard let h = digits(2), eat(":"), let mi = digits(2), h < 24, mi < 60 else { return nil }
        var sec = 0
        var frac: Int64 = 0
        if eat(":") {
            guard let s = digits(2), s < 60, let f = fractionTicks() else { return nil }
            sec = s; frac = f
        } else if requireSeconds {
            return nil
        }
        return Int64(h * 3600 + mi * 60 + sec) * ticksPerSecond + frac
    }
}

func _pad(_ v: Int, _ width: Int) -> String {
    let s = String(abs(v))
    return (v < 0 ? "-" : "") + String(repeating: "0", count: max(0, width - s.count)) + s
}

func _fraction(_ ticks: Int64) -> String {
    guard ticks != 0 else { return "" }
    var s = String(ticks)
    s = String(repeating: "0", count: 7 - s.count) + s
    while s.hasSuffix("0") { s.removeLast() }
    return "." + s
}

/// `Edm.DateTimeOffset`: an instant (ticks since 1970-01-01T00:00Z) and the offset it was written in.
///
/// Equality and order compare instants (`10:00+02:00 == 08:00Z`), as OData's `eq` does; the offset is
/// kept so the value reads back as it was written.
public struct EDMDateTimeOffset: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var ticks: Int64
    public var offsetMinutes: Int16

    public init(ticks: Int64, offsetMinutes: Int16 = 0) {
        self.ticks = ticks
        self.offsetMinutes = offsetMinutes
    }

    /// Parses `2021-01-01T10:00:00Z`, `2021-01-01T10:00:00.1234567+02:00`; with `offsetOptional`
    /// (V2 `datetime'…'`), a missing offset means UTC.
    public init?(_ text: some StringProtocol, offsetOptional: Bool = false) {
        var s = _ISOScanner(text)
        guard let days = s.date(), s.eat("T") || s.eat("t"), let tod = s.timeOfDay() else { return nil }
        var offset = 0
        if s.eat("Z") || s.eat("z") {
        } else if s.i < s.bytes.count, s.bytes[s.i] == UInt8(ascii: "+") || s.bytes[s.i] == UInt8(ascii: "-") {
            let sign = s.bytes[s.i] == UInt8(ascii: "-") ? -1 : 1
            s.i += 1
            guard let oh = s.digits(2), s.eat(":"), let om = s.digits(2), oh <= 14, om < 60 else { return nil }
            offset = sign * (oh * 60 + om)
        } else if !offsetOptional {
            return nil
        }
        guard s.atEnd else { return nil }
        let local = Int64(days) * ticksPerDay + tod
        self.init(ticks: local - Int64(offset) * 60 * ticksPerSecond, offsetMinutes: Int16(offset))
    }

    /// Ticks of the wall-clock time in the value's own offset.
    public var localTicks: Int64 { ticks + Int64(offsetMinutes) * 60 * ticksPerSecond }

    public var description: String {
        let local = localTicks
        let days = Int(local >= 0 ? local / ticksPerDay : (local - ticksPerDay + 1) / ticksPerDay)
        let tod = local - Int64(days) * ticksPerDay
        let date = EDMDate(days: Int32(days)).description
        var out = date + "T" + EDMTimeOfDay(ticks: tod).description(alwaysSeconds: true)
        if offsetMinutes == 0 {
            out += "Z"
        } else {
            let m = Int(abs(offsetMinutes))
            out += (offsetMinutes < 0 ? "-" : "+") + _pad(m / 60, 2) + ":" + _pad(m % 60, 2)
        }
        return out
    }

    public static func == (a: Self, b: Self) -> Bool { a.ticks == b.ticks }
    public func hash(into h: inout Hasher) { h.combine(ticks) }
    public static func < (a: Self, b: Self) -> Bool { a.ticks < b.ticks }
}

/// `Edm.TimeOfDay` (and V2 `Edm.Time`): ticks since midnight.
public struct EDMTimeOfDay: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var ticks: Int64
    public init(ticks: Int64) { self.ticks = ticks }

    /// Parses `hh:mm[:ss[.fffffff]]`.
    public init?(_ text: some StringProtocol) {
        var s = _ISOScanner(text)
        guard let t = s.timeOfDay(), s.atEnd else { return nil }
        ticks = t
    }

    public var description: String { description(alwaysSeconds: true) }

    func description(alwaysSeconds: Bool) -> String {
        let secs = Int(ticks / ticksPerSecond)
        return _pad(secs / 3600, 2) + ":" + _pad(secs / 60 % 60, 2) + ":" + _pad(secs % 60, 2)
            + _fraction(ticks % ticksPerSecond)
    }

    public static func < (a: Self, b: Self) -> Bool { a.ticks < b.ticks }
}

/// `Edm.Duration`: a signed length of time in ticks, written in ISO 8601 (`P1DT2H3M4.5S`).
public struct EDMDuration: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var ticks: Int64
    public init(ticks: Int64) { self.ticks = ticks }

    /// Parses `[-]PnDTnHnMn.nS` (days, hours, minutes, seconds; each optional, at least one).
    public init?(_ text: some StringProtocol) {
        var s = _ISOScanner(text)
        let negative = s.eat("-")
        guard s.eat("P") else { return nil }
        var total: Int64 = 0
        var any = false
        var inTime = false
        while !s.atEnd {
            if !inTime, s.eat("T") { inTime = true; continue }
            guard let n = s.number() else { return nil }
            let frac: Int64
            if s.i < s.bytes.count, s.bytes[s.i] == UInt8(ascii: ".") {
                guard inTime, let f = s.fractionTicks() else { return nil }
                frac = f
            } else {
                frac = 0
            }
            let unit: Int64
            if !inTime, s.eat("D") {
                unit = ticksPerDay
            } else if inTime, s.eat("H") {
                unit = 3600 * ticksPerSecond
            } else if inTime, s.eat("M") {
                unit = 60 * ticksPerSecond
            } else if inTime, s.eat("S") {
                unit = ticksPerSecond
            } else {
                return nil
            }
            if frac != 0 && unit != ticksPerSecond { return nil }
            let (p, o1) = Int64(n).multipliedReportingOverflow(by: unit)
            let (pf, o2) = p.addingReportingOverflow(frac)
            let (t, o3) = total.addingReportingOverflow(pf)
            if o1 || o2 || o3 { return nil }
            total = t
            any = true
        }
        guard any else { return nil }
        ticks = negative ? -total : total
    }

    public var description: String {
        var t = ticks.magnitude
        let perDay = UInt64(ticksPerDay), perSec = UInt64(ticksPerSecond)
        let d = t / perDay; t %= perDay
        let h = t / (3600 * perSec); t %= 3600 * perSec
        let m = t / (60 * perSec); t %= 60 * perSec
        let s = t / perSec, f = Int64(t % perSec)
        var out = (ticks < 0 ? "-P" : "P")
        if d > 0 { out += "\(d)D" }
        if h > 0 || m > 0 || s > 0 || f > 0 || d == 0 {
            out += "T"
            if h > 0 { out += "\(h)H" }
            if m > 0 { out += "\(m)M" }
            if s > 0 || f > 0 || (h == 0 && m == 0) { out += "\(s)" + _fraction(f) + "S" }
        }
        return out
    }

    public static func < (a: Self, b: Self) -> Bool { a.ticks < b.ticks }
}
