import Foundation
import Queue
package import Sync
import Storage
import Synchronization

extension OfflineStore {
    /// Imports server data into `set` from OData JSON (`{"value":[…]}`, V2's `{"d":{"results":[…]}}`,
    /// one entity object) or JSON lines. Expanded navigation properties go to their own sets, with
    /// their foreign keys filled from the parent. All or nothing: one transaction, nothing queued.
    ///
    /// - Returns: how many entities were written, across all sets.
    /// - Throws: `JSONError` for bad JSON (with its line), `EntityError` naming the entity and property.
    @discardableResult
    public func load(
        set: String, json bytes: [UInt8], progress: (@Sendable (_ written: Int, _ total: Int) -> Void)? = nil
    ) throws -> Int {
        let reader = PayloadReader(schema: schema, shapes: entities.entityShapes)
        var rows: [ServerRow] = []
        let stream = EntityObjectStream(bytes: bytes)
        try stream.forEach { object in try EntityLoader.collect(object, set: set, reader: reader, into: &rows) }
        return try load(rows: rows, progress: progress)
    }

    /// Upserts `rows`, each into its own set, in one group-committed transaction: all or nothing,
    /// nothing queued. The one write path of both `load`s and of `Samples`' `generate`.
    ///
    /// The writer may run the body more than once (it re-runs a batch after the map grows), so
    /// the body takes its entity-set handles from the store itself, and `progress` only moves
    /// forward: a count already reported is not reported again.
    ///
    /// - Parameter progress: called on the writer thread with (entities written, total) every
    ///   10,000 entities and once at the end.
    /// - Throws: `EntityError.badInput` naming the set and key of the entity refused.
    @discardableResult
    package func load(
        rows: [(set: String, entity: Properties)],
        progress: (@Sendable (_ written: Int, _ total: Int) -> Void)? = nil
    ) throws -> Int {
        try load(
            rows: rows.map { ServerRow(set: $0.set, entity: $0.entity, etag: nil, partial: false) }, progress: progress)
    }

    /// `load(rows:)` of rows as the payload reader made them, with what they say of their streams.
    package func load(
        rows: [ServerRow],
        progress: (@Sendable (_ written: Int, _ total: Int) -> Void)? = nil
    ) throws -> Int {
        let store = entities
        let sets = Set(rows.map(\.set)).sorted().joined(separator: ", ")
        return try lifecycle.during(.populating, detail: sets) { lifecycleProgress in
            let report = ForwardProgress { written, total in
                lifecycleProgress(LifecycleEvent(state: .populating, entities: written, detail: sets))
                progress?(written, total)
            }
            return try store.write { t in
                var handles: [String: EntitySetHandle] = [:]
                for (n, row) in rows.enumerated() {
                    if n % 10_000 == 0 { report(n, rows.count) }
                    try EntityLoader.upsert(row, t, store: store, handles: &handles)
                }
                report(rows.count, rows.count)
                return rows.count
            }
        }
    }
}

/// A progress callback that only moves forward: a count at or below one already reported is
/// dropped, so a write body that runs again does not report the same counts twice.
/// `Sendable`: the callback is, and the last count sits behind a mutex.
private final class ForwardProgress: Sendable {
    private let report: @Sendable (_ written: Int, _ total: Int) -> Void
    private let reported = Mutex(-1)

    init(_ report: @escaping @Sendable (_ written: Int, _ total: Int) -> Void) { self.report = report }

    func callAsFunction(_ written: Int, _ total: Int) {
        let forward = reported.withLock { last in
            guard written > last else { return false }
            last = written
            return true
        }
        if forward { report(written, total) }
    }
}
