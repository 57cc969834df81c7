/// What flush does, without a person, when the service refuses a change of an entity because it
/// changed there first (412): the configuration's `"conflictPolicies"` (`SyncSettings`) names one
/// per entity set; `RequestQueue.settleConflict` carries it out.
public enum ConflictPolicy: String, Sendable, Hashable, CaseIterable {
    /// The conflict waits in the ErrorArchive, both versions kept.
    case manual
    /// The change is given up and the service's version adopted.
    case serverWins = "server-wins"
    /// The change is sent again against the service's version (at most `maxClientWinsAttempts`
    /// attempts; then it waits as `manual`).
    case clientWins = "client-wins"

    /// The attempts after which a `client-wins` change that keeps meeting conflicts waits for a person.
    public static let maxClientWinsAttempts = 5
}
