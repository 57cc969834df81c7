import LMDB
/// The primitive types of the Entity Data Model (OData V2 and V4).
///
/// V2's `Edm.DateTime` and `Edm.Time` are kept as their own cases so output can name them, but they
/// share the value representation of `DateTimeOffset` (offset 0) and `TimeOfDay`.
public enum EDMPrimitive: String, Sendable, Hashable, CaseIterable {
    case string = "Edm.String"
    case boolean = "Edm.Boolean"
    case byte = "Edm.Byte"
    case sbyte = "Edm.SByte"
    case int16 = "Edm.Int16"
    case int32 = "Edm.Int32"
    case int64 = "Edm.Int64"
    case single = "Edm.Single"
    case double = "Edm.Double"
    case decimal = "Edm.Decimal"
    case date = "Edm.Date"
    case dateTimeOffset = "Edm.DateTimeOffset"
    case timeOfDay = "Edm.TimeOfDay"
    case duration = "Edm.Duration"
    case guid = "Edm.Guid"
    case binary = "Edm.Binary"
    /// V2 `Edm.DateTime`: an instant without offset, stored as a `DateTimeOffset` at offset 0.
    case dateTime = "Edm.DateTime"
    /// V2 `Edm.Time`: a time of day.
    case time = "Edm.Time"
    /// Spatial (`Edm.Geography*`, `Edm.Geometry*`) and `Edm.Untyped` values: kept as their JSON text.
    case json = "Edm.Untyped"

    /// The primitive type for a CSDL type name, or nil when it is not a primitive type.
    ///
    /// Spatial types map to `.json`; `Edm.Stream` maps to nil (media is not stored).
    public init?(typeName: String) {
        if let known = EDMPrimitive(rawValue: typeName) {
            self = known
        } else if typeName.hasPrefix("Edm.Geography") || typeName.hasPrefix("Edm.Geometry") {
            self = .json
        } else {
            return nil
        }
    }

    /// Whether the type is one of the integer types.
    public var isInteger: Bool {
        switch self {
        case .byte, .sbyte, .int16, .int32, .int64: true
        default: false
        }
    }

    /// Whether the type is numeric (integer, floating point or decimal).
    public var isNumeric: Bool { isInteger || self == .single || self == .double || self == .decimal }

    /// The inclusive range of an integer type.
    public var integerRange: ClosedRange<Int64>? {
        switch self {
        case .byte: 0...255
        case .sbyte: -128...127
        case .int16: Int64(Int16.min)...Int64(Int16.max)
        case .int32: Int64(Int32.min)...Int64(Int32.max)
        case .int64: Int64.min...Int64.max
        default: nil
        }
    }
}

/// A property's type: a primitive, a complex type, an enum type, or a collection of one of those.
/// Only `collection` is `indirect`: the common cases live inline, so reading a row's types
/// allocates and retains nothing.
public enum TypeRef: Sendable, Hashable, CustomStringConvertible {
    case primitive(EDMPrimitive)
    /// A complex type, by qualified name.
    case complex(String)
    /// An enum type, by qualified name.
    case enumeration(String)
    indirect case collection(TypeRef)

    public var description: String {
        switch self {
        case .primitive(let p): p.rawValue
        case .complex(let n), .enumeration(let n): n
        case .collection(let t): "Collection(\(t))"
        }
    }

    public var primitive: EDMPrimitive? {
        if case .primitive(let p) = self { return p }
        return nil
    }

    public var isCollection: Bool {
        if case .collection = self { return true }
        return false
    }
}
