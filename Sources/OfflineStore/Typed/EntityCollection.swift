import Foundation
public import Queue
import Sync
public import Storage

/// A `Codable` Swift type mapped onto one entity set: typed reads (`findAll`, `find(key:)`,
/// `findBy(\.property, value)` through the indexes, any OData query) and typed changes that go
/// through the request queue like any local change.
///
/// ```swift
/// struct Product: Codable, Sendable {
///     var ProductID: String
///     var Name: String?
///     var Category: String?
///     var Price: Decimal?          // exact: Foundation.Decimal or EDMDecimal
/// }
/// let products = try store.collection(Product.self, set: "Products")   // mismatches throw here
/// let notebooks = try products.findBy(\.Category, "Notebooks")
/// let dear = try products.query("$filter=Price gt 1000&$orderby=Price desc&$top=5")
/// var p = try products.find(key: "HT-1000")!
/// p.Price = Decimal(string: "999.00")
/// try await products.update(p)                                          // queued for flush
/// ```
/// Coding keys are property names (use `CodingKeys` to map Swift names). A property the schema
/// allows to be null must be `Optional`; a non-optional one reads a null as an error. Mismatches
/// between the type and the schema — an unknown property, a Swift type that cannot hold the EDM
/// type, a nullable property declared non-optional — are reported by `collection(_:set:)`, not
/// at the first read. The type may leave out properties (it reads what it names); an update
/// writes what it names.
public final class EntityCollection<Entity: Codable & Sendable>: Sendable {
    public let set: String
    public let store: OfflineStore
    let shape: TypedShape
    /// The set's key properties, in key order.
    let key: [Property]

    init(store: OfflineStore, set: String) throws {
        guard let type = store.schema.entityType(ofSet: set), store.schema.entitySet(set) != nil else {
            throw EntityError.unknownEntitySet(set)
        }
        self.store = store
        self.set = set
        shape = TypedShape(owner: set, properties: type.properties, schema: store.schema)
        key = type.key.compactMap { name in type.properties.first { $0.name == name } }
        let (keys, problems) = TypedProbe.check(Entity.self, shape: shape)
        var all = problems
        for k in key where !keys.contains(k.name) {
            all.append("the key property \(k.name) of \(set) is not read by \(Entity.self)")
        }
        guard all.isEmpty else {
            throw EntityError.badInput("\(Entity.self) does not fit \(set): " + all.joined(separator: "; "))
        }
    }

    // MARK: Reading

    /// Every entity of the set, in key order.
    public func findAll() throws -> [Entity] {
        var out: [Entity] = []
        try store.scan(set: set) {
            out.append(try decode($0)); return true
        }
        return out
    }

    /// The entity with this key (one value per key property, in key order), or nil.
    public func find(key values: any Encodable...) throws -> Entity? {
        guard values.count == key.count else {
            throw EntityError.badInput(
                "\(set) has \(key.count) key propert\(key.count == 1 ? "y" : "ies") (\(key.map(\.name).joined(separator: ", "))), not \(values.count)"
            )
        }
        let schema = shape.schema
        let keyValues: [Value]
        do {
            keyValues = try zip(values, key).map { v, p in
                try PropertiesEncoder.encode(v, p.type, schema: schema, path: [AnyKey(p.name)])
            }
        } catch let e as EncodingError {
            throw EntityError.badInput("a key of \(set): \(TypedProbe.describe(e))")
        }
        return try store.get(set: set, key: keyValues).map(decode)
    }

    /// The entities whose property (named by a key path of `Entity`) equals `value`: a `$filter`
    /// with `eq`, so an index on that property is used when there is one.
    public func findBy<V: Codable & Equatable>(_ keyPath: KeyPath<Entity, V>, _ value: V) throws -> [Entity] {
        let name = try property(keyPath)
        guard let p = shape.properties.first(where: { $0.name == name }) else {
            throw EntityError.unknownProperty(set: set, property: name)
        }
        let v: Value
        do { v = try PropertiesEncoder.encode(value, p.type, schema: shape.schema, path: [AnyKey(name)]) } catch let e
            as EncodingError
        {
            throw EntityError.badInput("findBy on \(set): \(TypedProbe.describe(e))")
        }
        return try query("$filter=\(name) eq \(Self.literal(v, p.type, schema: shape.schema))")
    }

    /// The entities an OData query of the set returns: `options` is what follows `?`
    /// (`$filter=Price gt 100&$orderby=Name&$top=10`). `$select` must keep what `Entity` needs.
    public func query(_ options: String) throws -> [Entity] {
        try decode(store.entities(options.isEmpty ? set : set + "?" + options))
    }

    /// `OfflineStore.observe` of an OData query of the set (`options` as in `query`), decoded:
    /// the current entities, then the new ones after each commit that changed them.
    public func observe(_ options: String = "") throws -> AsyncThrowingStream<[Entity], any Error> {
        let rows = try store.observe(options.isEmpty ? set : set + "?" + options)
        let (entities, out) = AsyncThrowingStream<[Entity], any Error>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let task = Task {
            do {
                for try await result in rows { out.yield(try decode(result)) }
                out.finish()
            } catch {
                out.finish(throwing: error)
            }
        }
        out.onTermination = { _ in task.cancel() }
        return entities
    }

    /// The property a key path of `Entity` reads: found by decoding `Entity` from made-up values
    /// twice per property, once with that property changed.
    public func property<V: Equatable>(_ keyPath: KeyPath<Entity, V>) throws -> String {
        let base = try TypedProbe.instance(Entity.self, shape: shape)
        let log = TypedProbe.Log()
        _ = try TypedProbe.instance(Entity.self, shape: shape, log: log)
        for name in log.keys {
            let changed = try TypedProbe.instance(Entity.self, shape: shape, variant: name)
            if changed[keyPath: keyPath] != base[keyPath: keyPath] { return name }
        }
        throw EntityError.badInput(
            "the key path does not read one property of \(set) that can take two values (a Bool or a one-case enum is ambiguous here)"
        )
    }

    // MARK: Changing (through the request queue)

    /// Creates the entity locally and queues its POST.
    @discardableResult
    public func create(_ entity: Entity, options: ChangeOptions = .init()) async throws -> OfflineStore.ChangeReceipt {
        try await store.create(set: set, entity: try properties(entity), options: options)
    }

    /// Writes the properties `entity` names (its key picks the entity) and queues a PATCH.
    @discardableResult
    public func update(_ entity: Entity, options: ChangeOptions = .init()) async throws -> OfflineStore.ChangeReceipt {
        let (keyValues, changes) = try split(entity)
        return try await store.update(set: set, key: keyValues, changes: changes, options: options)
    }

    /// Replaces the entity whole (what `entity` leaves out becomes null) and queues a PUT.
    @discardableResult
    public func replace(_ entity: Entity, options: ChangeOptions = .init()) async throws -> OfflineStore.ChangeReceipt {
        let (keyValues, _) = try split(entity)
        return try await store.replace(set: set, key: keyValues, entity: try properties(entity), options: options)
    }

    /// Deletes the entity (by its key) and queues a DELETE.
    @discardableResult
    public func delete(_ entity: Entity, options: ChangeOptions = .init()) async throws -> OfflineStore.ChangeReceipt {
        let (keyValues, _) = try split(entity)
        return try await store.delete(set: set, key: keyValues, options: options)
    }

    // MARK: Conversions

    /// `entity` as the store's properties.
    public func properties(_ entity: Entity) throws -> Properties {
        let encoder = PropertiesEncoder(shape: shape)
        do { try entity.encode(to: encoder) } catch let e as EncodingError {
            throw EntityError.badInput("\(Entity.self) as \(set): \(TypedProbe.describe(e))")
        }
        return encoder.properties
    }

    /// An entity of the set as an `Entity`.
    public func decode(_ properties: Properties) throws -> Entity {
        do { return try Entity(from: PropertiesDecoder(properties: properties, shape: shape)) } catch let e
            as DecodingError
        {
            throw EntityError.badInput("\(set) as \(Entity.self): \(TypedProbe.describe(e))")
        }
    }

    func decode(_ rows: [Properties]) throws -> [Entity] { try rows.map(decode) }

    func split(_ entity: Entity) throws -> (key: [Value], rest: Properties) {
        var props = try properties(entity)
        var keyValues: [Value] = []
        for k in key {
            guard let v = props[k.name], !v.isNull else { throw EntityError.missingKey(set: set, property: k.name) }
            keyValues.append(v)
            props[k.name] = nil
        }
        return (keyValues, props)
    }

    /// A value as an OData URL literal of type `edm`.
    static func literal(_ v: Value, _ edm: TypeRef, schema: Schema) -> String {
        if case .enumMember(let n) = v, case .enumeration(let name) = edm, let e = schema.enumTypes[name] {
            return "\(e.qualifiedName)'\(TypedScalar.flagNames(n, e))'"
        }
        return EntitySetHandle.literal(v)
    }
}

extension OfflineStore {
    /// A typed view of entity set `set` as `Entity`; throws when the type does not fit the set's
    /// entity type (every problem named). See `EntityCollection`.
    public func collection<Entity: Codable & Sendable>(
        _ type: Entity.Type, set: String
    ) throws -> EntityCollection<Entity> {
        try EntityCollection(store: self, set: set)
    }
}

/// A coding key for a property name, in error paths.
struct AnyKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init(_ s: String) { stringValue = s }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { return nil }
}
