import Foundation
import OfflineStore

/// What a local change's queue record holds in the raw LMDB and SQLite contestants: what
/// OfflineStore's `RequestQueue` record holds for the same PATCH (method, entity set, key as in a
/// URL, the changed properties as OData JSON, status, a repeatability id, the time).
enum QueueRecord {
    static let method = "PATCH"
    static let status = "pending"

    /// The changed properties as OfflineStore writes a PATCH body (declaration order):
    /// `{"Quantity":7,"ChangedAt":"2021-03-04T05:06:07Z"}`.
    static func body(_ item: Item) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        var out = JSONOut(sink: { bytes.append(contentsOf: $0) })
        out.ascii("{\"Quantity\":")
        out.int(Int64(item.quantity))
        out.ascii(",\"ChangedAt\":")
        out.dateTimeOffset(ticks: item.changedAt, offsetMinutes: item.changedAtOffset)
        out.byte(0x7D)
        out.flush()
        return bytes
    }

    /// The key as in a URL, as OfflineStore's `EntityKey`: `SalesOrderID='0500000001',ItemPosition=10`.
    static func entityKey(_ item: Item) -> String {
        "SalesOrderID='" + item.salesOrderID.replacingOccurrences(of: "'", with: "''") + "',ItemPosition="
            + String(item.itemPosition)
    }

    /// Now, in 100 ns ticks since 1970 (UTC).
    static func now() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 10_000_000 + Int64(ts.tv_nsec) / 100
    }

    /// A random (version 4) UUID, big-endian bytes.
    static func repeatabilityID() -> (high: UInt64, low: UInt64) {
        var g = SystemRandomNumberGenerator()
        let (a, b): (UInt64, UInt64) = (g.next(), g.next())
        let high = (a & ~0xF000) | 0x4000
        let low = (b & ~(UInt64(0xC) << 60)) | (UInt64(0x8) << 60)
        return (high, low)
    }
}

extension Item {
    /// The item with a new quantity and a later `ChangedAt`: one local change.
    func changed(quantity: Int32) -> Item {
        var i = self
        i.quantity = quantity
        i.changedAt += 10_000_000
        return i
    }

    /// OfflineStore's PATCH for this change: the changed properties.
    var changeProperties: Properties {
        [
            "Quantity": .int(Int64(quantity)),
            "ChangedAt": .dateTimeOffset(EDMDateTimeOffset(ticks: changedAt, offsetMinutes: changedAtOffset)),
        ]
    }

    var keyValues: [Value] { [.string(salesOrderID), .int(Int64(itemPosition))] }
}
