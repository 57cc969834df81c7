package import LMDB
package import Storage

/// The databases of flush and refresh (the offline role's side that talks to a service):
///
/// | database | key | value |
/// |---|---|---|
/// | `etags` | set ‖ key | the ETag the service last gave for the entity (UTF-8), sent as `If-Match` (`ServerETags`) |
/// | `membership` | defining-request name ‖ 0x00 ‖ set ‖ key | generation: which entities each defining request brought (`Membership`) |
/// | `membership/by-entity` | set ‖ key ‖ name | empty: which defining requests hold an entity |
///
/// Refresh keeps its delta links and generations in `meta` under `Membership`'s prefixes.
package enum SyncRole: StoreRole {
    static let etagsName = "etags"
    static let membershipName = "membership"
    static let membershipByEntityName = "membership/by-entity"

    package static func databaseNames(schema: Schema) -> [String] {
        [etagsName, membershipName, membershipByEntityName]
    }

    /// `etags` holds only entries of service entity sets' keys with sendable values
    /// (`ServerETags.check`); membership agrees with the entities, the queue and the defining
    /// requests (`Membership.check`).
    package static func check(_ store: EntityStore, _ t: ReadView, problem: (String) -> Void) throws {
        for p in try ServerETags(store: store).check(t) { problem(p) }
        let defined = Set(try store.syncSettings().definingRequests.map(\.name))
        for p in try Membership(store: store).check(t, defined: defined) { problem(p) }
    }
}

extension EntityStore {
    /// `etags`: set ‖ key → the ETag the service last gave for the entity (UTF-8), sent as
    /// `If-Match` when flush changes it. Written by refresh and by flush's acknowledgments.
    package var serverETags: Database { database(SyncRole.etagsName) }
    /// `membership`: defining-request name ‖ 0x00 ‖ set ‖ key → generation.
    package var membership: Database { database(SyncRole.membershipName) }
    /// `membership/by-entity`: set ‖ key ‖ name → empty.
    package var membershipByEntity: Database { database(SyncRole.membershipByEntityName) }
}
