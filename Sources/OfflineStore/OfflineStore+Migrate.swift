import Foundation
import Query
import Storage
import Sync

/// What `OfflineStore.migrate(at:metadata:dryRun:)` did (or, dry, would do).
public struct MigrationReport: Sendable, CustomStringConvertible {
    /// The document was the store's already: nothing was written.
    public var unchanged: Bool
    public var addedSets: [String]
    public var droppedSets: [String]
    /// `Set.Property` of each property added, dropped, and retyped (`Set.Property: Old → New`).
    public var addedProperties: [String]
    public var droppedProperties: [String]
    public var retypedProperties: [String]
    /// Rows re-encoded in the new layout: entities, and the base images of pending changes.
    public var rewrittenRows: Int
    /// Indexes rebuilt from the entities (their set's rows changed), and dropped (their set or a
    /// property they used is gone).
    public var rebuiltIndexes: [String]
    public var droppedIndexes: [String]
    /// Each pending request that no longer sends a property, each configuration entry removed,
    /// each defining request that no longer reads under the new `$metadata`.
    public var warnings: [String]
    public var dryRun: Bool

    public var description: String {
        if unchanged { return "unchanged: the store has this $metadata already" }
        var lines: [String] = []
        func list(_ what: String, _ items: [String]) {
            if !items.isEmpty { lines.append("\(what): \(items.joined(separator: ", "))") }
        }
        list("sets added", addedSets)
        list("sets dropped", droppedSets)
        list("properties added", addedProperties)
        list("properties dropped", droppedProperties)
        list("properties retyped", retypedProperties)
        list("indexes rebuilt", rebuiltIndexes)
        list("indexes dropped", droppedIndexes)
        lines.append("\(dryRun ? "would rewrite" : "rewrote") \(rewrittenRows) row\(rewrittenRows == 1 ? "" : "s")")
        return lines.joined(separator: "\n")
    }
}

extension OfflineStore {
    /// Moves the store in `path` to the service's new `$metadata` (`metadata`), keeping its data
    /// and its request queue, in one transaction — as SAP's offline store upgrades its schema
    /// when the service's metadata changes:
    ///
    /// - a property the new document adds is null in every stored entity until the next
    ///   refresh brings it;
    /// - one it drops leaves the stored entities, the pending requests' bodies (each such
    ///   request named in `MigrationReport.warnings`), the conflict versions of the
    ///   ErrorArchive, and the indexes that used it (with their configuration entries);
    /// - one it retypes is converted in every stored entity and pending body through its JSON
    ///   form (Int32 to Int64, a longer string, a number to a string); a value that does not fit
    ///   refuses the migration, naming the entity;
    /// - a set it adds is there to define requests on; one it drops goes with its entities
    ///   (refused while requests for it are queued);
    /// - a changed key is refused. A refused migration writes nothing.
    ///
    /// A kill at any instant leaves the old store or the new one (`check` passes on either);
    /// indexes of changed sets are rebuilt when the store opens next — `migrate` opens it once
    /// before it returns. Refused while another process has the store open; this process must
    /// not have it open either. `dryRun` reports what would change and writes nothing.
    ///
    /// ```swift
    /// let report = try OfflineStore.migrate(at: "store", metadata: newMetadata)
    /// for w in report.warnings { print("warning:", w) }
    /// let store = try OfflineStore.open(at: "store")
    /// ```
    public static func migrate(at path: String, metadata: [UInt8], dryRun: Bool = false) throws -> MigrationReport {
        let outcome = try EntityStore.migrate(path: path, metadata: metadata, roles: roles, dryRun: dryRun)
        let m = outcome.migration
        var warnings = outcome.warnings
        var configuration: StoreConfiguration?
        if !outcome.unchanged && !dryRun {
            // Opening builds the indexes the migration emptied.
            configuration = try open(at: path).configuration
        } else if !outcome.unchanged {
            configuration = try EntityStore.open(path: path, readOnly: true, roles: roles).configuration
        }
        if !outcome.unchanged, let schema = try? CSDL.parse(metadata).withSystemSets() {
            for r in configuration?.definingRequests ?? [] {
                do { _ = try DefiningRequests.bind(r.url, schema: schema) } catch {
                    warnings.append(
                        "defining request '\(r.name)' (\(r.url)) no longer reads under the new $metadata: \(error); change it with undefine and define"
                    )
                }
            }
        }
        func each(_ pick: (SchemaMigration.SetChange) -> [String]) -> [String] {
            m.sets.keys.sorted().flatMap { set in pick(m.sets[set]!).map { "\(set).\($0)" } }
        }
        return MigrationReport(
            unchanged: outcome.unchanged, addedSets: m.addedSets, droppedSets: m.droppedSets,
            addedProperties: each(\.added), droppedProperties: each(\.dropped),
            retypedProperties: m.sets.keys.sorted().flatMap { set in
                m.sets[set]!.retyped.map { "\(set).\($0.name): \($0.from) → \($0.to)" }
            },
            rewrittenRows: outcome.rewrittenRows, rebuiltIndexes: outcome.rebuiltIndexes,
            droppedIndexes: outcome.droppedIndexes, warnings: warnings, dryRun: dryRun)
    }
}
