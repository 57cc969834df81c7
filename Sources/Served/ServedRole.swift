package import LMDB
package import Storage

/// The served role's databases (`offline-store serve` over an authority store): what a server owes
/// its clients beside the entities. Written by served writes, in the write's transaction.
///
/// | database | key | value |
/// |---|---|---|
/// | `changes` | sequence number (UInt64 BE) | kind ‖ set ‖ key: the change log behind delta links (`ChangeLog`) |
/// | `changes/by-entity` | set ‖ key | the entity's entry in `changes` |
/// | `repeat` | repeatability request id | the recorded answer of a write (`RepeatRecords`) |
/// | `repeat/by-time` | time ‖ id | empty: oldest first, for purging expired records |
package enum ServedRole: StoreRole {
    static let changesName = "changes"
    static let changesByEntityName = "changes/by-entity"
    static let repeatName = "repeat"
    static let repeatByTimeName = "repeat/by-time"

    package static func databaseNames(schema: Schema) -> [String] {
        [changesName, changesByEntityName, repeatName, repeatByTimeName]
    }

    package static func check(_ store: EntityStore, _ t: ReadView, problem: (String) -> Void) throws {
        try store.checkServed(t, problem: problem)
    }
}

extension EntityStore {
    /// `changes`: the served role's change log (`ChangeLog`), sequence number → kind ‖ set ‖ key.
    package var changes: Database { database(ServedRole.changesName) }
    /// `changes/by-entity`: set ‖ key → the entity's entry in `changes`.
    package var changesByEntity: Database { database(ServedRole.changesByEntityName) }
    /// `repeat`: the served role's repeatability records (`RepeatRecords`), id → recorded answer.
    package var repeatRecords: Database { database(ServedRole.repeatName) }
    /// `repeat/by-time`: time ‖ id → empty, oldest first, for purging expired records.
    package var repeatRecordsByTime: Database { database(ServedRole.repeatByTimeName) }
}
