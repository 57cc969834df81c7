import Storage

/// Arithmetic on values of one numeric (or temporal) kind, by OData's rules:
///
/// - a null operand gives null;
/// - a result that does not fit its type — past `Int64`, a `Decimal` of more than 38 digits, a date
///   or instant outside the years -9999 to 9999, a duration past `Int64` ticks — is null, as a
///   failed `cast` is (numeric promotion has cast semantics, and a cast that does not fit is null);
///   so the entity does not match, in `$filter` and `$orderby` alike;
/// - `div`, `divby` and `mod` by an integer or decimal zero fail the request, with the position
///   (the spec says so for `div` and `mod`); `Double` follows IEEE 754 (`INF`, `-INF`, `NaN`).
///
/// Nothing here traps: every operation on operands from a URL or a row is checked.
enum Arithmetic {
    static func apply(_ op: ArithmeticOperator, _ a: Value, _ b: Value, at position: Int) throws(QueryError) -> Value {
        if a.isNull || b.isNull { return .null }
        if op == .div || op == .divby || op == .mod, isExactZero(b), !isDouble(a) {
            throw QueryError("division by zero", option: "$filter", column: position)
        }
        return compute(op, a, b)
    }

    static func isExactZero(_ v: Value) -> Bool {
        switch v {
        case .int(let y): y == 0
        case .decimal(let y): y.isZero
        default: false
        }
    }

    static func isDouble(_ v: Value) -> Bool {
        if case .double = v { return true }
        return false
    }

    /// `op` on two non-null operands; null when the result does not fit (see the type's summary).
    static func compute(_ op: ArithmeticOperator, _ a: Value, _ b: Value) -> Value {
        switch (a, b) {
        case (.null, _), (_, .null): return .null
        case (.int(let x), .int(let y)):
            switch op {
            case .add: let (r, o) = x.addingReportingOverflow(y); return o ? .null : .int(r)
            case .sub: let (r, o) = x.subtractingReportingOverflow(y); return o ? .null : .int(r)
            case .mul: let (r, o) = x.multipliedReportingOverflow(by: y); return o ? .null : .int(r)
            case .div: let (r, o) = x.dividedReportingOverflow(by: y); return o ? .null : .int(r)
            case .mod:
                if y == -1 { return .int(0) }  // Int64.min mod -1 is 0, though Swift reports an overflow
                let (r, o) = x.remainderReportingOverflow(dividingBy: y)
                return o ? .null : .int(r)
            case .divby: return EDMDecimal.dividing(EDMDecimal(x), EDMDecimal(y)).map { .decimal($0) } ?? .null
            }
        case (.decimal(let x), .decimal(let y)):
            let r: EDMDecimal?
            switch op {
            case .add: r = .adding(x, y)
            case .sub: r = .subtracting(x, y)
            case .mul: r = .multiplying(x, y)
            case .div, .divby: r = .dividing(x, y)
            case .mod: r = .remainder(x, y)
            }
            return r.map { .decimal($0) } ?? .null
        case (.double(let x), .double(let y)):
            switch op {
            case .add: return .double(x + y)
            case .sub: return .double(x - y)
            case .mul: return .double(x * y)
            case .div, .divby: return .double(x / y)
            case .mod: return .double(x.truncatingRemainder(dividingBy: y))
            }
        case (.dateTimeOffset(let d), .duration(let u)) where op == .add || op == .sub:
            let (t, o) =
                op == .add ? d.ticks.addingReportingOverflow(u.ticks) : d.ticks.subtractingReportingOverflow(u.ticks)
            guard !o, TemporalRange.ticks.contains(t) else { return .null }
            return .dateTimeOffset(EDMDateTimeOffset(ticks: t, offsetMinutes: d.offsetMinutes))
        case (.dateTimeOffset(let x), .dateTimeOffset(let y)) where op == .sub:
            let (t, o) = x.ticks.subtractingReportingOverflow(y.ticks)
            return o ? .null : .duration(EDMDuration(ticks: t))
        case (.date(let d), .duration(let u)) where op == .add || op == .sub:
            // As the spec says: the date at midnight, plus the duration, then the date part of that
            // (so a date minus a positive duration shorter than a day is the day before).
            guard let midnight = TemporalRange.ticks(ofDays: Int64(d.days)) else { return .null }
            let (t, o) =
                op == .add ? midnight.addingReportingOverflow(u.ticks) : midnight.subtractingReportingOverflow(u.ticks)
            guard !o else { return .null }
            let days = TemporalRange.days(ofTicks: t)
            guard TemporalRange.days.contains(days), let d32 = Int32(exactly: days) else { return .null }
            return .date(EDMDate(days: d32))
        case (.date(let x), .date(let y)) where op == .sub:
            guard let tx = TemporalRange.ticks(ofDays: Int64(x.days)),
                let ty = TemporalRange.ticks(ofDays: Int64(y.days))
            else { return .null }
            let (t, o) = tx.subtractingReportingOverflow(ty)
            return o ? .null : .duration(EDMDuration(ticks: t))
        case (.duration(let x), .duration(let y)) where op == .add || op == .sub:
            let (t, o) =
                op == .add ? x.ticks.addingReportingOverflow(y.ticks) : x.ticks.subtractingReportingOverflow(y.ticks)
            return o ? .null : .duration(EDMDuration(ticks: t))
        default: break
        }
        // Mixed kinds: promote and retry.
        if let (x, y) = promote(a, b) { return compute(op, x, y) }
        return .null
    }

    static func promote(_ a: Value, _ b: Value) -> (Value, Value)? {
        switch (a, b) {
        case (.int(let x), .decimal): return (.decimal(EDMDecimal(x)), b)
        case (.decimal, .int(let y)): return (a, .decimal(EDMDecimal(y)))
        case (.int(let x), .double): return (.double(Double(x)), b)
        case (.double, .int(let y)): return (a, .double(Double(y)))
        case (.decimal(let x), .double): return (.double(x.doubleValue), b)
        case (.double, .decimal(let y)): return (a, .double(y.doubleValue))
        default: return nil
        }
    }

    /// `-v`; null when that does not fit (`-Int64.min`).
    static func negate(_ v: Value) -> Value {
        switch v {
        case .int(let x):
            let (r, o) = Int64(0).subtractingReportingOverflow(x)
            return o ? .null : .int(r)
        case .double(let x): return .double(-x)
        case .decimal(let x):
            let (r, o) = Int128(0).subtractingReportingOverflow(x.significand)
            return o ? .null : .decimal(EDMDecimal(significand: r, scale: x.scale))
        case .duration(let d):
            let (r, o) = Int64(0).subtractingReportingOverflow(d.ticks)
            return o ? .null : .duration(EDMDuration(ticks: r))
        default: return .null
        }
    }

    /// Numeric promotion to `type` (int → decimal → double), and a date to its midnight UTC.
    static func convert(_ v: Value, to type: TypeRef?) -> Value {
        switch (v, type?.primitive) {
        case (.int(let x), .decimal?): return .decimal(EDMDecimal(x))
        case (.int(let x), .double?), (.int(let x), .single?): return .double(Double(x))
        case (.decimal(let x), .double?), (.decimal(let x), .single?): return .double(x.doubleValue)
        case (.date(let d), .dateTimeOffset?):
            return TemporalRange.ticks(ofDays: Int64(d.days)).map { .dateTimeOffset(EDMDateTimeOffset(ticks: $0)) }
                ?? .null
        default: return v
        }
    }
}

/// The dates and instants the engine computes with: years -9999 to 9999, the ones `Edm.Date` and
/// `Edm.DateTimeOffset` literals and payloads can be written as. An arithmetic result outside is null.
enum TemporalRange {
    static let days =
        Int64(daysFromCivil(year: -9999, month: 1, day: 1))...Int64(daysFromCivil(year: 9999, month: 12, day: 31))
    static let ticks = days.lowerBound * ticksPerDay...(days.upperBound + 1) * ticksPerDay - 1

    /// Midnight UTC of a day count, or nil when that does not fit in ticks.
    static func ticks(ofDays days: Int64) -> Int64? {
        let (t, o) = days.multipliedReportingOverflow(by: ticksPerDay)
        return o ? nil : t
    }

    /// The day a tick count falls on (rounding toward the past).
    static func days(ofTicks t: Int64) -> Int64 {
        let q = t / ticksPerDay
        return t % ticksPerDay < 0 ? q - 1 : q
    }
}
