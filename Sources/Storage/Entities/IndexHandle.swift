package import LMDB
/// One secondary index: its definition, its database, and how to read its components from a row.
package final class IndexHandle: Sendable {
    package let definition: IndexDefinition
    package let database: Database
    /// The declared type of each component's property.
    package let componentTypes: [TypeRef]
    package var descending: [Bool] { definition.components.map(\.descending) }
    /// For a covering index (`INCLUDE`): the top-level properties its entries' values carry — the
    /// key properties, the first property of each component and the included ones. Empty otherwise.
    package let carried: Set<String>
    /// Encodes an entry's value: the carried properties in the entity row format, cut after the
    /// last carried one (a row that ends early reads the rest as null). Nil for a plain index.
    let carriedCodec: RowCodec?

    package init(
        definition: IndexDefinition, database: Database, entityType: EntityType, schema: Schema
    ) throws(EntityError) {
        self.definition = definition
        self.database = database
        var types: [TypeRef] = []
        for c in definition.components {
            guard let first = c.path.first, var p = entityType.property(first) else {
                throw .badIndexDefinition(
                    "'\(definition.name)': entity set '\(definition.entitySet)' has no property '\(c.path.joined(separator: "/"))'"
                )
            }
            for segment in c.path.dropFirst() {
                guard case .complex(let ctName) = p.type, let sub = schema.complexTypes[ctName]?.property(segment)
                else {
                    throw .badIndexDefinition("'\(definition.name)': no property '\(c.path.joined(separator: "/"))'")
                }
                p = sub
            }
            switch p.type {
            case .primitive(.json), .complex, .collection:
                throw .badIndexDefinition(
                    "'\(definition.name)': property '\(c.path.joined(separator: "/"))' of type \(p.type) cannot be indexed"
                )
            default: types.append(p.type)
            }
        }
        self.componentTypes = types
        guard !definition.included.isEmpty else {
            carried = []
            carriedCodec = nil
            return
        }
        for name in definition.included {
            guard entityType.property(name) != nil else {
                throw .badIndexDefinition(
                    "'\(definition.text)': entity set '\(definition.entitySet)' has no property '\(name)' to include")
            }
        }
        let names = Set(entityType.key + definition.components.map { $0.path[0] } + definition.included)
        carried = names
        let last = entityType.properties.lastIndex { names.contains($0.name) } ?? 0
        carriedCodec = RowCodec(schema: schema, properties: Array(entityType.properties.prefix(last + 1)))
    }

    /// Whether the entries carry properties (`INCLUDE`), so a query may be answered from them.
    package var isCovering: Bool { carriedCodec != nil }

    /// The value of `props`' entry: empty for a plain index; for a covering one the carried
    /// properties as a row.
    package func entryValue(_ props: Properties) -> [UInt8] {
        guard let carriedCodec else { return [] }
        var subset = Properties()
        for (k, v) in props where carried.contains(k) { subset.appendNew(k, v) }
        return carriedCodec.encode(subset)
    }

    /// The index's component values for an entity (null where a path is absent).
    package func componentValues(_ props: Properties) -> [Value] {
        definition.components.map { c in
            var v = props[c.path[0]] ?? .null
            for segment in c.path.dropFirst() {
                guard case .complex(let sub) = v else { return .null }
                v = sub[segment] ?? .null
            }
            return v
        }
    }

    /// Encodes just the index tuple (no primary key): the prefix that equality look-ups seek.
    package func encodeTuple(_ values: [Value]) throws(EntityError) -> [UInt8] {
        var out: [UInt8] = []
        try appendTuple(values, to: &out)
        return out
    }

    private func appendTuple(_ values: [Value], to out: inout [UInt8]) throws(EntityError) {
        for (n, v) in values.enumerated() {
            do { try KeyCodec.append(v, descending: definition.components[n].descending, to: &out) } catch {
                throw .badIndexDefinition("'\(definition.name)': \(error)")
            }
        }
    }

    /// The full entry key: index tuple followed by the primary-key tuple.
    package func entryKey(_ props: Properties, primaryKey: [UInt8]) throws(EntityError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + primaryKey.count)
        try appendTuple(componentValues(props), to: &out)
        out.append(contentsOf: primaryKey)
        guard out.count <= KeyCodec.maxKeySize else {
            throw .indexKeyTooLong(index: definition.name, length: out.count)
        }
        return out
    }

    /// Splits an entry key into the byte length of its index tuple (the rest is the primary key).
    package func tupleLength(_ entry: UnsafeRawBufferPointer) throws -> Int {
        try KeyCodec.decode(entry, count: definition.components.count, descending: descending).length
    }

    /// Throws `uniqueViolation` when another entity already has `props`' index tuple.
    func checkUnique(_ t: ReadView, _ props: Properties, primaryKey: [UInt8]) throws {
        let values = componentValues(props)
        if values.contains(where: \.isNull) { return }  // as in SQL, nulls never collide
        let tuple = try encodeTuple(values)
        try t.withCursor(database) { c in
            guard let (k, _) = try c.seek(tuple) else { return }
            guard k.count >= tuple.count, k.prefix(tuple.count).elementsEqual(tuple) else { return }
            if !k.dropFirst(tuple.count).elementsEqual(primaryKey) {
                throw EntityError.uniqueViolation(
                    index: definition.name,
                    key: values.map(EntitySetHandle.literal).joined(separator: ","))
            }
        }
    }
}
