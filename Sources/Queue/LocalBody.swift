import LMDB
import Query
package import Storage

/// The body of a local write (an entity to create or replace, or a PATCH's changes) read from
/// OData JSON, with OData's rules for relating entities.
///
/// `Nav@odata.bind` (OData JSON 4.01 §8.5) on a single-valued navigation property with a
/// referential constraint sets the foreign key from the bound entity's key; the entity must
/// exist. On a navigation without a referential constraint it names entities to link
/// (`NewEntity.links`, a create's or a PATCH's: added to the links there). Anything else that
/// would relate entities — a bind of a collection-valued navigation with a constraint, a bind in
/// a PUT, or inline content where no deep insert is asked for (a PATCH, a PUT: deep update) — is
/// refused rather than dropped.
package struct LocalBody {
    package let store: EntityStore
    var schema: Schema { store.schema }

    package init(store: EntityStore) { self.store = store }

    /// Reads an entity (or a PATCH body) of `set` from an OData JSON object, checking each
    /// property against the schema. Throws `JSONError` or `EntityError` naming the problem.
    package func properties(set: String, json: [UInt8]) throws -> Properties {
        let entity = try entity(set: set, document: try JSON.parse(json), inline: false)
        if let nav = entity.links.keys.sorted().first {
            throw EntityError.badInput(
                "\(nav)@odata.bind of \(set): links are bound on a create or an update (POST, PATCH), not a replacement"
            )
        }
        return entity.properties
    }

    /// A PATCH's changes and the links its binds add (`changes` of `properties`, `links` of
    /// `NewEntity`).
    package func changes(set: String, json: [UInt8]) throws -> (changes: Properties, links: [String: [[Value]]]) {
        let entity = try entity(set: set, document: try JSON.parse(json), inline: false)
        return (entity.properties, entity.links)
    }

    /// Reads an entity to create from an OData JSON object, with the related entities it carries
    /// inline (a deep insert: `"Items": [{…}, {…}]`, V2's `{"results": [...]}` too, or one object
    /// for a single-valued navigation property), each checked against its set's schema.
    package func newEntity(set: String, json: [UInt8]) throws -> NewEntity {
        try entity(set: set, document: try JSON.parse(json), inline: true)
    }

    private func entity(set: String, document: JSON, inline: Bool, depth: Int = 0) throws -> NewEntity {
        let h = try store.set(set)
        let navigation = h.type.navigationProperties
        var out = NewEntity(
            try ValueJSON(schema: schema).properties(
                from: document, properties: h.type.properties,
                navigation: Set(navigation.map(\.name)), owner: set))
        guard case .object(let members) = document else { return out }
        for (name, value) in members {
            if let nav = navigation.first(where: { $0.name == name }) {
                guard inline else {
                    throw EntityError.badInput(
                        "'\(name)' of \(set): inline related entities are not taken here; "
                            + "a create takes them (a deep insert), an update does not: change them with their own requests, "
                            + "or link an existing one with \(nav.name)@odata.bind")
                }
                guard depth < 8 else { throw EntityError.badInput("a deep insert nested deeper than 8 levels") }
                guard let target = schema.targetSet(of: nav, from: set) else {
                    throw EntityError.badInput("'\(name)' of \(set) leads to no entity set of this store")
                }
                var items: [JSON]
                switch value {
                case .array(let a): items = a
                case .object where value["results"] != nil:
                    guard case .array(let a)? = value["results"] else {
                        throw EntityError.badInput("'\(name)' of \(set): results is not an array of entities")
                    }
                    items = a
                case .object: items = [value]
                case .null: items = []
                default:
                    throw EntityError.badInput(
                        "'\(name)' of \(set): expected related entities (an array of objects, or an object), got \(value.text.prefix(100))"
                    )
                }
                if !nav.isCollection, case .array = value {
                    throw EntityError.badInput("'\(name)' of \(set) is single-valued: give one object, not an array")
                }
                items = items.filter { $0 != .null }
                for item in items {
                    guard case .object = item else {
                        throw EntityError.badInput("'\(name)' of \(set): an inline entity is not a JSON object")
                    }
                }
                out.related[name] = try items.map {
                    try entity(set: target, document: $0, inline: true, depth: depth + 1)
                }
                continue
            }
            guard name.hasSuffix("@odata.bind") else { continue }
            let navName = String(name.dropLast("@odata.bind".count))
            guard let nav = navigation.first(where: { $0.name == navName }) else {
                throw EntityError.unknownProperty(set: set, property: navName)
            }
            if LinkStore.isUnconstrained(nav), depth == 0 {
                out.links[nav.name] = try linkTargets(nav, value, of: set)
                continue
            }
            try bind(nav, value, of: set, into: &out.properties)
        }
        return out
    }

    /// The keys of the entities a bind of `nav` (without a referential constraint) names: an
    /// array of entity URLs for a collection, one URL for a single-valued navigation. Each must
    /// exist.
    func linkTargets(_ nav: NavigationProperty, _ value: JSON, of set: String) throws -> [[Value]] {
        let label = "\(nav.name)@odata.bind of \(set)"
        let urls: [JSON]
        switch value {
        case .array(let items) where nav.isCollection: urls = items
        case .string where !nav.isCollection: urls = [value]
        default:
            throw EntityError.badInput(
                "\(label): expected \(nav.isCollection ? "an array of entity URLs" : "an entity URL"), got \(value.text.prefix(100))"
            )
        }
        guard let targetName = schema.targetSet(of: nav, from: set) else {
            throw EntityError.badInput("\(label): \(nav.name) leads to no entity set of this store")
        }
        let targetSet = try store.set(targetName)
        return try urls.map { item in
            guard case .string(let url) = item else {
                throw EntityError.badInput("\(label): expected an entity URL (a string), got \(item.text.prefix(100))")
            }
            let paren = url.firstIndex(of: "(") ?? url.endIndex
            let start = url[..<paren].lastIndex(of: "/").map { url.index(after: $0) } ?? url.startIndex
            let target: (set: String, key: [Value])
            do { target = try QueryEngine(store: store).entityPath(String(url[start...])) } catch {
                throw EntityError.badInput("\(label): '\(url)' does not name an entity (Set(key)): \(error)")
            }
            guard target.set == targetSet.name else {
                throw EntityError.badInput("\(label): '\(url)' is an entity of \(target.set), not of \(targetSet.name)")
            }
            guard try store.read({ t in try targetSet.get(t, key: target.key) }) != nil else {
                throw EntityError.badInput("\(label): \(url) does not exist")
            }
            return target.key
        }
    }

    /// Sets the foreign key of `nav` (single-valued, constrained) in `entity` from the key of the
    /// entity that `value` (`"Set(key)"`, relative or absolute, or null) names.
    func bind(_ nav: NavigationProperty, _ value: JSON, of set: String, into entity: inout Properties) throws {
        let label = "\(nav.name)@odata.bind of \(set)"
        guard !nav.isCollection, !nav.dependentConstraints.isEmpty else {
            throw EntityError.badInput(
                "\(label): binding \(nav.isCollection ? "a collection-valued" : "this") navigation property is not supported "
                    + "(only a single-valued one whose foreign key is on \(set)); change the related entities' own foreign keys"
            )
        }
        var values: [String: Value] = [:]
        switch value {
        case .null:
            guard nav.nullable else { throw EntityError.badInput("\(label): null, but \(nav.name) is not nullable") }
            for c in nav.dependentConstraints { values[c.property] = .null }
        case .string(let url):
            // "Set(key)", "/Set(key)" or "http://host/root/Set(key)": the last segment before the key.
            let paren = url.firstIndex(of: "(") ?? url.endIndex
            let start = url[..<paren].lastIndex(of: "/").map { url.index(after: $0) } ?? url.startIndex
            let target: (set: String, key: [Value])
            do { target = try QueryEngine(store: store).entityPath(String(url[start...])) } catch {
                throw EntityError.badInput("\(label): '\(url)' does not name an entity (Set(key)): \(error)")
            }
            guard let type = schema.entityType(ofSet: target.set), type.qualifiedName == nav.targetType else {
                throw EntityError.badInput("\(label): '\(url)' is an entity of \(target.set), not of \(nav.targetType)")
            }
            let targetSet = try store.set(target.set)
            guard try store.read({ t in try targetSet.get(t, key: target.key) }) != nil else {
                throw EntityError.badInput("\(label): \(url) does not exist")
            }
            for c in nav.dependentConstraints {
                guard let i = type.key.firstIndex(of: c.referencedProperty) else {
                    throw EntityError.badInput(
                        "\(label): the constraint refers to \(c.referencedProperty), which is not a key property of \(target.set)"
                    )
                }
                values[c.property] = target.key[i]
            }
        default:
            throw EntityError.badInput("\(label): expected an entity URL (a string) or null, got \(value.text)")
        }
        for (property, v) in values {
            if let given = entity[property], given != v {
                throw EntityError.badInput("\(label) sets \(property) to \(v), but the body gives \(given)")
            }
            entity[property] = v
        }
    }
}
