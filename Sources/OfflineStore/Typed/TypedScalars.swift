import Foundation
import Storage

/// The Swift types a typed collection maps to EDM primitive (and enum) values, and how.
///
/// | EDM | Swift |
/// |---|---|
/// | String | `String` |
/// | Boolean | `Bool` |
/// | Byte, SByte, Int16, Int32, Int64 | any fixed-width integer that holds the value |
/// | Single, Double | `Double`, `Float` |
/// | Decimal | `Foundation.Decimal` or `EDMDecimal` (both exact) |
/// | Date | `EDMDate`, or `Date` (midnight UTC) |
/// | DateTimeOffset, DateTime | `EDMDateTimeOffset`, or `Date` (100 ns ticks; the offset becomes Z) |
/// | TimeOfDay, Time | `EDMTimeOfDay` |
/// | Duration | `EDMDuration` |
/// | Guid | `UUID` or `EDMGuid` |
/// | Binary | `Data` |
/// | an enum type | `String` (the member's name) or an integer (its value), or a `RawRepresentable` of them |
/// | Untyped, spatial | `String` (the JSON text) |
enum TypedScalar {
    /// Whether Swift type `type` is a scalar here; nil when it is not (decoded structurally).
    static func fits(_ type: Any.Type, _ edm: TypeRef) -> Bool? {
        guard let kind = Kind(type) else { return nil }
        switch edm {
        case .enumeration: return kind == .string || kind == .integer
        case .primitive(let p): return kind.fits(p)
        case .complex, .collection: return false
        }
    }

    enum Kind: Equatable {
        case string, bool, integer, floating, decimal, edmDecimal, date, edmDate, edmDateTimeOffset, edmTimeOfDay,
            edmDuration, uuid, edmGuid, data

        init?(_ t: Any.Type) {
            switch t {
            case is String.Type: self = .string
            case is Bool.Type: self = .bool
            case is any FixedWidthInteger.Type: self = .integer
            case is Double.Type, is Float.Type: self = .floating
            case is Decimal.Type: self = .decimal
            case is EDMDecimal.Type: self = .edmDecimal
            case is Date.Type: self = .date
            case is EDMDate.Type: self = .edmDate
            case is EDMDateTimeOffset.Type: self = .edmDateTimeOffset
            case is EDMTimeOfDay.Type: self = .edmTimeOfDay
            case is EDMDuration.Type: self = .edmDuration
            case is UUID.Type: self = .uuid
            case is EDMGuid.Type: self = .edmGuid
            case is Data.Type: self = .data
            default: return nil
            }
        }

        func fits(_ p: EDMPrimitive) -> Bool {
            switch (self, p) {
            case (.string, .string), (.string, .json), (.bool, .boolean): true
            case (.integer, .byte), (.integer, .sbyte), (.integer, .int16), (.integer, .int32), (.integer, .int64): true
            case (.floating, .single), (.floating, .double): true
            case (.decimal, .decimal), (.edmDecimal, .decimal): true
            case (.date, .date), (.date, .dateTimeOffset), (.date, .dateTime), (.edmDate, .date): true
            case (.edmDateTimeOffset, .dateTimeOffset), (.edmDateTimeOffset, .dateTime): true
            case (.edmTimeOfDay, .timeOfDay), (.edmTimeOfDay, .time), (.edmDuration, .duration): true
            case (.uuid, .guid), (.edmGuid, .guid), (.data, .binary): true
            default: false
            }
        }
    }

    /// `value` (never `.null`) as a `T`, or nil when `T` is not a scalar here.
    static func decode<T>(
        _ type: T.Type, _ value: Value, _ edm: TypeRef, schema: Schema, path: [any CodingKey]
    ) throws -> T? {
        guard let kind = Kind(type) else { return nil }
        func mismatch() -> DecodingError {
            .typeMismatch(
                T.self,
                .init(codingPath: path, debugDescription: "the store holds \(edm) \(value), which is not a \(T.self)"))
        }
        let out: Any?
        switch (kind, value) {
        case (.string, .string(let s)), (.string, .json(let s)): out = s
        case (.string, .enumMember(let v)):
            guard case .enumeration(let name) = edm, let e = schema.enumTypes[name] else { throw mismatch() }
            out = e.isFlags ? flagNames(v, e) : e.name(of: v) ?? String(v)
        case (.bool, .bool(let b)): out = b
        case (.integer, .int(let i)), (.integer, .enumMember(let i)):
            guard let t = T.self as? any FixedWidthInteger.Type, let n = t.init(exactly: i) else { throw mismatch() }
            out = n
        case (.floating, .double(let d)): out = T.self == Float.self ? Float(d) as Any : d
        case (.decimal, .decimal(let d)):
            guard let f = Decimal(string: d.description, locale: Locale(identifier: "en_US_POSIX")) else {
                throw mismatch()
            }
            out = f
        case (.edmDecimal, .decimal(let d)): out = d
        case (.date, .dateTimeOffset(let t)):
            out = Date(timeIntervalSince1970: Double(t.ticks) / Double(ticksPerSecond))
        case (.date, .date(let d)): out = Date(timeIntervalSince1970: Double(d.days) * 86_400)
        case (.edmDate, .date(let d)): out = d
        case (.edmDateTimeOffset, .dateTimeOffset(let t)): out = t
        case (.edmTimeOfDay, .timeOfDay(let t)): out = t
        case (.edmDuration, .duration(let d)): out = d
        case (.uuid, .guid(let g)): out = uuid(g)
        case (.edmGuid, .guid(let g)): out = g
        case (.data, .binary(let b)): out = Data(b)
        default: throw mismatch()
        }
        guard let typed = out as? T else { throw mismatch() }
        return typed
    }

    /// `swift` as the store's value of `edm`, or nil when its type is not a scalar here.
    static func encode(_ swift: Any, _ edm: TypeRef, schema: Schema, path: [any CodingKey]) throws -> Value? {
        guard let kind = Kind(type(of: swift)) else { return nil }
        func mismatch(_ why: String = "") -> EncodingError {
            .invalidValue(
                swift,
                .init(codingPath: path, debugDescription: "a \(type(of: swift)) cannot be stored as \(edm)\(why)"))
        }
        if case .enumeration(let name) = edm {
            guard let e = schema.enumTypes[name] else { throw mismatch() }
            switch swift {
            case let s as String:
                var total: Int64 = 0
                for part in s.split(separator: ",") {
                    guard let v = e.value(of: part.trimmingCharacters(in: .whitespaces)) else {
                        throw mismatch(": '\(s)' is not a member of \(e.name)")
                    }
                    total |= v
                }
                return .enumMember(total)
            case let i as any FixedWidthInteger:
                guard let v = Int64(exactly: i) else { throw mismatch() }
                return .enumMember(v)
            default: throw mismatch()
            }
        }
        guard case .primitive(let p) = edm, kind.fits(p) else { throw mismatch() }
        switch swift {
        case let s as String: return p == .json ? .json(s) : .string(s)
        case let b as Bool: return .bool(b)
        case let i as any FixedWidthInteger:
            guard let v = Int64(exactly: i) else { throw mismatch(": \(i) is out of range") }
            return .int(v)
        case let d as Double: return .double(d)
        case let f as Float: return .double(Double(f))
        case let d as Decimal:
            guard let v = EDMDecimal(d.description) else { throw mismatch(": \(d)") }
            return .decimal(v)
        case let d as EDMDecimal: return .decimal(d)
        case let d as Date:
            if p == .date {
                let days = (d.timeIntervalSince1970 / 86_400).rounded(.down)
                guard days * 86_400 == d.timeIntervalSince1970, let n = Int32(exactly: days) else {
                    throw mismatch(": \(d) is not a midnight UTC (Edm.Date holds a day)")
                }
                return .date(EDMDate(days: n))
            }
            let ticks = (d.timeIntervalSince1970 * Double(ticksPerSecond)).rounded()
            guard let t = Int64(exactly: ticks) else { throw mismatch() }
            return .dateTimeOffset(EDMDateTimeOffset(ticks: t))
        case let d as EDMDate: return .date(d)
        case let t as EDMDateTimeOffset: return .dateTimeOffset(t)
        case let t as EDMTimeOfDay: return .timeOfDay(t)
        case let d as EDMDuration: return .duration(d)
        case let u as UUID: return .guid(EDMGuid(bytes: withUnsafeBytes(of: u.uuid) { Array($0) }))
        case let g as EDMGuid: return .guid(g)
        case let d as Data: return .binary(Array(d))
        default: throw mismatch()
        }
    }

    static func uuid(_ g: EDMGuid) -> UUID {
        let b = g.bytes
        return UUID(
            uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])
        )
    }

    static func flagNames(_ v: Int64, _ e: EnumType) -> String {
        if let exact = e.name(of: v) { return exact }
        let names = e.members.filter { $0.value != 0 && v & $0.value == $0.value }.map(\.name)
        return names.isEmpty ? String(v) : names.joined(separator: ",")
    }

    /// Two distinct values of scalar type `type` (for the probe that maps key paths to
    /// properties), or nil when it is not a scalar here.
    static func probe(_ type: Any.Type, variant: Bool, edm: TypeRef, schema: Schema?) -> Any? {
        guard let kind = Kind(type) else { return nil }
        let n = variant ? 1 : 0
        switch kind {
        case .string:
            if case .enumeration(let name) = edm, let e = schema?.enumTypes[name], e.members.count > n {
                return e.members[n].name
            }
            return variant ? "b" : "a"
        case .bool: return variant
        case .integer:
            guard let t = type as? any FixedWidthInteger.Type else { return nil }
            if case .enumeration(let name) = edm, let e = schema?.enumTypes[name], e.members.count > n {
                return t.init(exactly: e.members[n].value) ?? t.init(exactly: n)
            }
            return t.init(exactly: n)
        case .floating: return type == Float.self ? Float(n) as Any : Double(n)
        case .decimal: return Decimal(n)
        case .edmDecimal: return EDMDecimal(Int64(n))
        case .date: return Date(timeIntervalSince1970: Double(n) * 86_400)
        case .edmDate: return EDMDate(days: Int32(n))
        case .edmDateTimeOffset: return EDMDateTimeOffset(ticks: Int64(n))
        case .edmTimeOfDay: return EDMTimeOfDay(ticks: Int64(n))
        case .edmDuration: return EDMDuration(ticks: Int64(n))
        case .uuid: return uuid(EDMGuid(high: 0, low: UInt64(n)))
        case .edmGuid: return EDMGuid(high: 0, low: UInt64(n))
        case .data: return Data([UInt8(n)])
        }
    }
}
