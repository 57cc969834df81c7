import HTTPTypes
import OfflineStore
import Storage

extension Writes {
    /// A deep insert (`POST Set` with related entities inline, OData 4.01 Part 1 §11.4.2.2, V2 the
    /// same): the entity and every one under it, in this transaction — all or none. Each related
    /// entity's foreign key is set from its parent's key (the navigation's referential
    /// constraint, or its partner's); an authority store fills keys it computes as for a create,
    /// an offline store queues them as one deep insert (`RequestQueue.applyDeep`). The answer, 201,
    /// holds the entity with the related entities created expanded (V4 requires it; V2 as SAP
    /// Gateway answers, `{"results": [...]}`), with `Location` and `ETag` of the entity.
    static func createDeep(
        set: String, _ entity: NewEntity, _ tx: ServedTransaction, store: OfflineStore, root: String,
        representation: Bool?, options: ChangeOptions
    ) throws -> (response: RecordedResponse, entityURL: String?) {
        guard entity.count <= OfflineStore.maxDeepInsertEntities else {
            throw ODataFailure(
                .badRequest,
                "a deep insert of \(entity.count) entities: at most \(OfflineStore.maxDeepInsertEntities) go in one")
        }
        let created: Created
        if tx.queued {
            var stored = try tx.queuedCreateDeep(set: set, entity: entity, options: options)[...]
            created = try tree(set: set, entity, store: store) { _ in stored.popFirst()! }
        } else {
            created = try createInAuthority(set: set, entity, tx, store: store)
        }
        let url = try entityURL(store, set: set, entity: created.entity)
        var headers = [("Location", root + url), ("ETag", created.etag)]
        if representation == false {
            headers += [("OData-EntityId", root + url), ("Preference-Applied", "return=minimal")]
            return (RecordedResponse(status: 204, headers: headers, body: []), url)
        }
        headers.append(("Content-Type", V2Dialect.jsonContentType(store)))
        return (RecordedResponse(status: 201, headers: headers, body: try body(created, store: store, root: root)), url)
    }

    /// An entity a deep insert created, with those it created under it.
    struct Created {
        var set: String
        var entity: Properties
        var etag: String
        var related: [(navigation: String, isCollection: Bool, entities: [Created])]
    }

    /// Creates `e` in an authority store, then each entity under it with its foreign key set.
    private static func createInAuthority(
        set: String, _ e: NewEntity, _ tx: ServedTransaction, store: OfflineStore
    ) throws -> Created {
        let given = try assigningComputedKey(store, tx, set: set, e.properties)
        let (stored, etag) = try tx.create(set: set, entity: given)
        var out = Created(set: set, entity: stored, etag: etag, related: [])
        let type = try store.entities.set(set).type
        for name in e.related.keys.sorted() {
            guard let nav = type.navigationProperties.first(where: { $0.name == name }) else {
                throw EntityError.badInput("\(set) has no navigation property '\(name)' to create entities under")
            }
            let children = e.related[name] ?? []
            guard nav.isCollection || children.count <= 1 else {
                throw EntityError.badInput("'\(name)' of \(set) is single-valued: one entity goes under it")
            }
            let (target, constraints) = try OfflineStore.deepInsertTarget(nav, of: set, schema: store.schema)
            var made: [Created] = []
            for child in children {
                let props = try OfflineStore.relateInDeepInsert(
                    child.properties, to: stored, by: constraints, under: name, of: set)
                made.append(
                    try createInAuthority(
                        set: target, NewEntity(props, related: child.related), tx, store: store))
            }
            out.related.append((name, nav.isCollection, made))
        }
        return out
    }

    /// The tree of `e` with each entity as `next` gives it (in `applyDeep`'s order).
    private static func tree(
        set: String, _ e: NewEntity, store: OfflineStore, next: (String) -> (entity: Properties, etag: String)
    ) throws -> Created {
        let (entity, etag) = next(set)
        var out = Created(set: set, entity: entity, etag: etag, related: [])
        let type = try store.entities.set(set).type
        for name in e.related.keys.sorted() {
            guard let nav = type.navigationProperties.first(where: { $0.name == name }) else { continue }
            let target = try OfflineStore.deepInsertTarget(nav, of: set, schema: store.schema).set
            let made = try (e.related[name] ?? []).map { try tree(set: target, $0, store: store, next: next) }
            out.related.append((name, nav.isCollection, made))
        }
        return out
    }

    /// The answer's body: the entity as a create answers it, with its related entities expanded.
    private static func body(_ c: Created, store: OfflineStore, root: String) throws -> [UInt8] {
        let v2 = V2Dialect.applies(to: store)
        func json(_ c: Created, top: Bool) throws -> JSON {
            var object = try JSON.parse(try entityJSON(store, set: c.set, entity: c.entity, etag: c.etag, root: root))
            if v2, let d = object["d"] { object = d }
            guard case .object(var members) = object else { return object }
            for r in c.related {
                let items = try r.entities.map { try json($0, top: false) }
                let value: JSON =
                    r.isCollection
                    ? (v2 ? .object([("results", .array(items))]) : .array(items)) : (items.first ?? .null)
                members.removeAll { $0.0 == r.navigation }
                members.append((r.navigation, value))
            }
            // The context URL is the answer's, at its top only.
            if !top { members.removeAll { $0.0 == "@odata.context" } }
            return .object(members)
        }
        var entity = try json(c, top: true)
        if v2 { entity = .object([("d", entity)]) }
        var text = ""
        JSONWriter.write(entity, to: &text)
        return Array((text + "\n").utf8)
    }
}
