import Foundation
public import OfflineStore
public import Storage

/// Synthetic entities for any schema: what `offline-store generate` writes and the benchmarks load.
///
/// Row `n` of a set is a pure function of the schema, the seed, the row number and the sampled
/// foreign-key targets, so a generator can be asked for any row at any time and two runs with the
/// same seed over the same parents write the same entities.
///
/// - Keys are unique: derived from the row number (`"0000000042"`, `42`, a date, a GUID, …). A
///   composite key is split mixed-radix: leading components count orders, the last one counts
///   positions (`10, 20, 30, 40`). When key properties are the foreign key of a navigation property
///   (an item's `SalesOrderID`), they take the parent's key and the rest of the key numbers the
///   children of that parent.
/// - Every other property gets a value of its declared type that fits its facets: `MaxLength`,
///   `Precision`/`Scale`, integer ranges; enums, complex values and collections are filled
///   recursively. Nullable properties are null about one time in ten.
/// - Foreign keys (the dependent properties of a navigation property's referential constraint)
///   point at existing rows of the target set, sampled from it (at most `sampleLimit` of them).
///
/// ```swift
/// let gen = try store.generator(set: "SalesOrderItems", count: 1_000_000, seed: 7)
/// let first = gen.entity(0)   // ["SalesOrderID": .string("…"), "ItemPosition": .int(10), …]
/// ```
public struct EntityGenerator: Sendable {
    public let set: String
    package let type: EntityType
    package let schema: Schema
    public let count: Int
    public let seed: UInt64
    let base: UInt64
    let references: [Reference]
    let key: KeyPlan
    let stringKinds: [String: StringKind]

    /// The values a navigation property's foreign key may take.
    struct Reference: Sendable {
        var navigation: String
        /// The dependent (foreign-key) properties of this type, in constraint order.
        var properties: [String]
        /// Tuples of the target's referenced properties, in `properties` order.
        var tuples: [[Value]]
        var nullable: Bool
    }

    /// How a row number becomes the key.
    struct KeyPlan: Sendable {
        /// Key components taken from a parent's key: (key position, reference index, tuple position).
        var bound: [(position: Int, tuple: Int)]
        var boundReference: Int?
        /// Rows per parent when part of the key comes from a parent; else `count`.
        var perParent: Int
        /// The other key components, in key order, each with its radix and encoding.
        var free: [FreeComponent]
    }

    struct FreeComponent: Sendable {
        var position: Int
        var property: Property
        var radix: Int
        /// Counts in steps of 10 (positions: 10, 20, …) rather than 1.
        var stepTen: Bool
        /// For strings: decimal digits (true) or base 36 (false), and the width.
        var decimal: Bool
        var width: Int
    }

    /// Items per order when a composite key has no parent to hang from.
    static let defaultFanout = 4

    /// Makes a generator for `count` rows of `set`.
    ///
    /// - Parameter references: per navigation property (by name), the tuples of the target's
    ///   referenced properties that its foreign key may take, in the constraint's order. A
    ///   navigation property with a foreign key but no entry (or an empty one) gets null foreign
    ///   keys, which fails for a non-nullable one.
    /// - Throws: `EntityError.badInput` when the key cannot hold `count` distinct values or a
    ///   non-nullable foreign key has nothing to point at.
    package init(
        schema: Schema, set: String, count: Int, seed: UInt64, references: [String: [[Value]]] = [:]
    ) throws(EntityError) {
        guard let type = schema.entityType(ofSet: set) else { throw .unknownEntitySet(set) }
        guard count >= 0 else { throw .badInput("generate: the count must not be negative") }
        self.set = set
        self.type = type
        self.schema = schema
        self.count = count
        self.seed = seed
        self.base = _mix(seed ^ _fnv1a(set))

        var refs: [Reference] = []
        for nav in type.navigationProperties where !nav.dependentConstraints.isEmpty {
            let props = nav.dependentConstraints.map(\.property)
            guard props.allSatisfy({ type.property($0) != nil }) else { continue }
            let nullable = props.allSatisfy { type.property($0)!.nullable }
            let tuples = references[nav.name] ?? []
            if tuples.isEmpty && !nullable && count > 0 {
                let target = schema.targetSet(of: nav, from: set) ?? nav.targetType
                throw .badInput(
                    "generate \(set): its foreign key \(props.joined(separator: ", ")) must point at \(target), which has no entities; generate \(target) first"
                )
            }
            refs.append(Reference(navigation: nav.name, properties: props, tuples: tuples, nullable: nullable))
        }
        self.references = refs
        self.stringKinds = Self.stringKinds(type, schema)
        self.key = try Self.plan(type: type, schema: schema, set: set, count: count, references: refs)
    }

    static func plan(
        type: EntityType, schema: Schema, set: String, count: Int, references: [Reference]
    ) throws(EntityError) -> KeyPlan {
        let keyProps = type.key.compactMap { type.property($0) }
        guard keyProps.count == type.key.count, !keyProps.isEmpty else {
            throw .badInput("generate \(set): the entity type has no usable key")
        }
        // A foreign key made only of key properties hangs the rows from their parents.
        var bound: [(position: Int, tuple: Int)] = []
        var boundReference: Int? = nil
        for (r, ref) in references.enumerated() where !ref.tuples.isEmpty {
            let positions = ref.properties.map { type.key.firstIndex(of: $0) }
            if positions.allSatisfy({ $0 != nil }) && Set(ref.properties).count == ref.properties.count {
                boundReference = r
                bound = positions.enumerated().map { (position: $0.element!, tuple: $0.offset) }
                break
            }
        }
        let freePositions = (0..<keyProps.count).filter { p in !bound.contains { $0.position == p } }
        var perParent = max(count, 1)
        if let r = boundReference {
            let parents = references[r].tuples.count
            perParent = max(1, _ceilingDivision(count, parents))
            if freePositions.isEmpty && perParent > 1 {
                throw .badInput(
                    "generate \(set): its key is the foreign key to \(references[r].navigation); at most \(parents) entities (one per parent) can be made"
                )
            }
        }
        // Radixes: trailing components count positions (up to the fanout), the first free one the rest.
        var free: [FreeComponent] = []
        var remaining = perParent
        for (n, position) in freePositions.enumerated().reversed() {
            let p = keyProps[position]
            let first = n == 0
            let stepTen = position > 0 && p.type.primitive?.isInteger == true  // positions: 10, 20, …
            let capacity = Self.capacity(of: p, schema: schema, stepTen: stepTen)
            var radix: Int
            if first {
                radix = remaining
            } else if boundReference != nil && n == freePositions.count - 1 {
                radix = min(remaining, capacity)  // children of one parent: the last component takes them all
            } else {
                radix = min(capacity, Self.defaultFanout, remaining)
            }
            radix = max(radix, 1)
            if radix > capacity {
                throw .badInput(
                    "generate \(set): key property \(p.name) (\(p.type)) cannot hold \(radix) distinct values")
            }
            let width = min(p.maxLength ?? 10, 10)
            var decimal = true
            if p.type.primitive == .string {
                let decimalCapacity = width >= 19 ? Int.max : _pow(10, width) - 1
                decimal = radix <= decimalCapacity
            }
            free.insert(
                FreeComponent(
                    position: position, property: p, radix: radix, stepTen: stepTen, decimal: decimal,
                    width: decimal ? width : min(p.maxLength ?? 12, 12)), at: 0)
            remaining = _ceilingDivision(remaining, radix)
        }
        return KeyPlan(bound: bound, boundReference: boundReference, perParent: perParent, free: free)
    }

    /// How many distinct key values a property can take from this generator.
    static func capacity(of p: Property, schema: Schema, stepTen: Bool) -> Int {
        func cap(_ n: Int) -> Int { n }
        switch p.type {
        case .primitive(let t):
            switch t {
            case .string:
                guard let ml = p.maxLength else { return cap(Int.max) }
                return cap(ml >= 12 ? Int.max : _pow(36, ml) - 1)
            case .boolean: return cap(2)
            case .byte, .sbyte, .int16, .int32, .int64:
                let upper = t.integerRange!.upperBound
                return cap(Int(stepTen ? upper / 10 : upper) - 1)
            case .decimal:
                let digits = min(max((p.precision ?? 18) - max(p.scale ?? 0, 0), 1), 18)
                return cap(_pow(10, digits) - 1)
            case .single: return cap(1 << 24)
            case .double: return cap(1 << 53)
            case .date: return cap(2_900_000)
            case .dateTimeOffset, .dateTime, .duration: return cap(Int.max / Int(ticksPerSecond))
            case .timeOfDay, .time: return cap(86_400)
            case .guid: return cap(1 << 62)
            case .binary:
                guard let ml = p.maxLength, ml < 8 else { return cap(Int.max) }
                return cap(ml == 0 ? 0 : _pow(256, ml) - 1)
            case .json: return cap(0)
            }
        case .enumeration(let name):
            return cap(schema.enumTypes[name]?.members.count ?? 0)
        case .complex, .collection:
            return cap(0)
        }
    }

    // MARK: Rows

    /// The entity of row `row` (0-based; any row, in any order).
    public func entity(_ row: Int) -> Properties {
        var rng = _SplitMix(state: _mix(base &+ UInt64(truncatingIfNeeded: row) &* 0x9E37_79B9_7F4A_7C15))
        var out = Properties(minimumCapacity: type.properties.count)
        // The key.
        var digit = row % key.perParent
        if let r = key.boundReference {
            let tuple = references[r].tuples[(row / key.perParent) % references[r].tuples.count]
            for b in key.bound { out[type.key[b.position]] = tuple[b.tuple] }
        }
        for i in key.free.indices.reversed() {
            let c = key.free[i]
            let d: Int
            if i == 0 { d = digit } else { d = digit % c.radix; digit /= c.radix }
            out[c.property.name] = keyValue(c, d)
        }
        // Foreign keys that are not part of the key.
        for (r, ref) in references.enumerated() where r != key.boundReference {
            if ref.properties.contains(where: { out[$0] != nil }) { continue }
            if ref.tuples.isEmpty || (ref.nullable && rng.chance(0.1)) { continue }
            let tuple = ref.tuples[rng.below(ref.tuples.count)]
            for (p, v) in zip(ref.properties, tuple) { out[p] = v }
        }
        // Everything else.
        for p in type.properties where out[p.name] == nil {
            if isForeignKey(p.name) { continue }  // left null above
            let v = value(p, depth: 0, &rng)
            if !v.isNull { out[p.name] = v }
        }
        return out
    }

    func isForeignKey(_ name: String) -> Bool { references.contains { $0.properties.contains(name) } }

    /// A key component's value for digit `d`.
    func keyValue(_ c: FreeComponent, _ d: Int) -> Value {
        let n = c.stepTen ? (d + 1) * 10 : d + 1
        switch c.property.type {
        case .primitive(let t):
            switch t {
            case .string:
                return .string(
                    c.decimal ? _padded(String(n), c.width) : _padded(String(n, radix: 36, uppercase: true), c.width))
            case .boolean: return .bool(d == 1)
            case .byte, .sbyte, .int16, .int32, .int64: return .int(Int64(n))
            case .decimal: return .decimal(EDMDecimal(Int64(n)))
            case .single, .double: return .double(Double(n))
            case .date: return .date(EDMDate(days: Int32(daysFromCivil(year: 2000, month: 1, day: 1) + d)))
            case .dateTimeOffset, .dateTime:
                return .dateTimeOffset(EDMDateTimeOffset(ticks: (Self.epoch2020 + Int64(d)) * ticksPerSecond))
            case .timeOfDay, .time: return .timeOfDay(EDMTimeOfDay(ticks: Int64(d) * ticksPerSecond))
            case .duration: return .duration(EDMDuration(ticks: Int64(d) * ticksPerSecond))
            case .guid:
                let high = (_mix(base ^ 0x6775_6964) & ~0xF000) | 0x4000  // version 4
                let low = 0x8000_0000_0000_0000 | _bijective62(UInt64(d) ^ (base >> 2))  // variant 10
                return .guid(EDMGuid(high: high, low: low))
            case .binary:
                let width = min(c.property.maxLength ?? 8, 8)
                return .binary((0..<width).map { UInt8(truncatingIfNeeded: UInt64(n) >> (8 * UInt64(width - 1 - $0))) })
            case .json: return .null
            }
        case .enumeration(let name):
            return .enumMember(schema.enumTypes[name]!.members[d].value)
        case .complex, .collection:
            return .null
        }
    }

    static let epoch2015 = Int64(daysFromCivil(year: 2015, month: 1, day: 1)) * 86_400
    static let epoch2020 = Int64(daysFromCivil(year: 2020, month: 1, day: 1)) * 86_400
    static let epoch2026 = Int64(daysFromCivil(year: 2026, month: 1, day: 1)) * 86_400

    /// A value for a non-key, non-foreign-key property: null about one time in ten when nullable.
    func value(_ p: Property, depth: Int, _ rng: inout _SplitMix) -> Value {
        if p.nullable && rng.chance(0.1) { return .null }
        return value(type: p.type, p, depth: depth, &rng)
    }

    func value(type: TypeRef, _ p: Property, depth: Int, _ rng: inout _SplitMix) -> Value {
        switch type {
        case .primitive(let t):
            return primitive(t, p, &rng)
        case .enumeration(let name):
            guard let e = schema.enumTypes[name], !e.members.isEmpty else { return .enumMember(0) }
            if e.isFlags {
                var v: Int64 = 0
                for m in e.members where m.value != 0 && rng.chance(0.3) { v |= m.value }
                return .enumMember(v)
            }
            return .enumMember(e.members[rng.skewed(e.members.count)].value)
        case .complex(let name):
            guard let ct = schema.complexTypes[name] else { return .null }
            var props: Properties = [:]
            for sub in ct.properties {
                // Deep recursion (a complex type that contains itself) stops at nulls.
                if depth >= 3 && sub.nullable { continue }
                let v = value(sub, depth: depth + 1, &rng)
                if !v.isNull { props[sub.name] = v }
            }
            return .complex(props)
        case .collection(let element):
            if depth >= 3 { return .collection([]) }
            let n = rng.below(4)
            var items: [Value] = []
            for _ in 0..<n {
                let v = value(type: element, p, depth: depth + 1, &rng)
                if !v.isNull { items.append(v) }
            }
            return .collection(items)
        }
    }

    func primitive(_ t: EDMPrimitive, _ p: Property, _ rng: inout _SplitMix) -> Value {
        switch t {
        case .string: return .string(string(p, &rng))
        case .boolean: return .bool(rng.chance(0.5))
        case .byte: return .int(Int64(rng.below(256)))
        case .sbyte: return .int(Int64(rng.below(256)) - 128)
        case .int16, .int32, .int64:
            // Quantities, counts, sizes: mostly small, some large.
            return .int(Int64(rng.logUniform(1, t == .int64 ? 1_000_000 : 1_000).rounded(.down)))
        case .single:
            return .double(Double(Float((rng.logUniform(0.01, 10_000) * 100).rounded() / 100)))
        case .double:
            return .double((rng.logUniform(0.01, 10_000) * 1000).rounded() / 1000)
        case .decimal:
            let scale = min(max(p.scale ?? 2, 0), 18)
            let intDigits = min(max((p.precision ?? 18) - scale, 0), 7)
            let integer = intDigits == 0 ? 0 : Int128(rng.logUniform(1, Double(_pow(10, intDigits)) - 1).rounded(.down))
            let fraction = scale == 0 ? 0 : Int128(rng.below(min(_pow(10, scale), 1 << 40)))
            var unit: Int128 = 1
            for _ in 0..<scale { unit *= 10 }
            return .decimal(EDMDecimal(significand: integer * unit + fraction, scale: Int16(scale)))
        case .date:
            let from = daysFromCivil(year: 2015, month: 1, day: 1), to = daysFromCivil(year: 2025, month: 12, day: 31)
            return .date(EDMDate(days: Int32(from + rng.below(to - from + 1))))
        case .dateTimeOffset, .dateTime:
            let s = Self.epoch2015 + Int64(rng.below(Int(Self.epoch2026 - Self.epoch2015)))
            return .dateTimeOffset(EDMDateTimeOffset(ticks: s * ticksPerSecond + Int64(rng.below(1000)) * 10_000))
        case .timeOfDay, .time:
            return .timeOfDay(EDMTimeOfDay(ticks: Int64(rng.below(86_400)) * ticksPerSecond))
        case .duration:
            return .duration(EDMDuration(ticks: Int64(rng.below(30 * 86_400)) * ticksPerSecond))
        case .guid:
            let high = (rng.next() & ~0xF000) | 0x4000
            let low = (rng.next() & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
            return .guid(EDMGuid(high: high, low: low))
        case .binary:
            let n = 1 + rng.below(min(p.maxLength ?? 32, 64))
            return .binary((0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
        case .json:
            let lon = Double(rng.below(3_600_000) - 1_800_000) / 10_000,
                lat = Double(rng.below(1_800_000) - 900_000) / 10_000
            return .json("{\"type\":\"Point\",\"coordinates\":[\(lon),\(lat)]}")
        }
    }

    // MARK: Strings

    static let words = [
        "Notebook", "Basic", "Pro", "Ultra", "Flat", "Screen", "Wireless", "Mouse", "Keyboard", "Printer",
        "Laser", "Color", "Office", "Chair", "Desk", "Server", "Rack", "Cable", "Adapter", "Speaker",
        "Headset", "Monitor", "Tablet", "Phone", "Camera", "Scanner", "Power", "Supply", "Battery", "Dock",
        "delivery", "urgent", "partial", "order", "customer", "requested", "confirmed", "shipped", "via",
        "express", "standard", "warehouse", "Walldorf", "München", "Zürich", "Straße", "café", "naïve",
        "quarterly", "invoice", "credit", "note", "pending", "approval", "from", "the", "and", "for",
        "with", "please", "contact", "support", "before", "return", "item", "damaged", "replacement",
    ]
    static let firstNames = [
        "Anna", "Ben", "Chen", "Dana", "Emil", "Fatima", "Giulia", "Hiro", "Ines", "Jonas", "Karin", "Luis",
        "Maya", "Noah", "Olga", "Priya", "Quentin", "Rosa", "Sven", "Tara",
    ]
    static let lastNames = [
        "Becker", "Schmidt", "Müller", "Nguyen", "Garcia", "Rossi", "Tanaka", "Kumar", "Smith", "Dubois",
        "Jensen", "Novak", "Silva", "Cohen", "Okafor", "Larsen",
    ]
    static let companies = [
        "SAP", "Becker Berlin", "DelBont Industries", "Talpa", "Panorama Studios", "TECUM", "Asia High tech",
        "Laurent", "AVANTEL", "Telecomunicaciones Star", "New Line Design", "HEPA Tec", "Anav Ideon",
        "Robert Brown Entertainment", "Mexican Oil Trading Company", "Vente Et Réparation de Ordinateur",
    ]
    static let cities = [
        "Walldorf", "Berlin", "Fremont", "Hannover", "Hollywood", "Münster", "Tokyo", "Paris", "Boston",
        "Barcelona", "Lyon", "Chicago", "Stuttgart", "Pune", "Seattle", "Mexico City", "São Paulo", "Zürich",
    ]
    static let currencies = ["EUR", "USD", "EUR", "USD", "GBP", "JPY", "CHF", "INR", "CNY", "BRL"]
    static let countries = ["DE", "US", "DE", "US", "FR", "GB", "JP", "IN", "ES", "IT", "BR", "CN", "CH", "MX"]
    static let letters = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ")

    /// What a string property holds, judged once from its name and MaxLength.
    enum StringKind: Sendable {
        case currency, country, email, phone, city, postal, url, company, firstName, lastName, name, street, code, id,
            text
    }

    static func stringKind(_ p: Property) -> StringKind {
        let name = p.name.lowercased()
        if name.contains("currency") { return .currency }
        if name.contains("country") { return .country }
        if name.contains("mail") { return .email }
        if name.contains("phone") || name.contains("fax") { return .phone }
        if name.contains("city") { return .city }
        if name.contains("postal") || name.contains("zip") { return .postal }
        if name.contains("url") || name.contains("web") { return .url }
        if name.contains("company") || name.hasSuffix("partnername") { return .company }
        if name.contains("firstname") { return .firstName }
        if name.contains("lastname") { return .lastName }
        if name.hasSuffix("name") { return .name }
        if name.contains("street") { return .street }
        if (p.maxLength ?? 100) <= 4
            || ["status", "code", "type", "unit", "category"].contains(where: { name.contains($0) })
        {
            return .code
        }
        if name.hasSuffix("id") || name.hasSuffix("number") { return .id }
        return .text
    }

    /// The kinds of every string property of the type and its complex types, by name and MaxLength.
    static func stringKinds(_ type: EntityType, _ schema: Schema) -> [String: StringKind] {
        var out: [String: StringKind] = [:]
        for p in type.properties + schema.complexTypes.values.flatMap(\.properties) {
            out[kindKey(p)] = stringKind(p)
        }
        return out
    }

    static func kindKey(_ p: Property) -> String { p.name + "#" + (p.maxLength.map(String.init) ?? "") }

    static let capitalizedWords = words.map { $0.prefix(1).uppercased() + $0.dropFirst() }
    static let wordLengths = words.map(\.count)

    /// A string that fits the property, shaped after its name.
    func string(_ p: Property, _ rng: inout _SplitMix) -> String {
        Self.string(p, kind: stringKinds[Self.kindKey(p)] ?? Self.stringKind(p), &rng)
    }

    static func string(_ p: Property, kind: StringKind, _ rng: inout _SplitMix) -> String {
        let ml = p.maxLength
        func fit(_ s: String, count: Int? = nil) -> String {
            guard let ml, (count ?? s.count) > ml else { return s }
            var cut = s.prefix(ml)
            while cut.count > 1, cut.last == " " { cut.removeLast() }
            return String(cut)
        }
        func pick(_ list: [String]) -> String { list[rng.skewed(list.count)] }
        func ascii(_ s: String) -> String {
            String(s.lowercased().unicodeScalars.filter { $0.isASCII && $0.properties.isAlphabetic })
        }
        switch kind {
        case .currency: return fit(pick(currencies))
        case .country: return fit(pick(countries))
        case .email:
            return fit("\(ascii(pick(firstNames))).\(ascii(pick(lastNames)))@\(ascii(pick(companies))).example")
        case .phone: return fit("+49 6227 \(7_000_000 + rng.below(999_999))")
        case .city: return fit(pick(cities))
        case .postal: return fit(String(10_000 + rng.below(89_999)))
        case .url: return fit("https://www.\(ascii(pick(companies))).example/")
        case .company: return fit(pick(companies))
        case .firstName: return fit(pick(firstNames))
        case .lastName: return fit(pick(lastNames))
        case .name:
            let n = 1 + rng.below(3)
            return fit(
                (0..<n).map { _ in capitalizedWords[rng.below(30)] }.joined(separator: " ") + " \(rng.below(1000))")
        case .street: return fit("\(capitalizedWords[rng.below(words.count)]) Str. \(1 + rng.below(200))")
        case .code:
            // A low-cardinality code: a pool of values per property, skewed.
            let width = min(ml ?? 4, 4)
            let pool = 3 + Int(_fnv1a(p.name) % 12)
            var code = ""
            var x = _mix(_fnv1a(p.name) &+ UInt64(rng.skewed(pool)))
            for _ in 0..<max(width, 1) { code.append(letters[Int(x % 26)]); x /= 26 }
            return code
        case .id:
            let width = min(ml ?? 10, 10)
            return fit(_padded(String(rng.below(_pow(10, min(width, 9)))), width))
        case .text:
            // Free text: words up to a length between a short phrase and the maximum.
            let longest = min(ml ?? 80, 255)
            let target = min(longest, 8) + rng.below(max(longest - min(longest, 8), 0) + 1)
            var s = ""
            var count = 0
            while count < target {
                let w = rng.below(words.count)
                if count == 0 {
                    s = capitalizedWords[w]
                    count = wordLengths[w]
                } else {
                    s += " " + words[w]
                    count += 1 + wordLengths[w]
                }
            }
            return fit(s, count: count)
        }
    }
}

// MARK: Store

extension OfflineStore {
    /// At most this many target rows are kept to pick foreign keys from.
    public static let generatorSampleLimit = 100_000

    /// A generator for `count` rows of `set`, its foreign keys sampled from the target sets' rows.
    public func generator(set: String, count: Int, seed: UInt64 = 1) throws -> EntityGenerator {
        let h = try entities.set(set)
        var references: [String: [[Value]]] = [:]
        for nav in h.type.navigationProperties where !nav.dependentConstraints.isEmpty {
            guard let target = schema.targetSet(of: nav, from: set) else { continue }
            let t = try entities.set(target)
            let columns = nav.dependentConstraints.map { c in t.type.propertyIndex(c.referencedProperty) }
            guard columns.allSatisfy({ $0 != nil }) else { continue }
            references[nav.name] = try sample(
                t, columns: columns.map { $0! }, limit: Self.generatorSampleLimit,
                seed: seed ^ _fnv1a(set + "/" + nav.name))
        }
        return try EntityGenerator(schema: schema, set: set, count: count, seed: seed, references: references)
    }

    /// Up to `limit` tuples of `columns` from the rows of a set (reservoir sampling, deterministic per seed);
    /// all of them, in key order, when the set is no larger. Tuples with a null are skipped.
    func sample(_ h: EntitySetHandle, columns: [Int], limit: Int, seed: UInt64) throws -> [[Value]] {
        var rng = _SplitMix(state: _mix(seed))
        var out: [[Value]] = []
        var seen = 0
        let props = columns.map { h.type.properties[$0] }
        let schema = self.schema
        try entities.read { t in
            try h.scanRaw(t) { _, row in
                let view = try RowView(row)
                var tuple: [Value] = []
                for (c, p) in zip(columns, props) {
                    let v = try view.value(at: c, type: p.type, schema: schema)
                    if v.isNull { return true }
                    tuple.append(v)
                }
                seen += 1
                if out.count < limit {
                    out.append(tuple)
                } else {
                    let j = rng.below(seen)
                    if j < limit { out[j] = tuple }
                }
                return true
            }
        }
        return out
    }

    /// Writes `count` synthetic entities (rows `0..<count` of `generator(set:count:seed:)`) into
    /// `set`, `batchSize` per transaction; an entity with the same key is replaced. Nothing is
    /// queued. Memory stays bounded by one batch, whatever `count` is.
    ///
    /// - Parameter progress: called with (rows written, count) after each transaction.
    /// - Returns: how many entities were written.
    /// - Throws: `EntityError` (naming the set and key of an entity refused); the batches before
    ///   the failing one stay written.
    @discardableResult
    public func generate(
        set: String, count: Int, seed: UInt64 = 1, batchSize: Int = 50_000,
        progress: ((_ written: Int, _ total: Int) -> Void)? = nil
    ) throws -> Int {
        let gen = try generator(set: set, count: count, seed: seed)
        let size = max(batchSize, 1)
        var done = 0
        while done < count {
            let rows = done..<(done + min(size, count - done))
            try load(rows: rows.map { (set: set, entity: gen.entity($0)) })
            done = rows.upperBound
            progress?(done, count)
        }
        return count
    }
}

// MARK: Helpers

/// SplitMix64: small, fast, and the same on every platform (Swift's own generator is not seedable).
package struct _SplitMix: RandomNumberGenerator {
    package var state: UInt64

    package init(state: UInt64) { self.state = state }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return _mix(state)
    }

    /// Uniform in `0..<n` (n > 0).
    package mutating func below(_ n: Int) -> Int {
        guard n > 1 else { return 0 }
        return Int(next().multipliedFullWidth(by: UInt64(n)).high)
    }

    /// True with probability `p`.
    mutating func chance(_ p: Double) -> Bool { unit() < p }

    /// Uniform in [0, 1).
    mutating func unit() -> Double { Double(next() >> 11) * 0x1p-53 }

    /// Log-uniform in [lo, hi]: as many values per decade.
    mutating func logUniform(_ lo: Double, _ hi: Double) -> Double {
        lo * Foundation.pow(10, unit() * log10(hi / lo))
    }

    /// An index in `0..<n`, small ones more likely (a popular few, a long tail).
    mutating func skewed(_ n: Int) -> Int {
        let u = unit()
        return min(Int(Double(n) * u * u), n - 1)
    }
}

/// The SplitMix64 finalizer: a bijection on 64 bits that scatters neighbours.
@inline(__always)
func _mix(_ x: UInt64) -> UInt64 {
    var z = x
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
}

/// A bijection on the low 62 bits (xor-shifts and an odd multiplier, all modulo 2^62).
func _bijective62(_ x: UInt64) -> UInt64 {
    let mask: UInt64 = (1 << 62) - 1
    var z = x & mask
    z = (z ^ (z >> 29)) & mask
    z = (z &* 0xBF58_476D_1CE4_E5B9) & mask
    z = (z ^ (z >> 31)) & mask
    return z
}

/// FNV-1a of a string's UTF-8: a stable hash (Swift's `Hasher` is seeded per process).
func _fnv1a(_ s: String) -> UInt64 {
    var h: UInt64 = 0xCBF2_9CE4_8422_2325
    for b in s.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01B3 }
    return h
}

func _pow(_ base: Int, _ exp: Int) -> Int {
    var r = 1
    for _ in 0..<exp {
        let (m, o) = r.multipliedReportingOverflow(by: base)
        if o { return Int.max }
        r = m
    }
    return r
}

func _padded(_ s: String, _ width: Int) -> String {
    s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
}

/// `a / b` rounded up, for `a ≥ 0`, `b > 0`, without the overflow of `(a + b - 1) / b`.
@inline(__always)
func _ceilingDivision(_ a: Int, _ b: Int) -> Int { a / b + (a % b == 0 ? 0 : 1) }
