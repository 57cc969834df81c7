import Storage

/// Arithmetic on values of one numeric (or temporal) kind. A null operand gives null; division by
/// zero and overflow fail the request (OData: a division by zero is an error), with the position.
enum Arithmetic {
    static func apply(_ op: ArithmeticOperator, _ a: Value, _ b: Value, at position: Int) throws(QueryError) -> Value {
        let r = compute(op, a, b)
        if case .null = r, !a.isNull, !b.isNull {
            let zero: Bool = switch b {
            case .int(let y): y == 0
            case .decimal(let y): y.isZero
            default: false
            }
            if zero && op != .add && op != .sub && op != .mul {
                throw QueryError("division by zero", option: "$filter", column: position)
            }
            throw QueryError("arithmetic overflow in '\(op.rawValue)'", option: "$filter", column: position)
        }
        return r
    }

    static func compute(_ op: ArithmeticOperator, _ a: Value, _ b: Value) -> Value {
        switch (a, b) {
        case (.null, _), (_, .null): return .null
        case (.int(let x), .int(let y)):
            switch op {
            case .add: let (r, o) = x.addingReportingOverflow(y); return o ? .null : .int(r)
            case .sub: let (r, o) = x.subtractingReportingOverflow(y); return o ? .null : .int(r)
            case .mul: let (r, o) = x.multipliedReportingOverflow(by: y); return o ? .null : .int(r)
            case .div: return y == 0 || (x == .min && y == -1) ? .null : .int(x / y)
            case .mod: return y == 0 || (x == .min && y == -1) ? .null : .int(x % y)
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
        case (.dateTimeOffset(let d), .duration(let u)):
            if op == .add { return .dateTimeOffset(EDMDateTimeOffset(ticks: d.ticks &+ u.ticks, offsetMinutes: d.offsetMinutes)) }
            if op == .sub { return .dateTimeOffset(EDMDateTimeOffset(ticks: d.ticks &- u.ticks, offsetMinutes: d.offsetMinutes)) }
        case (.dateTimeOffset(let x), .dateTimeOffset(let y)) where op == .sub:
            return .duration(EDMDuration(ticks: x.ticks &- y.ticks))
        case (.date(let d), .duration(let u)) where u.ticks % ticksPerDay == 0:
            let days = Int64(d.days) + (op == .sub ? -1 : 1) * u.ticks / ticksPerDay
            return Int32(exactly: days).map { .date(EDMDate(days: $0)) } ?? .null
        case (.date(let x), .date(let y)) where op == .sub:
            return .duration(EDMDuration(ticks: Int64(x.days - y.days) * ticksPerDay))
        case (.duration(let x), .duration(let y)):
            if op == .add { return .duration(EDMDuration(ticks: x.ticks &+ y.ticks)) }
            if op == .sub { return .duration(EDMDuration(ticks: x.ticks &- y.ticks)) }
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

    static func negate(_ v: Value) -> Value {
        switch v {
        case .int(let x): return x == .min ? .null : .int(-x)
        case .double(let x): return .double(-x)
        case .decimal(let x): return .decimal(EDMDecimal(significand: -x.significand, scale: x.scale))
        case .duration(let d): return .duration(EDMDuration(ticks: -d.ticks))
        default: return .null
        }
    }

    /// Numeric promotion to `type` (int → decimal → double).
    static func convert(_ v: Value, to type: TypeRef?) -> Value {
        switch (v, type?.primitive) {
        case (.int(let x), .decimal?): return .decimal(EDMDecimal(x))
        case (.int(let x), .double?), (.int(let x), .single?): return .double(Double(x))
        case (.decimal(let x), .double?), (.decimal(let x), .single?): return .double(x.doubleValue)
        case (.date(let d), .dateTimeOffset?): return .dateTimeOffset(EDMDateTimeOffset(ticks: Int64(d.days) * ticksPerDay))
        default: return v
        }
    }
}
