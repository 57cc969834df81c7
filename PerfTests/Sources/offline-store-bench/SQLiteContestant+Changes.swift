import Foundation
import GRDB

/// Local changes with their queue record: the entity row upsert (its three index entries follow)
/// and a `RequestQueue` row insert in one `write { }` transaction. Concurrent writers are
/// serialized by the pool's one writer connection (WAL, `synchronous=FULL`: each commit syncs
/// the log), which is what a GRDB user gets.
extension SQLiteContestant {
    /// The queue table, as an app would keep it beside its data: ids from `AUTOINCREMENT`, so
    /// never reused (as OfflineStore's counter), the record's fields as columns.
    static let createQueue = """
        CREATE TABLE RequestQueue (
          RequestID INTEGER PRIMARY KEY AUTOINCREMENT, Method TEXT NOT NULL, EntitySet TEXT NOT NULL,
          EntityKey TEXT NOT NULL, Body TEXT, Status TEXT NOT NULL, RepeatabilityID BLOB NOT NULL,
          CreatedAt INTEGER NOT NULL)
        """
    static let insertRequest = """
        INSERT INTO RequestQueue (Method, EntitySet, EntityKey, Body, Status, RepeatabilityID, CreatedAt)
        VALUES (?, ?, ?, ?, ?, ?, ?)
        """

    /// `PRAGMA synchronous` on the writer connection: 2 is FULL.
    func writerSynchronous() throws -> Int {
        try pool.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
    }

    private static func insertRequest(_ db: Database, _ item: Item) throws {
        let (high, low) = QueueRecord.repeatabilityID()
        var guid = Data(count: 16)
        guid.withUnsafeMutableBytes { b in
            b.storeBytes(of: high.bigEndian, toByteOffset: 0, as: UInt64.self)
            b.storeBytes(of: low.bigEndian, toByteOffset: 8, as: UInt64.self)
        }
        let body = String(decoding: QueueRecord.body(item), as: UTF8.self)
        try db.cachedStatement(sql: insertRequest).execute(arguments: [
            QueueRecord.method, BenchSchema.set, QueueRecord.entityKey(item), body, QueueRecord.status, guid,
            QueueRecord.now(),
        ])
    }

    func change(_ item: Item) throws {
        try pool.write { db in
            try db.cachedStatement(sql: Self.upsert).execute(arguments: Self.arguments(item))
            try Self.insertRequest(db, item)
        }
    }

    func changeBatch(_ items: [Item]) throws {
        try pool.write { db in
            let upsert = try db.cachedStatement(sql: Self.upsert)
            for item in items {
                try upsert.execute(arguments: Self.arguments(item))
                try Self.insertRequest(db, item)
            }
        }
    }

    func queueCount() throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM RequestQueue") ?? 0 }
    }

    func queueBody(id: Int64) throws -> String? {
        try pool.read { db in
            try String.fetchOne(db, sql: "SELECT Body FROM RequestQueue WHERE RequestID = ?", arguments: [id])
        }
    }
}
