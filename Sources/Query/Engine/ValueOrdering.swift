import Storage

/// OData's ordering of two non-null values of the same type: strings ordinal (by code point),
/// DateTimeOffsets by instant. Returns nil when the values are not comparable.
@inline(__always)
func compareValues(_ a: Value, _ b: Value) -> Int? {
    @inline(__always) func cmp<T: Comparable>(_ x: T, _ y: T) -> Int { x < y ? -1 : (x == y ? 0 : 1) }
    switch (a, b) {
    case (.int(let x), .int(let y)): return cmp(x, y)
    case (.enumMember(let x), .enumMember(let y)): return cmp(x, y)
    case (.double(let x), .double(let y)):
        if x.isNaN || y.isNaN { return x.isNaN && y.isNaN ? 0 : (x.isNaN ? 1 : -1) }
        return cmp(x, y)
    case (.decimal(let x), .decimal(let y)): return cmp(x, y)
    case (.string(let x), .string(let y)):
        if x == y { return 0 }
        return x.utf8.lexicographicallyPrecedes(y.utf8) ? -1 : 1
    case (.bool(let x), .bool(let y)): return x == y ? 0 : (x ? 1 : -1)
    case (.date(let x), .date(let y)): return cmp(x, y)
    case (.dateTimeOffset(let x), .dateTimeOffset(let y)): return cmp(x, y)
    case (.timeOfDay(let x), .timeOfDay(let y)): return cmp(x, y)
    case (.duration(let x), .duration(let y)): return cmp(x, y)
    case (.guid(let x), .guid(let y)): return cmp(x, y)
    case (.binary(let x), .binary(let y)): return x == y ? 0 : (x.lexicographicallyPrecedes(y) ? -1 : 1)
    // Mixed numeric kinds (a conversion the binder left implicit): compare as decimal or double.
    case (.int(let x), .decimal(let y)): return cmp(EDMDecimal(x), y)
    case (.decimal(let x), .int(let y)): return cmp(x, EDMDecimal(y))
    case (.int(let x), .double(let y)): return compareValues(.double(Double(x)), .double(y))
    case (.double(let x), .int(let y)): return compareValues(.double(x), .double(Double(y)))
    case (.decimal(let x), .double(let y)): return compareValues(.double(x.doubleValue), .double(y))
    case (.double(let x), .decimal(let y)): return compareValues(.double(x), .double(y.doubleValue))
    case (.dateTimeOffset(let x), .date(let y)): return -compareDate(y, x)
    case (.date(let x), .dateTimeOffset(let y)): return compareDate(x, y)
    default: return a == b ? 0 : nil
    }
}

/// A date (as its midnight UTC) against an instant; no overflow for any day count.
func compareDate(_ d: EDMDate, _ t: EDMDateTimeOffset) -> Int {
    let (midnight, o) = Int64(d.days).multipliedReportingOverflow(by: ticksPerDay)
    if o { return d.days < 0 ? -1 : 1 }
    return midnight < t.ticks ? -1 : (midnight == t.ticks ? 0 : 1)
}

/// OData equality: null equals null; values equal when they compare equal.
@inline(__always)
func odataEqual(_ a: Value, _ b: Value) -> Bool {
    switch (a, b) {
    case (.null, .null): return true
    case (.null, _), (_, .null): return false
    default: return compareValues(a, b) == 0
    }
}

/// Total order used for sorting (`$orderby`): nulls first, then `compareValues`.
func sortCompare(_ a: Value, _ b: Value) -> Int {
    switch (a, b) {
    case (.null, .null): return 0
    case (.null, _): return -1
    case (_, .null): return 1
    default: return compareValues(a, b) ?? 0
    }
}
