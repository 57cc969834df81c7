package import LMDB
package import Foundation
package import Query
import Served
import Storage
import Synchronization

/// The clock of a served store's repeatability records; tests set it instead of sleeping.
final class ServedClock: Sendable {
    // The closure is kept in a struct: a bare closure in the generic Mutex went through
    // `withLock`'s `inout` and came back wrapped in two more reabstraction thunks on every read,
    // so each read (one per served write) walked a chain as long as all the reads before it.
    private struct Box: Sendable { var read: @Sendable () -> Date }
    private let now = Mutex(Box(read: { Date() }))

    var read: @Sendable () -> Date {
        get { now.withLock { $0.read } }
        set { now.withLock { $0.read = newValue } }
    }
}

extension OfflineStore {
    /// Whether the store is an offline copy of a service — it has a service root or defining
    /// requests — rather than the authority for its data. The role decides what a served write
    /// does (`ServedTransaction`): an offline store queues it for flush, exactly as the Swift
    /// API's `create`/`update`/`delete` do; an authority store applies it directly and logs it for
    /// delta links.
    public var isOffline: Bool { SyncSettings.namesAService(entities.configuration.roles) }

    /// The time repeatability records are stamped with and expire by (`Date()` unless a test sets
    /// another clock).
    package var now: @Sendable () -> Date {
        get { servedClock.read }
        set { servedClock.read = newValue }
    }

    static func milliseconds(_ date: Date) -> Int64 {
        let ms = (date.timeIntervalSince1970 * 1000).rounded(.down)
        return ms.isFinite ? Int64(max(min(ms, 9.2e18), -9.2e18)) : 0
    }

    /// Runs `body` as ONE write transaction of a served store: group-committed with other writers,
    /// durable on return under `full` durability. In an authority store writes go straight to the
    /// entity sets and their indexes and each is recorded in the change log; in an offline store
    /// (`isOffline`) they go through the request queue. Either way, in this transaction.
    ///
    /// With a `repeatabilityID` (OData 4.01 `Repeatability-Request-ID`): if a record of it exists
    /// and is younger than the store's `repeatabilityWindowSeconds`, returns it with
    /// `replayed: true` without running `body` and without writing anything — or throws
    /// `ServedError.repeatMismatch` when its `fingerprint` (the caller's bytes for method, URL and
    /// body hash) differs. Otherwise runs `body` and, if it returns, records its response under
    /// the id in the same transaction. Only successful writes are recorded: a write refused (or
    /// failed) changed nothing, so repeating it runs it again. Each call without a replay also
    /// purges up to 16 records older than the window.
    ///
    /// If `body` throws, nothing at all is written (entities, change log, record). `body` may run
    /// more than once (the writer runs it again after growing the map), so it must act only
    /// through the transaction it is given and not keep it.
    ///
    /// ```swift
    /// let (response, replayed) = try await store.served(repeatabilityID: id, fingerprint: fp) { tx in
    ///     let (entity, etag) = try tx.create(set: "Products", entity: props)
    ///     return RecordedResponse(status: 201, headers: [("ETag", etag)], body: json(entity))
    /// }
    /// ```
    /// - Throws: `ServedError`, `EntityError`, what `body` throws, `LMDBError`.
    package func served(
        repeatabilityID: String?, fingerprint: [UInt8],
        body: @escaping @Sendable (ServedTransaction) throws -> RecordedResponse
    ) async throws -> (response: RecordedResponse, replayed: Bool) {
        return try await entities.write(
            try servedJob(ServedUnit(repeatabilityID: repeatabilityID, fingerprint: fingerprint, body: body)))
    }

    /// One write unit for `servedAll`: what `served` takes, and `settled`, called on the writer
    /// thread with the unit's outcome (its response and whether it was replayed, or its error)
    /// before the units after it run — so a later unit's body can see what an earlier one did. A
    /// unit may run (and settle) more than once, always after the units before it ran again.
    package struct ServedUnit: Sendable {
        package var repeatabilityID: String?
        package var fingerprint: [UInt8]
        package var body: @Sendable (ServedTransaction) throws -> RecordedResponse
        package var settled: @Sendable (Result<(response: RecordedResponse, replayed: Bool), Error>) -> Void = { _ in }

        package init(
            repeatabilityID: String?, fingerprint: [UInt8],
            body: @escaping @Sendable (ServedTransaction) throws -> RecordedResponse,
            settled: @escaping @Sendable (Result<(response: RecordedResponse, replayed: Bool), Error>) -> Void = { _ in
            }
        ) {
            self.repeatabilityID = repeatabilityID
            self.fingerprint = fingerprint
            self.body = body
            self.settled = settled
        }
    }

    /// `served` for several units in order, in ONE group commit: each unit in a nested
    /// transaction of its own (a unit that fails undoes only itself, as alone), and one fsync for
    /// all — a `$batch` of N write units costs one durable commit, not N. Each unit's outcome, in
    /// order; a failed commit fails them all (nothing of any was written).
    package func servedAll(
        _ units: [ServedUnit]
    ) async -> [Result<(response: RecordedResponse, replayed: Bool), Error>] {
        var jobs: [@Sendable (WriteView) throws -> (response: RecordedResponse, replayed: Bool)] = []
        for unit in units {
            do {
                jobs.append(try servedJob(unit))
            } catch {
                let settled = unit.settled
                jobs.append { _ in
                    settled(.failure(error))
                    throw error
                }
            }
        }
        return await entities.writeAll(jobs)
    }

    /// The write body of one served unit (see `served`).
    private func servedJob(
        _ unit: ServedUnit
    ) throws -> @Sendable (WriteView) throws -> (response: RecordedResponse, replayed: Bool) {
        let id: [UInt8]?
        do { id = try unit.repeatabilityID.map(RepeatRecords.validate) } catch {
            throw ServedError.badRepeatabilityID(error.description)
        }
        let store = entities
        let queue = isOffline ? requestQueue : nil
        let optimize = entities.configuration.requestQueueOptimization
        // Taken once, outside the body, so a body run again records the same time.
        let now = Self.milliseconds(self.now())
        let window = Int64(repeatabilityWindowSeconds) * 1000
        let cutoff = now.subtractingReportingOverflow(window).overflow ? Int64.min : now - window
        return { t in
            do {
                let repeats = RepeatRecords(store: store)
                if let id, let recorded = try repeats.get(t.reader, id: id), recorded.recordedAt >= cutoff {
                    guard recorded.fingerprint == unit.fingerprint else {
                        throw ServedError.repeatMismatch(id: unit.repeatabilityID ?? "")
                    }
                    unit.settled(.success((RecordedResponse(recorded), true)))
                    return (RecordedResponse(recorded), true)
                }
                try repeats.purge(t, before: cutoff)
                let state = _ServedState()
                let response = try unit.body(
                    ServedTransaction(t: t, store: store, state: state, queue: queue, optimize: optimize))
                if let failure = state.failure { throw failure }
                if let id { try repeats.put(t, id: id, response.record(at: now, fingerprint: unit.fingerprint)) }
                unit.settled(.success((response, false)))
                return (response, false)
            } catch {
                unit.settled(.failure(error))
                throw error
            }
        }
    }

    /// A fingerprint of a request for `served`: method, URL and a 64-bit FNV-1a hash of the body.
    package static func requestFingerprint(method: String, url: String, body: [UInt8]) -> [UInt8] {
        let hash = body.withUnsafeBytes { EntityTag.hash($0) }
        return Array("\(method) \(url) \(String(hash, radix: 16)) \(body.count)".utf8)
    }

    /// The change log's position now (0 when empty): a delta token. Read in its own read
    /// transaction. Read it before the query whose delta link it goes into: a write between the
    /// two is then reported again by the next delta, never missed.
    package func changeToken() throws -> UInt64 {
        let store = entities
        return try store.read { t in try changeToken(t) }
    }

    /// `changeToken()` inside a read transaction the caller has.
    package func changeToken(_ t: ReadView) throws -> UInt64 {
        try ChangeLog(store: entities).last(t)
    }

    /// How many repeatability records the served store keeps: one per successful repeatable write
    /// (or write unit of a `$batch`) still in the window. `crashtest` counts applications with it.
    package func repeatRecordCount() throws -> Int {
        let store = entities
        return try store.read { t in try t.count(store.repeatRecords) }
    }

    /// The entities of `set` changed after `token` — each once, in its newest state (changed, or
    /// deleted), in the order of their last change — and the newest position (the next token).
    ///
    /// - Throws: `ChangeTokenError` when `token` is ahead of the log (not from this store);
    ///   `EntityError.unknownEntitySet`.
    package func changes(
        set: String, since token: UInt64
    ) throws -> (changed: [(key: [Value], deleted: Bool)], token: UInt64) {
        let store = entities
        return try store.read { t in try changes(t, set: set, since: token) }
    }

    /// `changes(set:since:)` inside a read transaction the caller has.
    package func changes(
        _ t: ReadView, set name: String, since token: UInt64
    ) throws -> (changed: [(key: [Value], deleted: Bool)], token: UInt64) {
        let set = try entities.set(name)
        let (entries, newest) = try ChangeLog(store: entities).entries(t, set: name, since: token)
        let changed = try entries.map { e -> (key: [Value], deleted: Bool) in
            let values = try e.keyBytes.withUnsafeBytes { try KeyCodec.decode($0, count: set.type.key.count).values }
            return (values, e.kind == .delete)
        }
        return (changed, newest)
    }

    /// The entities of `sets` changed after `token`, each once in the order of its last change
    /// (changed or deleted: the snapshot tells), for a delta response of a request with `$expand`
    /// (`QueryEngine.delta(_:page:options:writeBytes:)`), or one page of them.
    ///
    /// A delta read in pages has one upper bound, `bound`: the log's newest number when its first
    /// page was read (nil: now, which the first page passes; returned as `bound`). Each page is
    /// the next at most `limit` changes above `resumingAfter` (the last sequence number of the
    /// page before; nil: `token`) and at most `bound`, `more` telling whether any are left, `last`
    /// the sequence number of the page's last change. The whole delta's link is `bound`.
    ///
    /// An entity changed again after the first page was read has its one log entry moved above
    /// `bound` (the log keeps only an entity's newest entry): no later page of this delta has it,
    /// and the next delta, from `bound`, does. An entity a page sent that changes again is sent
    /// again by the next delta. So nothing changed after `token` is missed by the pages and the
    /// delta after them, though an entity may come twice, the newer last.
    ///
    /// - Throws: `ChangeTokenError` when `token` or `bound` is ahead of the log (not from this
    ///   store); `EntityError.unknownEntitySet`.
    package func changes(
        _ t: ReadView, sets names: [String], since token: UInt64, resumingAfter: UInt64? = nil,
        bound: UInt64? = nil, limit: Int? = nil
    ) throws -> (changes: [QueryEngine.DeltaChange], bound: UInt64, last: UInt64?, more: Bool) {
        var handles: [String: EntitySetHandle] = [:]
        for name in names { handles[name] = try entities.set(name) }
        let log = ChangeLog(store: entities)
        let newest = try log.last(t)
        guard token <= newest else { throw ChangeTokenError(token: token, newest: newest) }
        let upper = bound ?? newest
        let (entries, more) = try log.entries(
            t, sets: Set(names), after: resumingAfter ?? token, through: upper, limit: limit)
        let changes = try entries.compactMap { e -> QueryEngine.DeltaChange? in
            guard let set = handles[e.set] else { return nil }
            let values = try e.keyBytes.withUnsafeBytes { try KeyCodec.decode($0, count: set.type.key.count).values }
            return QueryEngine.DeltaChange(set: e.set, key: values)
        }
        return (changes, upper, entries.last?.sequence, more)
    }
}
