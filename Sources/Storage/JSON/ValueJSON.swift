import LMDB
import Foundation

/// What reading a service's data let pass that a local write would refuse: properties the
/// store's `$metadata` lacks (skipped) and values beyond a declared facet (kept).
package struct ServerNotes: Sendable, Hashable {
    package var skippedProperties = 0
    package var facetViolations = 0
    package init() {}
}

/// Converts between OData JSON (V4, and V2's `/Date(…)/` and string-typed numbers) and typed values.
package struct ValueJSON: Sendable {
    package let schema: Schema

    package init(schema: Schema) { self.schema = schema }

    /// Reads an entity's properties from a JSON object, checking each against `properties`.
    ///
    /// Annotations (`@odata.*`, `__metadata`) and navigation properties (`navigation`) are skipped;
    /// any other unknown name is an error.
    package func properties(
        from json: JSON, properties: [Property], navigation: Set<String> = [], owner: String
    ) throws(EntityError) -> Properties {
        var none: ServerNotes? = nil
        return try self.properties(
            from: json, properties: properties, navigation: navigation, owner: owner, notes: &none)
    }

    /// `properties(from:…)` for what a service sent: a property the local `$metadata` does not
    /// declare (a service may add nullable properties, a compatible change) is skipped, and a value
    /// beyond its MaxLength, Precision or Scale kept, both counted in `notes`, at any depth of
    /// complex values, instead of failing the entity (a value of the wrong type still fails it).
    /// With `notes` nil, both are errors.
    package func properties(
        from json: JSON, properties: [Property], navigation: Set<String> = [], owner: String, notes: inout ServerNotes?
    ) throws(EntityError) -> Properties {
        guard case .object(let members) = json else {
            throw .badInput("expected a JSON object for an entity of '\(owner)'")
        }
        var out = Properties(minimumCapacity: members.count)
        for (name, v) in members {
            // Annotations and V2's metadata members are skipped (bytes, not Foundation's `contains`:
            // this runs for every member of every entity a load or refresh reads).
            if name.utf8.contains(UInt8(ascii: "@")) || name == "__metadata" || name == "__deferred" { continue }
            guard let p = properties.first(where: { $0.name == name }) else {
                if navigation.contains(name) { continue }
                guard notes != nil else { throw .unknownProperty(set: owner, property: name) }
                notes!.skippedProperties += 1
                continue
            }
            let value = try self.value(from: v, type: p.type, property: name, notes: &notes)
            if !value.isNull {  // nulls: checked on write
                if notes != nil {
                    // The service's data: facets reported (counted), not fatal; the type is checked.
                    if (try? Validation.check(value, against: p, schema: schema)) == nil {
                        try Validation.check(value, against: p, schema: schema, facets: false)
                        notes!.facetViolations += 1
                    }
                } else {
                    try Validation.check(value, against: p, schema: schema)
                }
            }
            out[name] = value
        }
        return out
    }

    /// Reads one value of `type` from JSON.
    package func value(from json: JSON, type: TypeRef, property: String) throws(EntityError) -> Value {
        var none: ServerNotes? = nil
        return try value(from: json, type: type, property: property, notes: &none)
    }

    func value(from json: JSON, type: TypeRef, property: String, notes: inout ServerNotes?) throws(EntityError) -> Value
    {
        if case .null = json { return .null }
        func mismatch() -> EntityError { .typeMismatch(property: property, expected: type.description, got: json.text) }
        switch type {
        case .primitive(let p):
            return try primitive(from: json, type: p, property: property)
        case .enumeration(let name):
            guard let et = schema.enumTypes[name] else { throw mismatch() }
            switch json {
            case .number(let n):
                guard let v = Int64(n) else { throw mismatch() }
                return .enumMember(v)
            case .string(let s):
                var total: Int64 = 0
                for part in s.split(separator: ",") {
                    let member = part.trimmingCharacters(in: .whitespaces)
                    if let v = et.value(of: member) {
                        total |= v
                    } else if let v = Int64(member) {
                        total |= v
                    } else {
                        throw mismatch()
                    }
                }
                return .enumMember(total)
            default: throw mismatch()
            }
        case .complex(let name):
            guard let ct = schema.complexTypes[name] else { throw mismatch() }
            let props = try properties(from: json, properties: ct.properties, owner: name, notes: &notes)
            return .complex(props)
        case .collection(let element):
            var items: [JSON]
            switch json {
            case .array(let a): items = a
            case .object:  // V2: {"results": […]}
                guard case .array(let a)? = json["results"] else { throw mismatch() }
                items = a
            default: throw mismatch()
            }
            var values: [Value] = []
            values.reserveCapacity(items.count)
            for item in items {
                values.append(try value(from: item, type: element, property: property, notes: &notes))
            }
            return .collection(values)
        }
    }

    func primitive(from json: JSON, type p: EDMPrimitive, property: String) throws(EntityError) -> Value {
        func mismatch() -> EntityError { .typeMismatch(property: property, expected: p.rawValue, got: json.text) }
        switch (p, json) {
        case (.json, _): return .json(json.text)
        case (.string, .string(let s)): return .string(s)
        case (.boolean, .bool(let b)): return .bool(b)
        case (_, .number(let n)) where p.isInteger, (_, .string(let n)) where p.isInteger:
            guard let v = Int64(n) else {
                if EDMDecimal(n) != nil { throw EntityError.outOfRange(property: property, type: p.rawValue, value: n) }
                throw mismatch()
            }
            guard p.integerRange!.contains(v) else {
                throw EntityError.outOfRange(property: property, type: p.rawValue, value: n)
            }
            return .int(v)
        case (.single, .number(let n)), (.double, .number(let n)), (.single, .string(let n)), (.double, .string(let n)):
            switch n {
            case "INF", "Infinity": return .double(.infinity)
            case "-INF", "-Infinity": return .double(-.infinity)
            case "NaN": return .double(.nan)
            default:
                guard let d = Double(n), EDMDecimal(n) != nil || n.contains("e") || n.contains("E") else {
                    throw mismatch()
                }
                if p == .single, d.isFinite, !Float(d).isFinite {
                    throw EntityError.outOfRange(property: property, type: p.rawValue, value: n)
                }
                return .double(p == .single ? Double(Float(d)) : d)
            }
        case (.decimal, .number(let n)), (.decimal, .string(let n)):
            guard let d = EDMDecimal(n) else { throw mismatch() }
            return .decimal(d)
        case (.date, .string(let s)):
            if let d = EDMDate(s) { return .date(d) }
            if let dto = Self.v2Date(s) ?? EDMDateTimeOffset(s, offsetOptional: true), dto.localTicks % ticksPerDay == 0
            {
                return .date(EDMDate(days: Int32(dto.localTicks / ticksPerDay)))
            }
            throw mismatch()
        case (.dateTimeOffset, .string(let s)), (.dateTime, .string(let s)):
            if let v = Self.v2Date(s) ?? EDMDateTimeOffset(s, offsetOptional: p == .dateTime) {
                return .dateTimeOffset(v)
            }
            throw mismatch()
        case (.timeOfDay, .string(let s)), (.time, .string(let s)):
            if let t = EDMTimeOfDay(s) { return .timeOfDay(t) }
            if let d = EDMDuration(s), d.ticks >= 0, d.ticks < ticksPerDay {
                return .timeOfDay(EDMTimeOfDay(ticks: d.ticks))
            }
            throw mismatch()
        case (.duration, .string(let s)):
            guard let d = EDMDuration(s) else { throw mismatch() }
            return .duration(d)
        case (.guid, .string(let s)):
            guard let g = EDMGuid(s) else { throw mismatch() }
            return .guid(g)
        case (.binary, .string(let s)):
            var b64 = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while b64.count % 4 != 0 { b64 += "=" }
            guard let data = Data(base64Encoded: b64) else { throw mismatch() }
            return .binary(Array(data))
        default:
            throw mismatch()
        }
    }

    /// V2's `/Date(1234567890000)/` and `/Date(1234567890000+0060)/`.
    static func v2Date(_ s: String) -> EDMDateTimeOffset? {
        guard s.hasPrefix("/Date("), s.hasSuffix(")/") else { return nil }
        let inner = s.dropFirst(6).dropLast(2)
        var msText = Substring(inner)
        var offset = 0
        if let signAt = inner.dropFirst().firstIndex(where: { $0 == "+" || $0 == "-" }) {
            msText = inner[..<signAt]
            guard let o = Int(inner[inner.index(after: signAt)...]), o >= 0 else { return nil }
            offset = inner[signAt] == "-" ? -o : o
        }
        guard let ms = Int64(msText), ms.magnitude < 300_000_000_000_000 else { return nil }
        return EDMDateTimeOffset(ticks: ms * 10_000, offsetMinutes: Int16(clamping: offset))
    }

    // MARK: - Writing

    /// Writes an entity's (or complex value's) properties in declaration order as a JSON object,
    /// only those in `select` when given.
    package func write(_ props: Properties, properties: [Property], select: Set<String>? = nil, to out: inout String) {
        var buffer = JSONBuffer()
        write(props, properties: properties, select: select, to: &buffer)
        out += buffer.string
    }

    package func write(
        _ props: Properties, properties: [Property], select: Set<String>? = nil, to out: inout JSONBuffer
    ) {
        out.append(UInt8(ascii: "{"))
        var first = true
        for p in properties {
            if let select, !select.contains(p.name) { continue }
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.appendString(p.name)
            out.append(UInt8(ascii: ":"))
            write(props[p.name] ?? .null, type: p.type, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// Writes one value as OData V4 JSON.
    package func write(_ v: Value, type: TypeRef, to out: inout String) {
        var buffer = JSONBuffer(capacity: 32)
        write(v, type: type, to: &buffer)
        out += buffer.string
    }

    /// Writes one value as OData V4 JSON, straight into bytes.
    package func write(_ v: Value, type: TypeRef, to out: inout JSONBuffer) {
        switch v {
        case .null: out.append("null")
        case .bool(let b): out.append(b ? "true" : "false")
        case .int(let i): out.appendInt(i)
        case .double(let d):
            if d.isNaN {
                out.append("\"NaN\"")
            } else if d == .infinity {
                out.append("\"INF\"")
            } else if d == -.infinity {
                out.append("\"-INF\"")
            } else if type.primitive == .single {
                out.appendRaw("\(Float(d))")
            } else {
                out.appendRaw("\(d)")
            }
        case .decimal(let d): out.appendDecimal(d)
        case .string(let s): out.appendString(s)
        case .json(let s): out.appendRaw(s)
        case .date(let d): out.append(0x22); out.appendDate(d); out.append(0x22)
        case .dateTimeOffset(let d): out.append(0x22); out.appendDateTimeOffset(d); out.append(0x22)
        case .timeOfDay(let t): out.append(0x22); out.appendTime(ticks: t.ticks); out.append(0x22)
        case .duration(let d): out.append(0x22); out.appendRaw(d.description); out.append(0x22)
        case .guid(let g): out.append(0x22); out.appendGuid(g); out.append(0x22)
        case .binary(let b): out.append(0x22); out.appendRaw(Data(b).base64EncodedString()); out.append(0x22)
        case .enumMember(let i):
            if case .enumeration(let name) = type, let et = schema.enumTypes[name] {
                if let member = et.name(of: i) {
                    out.appendString(member)
                } else if et.isFlags {
                    let names = et.members.filter { $0.value != 0 && i & $0.value == $0.value }.map(\.name)
                    out.appendString(names.joined(separator: ","))
                } else {
                    out.append(0x22); out.appendInt(i); out.append(0x22)
                }
            } else {
                out.appendInt(i)
            }
        case .complex(let props):
            if case .complex(let name) = type, let ct = schema.complexTypes[name] {
                write(props, properties: ct.properties, to: &out)
            } else {
                out.append("{}")
            }
        case .collection(let items):
            let element: TypeRef = if case .collection(let e) = type { e } else { .primitive(.json) }
            out.append(UInt8(ascii: "["))
            for (k, item) in items.enumerated() {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                write(item, type: element, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
    }
}
