import Query
import Queue
import Storage

/// One entity as the service sent it, ready to be written into its own set.
package struct ServerRow: Sendable {
    package var set: String
    package var entity: Properties
    /// Its `@odata.etag`, if the service gave one.
    package var etag: String?
    /// Only some of its properties came (`$select` at its level): merge them into what is stored.
    package var partial: Bool
}

/// One page of a read or delta response.
package struct ServerPage: Sendable {
    package var rows: [ServerRow] = []
    /// Entities the service says are gone from the collection (`@removed`, V4.0 `$deletedEntity`).
    package var removed: [(set: String, key: [Value])] = []
    package var nextLink: String?
    package var deltaLink: String?
    /// Properties the local `$metadata` does not declare, skipped (a service may add some).
    package var skippedProperties = 0
    /// Values beyond a facet the schema declares (MaxLength, Precision, Scale), kept.
    package var facetViolations = 0
    /// The service's count of the whole collection (`@odata.count`, V2 `__count`), when it gave one.
    package var count: Int?
    /// Entities at the top level of the page (not expanded ones, not removals).
    package var topLevel = 0
    /// Entity objects in the page, expanded ones and removals included.
    package var received: Int { rows.count + removed.count }
}

/// Reads OData JSON payloads into rows of their own sets: expanded navigation properties are
/// split into the sets they lead to, with their foreign keys filled from the parent. The one
/// reader of `OfflineStore.load` and of refresh.
package struct PayloadReader: Sendable {
    package let schema: Schema
    /// The service root, to turn an absolute `@odata.id` into a path (nil: cut at the last `/`
    /// before the key).
    package var serviceRoot: String?

    package init(schema: Schema, serviceRoot: String? = nil) {
        self.schema = schema
        self.serviceRoot = serviceRoot
    }

    /// Converts one entity object of `set`, and recursively its expanded navigation properties.
    /// `options` (the request's bound options at this level) tells which levels carry only
    /// selected properties; nil: all came. A key property left out (`$select` without it) is
    /// taken from `@odata.id`.
    ///
    /// With `notes` (a service's answer), properties the schema does not declare are skipped and
    /// values beyond a facet kept, counted there, and a non-nullable collection the service left out of a whole entity is
    /// stored empty (S/4HANA's RAP services declare `SAP__Messages` so and send it only when there
    /// are messages); without it (a file to load), both are errors.
    package func collect(
        _ json: JSON, set: String, options: BoundOptions? = nil, into rows: inout [ServerRow]
    ) throws {
        var none: ServerNotes? = nil
        try collect(json, set: set, options: options, into: &rows, notes: &none)
    }

    package func collect(
        _ json: JSON, set: String, options: BoundOptions? = nil, into rows: inout [ServerRow], notes: inout ServerNotes?
    ) throws {
        guard let type = schema.entityType(ofSet: set) else { throw EntityError.unknownEntitySet(set) }
        let navigation = Set(type.navigationProperties.map(\.name))
        var props = try ValueJSON(schema: schema).properties(
            from: json, properties: type.properties, navigation: navigation, owner: set, notes: &notes)
        let partial = options?.select != nil
        if notes != nil, !partial {
            for p in type.properties where !p.nullable && props[p.name] == nil {
                if case .collection = p.type { props[p.name] = .collection([]) }
            }
        }
        if type.key.contains(where: { props[$0]?.isNull ?? true }), let id = Self.id(of: json, removal: false) {
            let (idSet, key) = try entity(id: id)
            guard idSet == set else {
                throw EntityError.badInput(
                    "an entity of '\(set)' has the @odata.id '\(Membership.quoted(id))' of \(idSet)")
            }
            for (name, v) in zip(type.key, key) where props[name]?.isNull ?? true { props[name] = v }
        }
        var etag: String? = nil
        if case .string(let e)? = json["@odata.etag"] ?? json["@etag"] ?? json["__metadata"]?["etag"] { etag = e }
        if let etag, !ServerETags.isHeaderValue(etag) {
            throw EntityError.badInput(
                "the service sent an ETag for an entity of '\(set)' that cannot be sent back as If-Match (empty, or with control characters): '\(Membership.quoted(String(etag.prefix(80))))'"
            )
        }
        rows.append(ServerRow(set: set, entity: props, etag: etag, partial: partial))
        guard case .object(let members) = json else { return }
        for (name, value) in members where navigation.contains(name) {
            guard let nav = type.navigationProperty(name), let target = schema.targetSet(of: nav, from: set) else {
                continue
            }
            var children: [JSON]
            switch value {
            case .array(let a): children = a
            case .object:
                if value["__deferred"] != nil { continue }
                if case .array(let a)? = value["results"] { children = a } else { children = [value] }
            default: continue
            }
            let nested = options?.expand.first { $0.navigation.name == name }?.options
            for child in children {
                guard case .object(var m) = child else { continue }
                // A child nested under its parent may leave out the foreign key: take it from the parent.
                for c in nav.principalConstraints where !m.contains(where: { $0.0 == c.property }) {
                    if let v = json[c.referencedProperty] { m.append((c.property, v)) }
                }
                try collect(.object(m), set: target, options: nested, into: &rows, notes: &notes)
            }
        }
    }

    /// An entry's `@odata.id` (`@id`), or V2's `__metadata.uri` (`id`); for a removal also V4.0's `id`.
    static func id(of json: JSON, removal: Bool) -> String? {
        for name in removal ? ["@odata.id", "@id", "id"] : ["@odata.id", "@id"] {
            if case .string(let s)? = json[name] { return s }
        }
        for name in ["uri", "id"] {
            if case .string(let s)? = json["__metadata"]?[name] { return s }
        }
        return nil
    }

    /// The entity set and key an `@odata.id` names (`Products('HT-1000')`, absolute or relative).
    package func entity(id: String) throws -> (set: String, key: [Value]) {
        var path = Substring(id)
        if let root = serviceRoot, path.hasPrefix(root) {
            path = path.dropFirst(root.count)
        } else if path.contains("://") {
            let beforeKey = path.firstIndex(of: "(") ?? path.endIndex
            if let slash = path[..<beforeKey].lastIndex(of: "/") { path = path[path.index(after: slash)...] }
        }
        let bound: BoundQuery
        do { bound = try Binder(schema: schema).bind(String(path)) } catch {
            throw EntityError.badInput(
                "the service sent an @odata.id that is not an entity of this schema: '\(Membership.quoted(id))' (\(error))"
            )
        }
        guard bound.path.segments.count == 1, let segment = bound.path.segments.first, let key = segment.key else {
            throw EntityError.badInput("the service sent an @odata.id that is not Set(key): '\(Membership.quoted(id))'")
        }
        return (segment.entitySet, key.map(\.value))
    }

    /// Reads one page of a collection (or delta) response of `set` — V4 `{"value":[…],
    /// "@odata.nextLink":…, "@odata.deltaLink":…}` or V2 `{"d":{"results":[…],"__next":…}}`.
    /// Unknown properties are skipped and counted (`ServerPage.skippedProperties`).
    package func page(_ bytes: [UInt8], set: String, options: BoundOptions?) throws -> ServerPage {
        let doc = try JSON.parse(bytes)
        var page = ServerPage()
        var items: [JSON]
        if case .array(let a)? = doc["value"] {
            items = a
        } else if let d = doc["d"], case .array(let a) = d["results"] ?? d {
            items = a
            if case .string(let next)? = d["__next"] { page.nextLink = next }
            if case .string(let delta)? = d["__delta"] { page.deltaLink = delta }
            if case .string(let c)? = d["__count"] { page.count = Int(c) }
        } else {
            throw EntityError.badInput("the service's answer is not a collection ({\"value\":[…]})")
        }
        for name in ["@odata.nextLink", "@nextLink", "odata.nextLink"] {
            if case .string(let s)? = doc[name] { page.nextLink = s }
        }
        for name in ["@odata.deltaLink", "@deltaLink", "odata.deltaLink"] {
            if case .string(let s)? = doc[name] { page.deltaLink = s }
        }
        for name in ["@odata.count", "@count", "odata.count"] {
            switch doc[name] {
            case .number(let n)?, .string(let n)?: page.count = Int(n)
            default: break
            }
        }
        var notes: ServerNotes? = ServerNotes()
        for item in items {
            if Self.isRemoval(item) {
                guard let id = Self.id(of: item, removal: true) else {
                    throw EntityError.badInput("the service sent a removed entry without an id")
                }
                let (s, key) = try entity(id: id)
                page.removed.append((s, key))
                continue
            }
            try collect(item, set: set, options: options, into: &page.rows, notes: &notes)
            page.topLevel += 1
        }
        page.skippedProperties = notes?.skippedProperties ?? 0
        page.facetViolations = notes?.facetViolations ?? 0
        return page
    }

    /// `{"@removed":{…}}` (4.01), `{"@odata.removed":…}`, V4.0's `$deletedEntity` context, or
    /// V2's tombstone `{"__metadata":{"deleted":true,…}}` (SAP Gateway's delta).
    static func isRemoval(_ item: JSON) -> Bool {
        if item["@removed"] != nil || item["@odata.removed"] != nil { return true }
        if case .bool(true)? = item["__metadata"]?["deleted"] { return true }
        for name in ["@odata.context", "@context"] {
            if case .string(let c)? = item[name], c.hasSuffix("$deletedEntity") { return true }
        }
        return false
    }
}
