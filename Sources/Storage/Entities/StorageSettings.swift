public import LMDB

/// What storage needs of a store's configuration: indexes, durability, query limits, the size
/// cap, the outcome record's length. The rest of the configuration belongs to the roles that use
/// it — the sync role's service, requests and options (`SyncSettings`), the served role's
/// repeatability window (`ServedSettings`) — and is kept here as written (`roles`): each role
/// reads and checks its own members, and the facade's `StoreConfiguration` puts them together
/// into the one JSON object a user writes and `meta` keeps.
public struct StorageSettings: Sendable, Hashable {
    /// Entity set → index definitions in `indexed_type` form.
    public var indexes: [String: [String]] = [:]
    public var requestQueueOptimization = true
    public var durability: Durability = .full
    /// Bounds on the work of one query request (`"limits"`; members left out keep their defaults).
    public var limits = QueryLimits()
    /// The size cap of the store's data file in bytes (`"maxSizeBytes"`), or nil for none (the
    /// default). A write that would need more fails with `EnvironmentError.sizeCapReached` and
    /// changes nothing; pages freed by deletes are reused, so writes fit again after deleting.
    /// Kept in the store, so every process that opens it honours it. From 256 KiB (rounded down
    /// to whole 4 KiB pages).
    public var maxSizeBytes: Int?
    /// How many requests the outcome record keeps (`"requestHistory"`, default 10,000; 0 to
    /// 10,000,000): the `RequestHistory` set says what became of each request that left the queue
    /// (applied, found applied, in doubt, refused, given up, undone), newest kept, oldest dropped.
    /// 0 keeps none.
    public var requestHistory = StorageSettings.defaultRequestHistory
    /// The configuration's members that are not storage's, as written: name → value. Each role
    /// reads its own (`SyncSettings(roles:)`, `ServedSettings(roles:)`).
    package var roles: [String: JSON] = [:]

    /// The members storage reads; every other member is a role's.
    package static let members: Set<String> = [
        "indexes", "requestQueueOptimization", "durability", "limits", "maxSizeBytes", "requestHistory",
    ]

    public static let defaultRequestHistory = 10_000
    public static let requestHistoryRange = 0...10_000_000
    /// Accepted values of `maxSizeBytes`: 256 KiB to 64 TiB: a memory map past half of x86-64's 128 TiB user address space fails (ENOMEM).
    public static let maxSizeRange = (256 << 10)...(1 << 46)

    /// Refuses a `maxSizeBytes` out of `maxSizeRange`.
    public static func checkMaxSize(_ bytes: Int) throws(EntityError) {
        guard maxSizeRange.contains(bytes) else {
            throw .badInput(
                "configuration: maxSizeBytes must be a whole number of bytes from \(maxSizeRange.lowerBound) (256 KiB) to \(maxSizeRange.upperBound) (64 TiB), not \(bytes)"
            )
        }
    }

    package init(
        indexes: [String: [String]] = [:], requestQueueOptimization: Bool = true, durability: Durability = .full,
        limits: QueryLimits = QueryLimits(), maxSizeBytes: Int? = nil
    ) {
        self.indexes = indexes
        self.requestQueueOptimization = requestQueueOptimization
        self.durability = durability
        self.limits = limits
        self.maxSizeBytes = maxSizeBytes
    }

    /// Reads the JSON form the DocC article "Configuration" documents: storage's members, the
    /// others kept for their roles (`StoreConfiguration(json:)` refuses those no role knows).
    package init(json: JSON) throws(EntityError) {
        self.init()
        guard case .object(let members) = json else { throw .badInput("configuration: expected a JSON object") }
        for (name, value) in members {
            guard Self.members.contains(name) else {
                roles[name] = value
                continue
            }
            switch (name, value) {
            case ("indexes", .object(let sets)):
                for (set, list) in sets {
                    guard case .array(let defs) = list else {
                        throw .badInput("configuration: indexes of '\(set)' must be an array")
                    }
                    for d in defs {
                        guard case .string(let s) = d else {
                            throw .badInput("configuration: index of '\(set)' must be a string")
                        }
                        indexes[set, default: []].append(s)
                    }
                }
            case ("requestQueueOptimization", .bool(let b)): requestQueueOptimization = b
            case ("durability", .string(let s)):
                guard let d = Durability(rawValue: s) else {
                    throw .badInput("configuration: durability must be \"full\" or \"noSync\"")
                }
                durability = d
            case ("limits", _): limits = try QueryLimits(json: value)
            case ("maxSizeBytes", .null): maxSizeBytes = nil
            case ("maxSizeBytes", _):
                guard case .number(let text) = value, let n = Int(text) else {
                    throw .badInput(
                        "configuration: maxSizeBytes must be a whole number of bytes from \(Self.maxSizeRange.lowerBound) (256 KiB) to \(Self.maxSizeRange.upperBound) (64 TiB)"
                    )
                }
                try Self.checkMaxSize(n)
                maxSizeBytes = n
            case ("requestHistory", _):
                guard case .number(let text) = value, let n = Int(text), Self.requestHistoryRange.contains(n) else {
                    throw .badInput(
                        "configuration: requestHistory must be a whole number of requests from \(Self.requestHistoryRange.lowerBound) to \(Self.requestHistoryRange.upperBound)"
                    )
                }
                requestHistory = n
            default:
                throw .badInput("configuration: unknown or mistyped member '\(name)'")
            }
        }
    }

    /// Storage's members, then the roles' as they were written (by name).
    package var json: JSON {
        var members: [(String, JSON)] = []
        members.append(
            ("indexes", .object(indexes.keys.sorted().map { ($0, .array(indexes[$0]!.map { .string($0) })) })))
        members.append(("requestQueueOptimization", .bool(requestQueueOptimization)))
        members.append(("durability", .string(durability.rawValue)))
        // Written only when set, so a store keeps the configuration text older builds can read.
        if limits != QueryLimits() { members.append(("limits", limits.json)) }
        if let maxSizeBytes { members.append(("maxSizeBytes", .number(String(maxSizeBytes)))) }
        if requestHistory != Self.defaultRequestHistory {
            members.append(("requestHistory", .number(String(requestHistory))))
        }
        for name in roles.keys.sorted() { members.append((name, roles[name]!)) }
        return .object(members)
    }
}
