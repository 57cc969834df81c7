import LMDB
import Query
public import Queue
import Sync
public import Storage

/// Options of a local change: custom tag, headers, transaction id, upload category, non-mergeable.
public typealias ChangeOptions = Queue.ChangeOptions

/// An entity to create with related entities under it: a deep insert (`create(set:deep:options:)`).
public typealias NewEntity = Queue.NewEntity

extension OfflineStore {
    /// A local change, for `apply(_:)`: `.create(set:entity:)`, `.update(set:key:changes:)` (PATCH:
    /// a null value removes one), `.replace(set:key:entity:)` (PUT: properties left out become
    /// null), `.delete(set:key:)`.
    public typealias Change = LocalChange

    /// What a local change became.
    public struct ChangeReceipt: Sendable, Hashable {
        /// The request in `RequestQueue` carrying the change — a new one, or the pending one it
        /// merged into; nil when it cancelled a pending create (create then delete).
        public var requestID: Int64?
        /// The entity as stored now; nil after a delete.
        public var entity: Properties?
    }

    var requestQueue: RequestQueue { RequestQueue(store: entities) }

    // MARK: Async (group-committed)

    /// Creates an entity and records the request, in one durable transaction; returns after the
    /// commit. Concurrent callers are group-committed: many changes, one fsync.
    @discardableResult
    public func create(set: String, entity: Properties, options: ChangeOptions = .init()) async throws -> ChangeReceipt
    {
        try await apply([.create(set: set, entity: entity)], options: options)[0]
    }

    /// Merges `changes` into an entity (PATCH) and records the request, in one durable transaction.
    @discardableResult
    public func update(
        set: String, key: [Value], changes: Properties, options: ChangeOptions = .init()
    ) async throws -> ChangeReceipt {
        try await apply([.update(set: set, key: key, changes: changes)], options: options)[0]
    }

    /// Replaces an entity (PUT) and records the request, in one durable transaction.
    @discardableResult
    public func replace(
        set: String, key: [Value], entity: Properties, options: ChangeOptions = .init()
    ) async throws -> ChangeReceipt {
        try await apply([.replace(set: set, key: key, entity: entity)], options: options)[0]
    }

    /// Deletes an entity and records the request, in one durable transaction.
    @discardableResult
    public func delete(set: String, key: [Value], options: ChangeOptions = .init()) async throws -> ChangeReceipt {
        try await apply([.delete(set: set, key: key)], options: options)[0]
    }

    /// Applies many changes in one transaction, in order: all of them and their requests, or —
    /// if any is refused — none. For bulk work.
    @discardableResult
    public func apply(_ changes: [Change], options: ChangeOptions = .init()) async throws -> [ChangeReceipt] {
        let (queue, optimize) = (requestQueue, entities.configuration.requestQueueOptimization)
        let (receipts, length) = try await entities.write { t in
            (try Self.apply(changes, options: options, queue: queue, optimize: optimize, t), try queue.length(t.reader))
        }
        metrics.queue(length)
        return receipts
    }

    /// Creates an entity and the related entities under it — a deep insert — and records their
    /// requests, in one durable transaction: all of them, readable and queryable at once, or
    /// none. Keys left out get local keys; each related entity's foreign key is set from its
    /// parent's key. The next flush sends them as one POST with the related entities inline, in
    /// both dialects, and maps the service's keys back onto every one; a change of any of them
    /// before that merges into its create. Returns a receipt per entity: the root's first, then
    /// depth first, navigation properties in name order.
    @discardableResult
    public func create(
        set: String, deep entity: NewEntity, options: ChangeOptions = .init()
    ) async throws
        -> [ChangeReceipt]
    {
        let body = deepCreate(set: set, entity, options: options)
        let (receipts, length) = try await entities.write { t in try body(t) }
        metrics.queue(length)
        return receipts
    }

    /// The write body of a deep insert: its receipts and the queue's length after it.
    private func deepCreate(
        set: String, _ entity: NewEntity, options: ChangeOptions
    ) -> @Sendable (WriteView) throws -> ([ChangeReceipt], Int) {
        let (queue, optimize) = (requestQueue, entities.configuration.requestQueueOptimization)
        return { t in
            let applied = try queue.applyDeep(set: set, entity, options: options, optimize: optimize, in: t)
            return (
                applied.map { ChangeReceipt(requestID: $0.requestID, entity: $0.entity) }, try queue.length(t.reader)
            )
        }
    }

    // MARK: Blocking

    @available(*, noasync, message: "use the async form from async code")
    @discardableResult
    public func create(
        set: String, deep entity: NewEntity, options: ChangeOptions = .init()
    ) throws
        -> [ChangeReceipt]
    {
        let (receipts, length) = try entities.write(deepCreate(set: set, entity, options: options))
        metrics.queue(length)
        return receipts
    }

    @available(*, noasync, message: "use the async form from async code")
    @discardableResult
    public func create(set: String, entity: Properties, options: ChangeOptions = .init()) throws -> ChangeReceipt {
        try apply([.create(set: set, entity: entity)], options: options)[0]
    }

    @available(*, noasync, message: "use the async form from async code")
    @discardableResult
    public func update(
        set: String, key: [Value], changes: Properties, options: ChangeOptions = .init()
    ) throws -> ChangeReceipt {
        try apply([.update(set: set, key: key, changes: changes)], options: options)[0]
    }

    @available(*, noasync, message: "use the async form from async code")
    @discardableResult
    public func replace(
        set: String, key: [Value], entity: Properties, options: ChangeOptions = .init()
    ) throws -> ChangeReceipt {
        try apply([.replace(set: set, key: key, entity: entity)], options: options)[0]
    }

    @available(*, noasync, message: "use the async form from async code")
    @discardableResult
    public func delete(set: String, key: [Value], options: ChangeOptions = .init()) throws -> ChangeReceipt {
        try apply([.delete(set: set, key: key)], options: options)[0]
    }

    @available(*, noasync, message: "use the async form from async code")
    @discardableResult
    public func apply(_ changes: [Change], options: ChangeOptions = .init()) throws -> [ChangeReceipt] {
        let (queue, optimize) = (requestQueue, entities.configuration.requestQueueOptimization)
        let (receipts, length) = try entities.write { t in
            (try Self.apply(changes, options: options, queue: queue, optimize: optimize, t), try queue.length(t.reader))
        }
        metrics.queue(length)
        return receipts
    }

    /// The one place local changes are applied: inside a write body, each change through the
    /// queue (entity, indexes, request — one transaction).
    private static func apply(
        _ changes: [Change], options: ChangeOptions, queue: RequestQueue, optimize: Bool,
        _ t: WriteView
    ) throws -> [ChangeReceipt] {
        try changes.map { c in
            let r = try queue.apply(c, options: options, optimize: optimize, in: t)
            return ChangeReceipt(requestID: r.requestID, entity: r.entity)
        }
    }

    // MARK: Undo

    /// Drops the pending changes of an entity and restores it as the service last sent it (an
    /// entity created locally disappears); requests that depend on a dropped create go too.
    /// Returns the ids of the requests dropped.
    @discardableResult
    public func undo(set: String, key: [Value]) throws -> [Int64] {
        let queue = requestQueue
        return try entities.write { t in try queue.undo(t, set: set, key: key) }
    }

    // MARK: ErrorArchive

    /// Resolves an ErrorArchive entry by giving up its change: the refused request and those that
    /// depend on it leave the queue and the archive, and their entities get the service's image
    /// back. Returns the ids of the requests dropped.
    @discardableResult
    public func resolveError(requestID: Int64) throws -> [Int64] {
        let queue = requestQueue
        return try entities.write { t in try queue.resolveError(t, id: requestID) }
    }

    /// Sends a refused request again, unchanged: the request the service refused (`requestID`,
    /// an ErrorArchive entry without `CausedBy`) and those archived because of it go back to
    /// pending and leave the ErrorArchive; the next flush sends them. For a refusal that may pass
    /// on a second try (a lock, a number range, a condition fixed on the service). To fix the
    /// data instead, change the entity: a create, update, replace or delete of an entity whose
    /// request is in error revives it the same way and collapses into it. Returns the ids revived.
    @discardableResult
    public func retryError(requestID: Int64) throws -> [Int64] {
        let queue = requestQueue
        return try entities.write { t in try queue.retryError(t, id: requestID) }
    }

    /// Resolves every ErrorArchive entry (see `resolveError(requestID:)`).
    @discardableResult
    public func resolveAllErrors() throws -> [Int64] {
        let queue = requestQueue
        return try entities.write { t in try queue.resolveAllErrors(t) }
    }

    /// Records a refusal of request `requestID` as flush does (for tests).
    @discardableResult
    package func archiveError(requestID: Int64, httpStatus: Int, message: String, code: String? = nil) throws -> [Int64]
    {
        let queue = requestQueue
        return try entities.write { t in
            try queue.archive(
                t, id: requestID, error: ServiceError(httpStatus: httpStatus, code: code, message: message))
        }
    }

    /// Number of pending requests in the queue.
    public func pendingRequestCount() throws -> Int {
        try count(set: SystemSets.requestQueue)
    }
}

extension OfflineStore {
    /// Reads an entity (or a PATCH body) of `set` from an OData JSON object, checking each
    /// property against the schema; `Nav@odata.bind` sets a foreign key from the bound entity's
    /// key (see `LocalBody`). Throws `JSONError` or `EntityError` naming the problem.
    public func properties(set: String, json: [UInt8]) throws -> Properties {
        try LocalBody(store: entities).properties(set: set, json: json)
    }

    /// The most entities one deep insert creates (`RequestQueue.maxDeepInsertEntities`).
    package static var maxDeepInsertEntities: Int { RequestQueue.maxDeepInsertEntities }

    /// The set a deep insert under `nav` of `set` creates in, and the constraint that relates the
    /// entities there to their parent (`RequestQueue.deepTarget`); throws when there is none.
    package static func deepInsertTarget(
        _ nav: NavigationProperty, of set: String, schema: Schema
    ) throws -> (set: String, constraints: [ReferentialConstraint]) {
        try RequestQueue.deepTarget(nav, of: set, schema: schema)
    }

    /// `child` with its foreign key to `parent` set by `constraints` (`RequestQueue.relate`).
    package static func relateInDeepInsert(
        _ child: Properties, to parent: Properties, by constraints: [ReferentialConstraint], under name: String,
        of set: String
    ) throws -> Properties {
        try RequestQueue.relate(child, to: parent, by: constraints, under: name, of: set)
    }

    /// Reads an entity to create, with the related entities it carries inline (a deep insert,
    /// for `create(set:deep:options:)`), from an OData JSON object: `"Items": [{…}, {…}]` (V2's
    /// `{"results": [...]}` too), one object for a single-valued navigation property.
    public func newEntity(set: String, json: [UInt8]) throws -> NewEntity {
        try LocalBody(store: entities).newEntity(set: set, json: json)
    }

    /// A PATCH body's changes and the links its binds add (`Tags@odata.bind` over a navigation
    /// without a referential constraint).
    package func changes(set: String, json: [UInt8]) throws -> (changes: Properties, links: [String: [[Value]]]) {
        try LocalBody(store: entities).changes(set: set, json: json)
    }
}

extension OfflineStore {
    /// Applies the service's acknowledgment of request `requestID` as flush will: the request
    /// leaves the queue, the entity takes `serverImage` (its key, computed properties) and a local
    /// key is replaced by the service's everywhere it is used (flush's settle, and tests).
    package func acknowledge(requestID: Int64, serverImage: Properties?) throws {
        let queue = requestQueue
        try entities.write { t in try queue.acknowledge(t, id: requestID, serverImage: serverImage) }
    }
}
