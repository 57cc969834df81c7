import Foundation
package import LMDB
package import Storage

/// What a queued link change (`RequestRecord.Method.link`, `.unlink`) sends: its body, as JSON in
/// the record's `Body`. The source is the request's entity; the target is named here.
package struct LinkChange: Codable, Sendable, Hashable {
    /// The navigation property of the source (one without a referential constraint).
    package var navigation: String
    package var targetSet: String
    /// The target's key as in a URL (`1`, `'a'`) and as the store encodes it (hexadecimal).
    package var targetKey: String
    package var targetKeyBytes: String
    /// Whether the navigation is collection-valued (a single-valued one is set, not added to).
    package var collection: Bool

    package var text: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }

    /// The target's key bytes.
    package var targetBytes: [UInt8] {
        var out: [UInt8] = []
        var i = targetKeyBytes.startIndex
        while i < targetKeyBytes.endIndex,
            let j = targetKeyBytes.index(i, offsetBy: 2, limitedBy: targetKeyBytes.endIndex),
            let b = UInt8(targetKeyBytes[i..<j], radix: 16)
        {
            out.append(b)
            i = j
        }
        return out
    }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    /// The body of a `link` or `unlink` record.
    package static func of(_ r: RequestRecord) throws -> LinkChange {
        guard r.method.isLinkChange, let body = r.body,
            let change = try? JSONDecoder().decode(LinkChange.self, from: Data(body.utf8))
        else { throw EntityError.badInput("request \(r.id): not a link change with a readable body") }
        return change
    }
}

extension RequestQueue {
    /// Links (`adding`) or unlinks the entity `key` of `set` and the entity `target` of the set
    /// its navigation `navigation` leads to, as a local change: the link in `LinkStore` and a
    /// request (`link`: `POST …/Nav/$ref`, or `PUT` for a single-valued navigation; `unlink`:
    /// `DELETE …/Nav/$ref`) in the source entity's chain, in `t`. Only a navigation without a
    /// referential constraint (with one, change the foreign key). A link and its undoing before a
    /// flush cancel each other; linking what is linked, or unlinking what is not, changes
    /// nothing. The target must not be an entity created here whose key the service will give:
    /// flush its create first. Returns the request's id (nil when nothing was queued).
    package func changeLink(
        _ t: WriteView, set setName: String, key: [Value], navigation: String, target: [Value], adding: Bool,
        options: ChangeOptions, optimize: Bool
    ) throws -> Int64? {
        let set = try store.set(setName)
        guard !store.schema.isSystemSet(set.name) else {
            throw EntityError.badInput("'\(set.name)' is one of the store's own sets; it cannot be changed directly")
        }
        guard let nav = set.type.navigationProperties.first(where: { $0.name == navigation }) else {
            throw EntityError.badInput("\(set.name) has no navigation property '\(navigation)'")
        }
        guard LinkStore.isUnconstrained(nav) else {
            throw EntityError.badInput(
                "\(set.name).\(navigation) follows a referential constraint: change the foreign key instead")
        }
        guard let links = store.links, let targetName = store.schema.targetSet(of: nav, from: set.name) else {
            throw EntityError.badInput("\(set.name).\(navigation) leads to no entity set of this store")
        }
        let targetSet = try store.set(targetName)
        let keyBytes = try set.encodeKey(key)
        let targetBytes = try targetSet.encodeKey(target)
        guard let entity = try set.get(t.reader, key: key) else {
            throw EntityError.notFound(set: set.name, key: set.describeKey(key))
        }
        guard try targetSet.get(t.reader, key: target) != nil else {
            throw EntityError.notFound(set: targetSet.name, key: targetSet.describeKey(target))
        }
        if let first = try self.chain(t.reader, set: targetSet.name, keyBytes: targetBytes).first,
            first.method.isCreate, let r = try record(t.reader, id: first.id), r.localKey
        {
            throw EntityError.badInput(
                "\(targetSet.name)(\(targetSet.describeKey(target))) was created here and its key is the service's to give: flush its create, then link it"
            )
        }
        let source = EntityStore.entityKey(set: set.name, keyBytes: keyBytes)
        let now = try links.targets(t.reader, source: source, nav: navigation)
        let linked = now.contains(targetBytes)
        if linked == adding { return nil }
        // The links here: one added (a single-valued navigation holds only it), or one removed.
        let targets =
            adding ? (nav.isCollection ? now + [targetBytes] : [targetBytes]) : now.filter { $0 != targetBytes }
        try links.replace(
            t, sourceSet: set.name, sourceKeyBytes: keyBytes, nav: navigation, targetSet: targetSet.name,
            targets: targets)
        var chain = try self.chain(t.reader, set: set.name, keyBytes: keyBytes)
        if chain.contains(where: { $0.status == .error }), try !reviveForChange(t, chain: chain).isEmpty {
            chain = try self.chain(t.reader, set: set.name, keyBytes: keyBytes)
        }
        let change = LinkChange(
            navigation: navigation, targetSet: targetSet.name, targetKey: targetSet.describeKey(target),
            targetKeyBytes: LinkChange.hex(targetBytes), collection: nav.isCollection)
        // The opposite change of the same link, pending last: both go.
        if optimize, !options.nonMergeable, let last = chain.last, last.status == .pending,
            try !callQueued(t.reader, after: last.id),
            let r = try record(t.reader, id: last.id), r.method == (adding ? .unlink : .link), !r.nonMergeable,
            !last.hasDependents, r.transactionID == options.transactionID, r.uploadCategory == options.uploadCategory,
            let pending = try? LinkChange.of(r), pending.navigation == navigation,
            pending.targetKeyBytes == change.targetKeyBytes
        {
            try remove(t, r)
            try recordOutcome(t, r, .cancelled, message: "cancelled by the opposite change of the same link")
            if chain.count == 1 { try t.delete(store.base(ofSet: set.name), keyBytes) }
            return nil
        }
        if chain.isEmpty {
            // The first local change of a server entity: keep its server image (undo, rebase).
            try t.put(store.base(ofSet: set.name), keyBytes, set.codec.encode(entity))
        }
        let id = try allocateID(t)
        let r = RequestRecord(
            id: id, method: adding ? .link : .unlink, entitySet: set.name, entityKey: Self.entityKey(set, key),
            keyBytes: keyBytes, body: change.text, options: options, repeatabilityID: EDMGuid.random(),
            createdAt: .now, dependencies: [], localKey: false)
        try put(t, r, hasDependents: false)
        return id
    }

    /// After link change `r` left the queue unapplied (undone, given up): the link goes back to
    /// what it was before it (added again, or removed).
    func revertLink(_ t: WriteView, _ r: RequestRecord) throws {
        guard let change = try? LinkChange.of(r), let links = store.links else { return }
        let source = EntityStore.entityKey(set: r.entitySet, keyBytes: r.keyBytes)
        let target = change.targetBytes
        var now = try links.targets(t.reader, source: source, nav: change.navigation)
        if r.method == .link { now.removeAll { $0 == target } } else if !now.contains(target) { now.append(target) }
        try links.replace(
            t, sourceSet: r.entitySet, sourceKeyBytes: r.keyBytes, nav: change.navigation, targetSet: change.targetSet,
            targets: now)
    }

    /// The links of `set`'s entity `keyBytes` (an `entityKey`'s parts) by navigation: what
    /// `rekey` moves with it.
    func links(
        _ t: ReadView, set: EntitySetHandle, keyBytes: [UInt8]
    ) throws -> [(nav: String, target: String, keys: [[UInt8]])] {
        guard let links = store.links else { return [] }
        var out: [(String, String, [[UInt8]])] = []
        for nav in set.type.navigationProperties where LinkStore.isUnconstrained(nav) {
            guard let target = store.schema.targetSet(of: nav, from: set.name) else { continue }
            let keys = try links.targets(
                t, source: EntityStore.entityKey(set: set.name, keyBytes: keyBytes), nav: nav.name)
            if !keys.isEmpty { out.append((nav.name, target, keys)) }
        }
        return out
    }
}
