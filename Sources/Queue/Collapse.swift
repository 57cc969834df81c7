import Storage

/// Request-queue optimization: what a new local change does to the entity's last pending request.
///
/// | pending | new | result |
/// |---|---|---|
/// | create | update, replace | one create with the entity as it now is |
/// | create, media create | delete | nothing at all (unless another request depends on the create) |
/// | update | update | one update, properties merged, later values win |
/// | update, replace | replace | one replace |
/// | replace | update | one replace with the entity as it now is |
/// | update, replace, stream replacement | delete | one delete, at the end of the queue |
/// | delete | create | one replace (PUT) |
/// | anything | anything else | two requests, in order |
///
/// Nothing is merged when the optimization is off, when either request is non-mergeable, when
/// the pending one was already sent (or failed), when they belong to different transactions (but
/// a create of a deep insert, which takes later changes of its entity whatever their transaction:
/// it goes as one POST with the entities under it, and a change cannot follow it inside that) or
/// upload categories, or when merging would move the new change ahead of a request it depends on
/// (a merge keeps the pending request's place in the queue).
package enum Collapse {
    /// What is known of the entity's last pending request.
    package struct Pending: Sendable, Hashable {
        package var id: Int64
        package var method: RequestRecord.Method
        package var status: RequestRecord.Status
        package var nonMergeable: Bool
        package var transactionID: String?
        package var uploadCategory: String?
        /// Another request depends on this one (a child's create on its parent's).
        package var hasDependents: Bool
        /// A create of a deep insert (`RequestRecord.deepInsert`).
        package var deepInsert = false

        package init(
            id: Int64, method: RequestRecord.Method, status: RequestRecord.Status = .pending,
            nonMergeable: Bool = false,
            transactionID: String? = nil, uploadCategory: String? = nil, hasDependents: Bool = false,
            deepInsert: Bool = false
        ) {
            self.id = id
            self.method = method
            self.status = status
            self.nonMergeable = nonMergeable
            self.transactionID = transactionID
            self.uploadCategory = uploadCategory
            self.hasDependents = hasDependents
            self.deepInsert = deepInsert
        }
    }

    package enum Decision: Sendable, Hashable {
        /// A new request at the end of the queue.
        case append
        /// The pending request takes the change and becomes `method`; it keeps its place.
        case merge(into: Int64, method: RequestRecord.Method)
        /// Create then delete: both requests vanish.
        case cancel(Int64)
        /// The pending request is dropped and the new one appended.
        case supersede(Int64)
    }

    package static func decide(
        pending: Pending?, new: RequestRecord.Method, dependencies: [Int64],
        options: ChangeOptions, optimize: Bool
    ) -> Decision {
        guard optimize, !options.nonMergeable, let p = pending, p.status == .pending, !p.nonMergeable,
            p.transactionID == options.transactionID || p.deepInsert && p.method == .create && new != .create,
            p.uploadCategory == options.uploadCategory
        else { return .append }
        // A merge puts the change at the pending request's place: only if nothing it needs comes later.
        let mayMoveUp = dependencies.allSatisfy { $0 < p.id }
        switch (p.method, new) {
        case (.create, .update), (.create, .replace):
            return mayMoveUp ? .merge(into: p.id, method: .create) : .append
        case (.create, .delete), (.createMedia, .delete):
            return p.hasDependents ? .append : .cancel(p.id)
        case (.update, .update):
            return mayMoveUp ? .merge(into: p.id, method: .update) : .append
        case (.update, .replace), (.replace, .update), (.replace, .replace):
            return mayMoveUp ? .merge(into: p.id, method: .replace) : .append
        case (.update, .delete), (.replace, .delete), (.putStream, .delete):
            return .supersede(p.id)
        case (.delete, .create):
            return mayMoveUp ? .merge(into: p.id, method: .replace) : .append
        default:
            return .append
        }
    }

    /// Tags join with `#` (a tag already there is not repeated).
    package static func joinTags(_ a: String?, _ b: String?) -> String? {
        guard let a else { return b }
        guard let b, b != a, !a.split(separator: "#").contains(Substring(b)) else { return a }
        return a + "#" + b
    }
}
