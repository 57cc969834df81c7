public import Storage

/// The columns a query hands out for each entity, resolved once per query: with `$select`, the
/// selected and key properties; without, every structural property — in declaration order, each
/// with its row position and type, so that reading one is a look-up in the row, not by name.
/// `@unchecked Sendable`: everything is immutable after `init`, `slots` included (written only there).
package final class ResultColumns: @unchecked Sendable {
    let set: EntitySetHandle
    let names: [String]
    /// Row positions; nil: every property, decoded together (`EntityRef.properties()`).
    let positions: [Int]?
    let types: [TypeRef]
    let schema: Schema
    /// Each column's row position and primitive type (nil for other types: a primitive decodes
    /// without the schema, whose copy for the call cost more than the decode), in memory this
    /// object owns: what reading a column needs, read without retaining an array.
    private let slots: UnsafeMutableBufferPointer<Slot>
    struct Slot {
        let position: Int
        let primitive: EDMPrimitive?
    }

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
        slots = .allocate(capacity: types.count)
        for (k, type) in types.enumerated() {
            let primitive: EDMPrimitive? = if case .primitive(let p) = type { p } else { nil }
            slots.initializeElement(at: k, to: Slot(position: positions?[k] ?? k, primitive: primitive))
        }
    }

    deinit { slots.deallocate() }

    /// How many columns there are.
    var count: Int { slots.count }

    /// Column `k` of `e` (null when the entity has none).
    @inline(__always)
    func value(_ k: Int, of e: EntityRef) throws -> Value {
        guard case .row(let row) = e.source else { return try e.value(at: slots[k].position) }
        return try value(k, of: row)
    }

    /// Column `k` of a stored row (or covering index entry).
    @inline(__always)
    func value(_ k: Int, of row: RowView) throws -> Value {
        let slot = slots[k]
        do throws(RowCodecError) {
            if let p = slot.primitive {
                guard let s = try row.slice(slot.position) else { return .null }
                return try RowView.decodePrimitive(s, p)
            }
            return try row.value(at: slot.position, type: types[k], schema: schema)
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
    // Four words at most, so that a row passes to `forEachRow`'s closure in registers.
    /// The columns, owned by the query run that hands the row over: not retained per row, nor
    /// around each column read (`_withUnsafeGuaranteedRef`).
    let unmanagedColumns: Unmanaged<ResultColumns>
    var columns: ResultColumns { unmanagedColumns.takeUnretainedValue() }
    /// The entity's row, when it is read from one (always, from `forEachRow`): read in place.
    let row: RowView?
    /// The entity, only when it is not read from a row (decoded properties).
    let decoded: DecodedEntity?

    final class DecodedEntity {
        let entity: EntityRef
        init(_ entity: EntityRef) { self.entity = entity }
    }

    init(entity: EntityRef, columns: ResultColumns) {
        unmanagedColumns = .passUnretained(columns)
        if case .row(let r) = entity.source {
            row = r
            decoded = nil
        } else {
            row = nil
            decoded = DecodedEntity(entity)
        }
    }

    /// How many columns the row has.
    public var count: Int { columns.count }

    /// The name of column `k`.
    public func name(_ k: Int) -> String { columns.names[k] }

    /// The value of column `k` (`.null` when the entity has none). Throws for a corrupt row.
    public func value(_ k: Int) throws -> Value {
        try unmanagedColumns._withUnsafeGuaranteedRef { columns in
            precondition(k >= 0 && k < columns.count, "column \(k) of a row of \(columns.count)")
            if let row { return try columns.value(k, of: row) }
            return try columns.value(k, of: entity)
        }
    }

    /// The value of the column named `name`, or nil when the row has no such column.
    public func value(_ name: String) throws -> Value? {
        guard let k = columns.names.firstIndex(of: name) else { return nil }
        return try value(k)
    }

    /// The row as `Properties`, null columns left out (what `entities` returns).
    public func properties() throws -> Properties { try columns.properties(entity) }

    /// The entity, made again from the row when it is read from one.
    var entity: EntityRef {
        if let row { return EntityRef(set: columns.set, view: row, primaryKey: nil) }
        return decoded!.entity
    }
}
