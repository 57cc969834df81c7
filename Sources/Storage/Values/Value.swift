import LMDB
/// One property value of an entity, typed by the EDM.
///
/// Only the recursive cases are `indirect`, so a scalar value lives inline with no allocation.
///
/// Integers of every width are `.int`, `Single` and `Double` are `.double`; the declared type in the
/// schema says which width a property has and is checked on write.
public enum Value: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case decimal(EDMDecimal)
    case string(String)
    case date(EDMDate)
    case dateTimeOffset(EDMDateTimeOffset)
    case timeOfDay(EDMTimeOfDay)
    case duration(EDMDuration)
    case guid(EDMGuid)
    case binary([UInt8])
    /// An enum member, by its underlying integer value.
    case enumMember(Int64)
    /// An opaque JSON text (spatial and untyped values).
    case json(String)
    /// A complex value: its properties by name.
    indirect case complex(Properties)
    indirect case collection([Value])

    public var isString: Bool {
        if case .string = self { return true }
        return false
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}
