import Foundation
import Queue
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
    public func load(set: String, json bytes: [UInt8], progress: (@Sendable (_ written: Int, _ total: Int) -> Void)? = nil) throws -> Int {
        let items = try Self.entityObjects(bytes)
        var rows: [(set: String, entity: Properties)] = []
        for (n, item) in items.enumerated() {
            do {
                try collect(item, set: set, into: &rows)
            } catch let e as EntityError {
                throw EntityError.badInput("entity \(n + 1) of the input: \(e)")
            }
        }
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
    package func load(rows: [(set: String, entity: Properties)],
                      progress: (@Sendable (_ written: Int, _ total: Int) -> Void)? = nil) throws -> Int {
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
                    let h = try handles[row.set] ?? store.set(row.set)
                    handles[row.set] = h
                    do {
                        try h.upsert(t, row.entity)
                    } catch let e as EntityError {
                        let key = (try? h.keyValues(row.entity)).map(h.describeKey) ?? "?"
                        throw EntityError.badInput("\(row.set)(\(key)): \(e)")
                    }
                }
                report(rows.count, rows.count)
                return rows.count
            }
        }
    }

    /// The entity objects of a payload in any of the accepted shapes.
    static func entityObjects(_ bytes: [UInt8]) throws -> [JSON] {
        let doc: JSON
        do {
            doc = try JSON.parse(bytes)
        } catch let first {
            // Not one document: maybe JSON lines, one object per line.
            var items: [JSON] = []
            var lineNumber = 0
            for line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
                lineNumber += 1
                if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
                do {
                    items.append(try JSON.parse(Array(line)))
                } catch {
                    if lineNumber == 1 || items.isEmpty { throw first }
                    throw JSONError(message: error.message, offset: error.offset, line: lineNumber, column: error.column)
                }
            }
            if items.count < 2 { throw first }
            return items
        }
        if case .array(let a)? = doc["value"] { return a }
        if let d = doc["d"] {
            if case .array(let a)? = d["results"] { return a }
            if case .array(let a) = d { return a }
            if case .object = d { return [d] }
        }
        if case .array(let a) = doc { return a }
        if case .object = doc { return [doc] }
        throw EntityError.badInput("expected {\"value\":[…]}, {\"d\":{\"results\":[…]}}, an entity object or JSON lines")
    }

    /// Converts one entity object, and recursively its expanded navigation properties (into
    /// their own sets; `PayloadReader`, which refresh uses too).
    func collect(_ json: JSON, set: String, into rows: inout [(set: String, entity: Properties)]) throws {
        var out: [ServerRow] = []
        try PayloadReader(schema: schema).collect(json, set: set, into: &out)
        rows += out.map { (set: $0.set, entity: $0.entity) }
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
