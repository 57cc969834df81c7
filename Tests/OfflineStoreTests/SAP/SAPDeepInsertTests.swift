import Foundation
import Testing
@testable import OfflineStore
import Storage

/// Issue 36, deep insert against mock-sap's S/4 sales order services, V2 (API_SALES_ORDER_SRV)
/// and V4 (the RAP api_salesorder): an order whose number the service assigns, created offline
/// with two items whose numbers it assigns too, inline. It is readable locally before the flush,
/// changed, flushed once as one POST, its keys mapped back, and a refresh brings back what the
/// store holds. One item the service refuses leaves nothing of the order on the service and the
/// whole of it in the ErrorArchive with the service's reason.
///
/// OData V2 does not require the answer to a deep insert to hold the related entities created
/// (V4 does, 4.01 Part 1 §11.4.2.2); mock-sap answers with the order alone, so the flush reads the
/// order back with `$expand=to_Item` — which the request log shows.
///
/// mock-sap 0.22.0's V4 `$metadata` declares no referential constraint between an order and its
/// items (S/4HANA's RAP services declare one on the item's association to its order): the store
/// cannot relate them locally, so it refuses such a deep insert with a message that says why,
/// and changes nothing. V4 deep inserts are tested against `serve` (`DeepInsertTests`).
@Suite(.external, .checksStores, .serialized) struct SAPDeepInsertTests {
    struct Service: Sendable, CustomStringConvertible {
        var root: String
        var orders: String
        var items: String
        var description: String { orders }
    }

    static let v2 = Service(root: MockSAP.salesOrderV2, orders: "A_SalesOrder", items: "A_SalesOrderItem")
    static let v4 = Service(root: MockSAP.salesOrderV4, orders: "SalesOrder", items: "SalesOrderItem")

    static func store(_ sap: MockSAP, _ s: Service) async throws -> OfflineStore {
        let metadata = try await sap.metadata(s.root)
        let configuration = StoreConfiguration(
            serviceRoot: sap.root(s.root),
            definingRequests: [DefiningRequest(name: "SO", url: "\(s.orders)?$expand=to_Item")])
        return try OfflineStore.create(
            at: tempDir() + "/sap-deep", metadata: Array(metadata.utf8), configuration: configuration)
    }

    /// An order with `items` inline (each: its text and, if given, its item number).
    static func order(_ items: [(text: String, number: String?)]) -> NewEntity {
        NewEntity(
            [
                "SalesOrderType": .string("OR"), "SalesOrganization": .string("1710"),
                "DistributionChannel": .string("10"), "OrganizationDivision": .string("00"),
                "SoldToParty": .string("1000001"), "TransactionCurrency": .string("EUR"),
                "PurchaseOrderByCustomer": .string("deep insert"),
            ],
            related: [
                "to_Item": items.map { item in
                    var p: Properties = [
                        "Material": .string("TG11"), "SalesOrderItemText": .string(item.text),
                        "RequestedQuantity": .decimal(EDMDecimal("2")!), "RequestedQuantityUnit": .string("PC"),
                    ]
                    if let n = item.number { p["SalesOrderItem"] = .string(n) }
                    return NewEntity(p)
                }
            ])
    }

    @Test(arguments: [v2]) func anOrderWithItsItemsGoesAsOneDeepInsert(_ s: Service) async throws {
        let sap = try await MockSAP.start()
        defer { Task { await sap.stop() } }
        let store = try await Self.store(sap, s)
        let receipts = try await store.create(set: s.orders, deep: Self.order([("first", nil), ("second", nil)]))
        #expect(receipts.count == 3)
        // Read back locally before the flush, and changed.
        var text = ""
        try store.query("\(s.orders)?$expand=to_Item") { text += $0 }
        let json = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        let local = (json?["value"] as? [[String: Any]])?.first
        #expect((local?["to_Item"] as? [Any])?.count == 2, "read back locally: \(text.prefix(500))")
        let second = try #require(receipts[2].entity)
        try await store.update(
            set: s.items, key: [second["SalesOrder"]!, second["SalesOrderItem"]!],
            changes: ["RequestedQuantity": .decimal(EDMDecimal("5")!)])
        #expect(try store.pendingRequestCount() == 3)

        let report = try await store.flush()
        #expect(report.succeeded == 3 && report.archived == 0 && report.roundTrips == 1, "\(report)")
        let log = try await sap.requests().map { "\($0["method"] ?? "") \($0["path"] ?? "")?\($0["query"] ?? "")" }
        #expect(log.contains { $0.hasPrefix("GET ") && $0.contains("expand=to_Item") }, "read back: \(log)")
        let order = try #require(try store.entities(s.orders).first)
        guard case .string(let number)? = order["SalesOrder"], !number.hasPrefix("~") else {
            Issue.record("the order's number was not mapped: \(order)")
            return
        }
        let mine = try store.entities("\(s.items)?$orderby=SalesOrderItem")
        #expect(mine.map { $0["SalesOrderItemText"] } == [.string("first"), .string("second")])
        #expect(mine.allSatisfy { $0["SalesOrder"] == .string(number) })
        #expect(mine.allSatisfy { if case .string(let n)? = $0["SalesOrderItem"] { !n.hasPrefix("~") } else { false } })
        #expect(mine.last?["RequestedQuantity"] == .decimal(EDMDecimal("5")!))
        let theirs = try await sap.entities(s.root, "\(s.items)?$filter=SalesOrder eq '\(number)'")
        #expect(theirs.count == 2, "\(theirs)")
        #expect(try store.requestHistory().filter { $0.outcome == "applied" }.count == 3)

        // A refresh brings back what the store holds.
        _ = try await store.refresh()
        try await SAPRefreshTests.expectSame(
            sap, s.root, "\(s.items)?$filter=SalesOrder eq '\(number)'", set: s.items, in: store)
        try await SAPRefreshTests.expectSame(
            sap, s.root, "\(s.orders)?$filter=SalesOrder eq '\(number)'", set: s.orders, in: store)
        #expect(try store.entities("\(s.items)?$filter=SalesOrder eq '\(number)'").count == 2)
        print("SAP deep insert \(s): \(report); order \(number)")
    }

    /// The second item names the number the service gives the first ("000010"): the service
    /// refuses it (409) and, the deep insert being all or nothing, makes nothing.
    @Test(arguments: [v2]) func oneRefusedItemLeavesNothingOfTheOrder(_ s: Service) async throws {
        let sap = try await MockSAP.start()
        defer { Task { await sap.stop() } }
        let store = try await Self.store(sap, s)
        try await store.create(set: s.orders, deep: Self.order([("first", nil), ("clashing", "000010")]))
        let before = try await sap.entities(s.root, s.orders).count
        let report = try await store.flush()
        #expect(report.succeeded == 0 && report.archived == 3, "\(report)")
        #expect(try await sap.entities(s.root, s.orders).count == before, "no order made")
        #expect(try await sap.entities(s.root, "\(s.items)?$filter=SalesOrderItemText eq 'first'").isEmpty)
        let errors = try SAPFlush.errors(store)
        let root = try #require(errors.first { $0["CausedBy"] == nil })
        #expect(errors.count == 3 && root["HTTPStatusCode"] == .int(409), "\(errors)")
        print("SAP deep insert refused \(s): \(report); \(SAPFlush.text(root["Message"]).prefix(200))")
        // The way out: fix the item and send it again, as one deep insert still.
        let clashing = try #require(try store.entities("\(s.items)?$filter=SalesOrderItem eq '000010'").first)
        try await store.delete(set: s.items, key: [clashing["SalesOrder"]!, clashing["SalesOrderItem"]!])
        let again = try await store.flush()
        #expect(again.succeeded == 2 && again.archived == 0, "\(again)")
        #expect(try await sap.entities(s.root, "\(s.items)?$filter=SalesOrderItemText eq 'first'").count == 1)
    }

    @Test func withoutAReferentialConstraintAV4DeepInsertIsRefusedHere() async throws {
        let sap = try await MockSAP.start()
        defer { Task { await sap.stop() } }
        let store = try await Self.store(sap, Self.v4)
        let orders = try store.count(set: "SalesOrder")
        await #expect {
            try await store.create(set: "SalesOrder", deep: Self.order([("first", nil)]))
        } throws: { error in
            "\(error)".contains("referential constraint")
        }
        #expect(try store.count(set: "SalesOrder") == orders)
        #expect(try store.pendingRequestCount() == 0)
        // A plain create of the order goes: SAP__Messages, a collection it may not leave null, is empty.
        try await store.create(set: "SalesOrder", entity: Self.order([]).properties)
        #expect(try store.entities("SalesOrder").first?["SAP__Messages"] == .collection([]))
    }
}
