import Foundation
import Storage

/// Decodes a type from made-up values to learn its shape without data: which coding keys it
/// reads, whether each Swift type fits its property's EDM type and nullability (the mismatches
/// a typed collection reports when it is opened), and — decoding once with one key changed —
/// which property a key path reads.
struct TypedProbe {
    final class Log {
        /// Top-level keys in the order the type decodes them.
        var keys: [String] = []
        var problems: [String] = []
    }

    /// Decodes `T` with every value the first of its two probe values, except `variant` (a
    /// top-level key), which gets the second; optionals are nil except `variant`.
    static func instance<T: Decodable>(
        _ type: T.Type, shape: TypedShape, variant: String? = nil, log: Log = Log()
    ) throws -> T {
        try T(from: ProbeDecoder(shape: shape, variant: variant, log: log, codingPath: []))
    }

    /// The problems of mapping `T` onto `shape`, each a sentence, and the keys `T` reads.
    static func check<T: Decodable>(_ type: T.Type, shape: TypedShape) -> (keys: [String], problems: [String]) {
        let log = Log()
        do { _ = try instance(T.self, shape: shape, log: log) } catch is Skip {
            if log.problems.isEmpty { log.problems.append("\(T.self) cannot be read from \(shape.owner)") }
        } catch {
            log.problems.append("\(T.self) cannot be read: \(describe(error))")
        }
        return (log.keys, log.problems)
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.typeMismatch(_, let c), DecodingError.valueNotFound(_, let c),
            DecodingError.keyNotFound(_, let c),
            DecodingError.dataCorrupted(let c):
            let path = c.codingPath.map(\.stringValue).joined(separator: ".")
            return (path.isEmpty ? "" : path + ": ") + c.debugDescription
        case EncodingError.invalidValue(_, let c):
            let path = c.codingPath.map(\.stringValue).joined(separator: ".")
            return (path.isEmpty ? "" : path + ": ") + c.debugDescription
        default: return "\(error)"
        }
    }

    struct ProbeDecoder: Decoder {
        let shape: TypedShape
        let variant: String?
        let log: Log
        var codingPath: [any CodingKey]
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
            KeyedDecodingContainer(Keyed<Key>(decoder: self))
        }
        func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
            throw DecodingError.typeMismatch(
                [Any].self, .init(codingPath: codingPath, debugDescription: "\(shape.owner) is an object, not an array")
            )
        }
        func singleValueContainer() throws -> any SingleValueDecodingContainer {
            throw DecodingError.typeMismatch(
                Any.self,
                .init(codingPath: codingPath, debugDescription: "\(shape.owner) is an object, not a single value"))
        }

        /// A made-up scalar or `CaseIterable` `T` whatever the property (nil `edm`: none fits),
        /// to go on after a problem is logged.
        static func any<T>(
            _ type: T.Type, second: Bool = false, edm: TypeRef? = nil, schema: Schema? = nil, path: [any CodingKey]
        ) throws -> T {
            let e = edm ?? .primitive(.string)
            if let v = TypedScalar.probe(T.self, variant: second, edm: e, schema: schema) as? T { return v }
            if let cases = T.self as? any CaseIterable.Type,
                let v = TypedProbe.cases(of: cases).compactMap({ $0 as? T }).first
            {
                return v
            }
            throw Skip()
        }

        /// A made-up `T` for a property of type `edm`.
        func value<T: Decodable>(_ type: T.Type, _ edm: TypeRef, second: Bool, path: [any CodingKey]) throws -> T {
            let schema = shape.schema
            if let fits = TypedScalar.fits(T.self, edm) {
                if !fits {
                    log.problems.append(
                        "\(path.map(\.stringValue).joined(separator: ".")): a \(T.self) cannot hold \(edm)")
                }
                return try Self.any(T.self, second: second, edm: fits ? edm : nil, schema: schema, path: path)
            }
            if let cases = T.self as? any CaseIterable.Type {
                let all = TypedProbe.cases(of: cases).compactMap { $0 as? T }
                if let v = all.count > 1 && second ? all[1] : all.first {
                    // Check the enum's raw value against the EDM type, as its Codable would.
                    _ = try? T(from: ScalarProbe(edm: edm, schema: schema, second: second, log: log, codingPath: path))
                    return v
                }
            }
            switch edm {
            case .complex(let name):
                let inner = try shape.complex(name, path: path)
                return try T(from: ProbeDecoder(shape: inner, variant: nil, log: log, codingPath: path))
            case .collection:
                return try T(from: EmptyItems(codingPath: path))
            default:
                return try T(from: ScalarProbe(edm: edm, schema: schema, second: second, log: log, codingPath: path))
            }
        }

        struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
            let decoder: ProbeDecoder
            var codingPath: [any CodingKey] { decoder.codingPath }
            var allKeys: [Key] { decoder.shape.properties.compactMap { Key(stringValue: $0.name) } }
            var top: Bool { codingPath.isEmpty }

            func note(_ key: Key) -> Property? {
                if top, !decoder.log.keys.contains(key.stringValue) { decoder.log.keys.append(key.stringValue) }
                guard let p = decoder.shape.property(key) else {
                    decoder.log.problems.append(
                        "\((codingPath + [key]).map(\.stringValue).joined(separator: ".")): \(decoder.shape.owner) has no property '\(key.stringValue)'"
                    )
                    return nil
                }
                return p
            }

            func contains(_ key: Key) -> Bool { true }

            func decodeNil(forKey key: Key) throws -> Bool {
                _ = note(key)
                return !(top && decoder.variant == key.stringValue)
            }

            func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
                let path = codingPath + [key]
                guard let p = note(key) else { return try ProbeDecoder.any(T.self, path: path) }
                if p.nullable {
                    decoder.log.problems.append(
                        "\(path.map(\.stringValue).joined(separator: ".")): \(p.name) may be null in \(decoder.shape.owner); declare it Optional"
                    )
                }
                return try decoder.value(T.self, p.type, second: top && decoder.variant == key.stringValue, path: path)
            }

            // The standard library's defaults for these ask contains/decodeNil and skip the
            // check; every optional goes through `optional`.
            func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try optional(Bool.self, key) }
            func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
                try optional(String.self, key)
            }
            func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
                try optional(Double.self, key)
            }
            func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try optional(Float.self, key) }
            func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try optional(Int.self, key) }
            func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try optional(Int8.self, key) }
            func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try optional(Int16.self, key) }
            func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try optional(Int32.self, key) }
            func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try optional(Int64.self, key) }
            func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try optional(UInt.self, key) }
            func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try optional(UInt8.self, key) }
            func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? {
                try optional(UInt16.self, key)
            }
            func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? {
                try optional(UInt32.self, key)
            }
            func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? {
                try optional(UInt64.self, key)
            }
            func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
                try optional(T.self, key)
            }

            func optional<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T? {
                guard let p = note(key) else { return nil }
                let path = codingPath + [key]
                let chosen = top && decoder.variant == key.stringValue
                let v = try decoder.value(T.self, p.type, second: false, path: path)
                return chosen ? v : nil
            }

            func nestedContainer<NestedKey: CodingKey>(
                keyedBy type: NestedKey.Type, forKey key: Key
            ) throws -> KeyedDecodingContainer<NestedKey> {
                throw DecodingError.typeMismatch(
                    NestedKey.self,
                    .init(
                        codingPath: codingPath + [key],
                        debugDescription: "nested containers are not supported; use a Decodable type"))
            }
            func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
                throw DecodingError.typeMismatch(
                    [Any].self,
                    .init(
                        codingPath: codingPath + [key],
                        debugDescription: "nested containers are not supported; use an array type"))
            }
            func superDecoder() throws -> any Decoder { decoder }
            func superDecoder(forKey key: Key) throws -> any Decoder { decoder }
        }
    }

    /// The cases of a `CaseIterable` type, as `Any`.
    static func cases(of type: any CaseIterable.Type) -> [Any] {
        func all<C: CaseIterable>(_: C.Type) -> [Any] { C.allCases.map { $0 } }
        return all(type)
    }

    /// Raised after a problem is logged, to go on with the next property.
    struct Skip: Error {}

    /// A single value for a non-scalar type of a primitive or enum property (a `RawRepresentable`).
    struct ScalarProbe: Decoder, SingleValueDecodingContainer {
        let edm: TypeRef
        let schema: Schema
        let second: Bool
        let log: Log
        var codingPath: [any CodingKey]
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
            log.problems.append(
                "\(codingPath.map(\.stringValue).joined(separator: ".")): \(edm) is a single value, not an object")
            throw Skip()
        }
        func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
            log.problems.append(
                "\(codingPath.map(\.stringValue).joined(separator: ".")): \(edm) is a single value, not an array")
            throw Skip()
        }
        func singleValueContainer() throws -> any SingleValueDecodingContainer { self }
        func decodeNil() -> Bool { false }
        func decode<T: Decodable>(_ type: T.Type) throws -> T {
            guard TypedScalar.fits(T.self, edm) == true,
                let v = TypedScalar.probe(T.self, variant: second, edm: edm, schema: schema) as? T
            else {
                log.problems.append(
                    "\(codingPath.map(\.stringValue).joined(separator: ".")): a \(T.self) cannot hold \(edm)")
                throw Skip()
            }
            return v
        }
    }

    /// An empty collection.
    struct EmptyItems: Decoder, UnkeyedDecodingContainer {
        var codingPath: [any CodingKey]
        var userInfo: [CodingUserInfoKey: Any] { [:] }
        var count: Int? { 0 }
        var isAtEnd: Bool { true }
        var currentIndex: Int { 0 }
        func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
            throw DecodingError.typeMismatch(
                Key.self, .init(codingPath: codingPath, debugDescription: "a collection is an array"))
        }
        func unkeyedContainer() throws -> any UnkeyedDecodingContainer { self }
        func singleValueContainer() throws -> any SingleValueDecodingContainer {
            throw DecodingError.typeMismatch(
                Any.self, .init(codingPath: codingPath, debugDescription: "a collection is an array"))
        }
        mutating func decodeNil() throws -> Bool { false }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            throw DecodingError.valueNotFound(T.self, .init(codingPath: codingPath, debugDescription: "empty"))
        }
        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy type: NestedKey.Type
        ) throws -> KeyedDecodingContainer<NestedKey> {
            throw DecodingError.valueNotFound(NestedKey.self, .init(codingPath: codingPath, debugDescription: "empty"))
        }
        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { self }
        mutating func superDecoder() throws -> any Decoder { self }
    }
}
