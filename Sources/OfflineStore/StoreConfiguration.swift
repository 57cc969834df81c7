public import LMDB
public import Queue
public import Served
public import Storage
public import Sync

/// A store's configuration: the JSON object of the DocC article "Configuration" (`init --config`),
/// kept in the store. Each part belongs to the role that uses it — storage's indexes,
/// durability, limits and size cap (`StorageSettings`), the sync role's service, defining
/// requests and options (`sync`, a `SyncSettings`), the served role's repeatability window —
/// and each role reads and checks its own members; this type puts them together and forwards
/// each member (`@dynamicMemberLookup`), so a program sets `configuration.serviceRoot` as before.
@dynamicMemberLookup
public struct StoreConfiguration: Sendable, Hashable {
    /// Storage's settings: indexes, durability, query limits, the size cap, the outcome record.
    public var storage: StorageSettings
    /// The sync role's settings: service root, defining requests, credentials, timeouts, options.
    public var sync: SyncSettings
    /// The served role's settings: the repeatability window.
    public var served: ServedSettings
    /// Function → the OData URL that answers it from this store (`"localFunctions":
    /// {"Lib.Overdue": "Books?$filter=Due lt @Today"}`): a function (a V4 `Function`, a V2
    /// function import called with GET) reads the service's data, so an offline store answers a
    /// call of one only when it is mapped here. The call's parameters are the URL's parameter
    /// aliases (`@Today`); a bound call's entity gives its key properties as aliases too
    /// (`@BookID`). Unmapped, a call of a function says that it needs the service.
    public var localFunctions: [String: String] = [:]

    public typealias DefiningRequest = SyncSettings.DefiningRequest
    public typealias Authentication = SyncSettings.Authentication
    public typealias SecretSource = SyncSettings.SecretSource
    public typealias Timeouts = SyncSettings.Timeouts
    public typealias StreamIfMatch = SyncSettings.StreamIfMatch
    public typealias ConflictPolicy = Queue.ConflictPolicy

    public static let defaultRepeatabilityWindowSeconds = ServedSettings.defaultRepeatabilityWindowSeconds
    public static let repeatabilityWindowRange = ServedSettings.repeatabilityWindowRange
    public static let defaultRefreshGroupRows = SyncSettings.defaultRefreshGroupRows
    public static let refreshGroupRowsRange = SyncSettings.refreshGroupRowsRange
    public static let defaultRequestHistory = StorageSettings.defaultRequestHistory
    public static let requestHistoryRange = StorageSettings.requestHistoryRange
    public static let maxSizeRange = StorageSettings.maxSizeRange
    /// The attempts after which a `client-wins` change that keeps meeting conflicts waits for a person.
    public static let maxClientWinsAttempts = ConflictPolicy.maxClientWinsAttempts

    /// Refuses a `maxSizeBytes` out of `maxSizeRange`.
    public static func checkMaxSize(_ bytes: Int) throws(EntityError) { try StorageSettings.checkMaxSize(bytes) }

    public init(
        serviceRoot: String? = nil, definingRequests: [DefiningRequest] = [], indexes: [String: [String]] = [:],
        requestQueueOptimization: Bool = true, durability: Durability = .full, limits: QueryLimits = QueryLimits(),
        repeatabilityWindowSeconds: Int = StoreConfiguration.defaultRepeatabilityWindowSeconds,
        maxSizeBytes: Int? = nil,
        authentication: Authentication? = nil
    ) {
        storage = StorageSettings(
            indexes: indexes, requestQueueOptimization: requestQueueOptimization, durability: durability,
            limits: limits, maxSizeBytes: maxSizeBytes)
        sync = SyncSettings(
            serviceRoot: serviceRoot, definingRequests: definingRequests, authentication: authentication)
        served = ServedSettings()
        served.repeatabilityWindowSeconds = repeatabilityWindowSeconds
    }

    /// The members this facade owns itself.
    static let members: Set<String> = ["localFunctions"]

    /// Reads the JSON form: storage's members, then each role's from the rest; a member no one
    /// reads is an error, so a typo surfaces.
    package init(json: JSON) throws(EntityError) {
        try self.init(storage: StorageSettings(json: json))
        for name in storage.roles.keys.sorted()
        where !SyncSettings.members.contains(name) && !ServedSettings.members.contains(name)
            && !Self.members.contains(name)
        {
            throw .badInput("configuration: unknown or mistyped member '\(name)'")
        }
    }

    /// The configuration a store keeps: `storage`'s members, and the roles' read from
    /// `storage.roles` (checked when the store was made).
    package init(storage: StorageSettings) throws(EntityError) {
        // The roles' members live in their typed parts from here (`stored` writes them back);
        // storage keeps only what no role reads (none, in a store this build made).
        self.storage = storage
        self.storage.roles = storage.roles.filter {
            !SyncSettings.members.contains($0.key) && !ServedSettings.members.contains($0.key)
                && !Self.members.contains($0.key)
        }
        sync = try SyncSettings(roles: storage.roles)
        served = try ServedSettings(roles: storage.roles)
        switch storage.roles["localFunctions"] {
        case .object(let members)?:
            for (name, v) in members {
                guard case .string(let url) = v, !url.isEmpty else {
                    throw .badInput("configuration: localFunctions.\(name) must be an OData URL (a string)")
                }
                localFunctions[name] = url
            }
        case nil: break
        case _?: throw .badInput("configuration: localFunctions must be an object of function names and OData URLs")
        }
    }

    /// What storage keeps: its settings with every role's members in `roles`.
    package var stored: StorageSettings {
        var s = storage
        s.roles.merge(sync.roles.merging(served.roles) { a, _ in a }) { _, new in new }
        if !localFunctions.isEmpty {
            s.roles["localFunctions"] = .object(localFunctions.keys.sorted().map { ($0, .string(localFunctions[$0]!)) })
        }
        return s
    }

    /// The JSON form `init(json:)` reads.
    package var json: JSON { stored.json }

    /// Each part's members, read and written as the configuration's own
    /// (`configuration.serviceRoot`, `configuration.indexes["Products"]`), as the JSON has them.
    public subscript<T>(dynamicMember member: WritableKeyPath<SyncSettings, T>) -> T {
        get { sync[keyPath: member] }
        set { sync[keyPath: member] = newValue }
    }
    public subscript<T>(dynamicMember member: WritableKeyPath<StorageSettings, T>) -> T {
        get { storage[keyPath: member] }
        set { storage[keyPath: member] = newValue }
    }
    public subscript<T>(dynamicMember member: WritableKeyPath<ServedSettings, T>) -> T {
        get { served[keyPath: member] }
        set { served[keyPath: member] = newValue }
    }
}
