import Foundation
package import LMDB
/// One entity set's storage: its rows database, its indexes and its codec.
///
/// Every method takes the transaction to act in, so a caller can put an entity change, its index
/// entries and a request-queue record in one transaction. Writes validate first and change nothing
/// when they throw.
///
/// A final class with only constant members (so `Sendable`): the query engine copies a handle into
/// every row it looks at, and a class reference costs one retain where a struct of this size cost ten.
package final class EntitySetHandle: Sendable {
    package let name: String
    package let type: EntityType
    package let schema: Schema
    package let codec: RowCodec
    package let entities: Database
    package let indexes: [IndexHandle]
    /// Positions of the key properties in the row.
    package let keyPositions: [Int]
    /// Position of each structural property in the row.
    package let propertyPositions: [String: Int]
    /// Property names in row order.
    let propertyNames: [String]
    /// Row positions bucketed by a cheap key of the name (length, first and last byte): a lookup
    /// compares one or two names instead of hashing or scanning them all.
    let positionBuckets: [[Int]]
    static let bucketMask = 127
    /// The set's name encoded as the first component of an `EntityStore.entityKey`, made once.
    let entityKeyPrefix: [UInt8]

    /// The store's `streams` database when the set's entities have streams (`EntityType.hasStreams`):
    /// deleting an entity deletes its stream records.
    package let streams: StreamStore?
    /// The store's links when the set's entities may have some (`LinkStore.linkedSets`):
    /// deleting an entity deletes its links both ways.
    package let links: LinkStore?

    package init(
        name: String, type: EntityType, schema: Schema, entities: Database, indexes: [IndexHandle],
        streams: StreamStore? = nil, links: LinkStore? = nil
    ) {
        self.streams = streams
        self.links = links
        self.name = name
        self.type = type
        self.schema = schema
        self.codec = RowCodec(schema: schema, entityType: type)
        self.entities = entities
        self.indexes = indexes
        self.keyPositions = type.key.map { k in type.propertyIndex(k)! }
        self.propertyPositions = Dictionary(
            type.properties.enumerated().map { ($1.name, $0) }, uniquingKeysWith: { a, _ in a })
        self.propertyNames = type.properties.map(\.name)
        var buckets = [[Int]](repeating: [], count: Self.bucketMask + 1)
        for (i, n) in propertyNames.enumerated() { buckets[Self.bucket(n)].append(i) }
        self.positionBuckets = buckets
        entityKeyPrefix = EntityStore.entityKey(set: name, keyBytes: [])
    }

    /// `EntityStore.entityKey(set: name, keyBytes:)`, without encoding the name again.
    package func entityKey(_ keyBytes: some Collection<UInt8>) -> [UInt8] {
        var out = entityKeyPrefix
        out.append(contentsOf: keyBytes)
        return out
    }

    package func index(named name: String) -> IndexHandle? { indexes.first { $0.definition.name == name } }

    @inline(__always)
    static func bucket(_ name: String) -> Int {
        let u = name.utf8
        guard let first = u.first, let last = u.last else { return 0 }
        return (u.count &* 31 &+ Int(first) &* 7 &+ Int(last)) & bucketMask
    }

    /// The row position of property `name`, or nil.
    @inline(__always)
    package func position(of name: String) -> Int? {
        for i in positionBuckets[Self.bucket(name)] where propertyNames[i] == name { return i }
        return nil
    }

    // MARK: Keys

    /// The key values of an entity, in key order. Throws when one is missing or null.
    package func keyValues(_ props: Properties) throws(EntityError) -> [Value] {
        var out: [Value] = []
        for k in type.key {
            guard let v = props[k], !v.isNull else { throw .missingKey(set: name, property: k) }
            out.append(v)
        }
        return out
    }

    /// The encoded primary-key tuple. Throws for a null or oversized key.
    package func encodeKey(_ values: [Value]) throws(EntityError) -> [UInt8] {
        guard values.count == type.key.count else {
            throw .badKeyPredicate(
                "entity set '\(name)' has \(type.key.count) key properties; got \(values.count) values")
        }
        for (k, v) in zip(type.key, values) where v.isNull { throw .missingKey(set: name, property: k) }
        let bytes: [UInt8]
        do { bytes = try KeyCodec.encode(values) } catch { throw .badKeyPredicate("key of '\(name)': \(error)") }
        guard bytes.count <= KeyCodec.maxKeySize else { throw .keyTooLong(set: name, length: bytes.count) }
        return bytes
    }

    /// Human-readable key, as in a URL: `'0500000001'` or `SalesOrderID='05',ItemPosition='10'`.
    package func describeKey(_ values: [Value]) -> String {
        let parts = values.map(Self.literal)
        if parts.count == 1 { return parts[0] }
        return zip(type.key, parts).map { "\($0)=\($1)" }.joined(separator: ",")
    }

    package static func literal(_ v: Value) -> String {
        switch v {
        case .string(let s): "'" + s.replacingOccurrences(of: "'", with: "''") + "'"
        case .int(let i): String(i)
        case .decimal(let d): d.description
        case .double(let d): "\(d)"
        case .bool(let b): b ? "true" : "false"
        case .guid(let g): g.description
        case .date(let d): d.description
        case .dateTimeOffset(let d): d.description
        case .timeOfDay(let t): t.description
        case .duration(let d): "duration'\(d)'"
        case .null: "null"
        default: "\(v)"
        }
    }

    // MARK: Validation

    /// Checks an entity against the type: known properties, values fit, non-nullables present
    /// (unless `partial`, for a PATCH body), key present.
    /// With `facets` false, MaxLength, Precision and Scale are not checked (the service's data).
    package func validate(_ props: Properties, partial: Bool, facets: Bool = true) throws(EntityError) {
        if accepts(props, partial: partial, facets: facets) { return }
        // Something is wrong: the checks one by one find it, in the order their errors have always come.
        try validateEachCheck(props, partial: partial, facets: facets)
    }

    /// `validate`'s checks one at a time, throwing the first that fails.
    package func validateEachCheck(_ props: Properties, partial: Bool, facets: Bool = true) throws(EntityError) {
        if !partial {
            for k in type.key where props[k]?.isNull ?? true { throw .missingKey(set: name, property: k) }
        }
        for (k, v) in props {
            guard let p = type.property(k) else { throw .unknownProperty(set: name, property: k) }
            try Validation.check(v, against: p, schema: schema, facets: facets)
        }
        if !partial {
            for p in type.properties where !p.nullable && (props[p.name]?.isNull ?? true) {
                if type.key.contains(p.name) { throw .missingKey(set: name, property: p.name) }
                throw .nullNotAllowed(property: p.name)
            }
        }
    }

    /// Whether `validate` would accept `props`, found in one walk over the type's properties with
    /// a cursor into `props` (no name searched for, no `Property` looked up by name): the same
    /// conditions — keys present, every name a property, every value valid, no null where none
    /// may be — without saying which one fails.
    package func accepts(_ props: Properties, partial: Bool, facets: Bool = true) -> Bool {
        var cursor = 0
        var found = 0
        for p in type.properties {
            // A key property is required even where the metadata let it be nullable.
            let required = !partial && (!p.nullable || type.key.contains(p.name))
            guard let v = props.value(p.name, cursor: &cursor) else {
                if required { return false }
                continue
            }
            found += 1
            if required && v.isNull { return false }
            guard (try? Validation.check(v, against: p, schema: schema, facets: facets)) != nil else { return false }
        }
        return found == props.count
    }

    // MARK: Reading

    /// The stored row bytes for a key, borrowed from the map. Nil when absent.
    package func row(_ t: ReadView, key: [UInt8]) throws -> MappedBytes? {
        try t.get(entities, key)
    }

    /// The entity with the given key values, or nil.
    package func get(_ t: ReadView, key values: [Value]) throws -> Properties? {
        let key = try encodeKey(values)
        guard let bytes = try t.get(entities, key) else { return nil }
        return try decodeRow(bytes, keyBytes: key)
    }

    func decodeRow(_ bytes: MappedBytes, keyBytes: UnsafeRawBufferPointer) throws(EntityError) -> Properties {
        do {
            return try codec.decode(bytes)
        } catch {
            throw .corruptRow(set: name, key: describeKeyBytes(keyBytes), reason: error.description)
        }
    }

    func decodeRow(_ bytes: MappedBytes, keyBytes: [UInt8]) throws(EntityError) -> Properties {
        let r: Result<Properties, EntityError> = keyBytes.withUnsafeBytes { k in
            do throws(EntityError) { return .success(try decodeRow(bytes, keyBytes: k)) } catch {
                return .failure(error)
            }
        }
        return try r.get()
    }

    /// The key as written in a URL when its bytes decode, else as hex.
    package func describeKeyBytes(_ keyBytes: some Collection<UInt8>) -> String {
        let bytes = Array(keyBytes)
        if let values = try? bytes.withUnsafeBytes({ try KeyCodec.decode($0, count: type.key.count).values }) {
            return describeKey(values)
        }
        return bytes.map { String($0, radix: 16) }.joined(separator: " ")
    }

    package func count(_ t: ReadView) throws -> Int { try t.count(entities) }

    /// Visits every entity in key order until `body` returns false.
    package func scan(_ t: ReadView, _ body: (Properties) throws -> Bool) throws {
        try t.withCursor(entities) { c in
            var e = try c.first()
            while let (k, v) = e {
                if try !body(try decodeRow(v, keyBytes: k)) { return }
                e = try c.next()
            }
        }
    }

    // MARK: Writing

    /// Inserts a new entity. Throws `duplicateKey` if one with the same key exists.
    package func insert(_ t: WriteView, _ props: Properties) throws {
        try validate(props, partial: false)
        let keyValues = try keyValues(props)
        let key = try encodeKey(keyValues)
        if try t.get(entities, key) != nil { throw EntityError.duplicateKey(set: name, key: describeKey(keyValues)) }
        try write(t, key: key, keyValues: keyValues, old: nil, new: props)
    }

    /// Inserts or fully replaces the entity with the same key. Returns the entity it replaced
    /// (its previous image), or nil when there was none.
    @discardableResult
    /// `facets` false: the service's image, stored as it came (see `Validation.check`).
    package func upsert(_ t: WriteView, _ props: Properties, facets: Bool = true) throws -> Properties? {
        try validate(props, partial: false, facets: facets)
        let keyValues = try keyValues(props)
        let key = try encodeKey(keyValues)
        let old = try oldRowForOverwrite(t, key: key)
        try write(t, key: key, keyValues: keyValues, old: old, new: props)
        return old
    }

    /// `upsert` unless the stored row is already `props` byte for byte (a refresh bringing what
    /// the store has): returns whether it wrote. `keyValues` and `keyBytes` are `props`' key,
    /// which the caller has made already; the row is encoded once, for the comparison and the write.
    package func upsertIfChanged(
        _ t: WriteView, _ props: Properties, keyValues: [Value], keyBytes: [UInt8], facets: Bool
    ) throws -> Bool {
        try validate(props, partial: false, facets: facets)
        assert(keyValues == (try? self.keyValues(props)))
        let encoded = codec.encode(props)
        let current = try t.get(entities, keyBytes)
        if let current, current.elementsEqual(encoded) { return false }
        let old = try oldRowForOverwrite(t, key: keyBytes, stored: current)
        try write(t, key: keyBytes, keyValues: keyValues, old: old, new: props, encoded: encoded)
        return true
    }

    /// Merges `changes` into the existing entity (PATCH). Returns its previous image and the
    /// entity as stored.
    @discardableResult
    package func merge(
        _ t: WriteView, key keyValues: [Value], _ changes: Properties
    ) throws -> (previous: Properties, current: Properties) {
        try validate(changes, partial: true)
        let key = try encodeKey(keyValues)
        guard let bytes = try t.get(entities, key) else {
            throw EntityError.notFound(set: name, key: describeKey(keyValues))
        }
        let old = try decodeRow(bytes, keyBytes: key)
        var new = old
        for (k, v) in changes {
            if type.key.contains(k), v != old[k] { throw EntityError.keyChange(set: name, property: k) }
            if v.isNull { new.removeValue(forKey: k) } else { new[k] = v }
        }
        // The changes were checked whole above; the rest is what was stored (the service's values
        // may exceed a facet).
        try validate(new, partial: false, facets: false)
        try write(t, key: key, keyValues: keyValues, old: old, new: new)
        return (old, new)
    }

    /// Replaces the existing entity (PUT): properties absent from `props` become null. Returns the
    /// previous image and the entity as stored.
    @discardableResult
    package func replace(
        _ t: WriteView, key keyValues: [Value], _ props: Properties
    ) throws -> (previous: Properties, current: Properties) {
        var full = props
        for (k, v) in zip(type.key, keyValues) {
            if let given = props[k], given != v { throw EntityError.keyChange(set: name, property: k) }
            full[k] = v
        }
        try validate(full, partial: false)
        let key = try encodeKey(keyValues)
        guard let bytes = try t.get(entities, key) else {
            throw EntityError.notFound(set: name, key: describeKey(keyValues))
        }
        let old = try decodeRow(bytes, keyBytes: key)
        try write(t, key: key, keyValues: keyValues, old: old, new: full)
        return (old, full)
    }

    /// Deletes the entity and its index entries. Returns the deleted entity, or nil if absent.
    @discardableResult
    package func delete(_ t: WriteView, key keyValues: [Value]) throws -> Properties? {
        let key = try encodeKey(keyValues)
        guard let bytes = try t.get(entities, key) else { return nil }
        let old = try decodeRow(bytes, keyBytes: key)
        for index in indexes {
            try t.delete(index.database, try index.entryKey(old, primaryKey: key))
        }
        try t.delete(entities, key)
        // Its streams' records go with it; their files are removed by `EntityStore.sweepStreams`.
        if let streams { try streams.removeAll(t, entityKey: entityKey(key)) }
        if let links { try links.removeAll(t, set: name, keyBytes: key, schema: schema) }
        return old
    }

    /// The row stored under `key`, decoded; nil when there is none. A row that does not decode
    /// cannot say which index entries it has, so those pointing at `key` are found and removed,
    /// and the row counts as absent: overwriting or deleting repairs it.
    private func oldRowForOverwrite(_ t: WriteView, key: [UInt8]) throws -> Properties? {
        try oldRowForOverwrite(t, key: key, stored: try t.get(entities, key))
    }

    /// `oldRowForOverwrite` with the stored row already looked up (`stored`, read in this
    /// transaction with no write since).
    private func oldRowForOverwrite(_ t: WriteView, key: [UInt8], stored: MappedBytes?) throws -> Properties? {
        guard let bytes = stored else { return nil }
        if let old = try? codec.decode(bytes) { return old }
        for index in indexes {
            var stale: [[UInt8]] = []
            try scanIndex(t.reader, index, lower: nil, upper: nil) { entry, pk in
                if pk.elementsEqual(key) { stale.append(Array(entry)) }
                return true
            }
            for entry in stale { try t.delete(index.database, entry) }
        }
        return nil
    }

    /// Writes the row and brings every index from `old` to `new`; all checks come first. An entry
    /// whose key stays is rewritten when its carried values (`INCLUDE`) change.
    private func write(
        _ t: WriteView, key: [UInt8], keyValues: [Value], old: Properties?, new: Properties, encoded: [UInt8]? = nil
    ) throws {
        let newEntries = try indexes.map { i throws(EntityError) in try i.entryKey(new, primaryKey: key) }
        let oldEntries = try old.map { o in
            try indexes.map { i throws(EntityError) in try i.entryKey(o, primaryKey: key) }
        }
        for (n, index) in indexes.enumerated() where index.definition.unique {
            if oldEntries?[n] == newEntries[n] { continue }
            try index.checkUnique(t.reader, new, primaryKey: key)
        }
        for (n, index) in indexes.enumerated() {
            let value = index.entryValue(new)
            if let o = oldEntries?[n] {
                if o == newEntries[n] {
                    if !index.isCovering || value == index.entryValue(old!) { continue }
                } else {
                    try t.delete(index.database, o)
                }
            }
            try t.put(index.database, newEntries[n], value)
        }
        try t.put(entities, key, encoded ?? codec.encode(new))
    }
}
