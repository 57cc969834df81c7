/// What moving a store from one `$metadata` to another changes, set by set, and how a stored
/// value, entity or JSON body of the old schema becomes one of the new (`EntityStore.migrate`).
///
/// A set's entity type is compared property by property, by each property's *shape*: its
/// primitive type, or its complex type's properties (recursively), enumeration's underlying
/// type, or collection's element. Facets (MaxLength, Precision, Nullable) are not part of the
/// shape: a row's bytes do not depend on them, and the service's data is stored as it comes.
///
/// ```swift
/// let m = try SchemaMigration(old: store.schema, new: try CSDL.parse(xml).withSystemSets())
/// let entity = try m.convert(oldEntity, set: "Products", key: "'HT-1000'")
/// ```
package struct SchemaMigration: Sendable {
    /// One entity set whose type changed.
    package struct SetChange: Sendable {
        package var added: [String] = []
        package var dropped: [String] = []
        /// Properties whose shape changed: name, the old type, the new.
        package var retyped: [Retyped] = [] {
            didSet { retypedNames = Set(retyped.map(\.name)) }
        }
        /// The names of `retyped`: only their values are converted, the others copied.
        package private(set) var retypedNames: Set<String> = []
        /// The row layout changed (properties added, dropped, retyped or reordered): every row
        /// of the set (and its `base/` images) is re-encoded.
        package var rewritesRows = false
        package let oldType: EntityType
        package let newType: EntityType
    }

    package struct Retyped: Sendable, Hashable {
        package var name: String
        package var from: String
        package var to: String
    }

    package let old: Schema
    package let new: Schema
    package private(set) var addedSets: [String] = []
    package private(set) var droppedSets: [String] = []
    /// The service sets in both schemas whose entity type changed.
    package private(set) var sets: [String: SetChange] = [:]

    package var isEmpty: Bool { addedSets.isEmpty && droppedSets.isEmpty && sets.isEmpty }

    /// Compares the two schemas (each with its system sets). Throws `EntityError.badInput`,
    /// naming the set, for what a store cannot move across: a changed key (names or types).
    package init(old: Schema, new: Schema) throws(EntityError) {
        self.old = old
        self.new = new
        let oldSets = Set(old.serviceSetNames)
        let newSets = Set(new.serviceSetNames)
        addedSets = new.serviceSetNames.filter { !oldSets.contains($0) }
        droppedSets = old.serviceSetNames.filter { !newSets.contains($0) }
        for name in old.serviceSetNames where newSets.contains(name) {
            guard let o = old.entityType(ofSet: name), let n = new.entityType(ofSet: name) else { continue }
            let oldKey = o.key.map { k in "\(k): \(o.property(k).map { Self.shape($0.type, old) } ?? "?")" }
            let newKey = n.key.map { k in "\(k): \(n.property(k).map { Self.shape($0.type, new) } ?? "?")" }
            guard oldKey == newKey else {
                throw .badInput(
                    "the key of \(name) changes from (\(oldKey.joined(separator: ", "))) to (\(newKey.joined(separator: ", "))); "
                        + "a store cannot move across a key change: make a new store (init) and refresh it")
            }
            var change = SetChange(oldType: o, newType: n)
            for p in n.properties where o.property(p.name) == nil { change.added.append(p.name) }
            for p in o.properties where n.property(p.name) == nil { change.dropped.append(p.name) }
            for p in n.properties {
                guard let q = o.property(p.name) else { continue }
                let (from, to) = (Self.shape(q.type, old), Self.shape(p.type, new))
                if from != to {
                    change.retyped.append(Retyped(name: p.name, from: q.type.description, to: p.type.description))
                }
            }
            change.rewritesRows =
                o.properties.map { "\($0.name) \(Self.shape($0.type, old))" }
                != n.properties.map { "\($0.name) \(Self.shape($0.type, new))" }
            if change.rewritesRows { sets[name] = change }
        }
    }

    /// A type's shape: what a row's bytes depend on (complex types expanded, facets left out).
    static func shape(_ type: TypeRef, _ schema: Schema, depth: Int = 0) -> String {
        switch type {
        case .primitive(let p): return p.rawValue
        case .enumeration(let name): return "enum(\(schema.enumTypes[name]?.underlying.rawValue ?? "?"))"
        case .collection(let element): return "[\(shape(element, schema, depth: depth + 1))]"
        case .complex(let name):
            guard depth < RowCodec.maxDepth, let c = schema.complexTypes[name] else { return "{\(name)}" }
            return "{"
                + c.properties.map { "\($0.name) \(shape($0.type, schema, depth: depth + 1))" }.joined(separator: ",")
                + "}"
        }
    }

    // MARK: Converting

    /// An entity of `set` read under the old schema, as the new one stores it: dropped
    /// properties left out, added ones absent (null), retyped ones converted. `key` names the
    /// entity in an error.
    package func convert(_ entity: Properties, set: String, key: String) throws(EntityError) -> Properties {
        guard let c = sets[set] else { return entity }
        var out = Properties(minimumCapacity: c.newType.properties.count)
        for p in c.newType.properties {
            guard let q = c.oldType.property(p.name), let v = entity[p.name] else { continue }
            out[p.name] = c.retypedNames.contains(p.name) ? try convert(v, from: q, to: p, at: "\(set)(\(key))") : v
        }
        return out
    }

    /// One value of retyped property `from` (old schema) as a value of `to` (new schema). The value
    /// goes through its OData JSON form, so what converts is what a service's JSON of the new
    /// type would accept (Int32 to Int64 or Decimal, a shorter or longer string, a complex
    /// value with members added or dropped, a number to a string); anything else is an error
    /// naming `place` and the property.
    func convert(_ v: Value, from: Property, to: Property, at place: String) throws(EntityError) -> Value {
        if v.isNull { return v }
        var text = ""
        ValueJSON(schema: old).write(v, type: from.type, to: &text)
        do {
            return try value(of: try JSON.parse(text), as: to, at: place)
        } catch let e as EntityError {
            throw e
        } catch {
            throw .badInput("\(place): \(to.name) could not be read back: \(error)")
        }
    }

    /// A JSON value as a value of `to` in the new schema (a number or boolean becomes the
    /// text of a string property; members a complex type no longer has are left out).
    func value(of json: JSON, as to: Property, at place: String) throws(EntityError) -> Value {
        if case .primitive(.string) = to.type {
            switch json {
            case .number, .bool: return .string(json.text)
            default: break
            }
        }
        var notes: ServerNotes? = ServerNotes()
        do {
            let v = try ValueJSON(schema: new).value(from: json, type: to.type, property: to.name, notes: &notes)
            try Validation.check(v, against: to, schema: new, facets: false)
            return v
        } catch {
            throw .badInput(
                "\(place): the value \(json.text.prefix(80)) of \(to.name) does not fit the new type \(to.type.description) (\(error.description)); "
                    + "the store was not changed")
        }
    }

    /// A request body (an OData JSON object of the old schema's `set`, an entity or a PATCH's
    /// changes) as the new schema reads it: members of dropped properties (and their
    /// annotations) left out, retyped values converted, everything else kept as it was
    /// (navigation binds, annotations). Nil when nothing changes; else the new text and the
    /// properties left out.
    package func convert(
        json text: String, set: String, at place: String
    ) throws(EntityError) -> (
        text: String, dropped: [String]
    )? {
        guard let c = sets[set] else { return nil }
        let parsed: JSON
        do { parsed = try JSON.parse(text) } catch { throw .badInput("\(place): its body is not JSON: \(error)") }
        guard case .object(let members) = parsed else { return nil }
        let droppedNames = Set(c.dropped)
        let retyped = c.retypedNames
        var out: [(String, JSON)] = []
        var dropped: [String] = []
        var changed = false
        for (name, v) in members {
            let property = name.split(separator: "@", maxSplits: 1).first.map(String.init) ?? name
            if droppedNames.contains(property) {
                if property == name { dropped.append(name) }
                changed = true
                continue
            }
            guard name == property, retyped.contains(name), let q = c.oldType.property(name),
                let p = c.newType.property(name)
            else {
                out.append((name, v))
                continue
            }
            let old: Value
            do {
                var notes: ServerNotes? = ServerNotes()
                old = try ValueJSON(schema: self.old).value(from: v, type: q.type, property: name, notes: &notes)
            } catch {
                throw .badInput(
                    "\(place): \(name) is not a value of its old type \(q.type.description): \(error.description)")
            }
            let converted = try convert(old, from: q, to: p, at: place)
            var written = ""
            ValueJSON(schema: new).write(converted, type: p.type, to: &written)
            do { out.append((name, try JSON.parse(written))) } catch {
                throw .badInput("\(place): \(name) could not be written in its new type: \(error)")
            }
            changed = true
        }
        return changed ? (JSON.object(out).text, dropped) : nil
    }
}
