package import Query
import Queue
package import Storage

/// One entity as the service sent it, ready to be written into its own set.
package struct ServerRow: Sendable {
    package var set: String
    package var entity: Properties
    /// Its `@odata.etag`, if the service gave one.
    package var etag: String?
    /// Only some of its properties came (`$select` at its level): merge them into what is stored.
    package var partial: Bool
    /// What the service said of its streams (a media resource under "", stream properties by
    /// name): content type, media ETag, links — not their bytes (`StreamRecord.announced`).
    package var streams: [String: StreamRecord] = [:]
    /// The entities an expanded navigation property without a referential constraint brought, by
    /// its name: their set, their keys, and whether that is the whole list (no `$filter`, `$top`
    /// or `$skip` on the expansion) — the links `LinkStore` keeps.
    package var links: [String: LinkList] = [:]

    package struct LinkList: Sendable {
        package var targetSet: String
        package var keys: [[Value]]
        package var complete: Bool
    }

    package init(
        set: String, entity: Properties, etag: String?, partial: Bool, streams: [String: StreamRecord] = [:]
    ) {
        self.set = set
        self.entity = entity
        self.etag = etag
        self.partial = partial
        self.streams = streams
    }
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
    /// What a parse builds of each set's entity objects (`Schema.entityShapes()`).
    package let shapes: [String: JSONShape]
    /// Each entity set's type and navigation property names, looked up once, not per entity.
    let sets: [String: SetType]

    final class SetType: Sendable {
        let type: EntityType
        let navigation: Set<String>
        init(_ type: EntityType) {
            self.type = type
            self.navigation = Set(type.navigationProperties.map(\.name))
        }
    }

    /// - Parameter shapes: the schema's `entityShapes()` when the caller has them made
    ///   (`EntityStore.entityShapes`); else they are made here.
    package init(schema: Schema, serviceRoot: String? = nil, shapes: [String: JSONShape]? = nil) {
        self.schema = schema
        self.serviceRoot = serviceRoot
        self.shapes = shapes ?? schema.entityShapes()
        var sets: [String: SetType] = [:]
        for name in schema.entitySets.keys {  // every set `entityType(ofSet:)` would find
            if let type = schema.entityType(ofSet: name) { sets[name] = SetType(type) }
        }
        self.sets = sets
    }

    /// Parses a service's answer holding one entity of `set` — V4's entity object, V2's
    /// `{"d":{…}}` — building only what the set's shape reads (`parse(_:set:dropped:)`).
    package func answer(_ bytes: [UInt8], set: String) throws -> JSON {
        guard let entity = shapes[set] else { throw EntityError.unknownEntitySet(set) }
        let shape = JSONShape(owner: set)
        shape.members = entity.members
        if shape.members["d"] == nil { shape.members["d"] = .shaped(JSONShape.Link(entity)) }
        var dropped = DroppedMembers()
        return try withExtendedLifetime(entity) { try JSON.parse(bytes, shape: shape, dropped: &dropped) }
    }

    /// Parses one entity object of `set` (with its expanded children), building only what the
    /// set's shape reads: members nobody reads take no memory, unknown ones are counted in `dropped`.
    package func parse(_ object: EntityObjectBytes, set: String, dropped: inout DroppedMembers) throws -> JSON {
        guard let shape = shapes[set] else { throw EntityError.unknownEntitySet(set) }
        return try object.parse(shape: shape, dropped: &dropped)
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
        guard let setType = sets[set] else { throw EntityError.unknownEntitySet(set) }
        let (type, navigation) = (setType.type, setType.navigation)
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
        let rowIndex = rows.count
        var row = ServerRow(set: set, entity: props, etag: etag, partial: partial)
        if type.hasStreams {
            // A service's answer announces every stream it declares; a file to load only those it annotates.
            row.streams = Self.announcedStreams(json, type: type, etag: etag, all: notes != nil)
        }
        rows.append(row)
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
            case .null where LinkStore.isUnconstrained(nav): children = []  // a to-one linking none
            default: continue
            }
            let nested = options?.expand.first { $0.navigation.name == name }?.options
            let linked = LinkStore.isUnconstrained(nav)
            var keys: [[Value]] = []
            for child in children {
                guard case .object(var m) = child else { continue }
                // A child nested under its parent may leave out the foreign key: take it from the parent.
                for c in nav.principalConstraints where !m.contains(where: { $0.0 == c.property }) {
                    if let v = json[c.referencedProperty] { m.append((c.property, v)) }
                }
                let childIndex = rows.count
                try collect(.object(m), set: target, options: nested, into: &rows, notes: &notes)
                if linked, let targetType = sets[target]?.type {
                    let key = targetType.key.map { rows[childIndex].entity[$0] ?? .null }
                    if !key.contains(where: \.isNull) { keys.append(key) }
                }
            }
            if linked {
                let complete = nested.map { $0.filter == nil && $0.top == nil && $0.skip == nil } ?? true
                rows[rowIndex].links[name] = ServerRow.LinkList(targetSet: target, keys: keys, complete: complete)
            }
        }
    }

    /// What an entity object says of its streams: for a media entity V4's `@odata.mediaReadLink`,
    /// `@odata.mediaEditLink`, `@odata.mediaContentType`, `@odata.mediaEtag` (4.01 without
    /// `odata.`) or V2's `__metadata` `media_src`, `edit_media`, `content_type`, `media_etag`; for
    /// a stream property the same annotations prefixed by its name (`Photo@odata.mediaEtag`).
    /// With `all` (a service's answer) every stream the type declares is announced, with what is
    /// given (a service may leave the conventional links out); else only those with an annotation.
    /// `etag` is the entity's, the version of a stream without a media ETag.
    static func announcedStreams(_ json: JSON, type: EntityType, etag: String?, all: Bool) -> [String: StreamRecord] {
        func text(_ v: JSON?) -> String? { if case .string(let s)? = v { return s } else { return nil } }
        func annotation(_ prefix: String, _ term: String) -> String? {
            text(json[prefix + "@odata." + term]) ?? text(json[prefix + "@" + term])
        }
        var out: [String: StreamRecord] = [:]
        func announce(_ name: String, _ prefix: String, v2: Bool) {
            let m = json["__metadata"]
            var r = StreamRecord.announced(
                contentType: annotation(prefix, "mediaContentType") ?? (v2 ? text(m?["content_type"]) : nil),
                mediaETag: annotation(prefix, "mediaEtag") ?? (v2 ? text(m?["media_etag"]) : nil),
                readLink: annotation(prefix, "mediaReadLink") ?? (v2 ? text(m?["media_src"]) : nil),
                editLink: annotation(prefix, "mediaEditLink") ?? (v2 ? text(m?["edit_media"]) : nil))
            r.entityETag = etag
            if all || r.contentType != nil || r.mediaETag != nil || r.readLink != nil || r.editLink != nil {
                out[name] = r
            }
        }
        if type.hasStream { announce("", "", v2: true) }
        for name in type.streamProperties { announce(name, name, v2: false) }
        return out
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
    /// "@odata.nextLink":…, "@odata.deltaLink":…}` or V2 `{"d":{"results":[…],"__next":…}}` —
    /// whole, from memory (`readPage` streams it).
    package func page(_ bytes: [UInt8], set: String, options: BoundOptions?) throws -> ServerPage {
        var whole = ServerPage()
        try readPage(EntityObjectStream(bytes: bytes), set: set, options: options, chunkRows: .max) { part in
            whole.rows += part.rows
            whole.removed += part.removed
            whole.topLevel += part.topLevel
            whole.skippedProperties += part.skippedProperties
            whole.facetViolations += part.facetViolations
            (whole.nextLink, whole.deltaLink, whole.count) = (part.nextLink, part.deltaLink, part.count)
        }
        return whole
    }

    /// Entity-object bytes a chunk of a page or a load holds at most (besides its last object).
    package static let chunkBytes = 8 << 20

    /// The members of a page that say where it goes on and how much there is.
    static let pageMembers: Set<String> = [
        "@odata.nextLink", "@nextLink", "odata.nextLink", "@odata.deltaLink", "@deltaLink", "odata.deltaLink",
        "@odata.count", "@count", "odata.count", "__next", "__delta", "__count",
    ]

    /// Reads one page of a collection (or delta) response of `set` as it streams, handing
    /// `emit` its entities (with their expanded children) and removals at most `chunkRows`
    /// rows (or about `chunkBytes` of entity objects) at a time — one entity's expanded rows
    /// split over several parts when they are more — then a last part with the page's links and count (which V4 puts after
    /// the entities). Memory holds a chunk of the input, one entity object and one part; members
    /// of the document other than the entity array and the links are checked and dropped as they
    /// stream by. Unknown properties are skipped and counted (`ServerPage.skippedProperties`).
    ///
    /// With `related` (a delta of a request with `$expand`: each set below the top of its expand
    /// tree, with the options at its level), an entry whose `@odata.context` names one of those
    /// sets (`$metadata#SalesOrderItems/$entity`) is an entity of that set, and a removal may name
    /// one; an entry or removal of a set the tree does not reach is refused (`EntityError`).
    package func readPage(
        _ stream: EntityObjectStream, set: String, options: BoundOptions?, chunkRows: Int,
        related: [String: BoundOptions]? = nil, emit: (ServerPage) throws -> Void
    ) throws {
        stream.collectionOnly = true
        stream.wanted = Self.pageMembers
        stream.shape = shapes[set]
        var part = ServerPage()
        var notes: ServerNotes? = ServerNotes()
        var bytes = 0
        try stream.forEach { object in
            bytes += object.length
            var dropped = DroppedMembers()
            var item = try parse(object, set: set, dropped: &dropped)
            if Self.isRemoval(item) {
                guard let id = Self.id(of: item, removal: true) else {
                    throw EntityError.badInput("the service sent a removed entry without an id")
                }
                let removed = try entity(id: id)
                if let related, removed.set != set, related[removed.set] == nil {
                    throw Self.outsideTree(removed.set, root: set, id)
                }
                part.removed.append(removed)
            } else if let related, let other = Self.contextSet(of: item), other != set {
                // An entity of a set below the top of the request's expand tree, read with its own shape.
                guard let nested = related[other] else { throw Self.outsideTree(other, root: set, nil) }
                guard object.parsed == nil, let shape = shapes[other] else {
                    throw EntityError.badInput(
                        "the service sent a delta entry of '\(other)' too large to read (over \(stream.largeObjectBytes) bytes)"
                    )
                }
                dropped = DroppedMembers()
                item = try object.parse(shape: shape, dropped: &dropped)
                try collect(item, set: other, options: nested, into: &part.rows, notes: &notes)
                notes?.skippedProperties += dropped.count
            } else {
                try collect(item, set: set, options: options, into: &part.rows, notes: &notes)
                notes?.skippedProperties += dropped.count
                part.topLevel += 1
            }
            // An entity that brings more expanded rows than a part holds goes out in parts of
            // `chunkRows` rows, its own last: what a writer takes in one transaction stays bounded
            // whatever one entity expands to (a partner with 11,000 orders and items held a
            // refresh's transaction at about 200 MiB).
            while part.rows.count > chunkRows {
                var slice = ServerPage()
                slice.rows = Array(part.rows.prefix(chunkRows))
                part.rows.removeFirst(chunkRows)
                try emit(slice)
            }
            guard part.received >= chunkRows || bytes >= Self.chunkBytes else { return }
            part.skippedProperties = notes?.skippedProperties ?? 0
            part.facetViolations = notes?.facetViolations ?? 0
            try emit(part)
            (part, notes, bytes) = (ServerPage(), ServerNotes(), 0)
        }
        part.skippedProperties = notes?.skippedProperties ?? 0
        part.facetViolations = notes?.facetViolations ?? 0
        for (name, value) in stream.annotations {
            switch (name, value) {
            case ("@odata.nextLink", .string(let s)), ("@nextLink", .string(let s)), ("odata.nextLink", .string(let s)),
                ("__next", .string(let s)):
                part.nextLink = s
            case ("@odata.deltaLink", .string(let s)), ("@deltaLink", .string(let s)),
                ("odata.deltaLink", .string(let s)), ("__delta", .string(let s)):
                part.deltaLink = s
            case (_, .number(let n)), (_, .string(let n)):
                if ["@odata.count", "@count", "odata.count", "__count"].contains(name) { part.count = Int(n) }
            default: break
            }
        }
        try emit(part)
    }

    /// The entity set an entry's `@odata.context` (`@context`) names: `Set` of
    /// `…$metadata#Set/$entity`; nil without one.
    static func contextSet(of item: JSON) -> String? {
        for name in ["@odata.context", "@context"] {
            guard case .string(let c)? = item[name], let hash = c.lastIndex(of: "#") else { continue }
            let rest = c[c.index(after: hash)...]
            let end = rest.firstIndex { $0 == "/" || $0 == "(" } ?? rest.endIndex
            return String(rest[..<end])
        }
        return nil
    }

    static func outsideTree(_ other: String, root: String, _ id: String?) -> EntityError {
        .badInput(
            "the service sent a delta entry of '\(Membership.quoted(other))'\(id.map { " ('\(Membership.quoted($0))')" } ?? ""), a set the request's $expand does not reach from '\(root)': the delta is not applied"
        )
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
