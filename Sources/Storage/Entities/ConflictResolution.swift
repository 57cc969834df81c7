import Synchronization

/// What a program decides of a conflict, in code (`OfflineStore.setConflictResolver`): the
/// Swift form of the configuration's `conflictPolicies`, decided per conflict.
public enum ConflictResolution: Sendable, Hashable {
    /// Send the local change again, against the service's version (client wins).
    case keepMine
    /// Give the local change up; the entity becomes the service's version (server wins).
    case takeTheirs
    /// Send these values (the properties to change) against the service's version: the entity
    /// becomes the service's version with them, as if the user had changed it so.
    case merged(Properties)
    /// Leave it in the ErrorArchive for a person.
    case manual
}

/// The three versions of a conflict, as the queue records them (`RequestQueue.recordConflict`).
package struct ConflictVersions: Sendable {
    package var requestID: Int64
    package var set: String
    package var key: [Value]
    /// The key as in a URL.
    package var keyText: String
    package var serverETag: String?
    package var base: Properties?
    package var local: Properties?
    package var server: Properties?
    package var differences: [String]

    package init(
        requestID: Int64, set: String, key: [Value], keyText: String, serverETag: String?, base: Properties?,
        local: Properties?, server: Properties?, differences: [String]
    ) {
        self.requestID = requestID
        self.set = set
        self.key = key
        self.keyText = keyText
        self.serverETag = serverETag
        self.base = base
        self.local = local
        self.server = server
        self.differences = differences
    }
}

/// The resolvers a program registered, by entity set: consulted by flush and refresh for each
/// conflict of the set, in the transaction that records it (they must be quick, and must not
/// use the store).
package final class ConflictResolvers: Sendable {
    private let bySet = Mutex<[String: @Sendable (ConflictVersions) -> ConflictResolution]>([:])

    package init() {}

    package func set(_ resolver: (@Sendable (ConflictVersions) -> ConflictResolution)?, forSet set: String) {
        bySet.withLock { $0[set] = resolver }
    }

    /// The registered resolver's decision, or nil when the set has none.
    package func decide(_ versions: ConflictVersions) -> ConflictResolution? {
        guard let resolver = bySet.withLock({ $0[versions.set] }) else { return nil }
        return resolver(versions)
    }
}
