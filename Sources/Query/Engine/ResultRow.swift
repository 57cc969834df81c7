import Storage

/// The columns a query hands out for each entity, resolved once per query: with `$select`, the
/// selected and key properties; without, every structural property — in declaration order, each
/// with its row position and type, so that reading one is a look-up in the row, not by name.
package final class ResultColumns: Sendable {
    let set: EntitySetHandle
    let names: [String]
    /// Row positions; nil: every property, decoded together (`EntityRef.properties()`).
    let positions: [Int]?
    let types: [TypeRef]
    /// Each column's primitive type, nil for other types: a primitive decodes without the schema
    /// (whose copy for the call, its dictionaries retained and released, cost more than the decode).
    let primitives: [EDMPrimitive?]
    let schema: Schema

    init(_ select: BoundSelect?, _ set: EntitySetHandle) {
        self.set = set
        schema = set.schema
        let all = set.type.properties
        if let select {
            let kept = Set(select.properties.compactMap { $0.steps.first?.name }).union(set.type.key)
            let positions = all.indices.filter { kept.contains(all[$0].name) }
            self.positions = positions
            names = positions.map { all[$0].name }
            types = positions.map { all[$0].type }
        } else {
            positions = nil
            names = all.map(\.name)
            types = all.map(\.type)
        }
        primitives = types.map { if case .primitive(let p) = $0 { p } else { nil } }
    }

    /// Column `k` of `e` (null when the entity has none).
    @inline(__always)
    func value(_ k: Int, of e: EntityRef) throws -> Value {
        guard case .row(let row) = e.source else { return try e.value(at: positions?[k] ?? k) }
        return try value(k, of: row)
    }

    /// Column `k` of a stored row (or covering index entry).
    @inline(__always)
    func value(_ k: Int, of row: RowView) throws -> Value {
        let i = positions?[k] ?? k
        do throws(RowCodecError) {
            if let p = primitives[k] {
                guard let s = try row.slice(i) else { return .null }
                return try RowView.decodePrimitive(s, p)
            }
            return try row.value(at: i, type: types[k], schema: schema)
        } catch {
            throw EntityError.corruptRow(set: set.name, key: "", reason: error.description)
        }
    }

    /// `e` as `Properties`, null columns left out. Entities with every column set share the one
    /// array of names.
    func properties(_ e: EntityRef) throws -> Properties {
        guard let positions else { return try e.properties() }
        var values: [Value] = []
        values.reserveCapacity(positions.count)
        var nulls = false
        for k in positions.indices {
            let v = try value(k, of: e)
            nulls = nulls || v.isNull
            values.append(v)
        }
        if !nulls { return Properties(uniqueNames: names, values: values) }
        var projected = Properties(minimumCapacity: positions.count)
        for (name, v) in zip(names, values) where !v.isNull { projected.appendNew(name, v) }
        return projected
    }
}

/// One entity of a result, read in place: column `k` (see `PreparedQuery.columns`) is decoded
/// from the stored row or covering index entry when `value(k)` asks for it, and nothing else is.
/// Valid only during the call that hands it over (its bytes are in the read transaction's map).
public struct ResultRow {
    let entity: EntityRef
    let columns: ResultColumns
    /// The entity's row, when it is read from one (always, from `forEachRow`): taken out of
    /// `entity` once, not for every column.
    let row: RowView?

    init(entity: EntityRef, columns: ResultColumns) {
        self.entity = entity
        self.columns = columns
        if case .row(let r) = entity.source { row = r } else { row = nil }
    }

    /// How many columns the row has.
    public var count: Int { columns.names.count }

    /// The name of column `k`.
    public func name(_ k: Int) -> String { columns.names[k] }

    /// The value of column `k` (`.null` when the entity has none). Throws for a corrupt row.
    public func value(_ k: Int) throws -> Value {
        precondition(k >= 0 && k < count, "column \(k) of a row of \(count)")
        if let row { return try columns.value(k, of: row) }
        return try columns.value(k, of: entity)
    }

    /// The value of the column named `name`, or nil when the row has no such column.
    public func value(_ name: String) throws -> Value? {
        guard let k = columns.names.firstIndex(of: name) else { return nil }
        return try columns.value(k, of: entity)
    }

    /// The row as `Properties`, null columns left out (what `entities` returns).
    public func properties() throws -> Properties { try columns.properties(entity) }
}
