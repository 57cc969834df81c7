import Foundation
import Storage

/// The shape a typed value is read from or written to: an entity or complex type's properties.
struct TypedShape: Sendable {
    let owner: String
    let properties: [Property]
    let schema: Schema

    func property(_ key: some CodingKey) -> Property? { properties.first { $0.name == key.stringValue } }

    func complex(_ name: String, path: [any CodingKey]) throws -> TypedShape {
        guard let c = schema.complexTypes[name] else {
            throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "unknown complex type \(name)"))
        }
        return TypedShape(owner: c.name, properties: c.properties, schema: schema)
    }
}

// MARK: - Reading: Properties → a Decodable type

/// Decodes a `Decodable` type from an entity's (or complex value's) `Properties`: each coding
/// key is a property name; values convert as `TypedScalar` says.
struct PropertiesDecoder: Decoder {
    let properties: Properties
    let shape: TypedShape
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(KeyedReader<Key>(decoder: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch(
            [Any].self,
            .init(codingPath: codingPath, debugDescription: "an entity of \(shape.owner) is an object, not an array"))
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw DecodingError.typeMismatch(
            Any.self,
            .init(
                codingPath: codingPath, debugDescription: "an entity of \(shape.owner) is an object, not a single value"
            ))
    }

    /// `value` of type `edm` as a `T`.
    static func decode<T: Decodable>(
        _ type: T.Type, _ value: Value, _ edm: TypeRef, schema: Schema, path: [any CodingKey]
    ) throws -> T {
        if value.isNull {
            throw DecodingError.valueNotFound(
                T.self, .init(codingPath: path, debugDescription: "the value is null; declare the property Optional"))
        }
        if let scalar = try TypedScalar.decode(T.self, value, edm, schema: schema, path: path) { return scalar }
        switch (edm, value) {
        case (.complex(let name), .complex(let props)):
            let shape = try TypedShape(owner: name, properties: [], schema: schema).complex(name, path: path)
            return try T(from: PropertiesDecoder(properties: props, shape: shape, codingPath: path))
        case (.collection(let inner), .collection(let items)):
            return try T(from: ItemsDecoder(items: items, edm: inner, schema: schema, codingPath: path))
        default:
            return try T(from: ValueDecoder(value: value, edm: edm, schema: schema, codingPath: path))
        }
    }

    struct KeyedReader<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let decoder: PropertiesDecoder
        var codingPath: [any CodingKey] { decoder.codingPath }
        var allKeys: [Key] { decoder.properties.compactMap { Key(stringValue: $0.key) } }

        func contains(_ key: Key) -> Bool { decoder.properties[key.stringValue] != nil }

        func decodeNil(forKey key: Key) throws -> Bool { (decoder.properties[key.stringValue] ?? .null).isNull }

        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            let path = codingPath + [key]
            guard let p = decoder.shape.property(key) else {
                throw DecodingError.keyNotFound(
                    key,
                    .init(
                        codingPath: path,
                        debugDescription: "\(decoder.shape.owner) has no property '\(key.stringValue)'"))
            }
            return try PropertiesDecoder.decode(
                T.self, decoder.properties[key.stringValue] ?? .null, p.type, schema: decoder.shape.schema, path: path)
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

/// Decodes a collection value's items.
struct ItemsDecoder: Decoder, UnkeyedDecodingContainer {
    let items: [Value]
    let edm: TypeRef
    let schema: Schema
    var codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    var currentIndex = 0

    init(items: [Value], edm: TypeRef, schema: Schema, codingPath: [any CodingKey]) {
        self.items = items
        self.edm = edm
        self.schema = schema
        self.codingPath = codingPath
    }

    var count: Int? { items.count }
    var isAtEnd: Bool { currentIndex >= items.count }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        throw DecodingError.typeMismatch(
            Key.self, .init(codingPath: codingPath, debugDescription: "a collection is an array"))
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { self }
    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw DecodingError.typeMismatch(
            Any.self, .init(codingPath: codingPath, debugDescription: "a collection is an array"))
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else { return false }
        if items[currentIndex].isNull { currentIndex += 1; return true }
        return false
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(T.self, .init(codingPath: codingPath, debugDescription: "no more items"))
        }
        let value = try PropertiesDecoder.decode(
            T.self, items[currentIndex], edm, schema: schema, path: codingPath + [IndexKey(currentIndex)])
        currentIndex += 1
        return value
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type
    ) throws -> KeyedDecodingContainer<NestedKey> {
        throw DecodingError.typeMismatch(
            NestedKey.self, .init(codingPath: codingPath, debugDescription: "nested containers are not supported"))
    }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch(
            [Any].self, .init(codingPath: codingPath, debugDescription: "nested containers are not supported"))
    }
    mutating func superDecoder() throws -> any Decoder { self }
}

/// Decodes one non-null value through a single-value container (a `RawRepresentable` enum, a
/// wrapper type).
struct ValueDecoder: Decoder, SingleValueDecodingContainer {
    let value: Value
    let edm: TypeRef
    let schema: Schema
    var codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        throw DecodingError.typeMismatch(
            Key.self, .init(codingPath: codingPath, debugDescription: "\(edm) is a single value, not an object"))
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch(
            [Any].self, .init(codingPath: codingPath, debugDescription: "\(edm) is a single value, not an array"))
    }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { value.isNull }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if let scalar = try TypedScalar.decode(T.self, value, edm, schema: schema, path: codingPath) { return scalar }
        return try T(from: self)  // a wrapper around a wrapper (an optional enum, say)
    }
}

struct IndexKey: CodingKey {
    let intValue: Int?
    var stringValue: String { "\(intValue ?? 0)" }
    init(_ i: Int) { intValue = i }
    init?(stringValue: String) { return nil }
    init?(intValue: Int) { self.intValue = intValue }
}

// MARK: - Writing: an Encodable type → Properties

/// Encodes an `Encodable` type as an entity's (or complex value's) `Properties`: the inverse of
/// `PropertiesDecoder`. A nil optional is written as null (`encodeNil`) or left out
/// (`encodeIfPresent`, the synthesized default) — for an update, left out means unchanged.
final class PropertiesEncoder: Encoder {
    let shape: TypedShape
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    var properties = Properties()

    init(shape: TypedShape, codingPath: [any CodingKey] = []) {
        self.shape = shape
        self.codingPath = codingPath
    }

    /// `value` as the store's value of `edm`.
    static func encode(_ value: any Encodable, _ edm: TypeRef, schema: Schema, path: [any CodingKey]) throws -> Value {
        if let scalar = try TypedScalar.encode(value, edm, schema: schema, path: path) { return scalar }
        switch edm {
        case .complex(let name):
            let shape = try TypedShape(owner: name, properties: [], schema: schema).complex(name, path: path)
            let encoder = PropertiesEncoder(shape: shape, codingPath: path)
            try value.encode(to: encoder)
            return .complex(encoder.properties)
        case .collection(let inner):
            let encoder = ItemsEncoder(edm: inner, schema: schema, codingPath: path)
            try value.encode(to: encoder)
            return .collection(encoder.items.items)
        default:
            let encoder = SingleEncoder(edm: edm, schema: schema, codingPath: path)
            try value.encode(to: encoder)
            guard let v = encoder.value else {
                throw EncodingError.invalidValue(
                    value, .init(codingPath: path, debugDescription: "a \(type(of: value)) encoded nothing for \(edm)"))
            }
            return v
        }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedWriter<Key>(encoder: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        FailingUnkeyed(codingPath: codingPath, why: "an entity of \(shape.owner) is an object, not an array")
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        FailingSingle(codingPath: codingPath, why: "an entity of \(shape.owner) is an object, not a single value")
    }

    struct KeyedWriter<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let encoder: PropertiesEncoder
        var codingPath: [any CodingKey] { encoder.codingPath }

        func property(_ key: Key) throws -> Property {
            guard let p = encoder.shape.property(key) else {
                throw EncodingError.invalidValue(
                    key.stringValue,
                    .init(
                        codingPath: codingPath + [key],
                        debugDescription: "\(encoder.shape.owner) has no property '\(key.stringValue)'"))
            }
            return p
        }

        mutating func encodeNil(forKey key: Key) throws {
            _ = try property(key)
            encoder.properties[key.stringValue] = .null
        }

        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            let p = try property(key)
            encoder.properties[key.stringValue] = try PropertiesEncoder.encode(
                value, p.type, schema: encoder.shape.schema, path: codingPath + [key])
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy keyType: NestedKey.Type, forKey key: Key
        ) -> KeyedEncodingContainer<NestedKey> {
            KeyedEncodingContainer(
                FailingKeyed<NestedKey>(
                    codingPath: codingPath + [key], why: "nested containers are not supported; use an Encodable type"))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            FailingUnkeyed(
                codingPath: codingPath + [key], why: "nested containers are not supported; use an array type")
        }

        mutating func superEncoder() -> any Encoder { encoder }
        mutating func superEncoder(forKey key: Key) -> any Encoder { encoder }
    }
}

/// Encodes a collection's items.
final class ItemsEncoder: Encoder {
    final class Items { var items: [Value] = [] }
    let edm: TypeRef
    let schema: Schema
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    let items = Items()

    init(edm: TypeRef, schema: Schema, codingPath: [any CodingKey]) {
        self.edm = edm
        self.schema = schema
        self.codingPath = codingPath
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(FailingKeyed<Key>(codingPath: codingPath, why: "a collection is an array"))
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { Writer(encoder: self) }
    func singleValueContainer() -> any SingleValueEncodingContainer {
        FailingSingle(codingPath: codingPath, why: "a collection is an array")
    }

    struct Writer: UnkeyedEncodingContainer {
        let encoder: ItemsEncoder
        var codingPath: [any CodingKey] { encoder.codingPath }
        var count: Int { encoder.items.items.count }
        mutating func encodeNil() throws { encoder.items.items.append(.null) }
        mutating func encode<T: Encodable>(_ value: T) throws {
            encoder.items.items.append(
                try PropertiesEncoder.encode(
                    value, encoder.edm, schema: encoder.schema, path: codingPath + [IndexKey(count)]))
        }
        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy keyType: NestedKey.Type
        ) -> KeyedEncodingContainer<NestedKey> {
            KeyedEncodingContainer(
                FailingKeyed<NestedKey>(codingPath: codingPath, why: "nested containers are not supported"))
        }
        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            FailingUnkeyed(codingPath: codingPath, why: "nested containers are not supported")
        }
        mutating func superEncoder() -> any Encoder { encoder }
    }
}

/// Encodes one value through a single-value container (a `RawRepresentable` enum, a wrapper).
final class SingleEncoder: Encoder, SingleValueEncodingContainer {
    let edm: TypeRef
    let schema: Schema
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    var value: Value?

    init(edm: TypeRef, schema: Schema, codingPath: [any CodingKey]) {
        self.edm = edm
        self.schema = schema
        self.codingPath = codingPath
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(
            FailingKeyed<Key>(codingPath: codingPath, why: "\(edm) is a single value, not an object"))
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        FailingUnkeyed(codingPath: codingPath, why: "\(edm) is a single value, not an array")
    }
    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    func encodeNil() throws { value = .null }

    func encode<T: Encodable>(_ v: T) throws {
        value = try PropertiesEncoder.encode(v, edm, schema: schema, path: codingPath)
    }
}

/// Containers that refuse (an `Encoder` cannot throw when asked for a container): the first
/// write throws.
struct FailingKeyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let codingPath: [any CodingKey]
    let why: String
    func fail(_ value: Any = ()) -> EncodingError {
        .invalidValue(value, .init(codingPath: codingPath, debugDescription: why))
    }
    mutating func encodeNil(forKey key: Key) throws { throw fail() }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { throw fail(value) }
    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(FailingKeyed<NestedKey>(codingPath: codingPath, why: why))
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        FailingUnkeyed(codingPath: codingPath, why: why)
    }
    mutating func superEncoder() -> any Encoder { FailingEncoder(codingPath: codingPath, why: why) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { FailingEncoder(codingPath: codingPath, why: why) }
}

struct FailingUnkeyed: UnkeyedEncodingContainer {
    let codingPath: [any CodingKey]
    let why: String
    var count: Int { 0 }
    func fail(_ value: Any = ()) -> EncodingError {
        .invalidValue(value, .init(codingPath: codingPath, debugDescription: why))
    }
    mutating func encodeNil() throws { throw fail() }
    mutating func encode<T: Encodable>(_ value: T) throws { throw fail(value) }
    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type
    ) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(FailingKeyed<NestedKey>(codingPath: codingPath, why: why))
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
    mutating func superEncoder() -> any Encoder { FailingEncoder(codingPath: codingPath, why: why) }
}

struct FailingSingle: SingleValueEncodingContainer {
    let codingPath: [any CodingKey]
    let why: String
    mutating func encodeNil() throws {
        throw EncodingError.invalidValue((), .init(codingPath: codingPath, debugDescription: why))
    }
    mutating func encode<T: Encodable>(_ value: T) throws {
        throw EncodingError.invalidValue(value, .init(codingPath: codingPath, debugDescription: why))
    }
}

struct FailingEncoder: Encoder {
    let codingPath: [any CodingKey]
    let why: String
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(FailingKeyed<Key>(codingPath: codingPath, why: why))
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { FailingUnkeyed(codingPath: codingPath, why: why) }
    func singleValueContainer() -> any SingleValueEncodingContainer { FailingSingle(codingPath: codingPath, why: why) }
}
