public import LMDB
import Foundation
import Query
import Queue
import Served
public import Storage
import Sync

/// An offline OData store: a local copy of a service's data in LMDB, read with OData URLs and
/// changed while offline.
///
/// ```swift
/// let store = try OfflineStore.create(at: "/tmp/s", metadata: xml, configuration: .init())
/// try store.load(set: "Products", json: Array(#"{"value":[{"ProductID":"HT-1000"}]}"#.utf8))
/// let p = try store.get(set: "Products", key: [.string("HT-1000")])
/// ```
/// `Sendable`: every member is, and writes are serialized by the store's writer thread.
public final class OfflineStore: Sendable {
    package let entities: EntityStore
    /// URLs already parsed and bound, reused when asked again.
    let boundQueries = BoundQueryCache()
    /// The live queries (`observe`).
    let observations: ObservationHub
    /// The clock of repeatability records (`now`), settable by tests.
    let servedClock = ServedClock()
    /// Where the store is in its life (`open`, `downloading`, `uploading`, …), as a current state
    /// and as `AsyncStream`s of changes: see `Lifecycle`.
    public let lifecycle: Lifecycle

    /// What the store reports through swift-metrics (`StoreMetrics`), and its commit listener.
    let metrics: StoreMetrics
    private let metricsListener: Int

    init(entities: EntityStore, lifecycle: Lifecycle) {
        self.entities = entities
        self.lifecycle = lifecycle
        observations = ObservationHub(environment: entities.environment)
        metrics = StoreMetrics(path: entities.environment.path)
        metricsListener = metrics.listen(to: entities)
        // Stream files a crash left before their transaction committed, or whose records were
        // replaced or deleted since the last sweep (`EntityStore.sweepStreams`).
        entities.sweepStreamsIfNeeded()
        lifecycle.report(.init(state: .open))
    }

    deinit {
        entities.environment.removeCommitListener(metricsListener)
        lifecycle.report(.init(state: .closed))
    }

    /// The modules that keep durable state in a store beside its entity sets, each with its own
    /// databases and invariants (`StoreRole`): the request queue, sync (flush and refresh), and
    /// the served role.
    package static let roles: [any StoreRole.Type] = [QueueRole.self, SyncRole.self, ServedRole.self]

    /// Creates a store in directory `path` (which must not hold one) from a `$metadata` document.
    /// The configuration's defining requests are checked as `define` checks them, its
    /// `serviceRoot` and `tokenURL` as URLs to send requests to.
    /// `lifecycle` reports `opening`, `initializing` and `open` (pass one to watch them; one
    /// `Lifecycle` per store).
    public static func create(
        at path: String, metadata: [UInt8], configuration: StoreConfiguration = .init(),
        lifecycle: Lifecycle = Lifecycle()
    ) throws -> OfflineStore {
        lifecycle.report(.init(state: .opening, detail: path))
        try configuration.sync.checkURLs()
        try configuration.served.check()
        try checkDefiningRequests(configuration.definingRequests, metadata: metadata)
        try configuration.sync.checkCreateMarkers(try CSDL.parse(metadata))
        lifecycle.report(.init(state: .initializing, detail: path))
        return OfflineStore(
            entities: try EntityStore.create(
                path: path, metadata: metadata, configuration: configuration.stored, roles: roles),
            lifecycle: lifecycle)
    }

    /// Opens the store in directory `path`. With `readOnly`, writes throw and nothing on disk is
    /// created or repaired; it works on a read-only file system.
    /// `lifecycle` reports `opening`, then `open` (pass one to watch them). `maxSizeBytes` changes
    /// the store's size cap and records it in its configuration (0 lifts the cap; nil keeps it).
    public static func open(
        at path: String, durability: Durability? = nil, readOnly: Bool = false,
        maxSizeBytes: Int? = nil, lifecycle: Lifecycle = Lifecycle()
    ) throws -> OfflineStore {
        lifecycle.report(.init(state: .opening, detail: path))
        let entities = try EntityStore.open(
            path: path, durability: durability, readOnly: readOnly, maxSizeBytes: maxSizeBytes, roles: roles)
        // Each role reads its settings here first: a store whose configuration a role cannot read
        // is refused at open, not at its first flush.
        _ = try StoreConfiguration(storage: entities.configuration)
        return OfflineStore(entities: entities, lifecycle: lifecycle)
    }

    public var schema: Schema { entities.schema }
    /// The store's configuration: storage's settings and each role's, as kept in the store. The
    /// roles' members were read when the store opened and change only through them (`define`).
    public var configuration: StoreConfiguration {
        (try? StoreConfiguration(storage: entities.configuration)) ?? StoreConfiguration()
    }

    /// How long a served store keeps a repeatable write's answer, in seconds: the served role's
    /// one setting, read on its own for each write (`configuration` reads every role's).
    package var repeatabilityWindowSeconds: Int {
        (try? ServedSettings(roles: entities.configuration.roles).repeatabilityWindowSeconds)
            ?? ServedSettings.defaultRepeatabilityWindowSeconds
    }
    public var path: String { entities.environment.path }

    /// The entity with key `key` in `set`, or nil.
    public func get(set: String, key: [Value]) throws -> Properties? {
        let h = try entities.set(set)
        return try entities.read { t in try h.get(t, key: key) }
    }

    /// Number of entities in `set`.
    public func count(set: String) throws -> Int {
        let h = try entities.set(set)
        return try entities.read { t in try h.count(t) }
    }

    /// Verifies the store in one read transaction: every entity set and index, then each role's
    /// invariants — the request queue's, sync's membership and ETags, the served role's change
    /// log and repeatability records. See `EntityStore.check`.
    ///
    /// - Parameter progress: called on this thread at the start of each entity set, every 4096
    ///   entities and index entries checked, and once when the sets are done (`CheckProgress`).
    public func check(progress: ((CheckProgress) -> Void)? = nil) throws -> IntegrityReport {
        try entities.check(progress: progress)
    }

    /// Verifies the store in directory `path`, auditing `data.mdb`'s structure before LMDB
    /// reads it; a damaged file is reported, not opened. See `EntityStore.check(path:)`.
    /// Opens nothing for writing: a diagnosis changes nothing.
    ///
    /// - Parameter progress: as for `check(progress:)`, once the structural audit is done.
    public static func check(
        at path: String, progress: ((CheckProgress) -> Void)? = nil
    ) throws -> IntegrityReport {
        try EntityStore.check(path: path, roles: roles, progress: progress)
    }

    public func stats() throws -> StoreStats { try entities.stats() }

    /// Adds a secondary index (`"Quantity DESC, ProductID"`) to `set`, backfilling it.
    public func addIndex(set: String, definition: String) throws {
        try entities.addIndex(IndexDefinition(entitySet: set, definition: definition))
    }

    public func dropIndex(set: String, name: String) throws {
        try entities.dropIndex(set: set, name: name)
    }

    /// An entity as an OData V4 JSON object, properties in declaration order.
    public func json(set: String, entity: Properties, select: Set<String>? = nil) throws -> String {
        let h = try entities.set(set)
        var out = ""
        ValueJSON(schema: schema).write(entity, properties: h.type.properties, select: select, to: &out)
        return out
    }
}
