import LMDB

extension Schema {
    /// Named databases a store may use (`mdb_env_set_maxdbs`).
    package static let maxDatabases = 1024
    /// Databases kept apart for the store's own structures, whatever the schema: 10 are used
    /// (`meta`; `q`, `q/by-entity`, `errors`, `events`, `history`; `changes`, `changes/by-entity`, `repeat`,
    /// `repeat/by-time`), the rest is headroom for later formats.
    static let reservedDatabases = 32

    /// Refuses a schema the store cannot hold, naming the type and property, so `init` fails
    /// instead of a later write, `generate` or open:
    /// - a key property that is complex, a collection, spatial or untyped (keys must be ordered
    ///   primitives or enums);
    /// - complex types that contain themselves through non-nullable single-valued properties
    ///   (no finite value exists);
    /// - `MaxLength`, `Precision` below 1, a negative `Scale`, or a `Scale` above the `Precision`;
    /// - more entity sets than the store has databases for (each set has a database for its
    ///   entities and one for the server images of changed entities, plus its indexes).
    package func checkStorable(indexCount: Int = 0) throws(EntityError) {
        for setName in entitySetNames {
            guard let type = entityType(ofSet: setName) else { continue }
            for k in type.key {
                guard let p = type.property(k) else { continue }
                switch p.type {
                case .primitive(let t) where t != .json: break
                case .enumeration: break
                default:
                    throw .badInput(
                        "entity type \(type.qualifiedName): key property \(k) has type \(p.type), which cannot be a key here (keys must be primitive or enum values)"
                    )
                }
            }
        }
        for type in entityTypes.values.sorted(by: { $0.qualifiedName < $1.qualifiedName }) {
            for p in type.properties { try Self.checkFacets(p, owner: type.qualifiedName) }
        }
        for type in complexTypes.values.sorted(by: { $0.qualifiedName < $1.qualifiedName }) {
            for p in type.properties { try Self.checkFacets(p, owner: type.qualifiedName) }
        }
        if let cycle = requiredComplexCycle() {
            throw .badInput(
                "complex type \(cycle.last!) contains itself through non-nullable properties (\(cycle.joined(separator: " → "))): no value of it can be finite; make one of them nullable or a collection"
            )
        }
        let needed = Self.reservedDatabases + 2 * entitySetNames.count + indexCount
        if needed > Self.maxDatabases {
            throw .badInput(
                "the schema has \(entitySetNames.count) entity sets (and \(indexCount) indexes): a store holds at most \((Self.maxDatabases - Self.reservedDatabases - indexCount) / 2) sets with these indexes"
            )
        }
    }

    static func checkFacets(_ p: Property, owner: String) throws(EntityError) {
        if let m = p.maxLength, m < 1 {
            throw .badInput(
                "\(owner): property \(p.name) has MaxLength=\(m); it must be at least 1 (or absent, or max)")
        }
        if let precision = p.precision, precision < 1 {
            throw .badInput("\(owner): property \(p.name) has Precision=\(precision); it must be at least 1")
        }
        if let scale = p.scale {
            if scale < 0 { throw .badInput("\(owner): property \(p.name) has Scale=\(scale); it must not be negative") }
            if let precision = p.precision, scale > precision {
                throw .badInput("\(owner): property \(p.name) has Scale=\(scale) above its Precision=\(precision)")
            }
        }
    }

    /// A cycle of complex types linked by non-nullable, single-valued complex properties, as
    /// `["A", "B", "A"]` with the property names, or nil.
    func requiredComplexCycle() -> [String]? {
        var state: [String: Bool] = [:]  // false: on the current path; true: done
        var path: [String] = []
        func visit(_ name: String) -> [String]? {
            if let done = state[name] {
                if done { return nil }
                let start = path.firstIndex { $0.hasPrefix(name + ".") || $0 == name } ?? 0
                return Array(path[start...]) + [name]
            }
            state[name] = false
            for p in complexTypes[name]?.properties ?? [] where !p.nullable {
                guard case .complex(let target) = p.type else { continue }
                path.append("\(name).\(p.name)")
                if let cycle = visit(target) { return cycle }
                path.removeLast()
            }
            state[name] = true
            return nil
        }
        for name in complexTypes.keys.sorted() {
            if let cycle = visit(name) { return cycle }
        }
        return nil
    }
}
