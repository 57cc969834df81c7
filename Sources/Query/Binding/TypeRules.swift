import Storage

/// Numeric promotion and literal conversion rules shared by the binder.
enum TypeRules {
    enum NumericClass { case integer, decimal, floating }

    static func numericClass(_ p: EDMPrimitive) -> NumericClass? {
        if p.isInteger { return .integer }
        switch p {
        case .decimal: return .decimal
        case .single, .double: return .floating
        default: return nil
        }
    }

    private static func integerRank(_ p: EDMPrimitive) -> Int {
        switch p {
        case .byte, .sbyte: 1
        case .int16: 2
        case .int32: 3
        default: 4
        }
    }

    /// The common type of two numeric types: Double > Single > Decimal > Int64 > Int32 > Int16 > (S)Byte.
    static func promote(_ a: EDMPrimitive, _ b: EDMPrimitive) -> EDMPrimitive {
        if a == b { return a }
        if a == .double || b == .double { return .double }
        if a == .single || b == .single { return a == .decimal || b == .decimal ? .double : .single }
        if a == .decimal || b == .decimal { return .decimal }
        let ra = integerRank(a), rb = integerRank(b)
        if ra == rb { return .int16 }
        return ra > rb ? a : b
    }

    /// `value` in the representation of numeric type `target`; nil when it does not fit (out of an
    /// integer type's range, not integral, not finite for Decimal).
    static func convertNumeric(_ value: Value, to target: EDMPrimitive) -> Value? {
        guard let cls = numericClass(target) else { return nil }
        switch (value, cls) {
        case (.int(let i), .integer):
            return target.integerRange!.contains(i) ? value : nil
        case (.int(let i), .decimal): return .decimal(EDMDecimal(i))
        case (.int(let i), .floating): return .double(Double(i))
        case (.decimal(let d), .integer):
            let n = d.normalized
            guard n.scale <= 0, n.scale > -19, let i = Int64(exactly: n.significand) else { return nil }
            var v = i
            for _ in 0..<Int(-n.scale) {
                let (m, o) = v.multipliedReportingOverflow(by: 10)
                if o { return nil }
                v = m
            }
            return target.integerRange!.contains(v) ? .int(v) : nil
        case (.decimal, .decimal): return value
        case (.decimal(let d), .floating): return .double(d.doubleValue)
        case (.double(let x), .integer):
            guard x.isFinite, x.rounded() == x, let i = Int64(exactly: x), target.integerRange!.contains(i) else {
                return nil
            }
            return .int(i)
        case (.double(let x), .decimal):
            guard x.isFinite, let d = EDMDecimal("\(x)") else { return nil }
            return .decimal(d)
        case (.double, .floating): return value
        default: return nil
        }
    }

    /// Whether two primitive types share a value representation and compare directly.
    static func sameRepresentation(_ a: EDMPrimitive, _ b: EDMPrimitive) -> Bool {
        if a == b { return true }
        let instants: Set<EDMPrimitive> = [.dateTimeOffset, .dateTime]
        let times: Set<EDMPrimitive> = [.timeOfDay, .time]
        return (instants.contains(a) && instants.contains(b)) || (times.contains(a) && times.contains(b))
    }

    /// A literal `value` of type `source` as a value of type `target`, or nil when not convertible.
    /// Numbers convert when they fit; a date becomes midnight UTC; a duration within a day becomes
    /// a time of day; strings become enum members or durations.
    static func convertLiteral(_ value: Value, from source: TypeRef?, to target: TypeRef, schema: Schema) -> Value? {
        if value.isNull { return value }
        if source == target { return value }
        switch target {
        case .primitive(let t):
            guard let s = source?.primitive else { return nil }
            if numericClass(t) != nil, numericClass(s) != nil { return convertNumeric(value, to: t) }
            if sameRepresentation(s, t) { return value }
            switch (value, t) {
            case (.date(let d), .dateTimeOffset), (.date(let d), .dateTime):
                return .dateTimeOffset(EDMDateTimeOffset(ticks: Int64(d.days) * ticksPerDay))
            case (.duration(let d), .timeOfDay), (.duration(let d), .time):
                return d.ticks >= 0 && d.ticks < ticksPerDay ? .timeOfDay(EDMTimeOfDay(ticks: d.ticks)) : nil
            case (.string(let text), .duration):
                return EDMDuration(text).map { .duration($0) }
            default:
                return nil
            }
        case .enumeration(let name):
            guard let e = schema.enumTypes[name] else { return nil }
            switch value {
            case .string(let members): return enumValue(members, of: e).map { .enumMember($0) }
            case .int(let i): return .enumMember(i)
            case .enumMember: return source == target ? value : nil
            default: return nil
            }
        default:
            return nil
        }
    }

    /// `Member`, `A,B` (flags, or-ed together) or a number, as the enum's integer value.
    static func enumValue(_ members: String, of type: EnumType) -> Int64? {
        var result: Int64 = 0
        var any = false
        for part in members.split(separator: ",", omittingEmptySubsequences: false) {
            let name = String(part).trimmingSpaces
            if let v = type.value(of: name) {
                result |= v
            } else if let v = Int64(name) {
                result |= v
            } else {
                return nil
            }
            any = true
        }
        return any ? result : nil
    }

    /// The enum type named `name`: by qualified name, else by unqualified name.
    static func enumType(named name: String, in schema: Schema) -> EnumType? {
        if let e = schema.enumTypes[name] { return e }
        let simple = name.split(separator: ".").last.map(String.init) ?? name
        return schema.enumTypes.values.first { $0.name == simple || $0.name == name }
    }
}
