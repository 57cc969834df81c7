import LMDB
/// Checks values against their declared properties: kind, range, length, nullability.
package enum Validation {
    /// Throws when `value` does not fit `property` (its type, MaxLength, Precision/Scale, Nullable).
    /// With `facets` false, MaxLength, Precision and Scale are not checked: the service's data is
    /// stored as the service sends it (a refresh counts what exceeds them, `check` does not call
    /// it damage); local writes check them.
    package static func check(
        _ value: Value, against property: Property, schema: Schema, facets: Bool = true
    ) throws(EntityError) {
        if value.isNull {
            if !property.nullable { throw .nullNotAllowed(property: property.name) }
            return
        }
        try check(value, type: property.type, property: property, schema: schema, depth: 0, facets: facets)
    }

    static func check(
        _ value: Value, type: TypeRef, property p: Property, schema: Schema, depth: Int, facets: Bool = true
    ) throws(EntityError) {
        guard depth < RowCodec.maxDepth else {
            throw .badInput(
                "property '\(p.name)' nests complex values or collections more than \(RowCodec.maxDepth) deep")
        }
        func mismatch() -> EntityError { .typeMismatch(property: p.name, expected: type.description, got: "\(value)") }
        switch (type, value) {
        case (.primitive(let t), _):
            switch (t, value) {
            case (.string, .string(let s)):
                if facets, let max = p.maxLength {
                    // MaxLength counts characters; the UTF-8 byte count is a cheap upper bound.
                    if s.utf8.count > max, s.count > max {
                        throw .tooLong(property: p.name, maxLength: max, length: s.count)
                    }
                }
            case (.binary, .binary(let b)):
                if facets, let max = p.maxLength, b.count > max {
                    throw .tooLong(property: p.name, maxLength: max, length: b.count)
                }
            case (.json, .json), (.boolean, .bool), (.single, .double), (.double, .double),
                (.date, .date), (.dateTimeOffset, .dateTimeOffset), (.dateTime, .dateTimeOffset),
                (.timeOfDay, .timeOfDay), (.time, .timeOfDay), (.duration, .duration), (.guid, .guid):
                break
            case (_, .int(let i)) where t.isInteger:
                if !t.integerRange!.contains(i) {
                    throw .outOfRange(property: p.name, type: t.rawValue, value: String(i))
                }
            case (.decimal, .decimal(let d)):
                let (digits, exponent) = d.digitCountAndExponent
                let fraction = max(0, digits - exponent)
                if facets, let scale = p.scale, fraction > scale {
                    throw .outOfRange(property: p.name, type: "Edm.Decimal(scale \(scale))", value: d.description)
                }
                if facets, let precision = p.precision, max(exponent, 0) + fraction > precision {
                    throw .outOfRange(
                        property: p.name, type: "Edm.Decimal(precision \(precision))", value: d.description)
                }
            default:
                throw mismatch()
            }
        case (.enumeration, .enumMember): break
        case (.complex(let name), .complex(let props)):
            guard let ct = schema.complexTypes[name] else { throw mismatch() }
            for (k, v) in props {
                guard let sub = ct.property(k) else { throw .unknownProperty(set: name, property: k) }
                let subProperty = Property(
                    name: p.name + "/" + k, type: sub.type, nullable: sub.nullable,
                    maxLength: sub.maxLength, precision: sub.precision, scale: sub.scale)
                if v.isNull {
                    if !sub.nullable { throw .nullNotAllowed(property: subProperty.name) }
                } else {
                    try check(
                        v, type: sub.type, property: subProperty, schema: schema, depth: depth + 1, facets: facets)
                }
            }
            for sub in ct.properties where !sub.nullable && props[sub.name] == nil {
                throw .nullNotAllowed(property: p.name + "/" + sub.name)
            }
        case (.collection(let element), .collection(let items)):
            for item in items {
                if item.isNull { continue }
                try check(item, type: element, property: p, schema: schema, depth: depth + 1, facets: facets)
            }
        default:
            throw mismatch()
        }
    }
}
