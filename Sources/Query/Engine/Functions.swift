import Storage

/// The built-in functions of `$filter`; any null argument gives null (except `concat`, which
/// OData also makes null). Strings count Unicode scalars, as code points.
enum Functions {
    static func call(
        _ name: String, _ args: [Value], resultType: TypeRef?, now: EDMDateTimeOffset, at position: Int
    ) throws -> Value {
        switch name {
        case "now": return .dateTimeOffset(now)
        case "maxdatetime": return .dateTimeOffset(EDMDateTimeOffset("9999-12-31T23:59:59.9999999Z")!)
        case "mindatetime": return .dateTimeOffset(EDMDateTimeOffset("0001-01-01T00:00:00Z")!)
        default: break
        }
        if args.contains(where: \.isNull) { return .null }
        switch (name, args.first) {
        case ("contains", .string(let s)?): return .bool(contains(s, string(args[1])))
        case ("startswith", .string(let s)?): return .bool(s.utf8.starts(with: string(args[1]).utf8))
        case ("endswith", .string(let s)?):
            return .bool(s.utf8.reversed().starts(with: string(args[1]).utf8.reversed()))
        case ("indexof", .string(let s)?):
            let scalars = Array(s.unicodeScalars), needle = Array(string(args[1]).unicodeScalars)
            if needle.isEmpty { return .int(0) }
            if needle.count <= scalars.count {
                for i in 0...(scalars.count - needle.count) where scalars[i..<(i + needle.count)].elementsEqual(needle)
                { return .int(Int64(i)) }
            }
            return .int(-1)
        case ("length", .string(let s)?): return .int(Int64(s.unicodeScalars.count))
        case ("substring", .string(let s)?):
            let scalars = Array(s.unicodeScalars)
            guard case .int(let start) = args[1] else { return .null }
            // Clamped before any sum, so no start or length (Int64.min…max) can overflow.
            let count = Int64(scalars.count)
            let from = min(max(0, start), count)
            var to = count
            if args.count > 2 {
                guard case .int(let length) = args[2] else { return .null }
                if length < 0 {
                    throw QueryError("substring length must not be negative", option: "$filter", column: position)
                }
                to = from + min(length, count - from)
            }
            var out = String.UnicodeScalarView()
            out.append(contentsOf: scalars[Int(from)..<Int(to)])
            return .string(String(out))
        case ("tolower", .string(let s)?): return .string(s.lowercased())
        case ("toupper", .string(let s)?): return .string(s.uppercased())
        case ("trim", .string(let s)?):
            return .string(
                String(
                    s.unicodeScalars.drop(while: { $0.properties.isWhitespace }).reversed()
                        .drop(while: { $0.properties.isWhitespace }).reversed().map(Character.init)))
        case ("concat", .string(let s)?): return .string(s + string(args[1]))
        case ("year", let v?): return civil(v).map { .int(Int64($0.year)) } ?? .null
        case ("month", let v?): return civil(v).map { .int(Int64($0.month)) } ?? .null
        case ("day", let v?): return civil(v).map { .int(Int64($0.day)) } ?? .null
        case ("hour", let v?): return timeTicks(v).map { .int($0 / (3600 * ticksPerSecond)) } ?? .null
        case ("minute", let v?): return timeTicks(v).map { .int($0 / (60 * ticksPerSecond) % 60) } ?? .null
        case ("second", let v?): return timeTicks(v).map { .int($0 / ticksPerSecond % 60) } ?? .null
        case ("fractionalseconds", let v?):
            return timeTicks(v).map {
                .decimal(EDMDecimal(significand: Int128($0 % ticksPerSecond), scale: 7).normalized)
            } ?? .null
        case ("totaloffsetminutes", .dateTimeOffset(let d)?): return .int(Int64(d.offsetMinutes))
        case ("date", .dateTimeOffset(let d)?):
            let local = d.localTicks
            return .date(
                EDMDate(days: Int32((local - (local % ticksPerDay + ticksPerDay) % ticksPerDay) / ticksPerDay)))
        case ("time", .dateTimeOffset(let d)?):
            return .timeOfDay(EDMTimeOfDay(ticks: (d.localTicks % ticksPerDay + ticksPerDay) % ticksPerDay))
        case ("totalseconds", .duration(let d)?):
            return .decimal(EDMDecimal(significand: Int128(d.ticks), scale: 7).normalized)
        case ("round", let v?): return round(v, .toNearestOrAwayFromZero)
        case ("floor", let v?): return round(v, .down)
        case ("ceiling", let v?): return round(v, .up)
        case ("cast", let v?): return cast(v, to: resultType)
        default: return .null
        }
    }

    static func string(_ v: Value) -> String {
        if case .string(let s) = v { return s }
        return ""
    }

    /// Ordinal substring search on UTF-8 bytes (`%` and `_` are ordinary characters).
    static func contains(_ haystack: String, _ needle: String) -> Bool {
        if needle.isEmpty { return true }
        let h = Array(haystack.utf8), n = Array(needle.utf8)
        guard n.count <= h.count else { return false }
        let first = n[0]
        var i = 0
        while i <= h.count - n.count {
            if h[i] == first, h[i..<(i + n.count)].elementsEqual(n) { return true }
            i += 1
        }
        return false
    }

    static func civil(_ v: Value) -> (year: Int, month: Int, day: Int)? {
        switch v {
        case .date(let d): return d.components
        case .dateTimeOffset(let d):
            let local = d.localTicks
            let days = (local - ((local % ticksPerDay) + ticksPerDay) % ticksPerDay) / ticksPerDay
            return civilFromDays(Int(days))
        default: return nil
        }
    }

    static func timeTicks(_ v: Value) -> Int64? {
        switch v {
        case .timeOfDay(let t): return t.ticks
        case .dateTimeOffset(let d): return (d.localTicks % ticksPerDay + ticksPerDay) % ticksPerDay
        default: return nil
        }
    }

    static func round(_ v: Value, _ rule: FloatingPointRoundingRule) -> Value {
        switch v {
        case .int: return v
        case .double(let d): return .double(d.rounded(rule))
        case .decimal(let d): return .decimal(d.rounded(rule))
        default: return .null
        }
    }

    static func cast(_ v: Value, to type: TypeRef?) -> Value {
        guard let p = type?.primitive else { return v }
        switch (v, p) {
        case (_, .string):
            if case .string = v { return v }
            var out = ""
            ValueJSON(schema: Schema(version: .v4, entityTypes: [:], complexTypes: [:], enumTypes: [:], entitySets: []))
                .write(v, type: .primitive(p), to: &out)
            if out.hasPrefix("\"") { out = String(out.dropFirst().dropLast()) }
            return .string(out)
        case (.int(let x), _) where p.isInteger: return p.integerRange!.contains(x) ? v : .null
        case (.int(let x), .decimal): return .decimal(EDMDecimal(x))
        case (.int(let x), .double), (.int(let x), .single): return .double(Double(x))
        case (.decimal(let d), .double), (.decimal(let d), .single): return .double(d.doubleValue)
        case (.decimal(let d), _) where p.isInteger:
            // Truncated, then in range (a negative scale, 1E+30, is not its significand).
            return TypeRules.convertNumeric(.decimal(d.rounded(.towardZero)), to: p) ?? .null
        case (.double(let d), _) where p.isInteger:
            guard d.isFinite, let i = Int64(exactly: d.rounded(.towardZero)), p.integerRange!.contains(i) else {
                return .null
            }
            return .int(i)
        case (.double(let d), .decimal): return EDMDecimal(String(d)).map { .decimal($0) } ?? .null
        case (.string(let s), _):
            return
                (try? ValueJSON(
                    schema: Schema(version: .v4, entityTypes: [:], complexTypes: [:], enumTypes: [:], entitySets: [])
                )
                .value(from: .string(s), type: .primitive(p), property: "cast")) ?? .null
        default:
            return compareValues(v, v) != nil && Arithmetic.convert(v, to: type) != v
                ? Arithmetic.convert(v, to: type)
                : (p == .dateTimeOffset || p == .double || p == .decimal ? Arithmetic.convert(v, to: type) : v)
        }
    }
}
