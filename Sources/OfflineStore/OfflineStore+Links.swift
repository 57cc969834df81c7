import LMDB
public import Queue
import Served
public import Storage

extension OfflineStore {
    /// Links two entities over a navigation property without a referential constraint (a
    /// many-to-many, say: `Docs(1)/Tags` to `Tags(3)`), as a local change: the link, read at once
    /// by `$expand` and navigation paths, and a request the next flush sends (V4
    /// `POST Docs(1)/Tags/$ref`, or `PUT` for a single-valued navigation, which holds one link;
    /// V2 `POST Docs(1)/$links/Tags`), in one durable transaction. A navigation with a
    /// referential constraint is changed through its foreign key instead. Linking what is linked
    /// changes nothing; a link undone before a flush (`unlink`) is no request at all. The target
    /// must not be an entity created here whose key the service gives: flush its create first.
    /// Returns the request's id (nil when nothing was queued).
    @discardableResult
    public func link(
        set: String, key: [Value], navigation: String, to target: [Value], options: ChangeOptions = .init()
    ) async throws -> Int64? {
        try await changeLink(set: set, key: key, navigation: navigation, target: target, adding: true, options: options)
    }

    /// Removes a link (`link`'s opposite): V4 `DELETE Docs(1)/Tags/$ref?$id=…/Tags(3)`, V2
    /// `DELETE Docs(1)/$links/Tags(3)`. Unlinking what is not linked changes nothing.
    @discardableResult
    public func unlink(
        set: String, key: [Value], navigation: String, from target: [Value], options: ChangeOptions = .init()
    ) async throws -> Int64? {
        try await changeLink(
            set: set, key: key, navigation: navigation, target: target, adding: false, options: options)
    }

    private func changeLink(
        set: String, key: [Value], navigation: String, target: [Value], adding: Bool, options: ChangeOptions
    ) async throws -> Int64? {
        guard isOffline else {
            throw EntityError.badInput(
                "this store is an authority: its links are its own (load them), not changes to send")
        }
        let (queue, optimize) = (requestQueue, entities.configuration.requestQueueOptimization)
        return try await entities.write { t in
            try queue.changeLink(
                t, set: set, key: key, navigation: navigation, target: target, adding: adding, options: options,
                optimize: optimize)
        }
    }
}

extension ServedTransaction {
    /// A link added (`adding`; a single-valued navigation holds only it) or removed, as `serve`
    /// takes a `$ref` or `$links` write: an authority changes its own links — the source logged as
    /// changed (a client's delta brings it) and the navigation marked linked —; an offline store
    /// queues the change (`RequestQueue.changeLink`). `target` nil removes a single-valued
    /// navigation's link. Only a navigation without a referential constraint; both entities must
    /// exist.
    package func changeLink(
        set setName: String, key: [Value], navigation: String, target: [Value]?, adding: Bool,
        options: ChangeOptions = .init()
    ) throws {
        let set = try store.set(setName)
        guard let nav = set.type.navigationProperties.first(where: { $0.name == navigation }) else {
            throw EntityError.badInput("\(set.name) has no navigation property '\(navigation)'")
        }
        guard LinkStore.isUnconstrained(nav), let links = store.links,
            let targetName = store.schema.targetSet(of: nav, from: set.name)
        else {
            throw EntityError.badInput(
                "\(set.name).\(navigation) follows a referential constraint: change the foreign key instead")
        }
        let targetSet = try store.set(targetName)
        let keyBytes = try set.encodeKey(key)
        let source = EntityStore.entityKey(set: set.name, keyBytes: keyBytes)
        // The one a single-valued navigation's removal names.
        let named =
            try target.map { [try targetSet.encodeKey($0)] } ?? links.targets(t.reader, source: source, nav: navigation)
        if let queue {
            try writing {
                for targetBytes in named {
                    let targetKey = try targetBytes.withUnsafeBytes {
                        try KeyCodec.decode($0, count: targetSet.type.key.count).values
                    }
                    _ = try queue.changeLink(
                        t, set: set.name, key: key, navigation: navigation, target: targetKey, adding: adding,
                        options: options, optimize: optimize)
                }
            }
            return
        }
        guard try t.contains(set.entities, keyBytes) else {
            throw EntityError.notFound(set: set.name, key: set.describeKey(key))
        }
        if let target, try !t.contains(targetSet.entities, named[0]) {
            throw EntityError.notFound(set: targetSet.name, key: targetSet.describeKey(target))
        }
        var now = try links.targets(t.reader, source: source, nav: navigation)
        if adding, let first = named.first {
            now = nav.isCollection ? now.filter { $0 != first } + [first] : [first]
        } else {
            now.removeAll { named.contains($0) }
        }
        try writing {
            try links.replace(
                t, sourceSet: set.name, sourceKeyBytes: keyBytes, nav: navigation, targetSet: targetSet.name,
                targets: now)
            try links.markLinked(t, set: set.name, nav: navigation)
            _ = try ChangeLog(store: store).record(t, set: set.name, keyBytes: keyBytes, kind: .upsert)
        }
    }
}
