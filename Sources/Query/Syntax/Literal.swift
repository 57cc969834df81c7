package import Storage

/// A literal as written in a URL, already parsed into its value.
///
/// Untyped forms get their OData default type: `12` is `Edm.Int32` (`Edm.Int64` when larger),
/// `1.5` is `Edm.Decimal`, `2.5e3`, `INF` and `NaN` are `Edm.Double`. V2 suffixes pick the type
/// explicitly (`12L`, `1.5M`, `2.0d`, `1.5f`). Values follow `Storage.Value` conventions (all
/// integers are `.int`, `Edm.DateTime` is `.dateTimeOffset`, `Edm.Time` is `.timeOfDay`).
package enum Literal: Sendable, Hashable, CustomStringConvertible {
    case null
    case primitive(Value, EDMPrimitive)
    /// `Namespace.Enum'Member'` or `Namespace.Enum'A,B'` (flags) or `Namespace.Enum'32'`.
    case enumeration(type: String, members: String)

    /// The primitive type, or nil for `null` and enum literals.
    package var primitiveType: EDMPrimitive? {
        if case .primitive(_, let type) = self { return type }
        return nil
    }

    package var description: String {
        switch self {
        case .null: "null"
        case .primitive(let value, let type): Literal.format(value, type)
        case .enumeration(let type, let members): type + "'" + members + "'"
        }
    }

    /// A compact OData-like rendering of a typed value: `'O''Neil'`, `12`, `12L`, `1.5M`, `2.5D`,
    /// `1.5F`, `2021-01-01`, `datetime'…'`, `duration'P1D'`, `X'0A0B'`.
    package static func format(_ value: Value, _ type: EDMPrimitive?) -> String {
        switch value {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .int(let i): return type == .int64 ? "\(i)L" : "\(i)"
        case .double(let d):
            if d.isNaN { return "NaN" }
            if d.isInfinite { return d < 0 ? "-INF" : "INF" }
            return "\(d)" + (type == .single ? "F" : "D")
        case .decimal(let d): return d.description + "M"
        case .string(let s): return quoted(s)
        case .date(let d): return d.description
        case .dateTimeOffset(let d): return type == .dateTime ? "datetime'\(d)'" : d.description
        case .timeOfDay(let t): return type == .time ? "time'\(t)'" : t.description
        case .duration(let d): return "duration'\(d)'"
        case .guid(let g): return g.description
        case .binary(let bytes): return "X'" + bytes.map(hexByte).joined() + "'"
        case .enumMember(let n): return "\(type?.rawValue ?? "enum")'\(n)'"
        case .json(let s): return s
        case .complex(let c): return "{" + c.keys.sorted().joined(separator: ",") + "}"
        case .collection(let items): return "[" + items.map { format($0, nil) }.joined(separator: ",") + "]"
        }
    }
}

/// `'O''Neil'`: single-quoted with quotes doubled.
func quoted(_ s: String) -> String {
    var out = "'"
    for c in s.unicodeScalars {
        if c == "'" { out += "''" } else { out.unicodeScalars.append(c) }
    }
    return out + "'"
}

private func hexByte(_ b: UInt8) -> String {
    let digits = Array("0123456789ABCDEF")
    return String([digits[Int(b >> 4)], digits[Int(b & 15)]])
}

extension Literal {
    /// The one literal `text` is (`'a''b'`, `12`, `12L`, `datetime'…'`, `true`, `null`, a V4
    /// date), as a URL writes it; anything else, or anything after it, is an error.
    package static func parse(_ text: String, version: ODataVersion) throws(QueryError) -> Literal {
        switch text {
        case "null": return .null
        case "true": return .primitive(.bool(true), .boolean)
        case "false": return .primitive(.bool(false), .boolean)
        default: break
        }
        var lexer = Lexer(Array(text.unicodeScalars), option: nil, version: version)
        guard let literal = try lexer.scanLiteralIfAny(), lexer.pos == lexer.end else {
            throw QueryError(
                "'\(QueryError.quoting(String(text.prefix(100))))' is not a literal", option: nil, column: 1)
        }
        return literal
    }
}
