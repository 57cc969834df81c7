package import LMDB
package import Storage

/// An entity being evaluated: either its row in the memory map (properties decoded one at a time,
/// only those an expression touches) or already decoded properties.
package struct EntityRef {
    package let set: EntitySetHandle
    package let primaryKey: MappedBytes?
    enum Source {
        case row(RowView)
        case decoded(Properties)
    }
    let source: Source

    package init(set: EntitySetHandle, row: MappedBytes, primaryKey: MappedBytes?) throws {
        self.init(set: set, view: try Self.view(row, set: set), primaryKey: primaryKey)
    }

    /// A row whose header `view` checked already.
    package init(set: EntitySetHandle, view: RowView, primaryKey: MappedBytes?) {
        self.set = set
        self.primaryKey = primaryKey
        source = .row(view)
    }

    /// The row's header checked, or the error a corrupt row of `set` gives.
    @inline(__always)
    package static func view(_ row: MappedBytes, set: EntitySetHandle) throws -> RowView {
        do { return try RowView(row) } catch {
            throw EntityError.corruptRow(set: set.name, key: "", reason: error.description)
        }
    }

    package init(set: EntitySetHandle, properties: Properties) {
        self.set = set
        self.primaryKey = nil
        source = .decoded(properties)
    }

    /// The value of structural property `name` (null when absent).
    @inline(__always)
    package func value(_ name: String) throws -> Value {
        switch source {
        case .decoded(let p): return p[name] ?? .null
        case .row(let row):
            guard let i = set.position(of: name) else { return .null }
            do {
                return try row.value(at: i, type: set.type.properties[i].type, schema: set.schema)
            } catch {
                throw EntityError.corruptRow(set: set.name, key: "", reason: error.description)
            }
        }
    }

    /// The value of the property at row position `i`.
    @inline(__always)
    package func value(at i: Int) throws -> Value {
        switch source {
        case .decoded(let p): return p[set.type.properties[i].name] ?? .null
        case .row(let row):
            do {
                return try row.value(at: i, type: set.type.properties[i].type, schema: set.schema)
            } catch {
                throw EntityError.corruptRow(set: set.name, key: "", reason: error.description)
            }
        }
    }

    /// The bytes read as its row (in the memory map), or nil for decoded properties.
    package var rowBytes: MappedBytes? {
        if case .row(let row) = source { return row.bytes }
        return nil
    }

    /// Whether this entity is read from its row bytes (so `rawBytes` works).
    package var isRow: Bool {
        if case .row = source { return true }
        return false
    }

    /// The stored bytes of the property at position `i` when this entity is a row and the property
    /// is not null; nil otherwise (then use `value(at:)`).
    @inline(__always)
    package func rawBytes(at i: Int) throws -> UnsafeRawBufferPointer? {
        guard case .row(let row) = source else { return nil }
        do { return try row.slice(i) } catch {
            throw EntityError.corruptRow(set: set.name, key: "", reason: error.description)
        }
    }

    /// The entity's ETag, `EntityTag.of(row:)` of its stored row bytes. An entity built from
    /// decoded properties (not how results are read) is encoded with the set's codec first.
    package func etag() throws -> String { EntityTag.format(try etagHash()) }

    /// The hash `etag()` formats.
    package func etagHash() throws -> UInt64 {
        switch source {
        case .row(let row): return EntityTag.hash(row.bytes)
        case .decoded(let p): return set.codec.encode(p).withUnsafeBytes { EntityTag.hash($0) }
        }
    }

    /// All properties, decoded.
    package func properties() throws -> Properties {
        switch source {
        case .decoded(let p): return p
        case .row(let row):
            do { return try set.codec.decode(row.bytes) } catch {
                throw EntityError.corruptRow(set: set.name, key: "", reason: error.description)
            }
        }
    }

    /// The key values, in key order.
    package func keyValues() throws -> [Value] { try set.type.key.map { try value($0) } }
}
