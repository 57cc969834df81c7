import Foundation

/// Writing OData V2 JSON ([MS-ODATA] §2.2.6.3, "verbose" JSON) for request bodies to a V2
/// service such as SAP Gateway:
///
/// | EDM type | V2 JSON |
/// |---|---|
/// | `Edm.Int64`, `Edm.Decimal` | a string (`"1999.990"`): exact, whatever the reader's numbers |
/// | `Edm.Double`, `Edm.Single` | a string, the URI literal (`"1.5"`, `"INF"`, `"NaN"`) |
/// | `Edm.Byte`, `SByte`, `Int16`, `Int32`, `Boolean` | a JSON number or boolean |
/// | `Edm.DateTime` | `"/Date(ms)/"`, milliseconds since 1970 UTC |
/// | `Edm.DateTimeOffset` | its URI literal's text, `"2026-01-01T10:00:00+02:00"` (Gateway also reads `/Date(ms+mmmm)/`) |
/// | `Edm.Time` | an ISO 8601 duration, `"PT13H20M05S"` |
/// | `Edm.Guid`, `Edm.String` | a string |
/// | `Edm.Binary` | base64 |
/// | a complex value | a nested object |
///
/// No annotations go out (no `@odata.*`, no `__metadata`): a create relates entities through its
/// foreign-key properties, which the store's local body has already set from any `@odata.bind`.
extension ValueJSON {
    /// Writes an entity's properties as a V2 JSON object in declaration order, only those in
    /// `select` when given.
    package func writeV2(_ props: Properties, properties: [Property], select: Set<String>? = nil) -> [UInt8] {
        var out = JSONBuffer()
        writeV2(props, properties: properties, select: select, to: &out)
        return out.bytes
    }

    package func writeV2(
        _ props: Properties, properties: [Property], select: Set<String>? = nil, to out: inout JSONBuffer
    ) {
        out.append(UInt8(ascii: "{"))
        for (i, p) in properties.filter({ select?.contains($0.name) ?? true }).enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.appendString(p.name)
            out.append(UInt8(ascii: ":"))
            writeV2(props[p.name] ?? .null, type: p.type, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// Writes one value as V2 JSON (the table above).
    package func writeV2(_ v: Value, type: TypeRef, to out: inout JSONBuffer) {
        let primitive = type.primitive
        switch v {
        case .int(let i):
            if primitive == .int64 { out.append(0x22); out.appendInt(i); out.append(0x22) } else { out.appendInt(i) }
        case .double(let d):
            let text: String =
                if d.isNaN { "NaN" } else if d == .infinity { "INF" } else if d == -.infinity {
                    "-INF"
                } else if primitive
                    == .single
                { "\(Float(d))" } else { "\(d)" }
            out.appendString(text)
        case .decimal(let d):
            out.append(0x22); out.appendDecimal(d); out.append(0x22)
        case .dateTimeOffset(let d):
            if primitive == .dateTimeOffset {
                out.append(0x22); out.appendDateTimeOffset(d); out.append(0x22)
            } else {
                out.appendString("/Date(\(Self.floorDiv(d.ticks, 10_000)))/")
            }
        case .date(let d):
            out.appendString("/Date(\(Int64(d.days) * 86_400_000))/")
        case .timeOfDay(let t):
            out.appendString(Self.v2Time(ticks: t.ticks))
        case .enumMember(let i):
            out.appendInt(i)  // V2 has no enumerations: the underlying integer
        case .complex(let props):
            if case .complex(let name) = type, let ct = schema.complexTypes[name] {
                writeV2(props, properties: ct.properties, to: &out)
            } else {
                out.append("{}")
            }
        case .collection(let items):
            // V2 verbose JSON nests a collection's items in "results".
            let element: TypeRef = if case .collection(let e) = type { e } else { .primitive(.json) }
            out.append("{\"results\":[")
            for (k, item) in items.enumerated() {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                writeV2(item, type: element, to: &out)
            }
            out.append("]}")
        case .null, .bool, .string, .json, .duration, .guid, .binary:
            write(v, type: type, to: &out)
        }
    }

    /// `Edm.Time` as V2 writes it: `PT13H20M05S`, `PT0H0M0.5S`.
    package static func v2Time(ticks: Int64) -> String {
        let h = ticks / (3600 * ticksPerSecond)
        let m = ticks / (60 * ticksPerSecond) % 60
        let s = ticks / ticksPerSecond % 60
        let fraction = ticks % ticksPerSecond
        var text = "PT\(h)H\(m < 10 ? "0" : "")\(m)M\(s < 10 ? "0" : "")\(s)"
        if fraction > 0 {
            var f = String(fraction)
            f = String(repeating: "0", count: 7 - f.count) + f
            while f.hasSuffix("0") { f.removeLast() }
            text += "." + f
        }
        return text + "S"
    }

    static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        a >= 0 ? a / b : -((-a + b - 1) / b)
    }
}
