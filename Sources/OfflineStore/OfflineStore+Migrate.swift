import Foundation
import Query
import Storage
public import Remote
import Sync

/// What `OfflineStore.migrate(at:metadata:dryRun:progress:)` did (or, dry, would do).
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
    ///
    /// - Parameter progress: called on the writer thread with (rows rewritten, rows of the entity
    ///   sets the new `$metadata` changes) at each such set, every 4096 rows and at the end.
    public static func migrate(
        at path: String, metadata: [UInt8], dryRun: Bool = false,
        progress: (@Sendable (_ rewritten: Int, _ total: Int) -> Void)? = nil
    ) throws -> MigrationReport {
        let outcome = try EntityStore.migrate(
            path: path, metadata: metadata, roles: roles, dryRun: dryRun, progress: progress)
        let m = outcome.migration
        var warnings = outcome.warnings
        // Opening builds the indexes the migration emptied.
        if !outcome.unchanged && !dryRun { _ = try open(at: path) }
        let configuration = outcome.configuration
        if !outcome.unchanged, let schema = try? CSDL.parse(metadata).withSystemSets() {
            for r in (try configuration.map { try SyncSettings(roles: $0.roles) })?.definingRequests ?? [] {
                do { _ = try DefiningRequests.bind(r.url, schema: schema) } catch {
                    warnings.append(
                        "defining request '\(r.name)' (\(r.url)) no longer reads under the new $metadata: \(error); change it with undefine and define"
                    )
                }
            }
        }
        var report = MigrationReport(m, dryRun: dryRun)
        report.unchanged = outcome.unchanged
        report.rewrittenRows = outcome.rewrittenRows
        report.rebuiltIndexes = outcome.rebuiltIndexes
        report.droppedIndexes = outcome.droppedIndexes
        report.warnings = warnings
        return report
    }
}

/// What `OfflineStore.checkMetadata(serviceRoot:)` found: the service's `$metadata` now, and how
/// it differs from the store's.
public struct MetadataCheck: Sendable, CustomStringConvertible {
    /// The service's document as it answered.
    public var metadata: [UInt8]
    /// The service's entity sets or types differ from the store's (a byte-for-byte different
    /// document that means the same, annotations or order, is not a change).
    public var changed: Bool
    /// The differences, as `migrate` would report them (with `dryRun`, nothing written).
    public var differences: MigrationReport?
    /// Why `migrate` would refuse the document (a changed key), if it would.
    public var refusal: String?

    public var description: String {
        if let refusal { return "the service's $metadata changed in a way a store cannot follow: \(refusal)" }
        guard changed, let differences else { return "the service's $metadata is this store's" }
        return "the service's $metadata changed:\n\(differences.changes)"
    }
}

extension MigrationReport {
    /// The schema's differences, one line each (what `description` says before its row count).
    var changes: String { description.split(separator: "\n").dropLast().joined(separator: "\n") }

    init(_ m: SchemaMigration, dryRun: Bool) {
        func each(_ pick: (SchemaMigration.SetChange) -> [String]) -> [String] {
            m.sets.keys.sorted().flatMap { set in pick(m.sets[set]!).map { "\(set).\($0)" } }
        }
        self.init(
            unchanged: m.isEmpty, addedSets: m.addedSets, droppedSets: m.droppedSets, addedProperties: each(\.added),
            droppedProperties: each(\.dropped),
            retypedProperties: m.sets.keys.sorted().flatMap { set in
                m.sets[set]!.retyped.map { "\(set).\($0.name): \($0.from) → \($0.to)" }
            }, rewrittenRows: 0, rebuiltIndexes: [], droppedIndexes: [], warnings: [], dryRun: dryRun)
    }
}

extension OfflineStore {
    /// Reads the service's `$metadata` now and compares it with the store's: whether the service
    /// changed (an upgrade of the back end) and how, before a refresh or flush meets it. Writes
    /// nothing. To follow it, save `metadata` and run `OfflineStore.migrate(at:metadata:)`.
    public func checkMetadata(
        serviceRoot: String? = nil, headers: [(String, String)] = [], authorizer: (any RequestAuthorizer)? = nil
    ) async throws -> MetadataCheck {
        let transport = try readingTransport(serviceRoot: serviceRoot, headers: headers, authorizer: authorizer)
        let bytes: [UInt8]
        do {
            bytes = try await ODataBackend(transport: transport, store: entities).metadata()
            try await transport.shutdown()
        } catch {
            try? await transport.shutdown()
            throw error
        }
        let theirs = try CSDL.parse(bytes).withSystemSets()
        do {
            let m = try SchemaMigration(old: schema, new: theirs)
            return MetadataCheck(metadata: bytes, changed: !m.isEmpty, differences: MigrationReport(m, dryRun: true))
        } catch {
            return MetadataCheck(metadata: bytes, changed: true, differences: nil, refusal: "\(error)")
        }
    }
}
