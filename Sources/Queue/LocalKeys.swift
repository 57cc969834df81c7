package import LMDB
package import Storage

/// Keys the store makes for entities created without the key the service assigns, and what
/// happens when the service's answer brings the real one.
///
/// A key property may be left out of a create when the service computes it (`Core.Computed`, V2
/// `sap:creatable="false"`) or when its type can hold a local value: integers get negative values
/// (−1, −2, … from a counter in `meta`), strings `~1`, `~2`, …, GUIDs a random UUID. Negative
/// integers and strings starting with `~` are reserved for local keys: services assign neither.
extension RequestQueue {
    static let nextLocalKey = Array("queue/next-local-key".utf8)

    /// `entity` with its missing key properties filled with local values, and whether any were.
    /// Throws when a missing key property's type cannot hold a local value.
    func fillLocalKey(_ t: WriteView, set: EntitySetHandle, _ entity: Properties) throws -> (Properties, Bool) {
        let missing = set.type.key.filter { entity[$0]?.isNull ?? true }
        if missing.isEmpty { return (entity, false) }
        var out = entity
        for name in missing {
            let p = set.type.property(name)!
            var n: Int64 = 1
            if let b = try t.get(store.meta, Self.nextLocalKey), b.count == 8 {
                n = Int64(bitPattern: b.reduce(0) { $0 << 8 | UInt64($1) })
            }
            var next: [UInt8] = []
            withUnsafeBytes(of: UInt64(bitPattern: n + 1).bigEndian) { next.append(contentsOf: $0) }
            try t.put(store.meta, Self.nextLocalKey, next)
            switch p.type {
            case .primitive(let prim) where prim.isInteger && prim != .byte:
                guard let range = prim.integerRange, -n >= range.lowerBound else {
                    throw EntityError.badInput("\(set.name): no local key is left for \(name) (\(prim.rawValue))")
                }
                out[name] = .int(-n)
            case .primitive(.string):
                let text = "~\(n)"
                if let m = p.maxLength, text.count > m {
                    throw EntityError.badInput(
                        "\(set.name): a local key for \(name) would not fit its MaxLength \(m); give the key")
                }
                out[name] = .string(text)
            case .primitive(.guid):
                out[name] = .guid(.random())
            default:
                throw EntityError.missingKey(set: set.name, property: name)
            }
        }
        return (out, true)
    }

    // MARK: The service's answer

    /// Applies the service's acknowledgment of request `id` — the first pending request of its
    /// entity — in the caller's transaction: the request leaves the queue and the entity takes
    /// `serverImage` (the service's answer: its key, computed properties, ETag) as its new server
    /// image, with the entity's remaining requests re-applied on top. When a create with a local
    /// key gets the service's key, the entity moves to it, and so do its remaining requests and
    /// every local reference to it (foreign keys in other entities and in their queued bodies;
    /// a child whose own key holds the foreign key moves too).
    package func acknowledge(_ t: WriteView, id: Int64, serverImage: Properties?) throws {
        guard let r = try record(t.reader, id: id) else {
            throw EntityError.notFound(set: SystemSets.requestQueue, key: String(id))
        }
        let set = try store.set(r.entitySet)
        // What the service held before this request (nil for an entity created here).
        let serverBefore = try t.get(store.base(ofSet: set.name), r.keyBytes).map { try set.codec.decode($0) }
        let chain = try self.chain(t.reader, set: set.name, keyBytes: r.keyBytes)
        guard chain.first?.id == id else {
            throw EntityError.badInput(
                "request \(id) is not the first pending request of \(r.entitySet)(\(r.entityKey))")
        }
        try remove(t, r)
        var keyBytes = r.keyBytes
        if r.method != .delete, let serverImage {
            let serverKey = try set.keyValues(serverImage)
            let oldKey = try keyBytes.withUnsafeBytes { try KeyCodec.decode($0, count: set.type.key.count).values }
            let newBytes = try set.encodeKey(serverKey)
            if newBytes != keyBytes {
                guard r.localKey else {
                    throw EntityError.badInput(
                        "the service answered request \(id) with key \(set.describeKey(serverKey)), not \(r.entityKey)")
                }
                try rekey(t, set: set, from: oldKey, to: serverKey)
                keyBytes = newBytes
            }
        }
        // The new server image, and the entity rebuilt from it and what is still queued.
        let base = store.base(ofSet: set.name)
        let remaining = try self.chain(t.reader, set: set.name, keyBytes: keyBytes).compactMap {
            try record(t.reader, id: $0.id)
        }
        // The service's answer, or (a 204 without a body) what it held with this request applied.
        // An answer with only some properties (a service may send less than the whole entity)
        // is laid over that: a property it leaves out was not sent, never null.
        var image: Properties? = nil
        if r.method != .delete {
            image = try apply(r, to: serverBefore)
            if let serverImage {
                var merged = image ?? [:]
                for (k, v) in serverImage { merged[k] = v }
                image = merged
            }
        }
        if remaining.isEmpty {
            try t.delete(base, keyBytes)
        } else if let image {
            try t.put(base, keyBytes, set.codec.encode(image))
        } else {
            try t.delete(base, keyBytes)
        }
        var local = image
        for q in remaining { local = try apply(q, to: local) }
        let keyValues = try keyBytes.withUnsafeBytes { try KeyCodec.decode($0, count: set.type.key.count).values }
        if let local {
            // Most often the entity is already this (the service took the change as sent): no write.
            _ = try set.upsertIfChanged(t, local, keyValues: keyValues, keyBytes: keyBytes, facets: false)
        } else {
            _ = try set.delete(t, key: keyValues)
        }
    }

    /// Moves an entity from key `old` to key `new`: its row, its queued requests, its server image,
    /// and every local reference to it.
    func rekey(_ t: WriteView, set: EntitySetHandle, from old: [Value], to new: [Value]) throws {
        var moved: Set<[UInt8]> = []
        try rekey(t, set: set, from: old, to: new, moved: &moved)
    }

    /// `rekey`, once per entity: `moved` holds the entities moved so far (`EntityStore.entityKey`
    /// of their old keys). SAP's `$metadata` declares referential constraints both ways (S/4's
    /// `assoc_A_SalesOrderItem_to_SalesOrder` makes the item the principal of its order), so the
    /// references can lead back to an entity already moved.
    private func rekey(
        _ t: WriteView, set: EntitySetHandle, from old: [Value], to new: [Value], moved: inout Set<[UInt8]>
    ) throws {
        let oldBytes = try set.encodeKey(old), newBytes = try set.encodeKey(new)
        guard oldBytes != newBytes, moved.insert(EntityStore.entityKey(set: set.name, keyBytes: oldBytes)).inserted
        else { return }
        var renamed: Properties = [:]
        for (k, v) in zip(set.type.key, new) { renamed[k] = v }
        // The row. The service's copy may be here already: a refresh brought it after the answer
        // to its create was lost, and the create sent again was answered from the service's
        // record. That copy is the entity then (one entity, not two); the caller lays what is
        // still queued on it.
        if let entity = try set.get(t.reader, key: old) {
            // Its streams (a photo added before its create was answered) move with it: the
            // delete below removes the old key's records.
            let streams = try store.streams?.records(t.reader, entityKey: set.entityKey(oldBytes)) ?? []
            let links = try self.links(t.reader, set: set, keyBytes: oldBytes)
            _ = try set.delete(t, key: old)
            if try set.get(t.reader, key: new) == nil {
                var moved = entity
                for (k, v) in renamed { moved[k] = v }
                try set.insert(t, moved)
                for (name, record) in streams {
                    try store.streams?.put(t, entityKey: set.entityKey(newBytes), name: name, record)
                }
                for (nav, target, keys) in links {
                    try store.links?.replace(
                        t, sourceSet: set.name, sourceKeyBytes: newBytes, nav: nav, targetSet: target, targets: keys)
                }
            }
        }
        // Its requests: key, and the key inside bodies that carry it.
        for entry in try chain(t.reader, set: set.name, keyBytes: oldBytes) {
            guard var q = try record(t.reader, id: entry.id) else { continue }
            try remove(t, q)
            q.keyBytes = newBytes
            q.entityKey = set.describeKey(new)
            q.body = try rewrite(q, in: set, with: renamed)
            try put(t, q, hasDependents: entry.hasDependents)
        }
        // Its server image (none for an entity created here, but a child moved by its parent may have one).
        let base = store.base(ofSet: set.name)
        if let image = try t.get(base, oldBytes).map({ Array($0) }) {
            try t.delete(base, oldBytes)
            try t.put(base, newBytes, image)
        }
        // Entities that refer to it.
        var oldReferenced: [String: Value] = [:], newReferenced: [String: Value] = [:]
        for (i, k) in set.type.key.enumerated() { oldReferenced[k] = old[i]; newReferenced[k] = new[i] }
        for depName in store.schema.serviceSetNames {
            let dep = try store.set(depName)
            for foreignKey in store.foreignKeys[depName] ?? [] where foreignKey.target == set.name {
                let fk = foreignKey.constraints
                guard fk.allSatisfy({ oldReferenced[$0.referencedProperty] != nil }) else { continue }
                let match = fk.map { oldReferenced[$0.referencedProperty]! }
                var replacement: Properties = [:]
                for c in fk { replacement[c.property] = newReferenced[c.referencedProperty]! }
                for child in try referring(t.reader, dep, fk.map(\.property), match) {
                    let childKey = try dep.keyValues(child)
                    if fk.contains(where: { dep.type.key.contains($0.property) }) {
                        // The foreign key is part of the child's key: the child moves too.
                        var newChildKey = childKey
                        for (i, k) in dep.type.key.enumerated() { if let v = replacement[k] { newChildKey[i] = v } }
                        try rekey(t, set: dep, from: childKey, to: newChildKey, moved: &moved)
                        if var entity = try dep.get(t.reader, key: newChildKey) {
                            for (k, v) in replacement { entity[k] = v }
                            try dep.upsert(t, entity, facets: false)
                        }
                    } else {
                        var updated = child
                        for (k, v) in replacement { updated[k] = v }
                        try dep.upsert(t, updated, facets: false)
                        let childBytes = try dep.encodeKey(childKey)
                        for entry in try chain(t.reader, set: dep.name, keyBytes: childBytes) {
                            guard var q = try record(t.reader, id: entry.id) else { continue }
                            let body = try self.body(of: q)
                            guard fk.contains(where: { body[$0.property] == match[fk.firstIndex(of: $0)!] }) else {
                                continue
                            }
                            q.body = try rewrite(
                                q, in: dep, with: Properties(replacement.filter { k, _ in body[k] != nil }))
                            try put(t, q, hasDependents: entry.hasDependents)
                        }
                    }
                }
            }
        }
    }

    /// Entities of `set` whose `properties` equal `values`: through an index that starts with
    /// them (foreign keys have one), else a scan.
    func referring(
        _ t: ReadView, _ set: EntitySetHandle, _ properties: [String], _ values: [Value]
    ) throws -> [Properties] {
        var out: [Properties] = []
        if let index = set.indexes.first(where: {
            $0.definition.components.prefix(properties.count).map(\.path) == properties.map { [$0] }
        }) {
            try set.findEqual(t, index: index, values) { pk in
                if let e = try set.entity(t, primaryKey: pk) { out.append(e) }
                return true
            }
        } else {
            try set.scan(t) { e in
                if zip(properties, values).allSatisfy({ e[$0] == $1 }) { out.append(e) }
                return true
            }
        }
        return out
    }

    /// `r`'s body with `changes` written over the properties it carries (a PATCH body gains only
    /// what it already had).
    func rewrite(_ r: RequestRecord, in set: EntitySetHandle, with changes: Properties) throws -> String? {
        guard r.body != nil, !r.method.carriesStream, !r.method.isLinkChange else { return r.body }
        var body = try self.body(of: r)
        for (k, v) in changes where r.method != .update || body[k] != nil { body[k] = v }
        return json(set, body, select: r.method == .update ? Set(body.map(\.key)) : nil)
    }
}
