import Queue
import Storage

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
        let (queue, optimize) = (requestQueue, configuration.requestQueueOptimization)
        return try await entities.write { t in
            try queue.changeLink(
                t, set: set, key: key, navigation: navigation, target: target, adding: adding, options: options,
                optimize: optimize)
        }
    }
}
