import LMDB
import Queue
import Storage

extension Flush {
    // MARK: A change set goes whole, or not at all

    /// How a member of a change set names the entity an earlier create of the same change set
    /// made, whose key the service assigns: see `ContentIDReference`. `omit`: the member's
    /// foreign-key properties to that entity, which the service fills from the reference.
    struct ParentReference: Equatable, Sendable {
        var parent: Int64
        var navigation: String?
        var omit: Set<String>
    }

    /// How `m` can name `p` (a create with a local key earlier in its change set) by `p`'s
    /// Content-ID: a change of `p`'s entity itself goes to `$p`; a create that refers to it goes
    /// to `$p/<navigation>` — `p`'s navigation property to `m`'s set, whose referential
    /// constraint is `m`'s foreign key to `p`'s key. Nil when neither applies (an update of
    /// another entity that refers to `p`, a navigation without a constraint).
    static func reference(from m: RequestRecord, to p: RequestRecord, schema: Schema) -> ParentReference? {
        if m.entitySet == p.entitySet && m.keyBytes == p.keyBytes {
            return ParentReference(parent: p.id, navigation: nil, omit: [])
        }
        guard m.method == .create, m.dependencies.contains(p.id),
            let parentType = schema.entityType(ofSet: p.entitySet),
            let childType = schema.entityType(ofSet: m.entitySet)
        else { return nil }
        for nav in parentType.navigationProperties where schema.targetSet(of: nav, from: p.entitySet) == m.entitySet {
            // The constraint is on this navigation (to-many, V2 associations) or on its partner.
            var constraints = nav.principalConstraints
            if constraints.isEmpty, let partner = nav.partner,
                let back = childType.navigationProperties.first(where: { $0.name == partner })
            {
                constraints = back.dependentConstraints
            }
            guard !constraints.isEmpty, Set(constraints.map(\.referencedProperty)) == Set(parentType.key) else {
                continue
            }
            return ParentReference(parent: p.id, navigation: nav.name, omit: Set(constraints.map(\.property)))
        }
        return nil
    }

    /// Why change set `members` (in id order, none sent yet) cannot go as one change set to a
    /// service with `capabilities`: a member needs the key of a create earlier in it whose key the
    /// service assigns, and cannot name that create by its Content-ID. Nil when it can go whole.
    static func cannotGoWhole(
        _ members: [RequestRecord], capabilities: BackendCapabilities, schema: Schema
    ) -> String? {
        let creates = Dictionary(
            members.filter { $0.method == .create && $0.localKey }.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        for m in members {
            let earlierOfEntity = members.filter {
                $0.id < m.id && $0.entitySet == m.entitySet && $0.keyBytes == m.keyBytes
            }.map(\.id)
            let needed = Set(m.dependencies + earlierOfEntity).compactMap { creates[$0] }.sorted { $0.id < $1.id }
            guard let p = needed.first else { continue }
            let what =
                "request \(m.id) (\(m.method.rawValue) \(m.entitySet)) needs the key the service assigns to request \(p.id) (POST \(p.entitySet)) of the same transaction"
            guard capabilities.contentIDReferences else {
                return
                    "\(what), and this service is not configured to resolve Content-ID references ($\(p.id)) in a change set. Set contentIDReferences if it does, or splitTransactions to send it in two round trips (not atomic)"
            }
            guard needed.count == 1, reference(from: m, to: p, schema: schema) != nil else {
                return
                    "\(what), and cannot name it by its Content-ID: only a change of that entity, or a create under it by a navigation property with a referential constraint, can. Set splitTransactions to send it in two round trips (not atomic)"
            }
        }
        return nil
    }

    /// How change set `members` (in id order) goes as one deep insert: for each member but the
    /// first, the earlier member it goes under and the navigation property from that one
    /// (`reference`). Nil when it cannot: a member that is not a create, or not under exactly one
    /// earlier member by a navigation property whose referential constraint is on that one's key.
    static func deepInsertTree(_ members: [RequestRecord], schema: Schema) -> [Int64: ParentReference]? {
        guard members.count > 1, let root = members.first, root.method == .create else { return nil }
        var out: [Int64: ParentReference] = [:]
        for m in members.dropFirst() {
            guard m.method == .create else { return nil }
            let parents = members.filter { $0.id < m.id && m.dependencies.contains($0.id) }
            guard parents.count == 1, let ref = reference(from: m, to: parents[0], schema: schema),
                ref.navigation != nil
            else { return nil }
            out[m.id] = ref
        }
        return out
    }

    /// Whether change set `members` (in id order) goes as one deep insert, and how
    /// (`deepInsertTree`): when it was made as one (`RequestRecord.deepInsert`), or when the
    /// configuration says the service takes deep inserts (`deepInsert`) and it cannot go as one
    /// change set otherwise (`cannotGoWhole`).
    static func deepInsert(
        _ members: [RequestRecord], capabilities: BackendCapabilities, configuration: SyncSettings,
        schema: Schema
    ) -> [Int64: ParentReference]? {
        guard let first = members.first, first.deepInsert || configuration.deepInsert,
            let tree = deepInsertTree(members, schema: schema)
        else { return nil }
        if first.deepInsert { return tree }
        return cannotGoWhole(members, capabilities: capabilities, schema: schema) == nil ? nil : tree
    }

    /// Refuses, before anything is sent, every transaction of this flush that cannot go as one
    /// change set (`cannotGoWhole`) and would otherwise be split — unless the configuration allows
    /// splitting (`splitTransactions`): each member goes to ErrorArchive (the first with the
    /// reason, the others caused by it), nothing of it to the service. Returns the ids archived.
    func refuseChangeSetsThatCannotGoWhole() async throws -> [Int64] {
        guard !options.settings.splitTransactions else { return [] }
        let (queue, options, schema, configuration) = (self.queue, self.options, store.schema, options.settings)
        return try await store.write(usingReserve: true) { t in
            var sets: [String: [RequestRecord]] = [:]
            try queue.records.scan(t.reader) { p in
                let r = try RequestRecord(p)
                if let tx = r.transactionID, options.category == nil || r.uploadCategory == options.category {
                    sets[tx, default: []].append(r)
                }
                return true
            }
            var archived: [Int64] = []
            for (tx, members) in sets.sorted(by: { $0.key < $1.key }) {
                // A change set in error or once sent goes (or waits) as it is.
                guard members.allSatisfy({ $0.status == .pending }),
                    Self.deepInsert(
                        members, capabilities: options.capabilities, configuration: configuration, schema: schema)
                        == nil,
                    let why = Self.cannotGoWhole(members, capabilities: options.capabilities, schema: schema)
                else { continue }
                let error = ServiceError(
                    httpStatus: 0, code: "OfflineStore.TransactionNotSent",
                    message: "transaction \(tx) was not sent, so as not to apply it in part: \(why)")
                let root = members[0].id
                archived += try queue.archive(t, id: root, error: error)
                for m in members.dropFirst() where try queue.record(t.reader, id: m.id)?.status == .pending {
                    archived += try queue.archive(t, id: m.id, error: error, causedBy: root)
                }
            }
            return archived
        }
    }
}
