import LMDB
/// A store's configuration file (`init --config`): service root, defining requests, indexes, options.
public struct StoreConfiguration: Sendable, Hashable {
    public struct DefiningRequest: Sendable, Hashable {
        public var name: String
        public var url: String
        public init(name: String, url: String) {
            self.name = name
            self.url = url
        }
    }

    public var serviceRoot: String?
    public var definingRequests: [DefiningRequest]
    /// Entity set → index definitions in `indexed_type` form.
    public var indexes: [String: [String]]
    public var requestQueueOptimization: Bool
    public var durability: Durability
    /// Bounds on the work of one query request (`"limits"`; members left out keep their defaults).
    public var limits: QueryLimits
    /// How long a served store keeps the recorded answer of a write with a
    /// `Repeatability-Request-ID`, in seconds (default 86,400: 24 hours; 1 to 31,536,000: a year).
    /// A request repeated later is applied again.
    public var repeatabilityWindowSeconds: Int
    /// The size cap of the store's data file in bytes (`"maxSizeBytes"`), or nil for none (the
    /// default). A write that would need more fails with `EnvironmentError.sizeCapReached` and
    /// changes nothing; pages freed by deletes are reused, so writes fit again after deleting.
    /// Kept in the store, so every process that opens it honours it. From 256 KiB (rounded down
    /// to whole 4 KiB pages).
    public var maxSizeBytes: Int?

    public static let defaultRepeatabilityWindowSeconds = 86_400
    public static let repeatabilityWindowRange = 1...31_536_000
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

    public init(
        serviceRoot: String? = nil, definingRequests: [DefiningRequest] = [], indexes: [String: [String]] = [:],
        requestQueueOptimization: Bool = true, durability: Durability = .full, limits: QueryLimits = QueryLimits(),
        repeatabilityWindowSeconds: Int = StoreConfiguration.defaultRepeatabilityWindowSeconds, maxSizeBytes: Int? = nil
    ) {
        self.serviceRoot = serviceRoot
        self.definingRequests = definingRequests
        self.indexes = indexes
        self.requestQueueOptimization = requestQueueOptimization
        self.durability = durability
        self.limits = limits
        self.repeatabilityWindowSeconds = repeatabilityWindowSeconds
        self.maxSizeBytes = maxSizeBytes
    }

    /// Reads the JSON form the DocC article "Configuration" documents. Unknown members are errors, so typos surface.
    package init(json: JSON) throws(EntityError) {
        self.init()
        guard case .object(let members) = json else { throw .badInput("configuration: expected a JSON object") }
        for (name, value) in members {
            switch (name, value) {
            case ("serviceRoot", .string(let s)): serviceRoot = s
            case ("serviceRoot", .null): serviceRoot = nil
            case ("definingRequests", .array(let items)):
                for item in items {
                    guard case .string(let n)? = item["name"], case .string(let u)? = item["url"] else {
                        throw .badInput("configuration: each defining request needs \"name\" and \"url\" strings")
                    }
                    definingRequests.append(DefiningRequest(name: n, url: u))
                }
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
            case ("repeatabilityWindowSeconds", _):
                guard case .number(let text) = value, let n = Int(text), Self.repeatabilityWindowRange.contains(n)
                else {
                    throw .badInput(
                        "configuration: repeatabilityWindowSeconds must be a whole number of seconds from \(Self.repeatabilityWindowRange.lowerBound) to \(Self.repeatabilityWindowRange.upperBound) (a year)"
                    )
                }
                repeatabilityWindowSeconds = n
            case ("maxSizeBytes", .null): maxSizeBytes = nil
            case ("maxSizeBytes", _):
                guard case .number(let text) = value, let n = Int(text) else {
                    throw .badInput(
                        "configuration: maxSizeBytes must be a whole number of bytes from \(Self.maxSizeRange.lowerBound) (256 KiB) to \(Self.maxSizeRange.upperBound) (64 TiB)"
                    )
                }
                try Self.checkMaxSize(n)
                maxSizeBytes = n
            default:
                throw .badInput("configuration: unknown or mistyped member '\(name)'")
            }
        }
    }

    package var json: JSON {
        var members: [(String, JSON)] = []
        if let serviceRoot { members.append(("serviceRoot", .string(serviceRoot))) }
        members.append(
            (
                "definingRequests",
                .array(definingRequests.map { .object([("name", .string($0.name)), ("url", .string($0.url))]) })
            ))
        members.append(
            ("indexes", .object(indexes.keys.sorted().map { ($0, .array(indexes[$0]!.map { .string($0) })) })))
        members.append(("requestQueueOptimization", .bool(requestQueueOptimization)))
        members.append(("durability", .string(durability.rawValue)))
        // Written only when set, so a store keeps the configuration text older builds can read.
        if limits != QueryLimits() { members.append(("limits", limits.json)) }
        if repeatabilityWindowSeconds != Self.defaultRepeatabilityWindowSeconds {
            members.append(("repeatabilityWindowSeconds", .number(String(repeatabilityWindowSeconds))))
        }
        if let maxSizeBytes { members.append(("maxSizeBytes", .number(String(maxSizeBytes)))) }
        return .object(members)
    }
}
