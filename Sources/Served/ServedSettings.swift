package import Storage

/// The served role's settings: members of the store's configuration JSON that storage keeps as
/// written (`StorageSettings.roles`) and the served role reads here.
public struct ServedSettings: Sendable, Hashable {
    /// How long a served store keeps the recorded answer of a write with a
    /// `Repeatability-Request-ID`, in seconds (default 86,400: 24 hours; 1 to 31,536,000: a year).
    /// A request repeated later is applied again.
    public var repeatabilityWindowSeconds = ServedSettings.defaultRepeatabilityWindowSeconds

    public static let defaultRepeatabilityWindowSeconds = 86_400
    public static let repeatabilityWindowRange = 1...31_536_000
    /// The configuration members that are the served role's.
    package static let members: Set<String> = ["repeatabilityWindowSeconds"]

    package init() {}

    /// Refuses a window out of `repeatabilityWindowRange` (from the JSON or from Swift).
    package func check() throws(EntityError) {
        guard Self.repeatabilityWindowRange.contains(repeatabilityWindowSeconds) else {
            throw Self.windowError(", not \(repeatabilityWindowSeconds)")
        }
    }

    private static func windowError(_ detail: String) -> EntityError {
        .badInput(
            "configuration: repeatabilityWindowSeconds must be a whole number of seconds from \(repeatabilityWindowRange.lowerBound) to \(repeatabilityWindowRange.upperBound) (a year)\(detail)"
        )
    }

    /// Reads the served role's members of a configuration (`StorageSettings.roles`).
    package init(roles: [String: JSON]) throws(EntityError) {
        for name in roles.keys.sorted() where Self.members.contains(name) {
            let value = roles[name]!
            switch (name, value) {
            case ("repeatabilityWindowSeconds", _):
                guard case .number(let text) = value, let n = Int(text) else { throw Self.windowError("") }
                repeatabilityWindowSeconds = n
                try check()
            default:
                throw .badInput("configuration: unknown or mistyped member '\(name)'")
            }
        }
    }

    /// The served role's members of the configuration JSON (those not at their defaults).
    package var roles: [String: JSON] {
        repeatabilityWindowSeconds == Self.defaultRepeatabilityWindowSeconds
            ? [:] : ["repeatabilityWindowSeconds": .number(String(repeatabilityWindowSeconds))]
    }
}
