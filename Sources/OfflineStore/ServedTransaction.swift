import LMDB
import Queue
import Served
package import Storage

/// The answer a served write gave, recorded under its `Repeatability-Request-ID` and replayed when
/// the same request comes again.
package struct RecordedResponse: Sendable, Equatable {
    package var status: Int
    /// Header names and values, in order (a name may repeat).
    package var headers: [(String, String)]
    package var body: [UInt8]

    package init(status: Int, headers: [(String, String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    package static func == (a: RecordedResponse, b: RecordedResponse) -> Bool {
        a.status == b.status && a.body == b.body && a.headers.count == b.headers.count
            && zip(a.headers, b.headers).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    }

    init(_ record: RepeatRecord) {
        self.init(status: record.status, headers: record.headers.map { ($0.name, $0.value) }, body: record.body)
    }

    func record(at time: Int64, fingerprint: [UInt8]) -> RepeatRecord {
        RepeatRecord(
            status: status, headers: headers.map { .init(name: $0.0, value: $0.1) }, body: body,
            recordedAt: time, fingerprint: fingerprint)
    }
}

/// A served write the store refuses; nothing was changed. Schema violations and bad keys are
/// `EntityError`s (400).
package enum ServedError: Error, Equatable, CustomStringConvertible {
    /// 404: no entity with that key.
    case notFound(set: String, key: String)
    /// 409: a create (POST) of a key that exists.
    case alreadyExists(set: String, key: String)
    /// 412: `If-Match` did not match the entity's ETag.
    case preconditionFailed(set: String, key: String)
    /// 422: a `Repeatability-Request-ID` already used for a different request.
    case repeatMismatch(id: String)
    /// 400: a `Repeatability-Request-ID` that is empty or longer than 200 bytes; the text says which.
    case badRepeatabilityID(String)

    /// The HTTP status a server answers with.
    package var httpStatus: Int {
        switch self {
        case .notFound: 404
        case .alreadyExists: 409
        case .preconditionFailed: 412
        case .repeatMismatch: 422
        case .badRepeatabilityID: 400
        }
    }

    package var description: String {
        switch self {
        case .notFound(let s, let k): "entity \(s)(\(_excerpt(k))) does not exist"
        case .alreadyExists(let s, let k): "entity \(s)(\(_excerpt(k))) already exists"
        case .preconditionFailed(let s, let k):
            "entity \(s)(\(_excerpt(k))) has changed: its ETag does not match If-Match"
        case .repeatMismatch(let id):
            "Repeatability-Request-ID '\(_excerpt(id))' was already used for a different request"
        case .badRepeatabilityID(let why): why
        }
    }
}

/// What a served transaction learns besides its results: the first error that may have left a
/// write half done.
final class _ServedState: @unchecked Sendable {
    // @unchecked: used only on the writer thread, inside one write body.
    var failure: Error?
}

/// One write transaction of a served store. Valid only inside `OfflineStore.served(...)`'s body
/// (debug builds trap on use after it: it wraps the transaction's `WriteView`).
///
/// The store's role decides what a write does. In an **authority** store (no service behind it)
/// each write applies the entity and its indexes directly and records the entity in the change
/// log. In an **offline** store (`OfflineStore.isOffline`: it has a service to sync with) each
/// write goes through the request queue exactly as the Swift API's `create`/`update`/… do — same
/// validation, collapse, local keys — and the next flush sends it; the change log is not written
/// (refresh changes entities too, so it could not serve deltas). Either way it is this
/// transaction: all of a unit's writes, or none.
///
/// A refusal — `ServedError`, or `EntityError` for input the schema refuses — of an authority
/// write comes before anything is written, so the body may catch it and go on. Any other error
/// (LMDB's), and any error of an offline write (the queue writes the entity before it records the
/// request), may leave a write half done: `served` then throws it even if the body returns, so
/// nothing is committed.
package struct ServedTransaction {
    let t: WriteView
    let store: EntityStore
    let state: _ServedState
    /// The request queue writes go through: an offline store's; nil for an authority store.
    let queue: RequestQueue?
    /// Request-queue optimization (collapse) of an offline store's configuration.
    let optimize: Bool

    /// Whether writes go through the request queue (an offline store).
    package var queued: Bool { queue != nil }

    /// The handle of a set served writes may change (not one of the store's own sets).
    private func handle(_ name: String) throws -> EntitySetHandle {
        let set = try store.set(name)
        guard !store.schema.isSystemSet(name) else {
            throw EntityError.badInput("'\(name)' is one of the store's own sets; it cannot be changed directly")
        }
        return set
    }

    /// Runs `body`; an error that is not a refusal marks the transaction failed.
    private func guarded<R>(_ body: () throws -> R) throws -> R {
        do {
            return try body()
        } catch let e as ServedError {
            throw e
        } catch let e as EntityError {
            throw e
        } catch {
            if state.failure == nil { state.failure = error }
            throw error
        }
    }

    /// Runs `body`, which writes: any error it throws marks the transaction failed.
    func writing<R>(_ body: () throws -> R) throws -> R {
        do {
            return try body()
        } catch {
            if state.failure == nil { state.failure = error }
            throw error
        }
    }

    /// The key tuple of `key`, refused (before anything is written) when the change log cannot
    /// hold it.
    private func keyBytes(_ set: EntitySetHandle, _ key: [Value]) throws -> [UInt8] {
        let bytes = try set.encodeKey(key)
        _ = try ChangeLog.entityKey(set: set.name, keyBytes: bytes)
        return bytes
    }

    /// The entity stored under `keyBytes` and its ETag, both from the row's bytes.
    private func current(_ set: EntitySetHandle, _ keyBytes: [UInt8]) throws -> (entity: Properties, etag: String)? {
        guard let row = try t.get(set.entities, keyBytes) else { return nil }
        do {
            return (try set.codec.decode(row), EntityTag.of(row: row))
        } catch {
            throw EntityError.corruptRow(set: set.name, key: set.describeKeyBytes(keyBytes), reason: error.description)
        }
    }

    /// The entity just written under `keyBytes` and its ETag.
    private func stored(_ set: EntitySetHandle, _ keyBytes: [UInt8]) throws -> (entity: Properties, etag: String) {
        guard let c = try current(set, keyBytes) else {
            // not reached: it was just written
            throw EntityError.notFound(set: set.name, key: set.describeKeyBytes(keyBytes))
        }
        return c
    }

    /// Refuses the write unless the entity exists and `ifMatch` (if given) matches its ETag.
    private func existing(_ set: EntitySetHandle, key: [Value], _ keyBytes: [UInt8], ifMatch: String?) throws {
        guard let row = try t.get(set.entities, keyBytes) else {
            throw ServedError.notFound(set: set.name, key: set.describeKey(key))
        }
        if let ifMatch, !EntityTag.header(ifMatch, matches: EntityTag.of(row: row)) {
            throw ServedError.preconditionFailed(set: set.name, key: set.describeKey(key))
        }
    }

    private func log(_ set: EntitySetHandle, _ keyBytes: [UInt8], _ kind: ChangeLog.Kind) throws {
        _ = try writing { try ChangeLog(store: store).record(t, set: set.name, keyBytes: keyBytes, kind: kind) }
    }

    /// Inserts an entity (schema-validated; `EntityError` for bad input); `ServedError.alreadyExists`
    /// if the key is taken. Returns the entity as stored and its ETag. In an offline store the
    /// create is queued with `options`; key properties left out get local keys (`LocalKeys`).
    package func create(
        set name: String, entity: Properties, options: ChangeOptions = .init()
    ) throws -> (entity: Properties, etag: String) {
        if let queue { return try queuedCreate(queue, set: name, entity: entity, options: options) }
        return try guarded {
            let set = try handle(name)
            let key = try set.keyValues(entity)
            let keyBytes = try keyBytes(set, key)
            if try t.get(set.entities, keyBytes) != nil {
                throw ServedError.alreadyExists(set: name, key: set.describeKey(key))
            }
            try set.insert(t, entity)
            try log(set, keyBytes, .upsert)
            return try stored(set, keyBytes)
        }
    }

    /// Creates a media entity with `bytes` (a stream file written and not yet committed) as its
    /// media resource: in an authority, `entity` (its key given or assigned by the caller) and
    /// the stream's record, its media ETag made from the bytes' SHA-256; in an offline store,
    /// queued as `OfflineStore.createMedia` is. Returns the entity as stored and its ETag.
    package func createMedia(
        set name: String, entity: Properties, bytes: StreamRecord, slug: String?, options: ChangeOptions = .init()
    ) throws -> (entity: Properties, etag: String) {
        if let queue {
            return try writing {
                let created = try queue.createMedia(
                    t, set: name, entity: entity, bytes: bytes, slug: slug, options: options)
                let set = try handle(name)
                return try stored(set, try set.encodeKey(try set.keyValues(created.entity)))
            }
        }
        return try guarded {
            let set = try handle(name)
            guard set.type.hasStream, let streams = store.streams else {
                throw EntityError.badInput("\(name) is not a set of media entities (its type has no HasStream)")
            }
            let key = try set.keyValues(entity)
            let keyBytes = try keyBytes(set, key)
            if try t.get(set.entities, keyBytes) != nil {
                throw ServedError.alreadyExists(set: name, key: set.describeKey(key))
            }
            try writing {
                try set.insert(t, entity)
                var record = bytes
                record.mediaETag = "\"" + (bytes.sha256 ?? "").prefix(32) + "\""
                try streams.put(t, entityKey: set.entityKey(keyBytes), name: "", record)
            }
            try log(set, keyBytes, .upsert)
            return try stored(set, keyBytes)
        }
    }

    /// PATCH: merges `changes` (a null removes a value). `ifMatch` is the raw `If-Match` header
    /// value (nil: none), checked with `EntityTag.header(_:matches:)`. `ServedError.notFound` when
    /// the entity does not exist (whatever `ifMatch` says), `.preconditionFailed` when the tag
    /// does not match.
    package func update(
        set name: String, key: [Value], changes: Properties, ifMatch: String?, options: ChangeOptions = .init()
    ) throws -> (entity: Properties, etag: String) {
        if let queue {
            return try queuedChange(
                queue, .update(set: name, key: key, changes: changes), ifMatch: ifMatch, options: options)!
        }
        return try guarded {
            let set = try handle(name)
            let keyBytes = try keyBytes(set, key)
            try existing(set, key: key, keyBytes, ifMatch: ifMatch)
            try set.merge(t, key: key, changes)
            try log(set, keyBytes, .upsert)
            return try stored(set, keyBytes)
        }
    }

    /// PUT: replaces the entity; properties left out become null (as the local replace does).
    /// Errors as `update`.
    package func replace(
        set name: String, key: [Value], entity: Properties, ifMatch: String?, options: ChangeOptions = .init()
    ) throws -> (entity: Properties, etag: String) {
        if let queue {
            return try queuedChange(
                queue, .replace(set: name, key: key, entity: entity), ifMatch: ifMatch, options: options)!
        }
        return try guarded {
            let set = try handle(name)
            let keyBytes = try keyBytes(set, key)
            try existing(set, key: key, keyBytes, ifMatch: ifMatch)
            try set.replace(t, key: key, entity)
            try log(set, keyBytes, .upsert)
            return try stored(set, keyBytes)
        }
    }

    /// Deletes the entity. Errors as `update`.
    package func delete(set name: String, key: [Value], ifMatch: String?, options: ChangeOptions = .init()) throws {
        if let queue {
            _ = try queuedChange(queue, .delete(set: name, key: key), ifMatch: ifMatch, options: options)
            return
        }
        try guarded {
            let set = try handle(name)
            let keyBytes = try keyBytes(set, key)
            try existing(set, key: key, keyBytes, ifMatch: ifMatch)
            try set.delete(t, key: key)
            try log(set, keyBytes, .delete)
        }
    }

    // MARK: An offline store's writes: through the request queue

    /// A create through the queue: 409 when the client gave the whole key and it is taken.
    private func queuedCreate(
        _ queue: RequestQueue, set name: String, entity: Properties, options: ChangeOptions
    ) throws -> (entity: Properties, etag: String) {
        try writing {
            let set = try handle(name)
            let type = set.type
            if type.key.allSatisfy({ !(entity[$0]?.isNull ?? true) }) {
                let key = try set.keyValues(entity)
                if try t.get(set.entities, try set.encodeKey(key)) != nil {
                    throw ServedError.alreadyExists(set: name, key: set.describeKey(key))
                }
            }
            let applied = try queue.apply(
                .create(set: name, entity: entity), options: options, optimize: optimize, in: t)
            guard let created = applied.entity else {
                throw EntityError.badInput("the create of an entity of \(name) left no entity")  // not reached
            }
            return try stored(set, try set.encodeKey(try set.keyValues(created)))
        }
    }

    /// A deep insert through an offline store's queue (`RequestQueue.applyDeep`): the entity and
    /// those under it, created and queued as one POST for flush. Returns each as stored with its
    /// ETag, in `applyDeep`'s order (the root first, then depth first, navigation properties in
    /// name order). Only for an offline store (`queued`).
    package func queuedCreateDeep(
        set name: String, entity: NewEntity, options: ChangeOptions = .init()
    ) throws -> [(entity: Properties, etag: String)] {
        guard let queue else { throw EntityError.badInput("this store has no request queue") }
        return try writing {
            let applied = try queue.applyDeep(set: name, entity, options: options, optimize: optimize, in: t)
            var out: [(entity: Properties, etag: String)] = []
            var sets: [String] = []
            func walk(_ set: String, _ e: NewEntity) throws {
                sets.append(set)
                let type = try store.set(set).type
                for nav in e.related.keys.sorted() {
                    guard let n = type.navigationProperties.first(where: { $0.name == nav }) else { continue }
                    let target = try RequestQueue.deepTarget(n, of: set, schema: store.schema).set
                    for child in e.related[nav] ?? [] { try walk(target, child) }
                }
            }
            try walk(name, entity)
            for (set, a) in zip(sets, applied) {
                guard let created = a.entity else { continue }
                let h = try handle(set)
                out.append(try stored(h, try h.encodeKey(try h.keyValues(created))))
            }
            return out
        }
    }

    /// An update, replace or delete through the queue, after the checks an authority write makes
    /// (the entity exists; `ifMatch` matches the ETag of its local image). Returns the entity as
    /// stored and its ETag; nil after a delete.
    private func queuedChange(
        _ queue: RequestQueue, _ change: LocalChange, ifMatch: String?, options: ChangeOptions
    ) throws -> (entity: Properties, etag: String)? {
        try writing {
            let (name, key): (String, [Value])
            switch change {
            case .update(let s, let k, _), .replace(let s, let k, _), .delete(let s, let k): (name, key) = (s, k)
            case .create: throw EntityError.badInput("a create is not a change of an entity")  // not reached
            }
            let set = try handle(name)
            let keyBytes = try set.encodeKey(key)
            try existing(set, key: key, keyBytes, ifMatch: ifMatch)
            let applied = try queue.apply(change, options: options, optimize: optimize, in: t)
            return applied.entity == nil ? nil : try stored(set, keyBytes)
        }
    }

    /// Resolves an ErrorArchive entry (`DELETE ErrorArchive(id)` on an offline store): the refused
    /// request and those that depend on it leave the queue, and their entities get the service's
    /// image back (`OfflineStore.resolveError`). `EntityError.notFound` when there is no such entry.
    package func resolveError(requestID: Int64) throws {
        guard let queue else {
            throw EntityError.badInput("this store has no request queue to resolve errors of")
        }
        _ = try writing { try queue.resolveError(t, id: requestID) }
    }

    /// Sends an ErrorArchive entry's request again (`POST ErrorArchive(id)/OfflineOData.Retry` on
    /// an offline store): it and those archived because of it go back to pending
    /// (`OfflineStore.retryError`). `EntityError.notFound` when there is no such entry.
    package func retryError(requestID: Int64) throws {
        guard let queue else {
            throw EntityError.badInput("this store has no request queue to retry errors of")
        }
        _ = try writing { try queue.retryError(t, id: requestID) }
    }

    /// Queues a call of action `operation` (an offline store's `serve` taking a client's call):
    /// as `OfflineStore.call`, in this transaction. Returns the request's id. An authority has
    /// no business logic to run it: `EntityError.badInput`.
    package func call(
        _ operation: ServiceOperation, set: String?, key: [Value]?, parameters: Properties,
        options: ChangeOptions = .init()
    ) throws -> Int64 {
        guard let queue else {
            throw EntityError.badInput(
                "this store is an authority: it runs no business logic, so \(operation.name) is not executed here")
        }
        return try writing {
            try queue.call(t, operation: operation, set: set, key: key, parameters: parameters, options: options)
        }
    }

    /// The current entity and its ETag, read inside this transaction (it sees this
    /// transaction's writes): for `$1` references and `If-None-Match`.
    package func get(set name: String, key: [Value]) throws -> (entity: Properties, etag: String)? {
        try guarded {
            let set = try store.set(name)
            return try current(set, try set.encodeKey(key))
        }
    }
}
