import LMDB
import Query
import Queue
import Storage

/// Options of a local change: custom tag, headers, transaction id, upload category, non-mergeable.
public typealias ChangeOptions = Queue.ChangeOptions

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
    public func create(set: String, entity: Properties, options: ChangeOptions = .init()) async throws -> ChangeReceipt {
        try await apply([.create(set: set, entity: entity)], options: options)[0]
    }

    /// Merges `changes` into an entity (PATCH) and records the request, in one durable transaction.
    @discardableResult
    public func update(set: String, key: [Value], changes: Properties, options: ChangeOptions = .init()) async throws -> ChangeReceipt {
        try await apply([.update(set: set, key: key, changes: changes)], options: options)[0]
    }

    /// Replaces an entity (PUT) and records the request, in one durable transaction.
    @discardableResult
    public func replace(set: String, key: [Value], entity: Properties, options: ChangeOptions = .init()) async throws -> ChangeReceipt {
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
        let (queue, optimize) = (requestQueue, configuration.requestQueueOptimization)
        return try await entities.write { t in try Self.apply(changes, options: options, queue: queue, optimize: optimize, t) }
    }

    // MARK: Blocking

    @available(*, noasync, message: "use the async form from async code")
    @discardableResult
    public func create(set: String, entity: Properties, options: ChangeOptions = .init()) throws -> ChangeReceipt {
        try apply([.create(set: set, entity: entity)], options: options)[0]
    }

    @available(*, noasync, message: "use the async form from async code")
    @discardableResult
    public func update(set: String, key: [Value], changes: Properties, options: ChangeOptions = .init()) throws -> ChangeReceipt {
        try apply([.update(set: set, key: key, changes: changes)], options: options)[0]
    }

    @available(*, noasync, message: "use the async form from async code")
    @discardableResult
    public func replace(set: String, key: [Value], entity: Properties, options: ChangeOptions = .init()) throws -> ChangeReceipt {
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
        let (queue, optimize) = (requestQueue, configuration.requestQueueOptimization)
        return try entities.write { t in try Self.apply(changes, options: options, queue: queue, optimize: optimize, t) }
    }

    /// The one place local changes are applied: inside a write body, each change through the
    /// queue (entity, indexes, request — one transaction).
    private static func apply(_ changes: [Change], options: ChangeOptions, queue: RequestQueue, optimize: Bool,
                              _ t: WriteView) throws -> [ChangeReceipt] {
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

    /// Resolves every ErrorArchive entry (see `resolveError(requestID:)`).
    @discardableResult
    public func resolveAllErrors() throws -> [Int64] {
        let queue = requestQueue
        return try entities.write { t in try queue.resolveAllErrors(t) }
    }

    /// Records a refusal of request `requestID` as flush would (for tests, until flush exists).
    @discardableResult
    package func archiveError(requestID: Int64, httpStatus: Int, message: String, code: String? = nil) throws -> [Int64] {
        let queue = requestQueue
        return try entities.write { t in
            try queue.archive(t, id: requestID, error: ServiceError(httpStatus: httpStatus, code: code, message: message))
        }
    }

    /// Number of pending requests in the queue.
    public func pendingRequestCount() throws -> Int {
        try count(set: SystemSets.requestQueue)
    }
}

extension OfflineStore {
    /// Reads an entity (or a PATCH body) of `set` from an OData JSON object, checking each
    /// property against the schema. Throws `JSONError` or `EntityError` naming the problem.
    ///
    /// `Nav@odata.bind` (OData JSON 4.01 §8.5) on a single-valued navigation property with a
    /// referential constraint sets the foreign key from the bound entity's key; the entity must
    /// exist. Anything else that would relate entities — a bind of a collection-valued or
    /// unconstrained navigation property, or a navigation property with inline content (deep
    /// insert, deep update) — is refused rather than dropped.
    public func properties(set: String, json: [UInt8]) throws -> Properties {
        let h = try entities.set(set)
        let navigation = h.type.navigationProperties
        let document = try JSON.parse(json)
        var out = try ValueJSON(schema: schema).properties(from: document, properties: h.type.properties,
                                                           navigation: Set(navigation.map(\.name)), owner: set)
        guard case .object(let members) = document else { return out }
        for (name, value) in members {
            if let nav = navigation.first(where: { $0.name == name }) {
                throw EntityError.badInput("'\(name)' of \(set): inline related entities (deep insert or update) are not supported; "
                                           + "create or change them with their own requests (a $batch change set keeps them atomic), "
                                           + "or link an existing one with \(nav.name)@odata.bind")
            }
            guard name.hasSuffix("@odata.bind") else { continue }
            let navName = String(name.dropLast("@odata.bind".count))
            guard let nav = navigation.first(where: { $0.name == navName }) else {
                throw EntityError.unknownProperty(set: set, property: navName)
            }
            try bind(nav, value, of: set, into: &out)
        }
        return out
    }

    /// Sets the foreign key of `nav` (single-valued, constrained) in `entity` from the key of the
    /// entity that `value` (`"Set(key)"`, relative or absolute, or null) names.
    func bind(_ nav: NavigationProperty, _ value: JSON, of set: String, into entity: inout Properties) throws {
        let label = "\(nav.name)@odata.bind of \(set)"
        guard !nav.isCollection, !nav.dependentConstraints.isEmpty else {
            throw EntityError.badInput("\(label): binding \(nav.isCollection ? "a collection-valued" : "this") navigation property is not supported "
                                       + "(only a single-valued one whose foreign key is on \(set)); change the related entities' own foreign keys")
        }
        var values: [String: Value] = [:]
        switch value {
        case .null:
            guard nav.nullable else { throw EntityError.badInput("\(label): null, but \(nav.name) is not nullable") }
            for c in nav.dependentConstraints { values[c.property] = .null }
        case .string(let url):
            // "Set(key)", "/Set(key)" or "http://host/root/Set(key)": the last segment before the key.
            let paren = url.firstIndex(of: "(") ?? url.endIndex
            let start = url[..<paren].lastIndex(of: "/").map { url.index(after: $0) } ?? url.startIndex
            let target: (set: String, key: [Value])
            do { target = try parseEntityPath(String(url[start...])) } catch {
                throw EntityError.badInput("\(label): '\(url)' does not name an entity (Set(key)): \(error)")
            }
            guard let type = schema.entityType(ofSet: target.set), type.qualifiedName == nav.targetType else {
                throw EntityError.badInput("\(label): '\(url)' is an entity of \(target.set), not of \(nav.targetType)")
            }
            guard try get(set: target.set, key: target.key) != nil else {
                throw EntityError.badInput("\(label): \(url) does not exist")
            }
            for c in nav.dependentConstraints {
                guard let i = type.key.firstIndex(of: c.referencedProperty) else {
                    throw EntityError.badInput("\(label): the constraint refers to \(c.referencedProperty), which is not a key property of \(target.set)")
                }
                values[c.property] = target.key[i]
            }
        default:
            throw EntityError.badInput("\(label): expected an entity URL (a string) or null, got \(value.text)")
        }
        for (property, v) in values {
            if let given = entity[property], given != v {
                throw EntityError.badInput("\(label) sets \(property) to \(v), but the body gives \(given)")
            }
            entity[property] = v
        }
    }
}

extension OfflineStore {
    /// Applies the service's acknowledgment of request `requestID` as flush will: the request
    /// leaves the queue, the entity takes `serverImage` (its key, computed properties) and a local
    /// key is replaced by the service's everywhere it is used. Package API until flush exists.
    package func acknowledge(requestID: Int64, serverImage: Properties?) throws {
        let queue = requestQueue
        try entities.write { t in try queue.acknowledge(t, id: requestID, serverImage: serverImage) }
    }
}
