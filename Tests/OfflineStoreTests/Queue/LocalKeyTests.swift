import TestSupport
import Foundation
import Testing
@testable import OfflineStore
import Samples
@testable import Queue
@testable import Sync
@testable import Storage

/// Entities created without the key the service assigns: local keys that cannot clash, and what a
/// (simulated) service answer does — the entity, its queued requests and every local reference
/// move to the service's key.
@Suite(.checksStores, .runsOffThePool) struct LocalKeyTests {
    func requests(_ store: OfflineStore) throws -> [RequestRecord] {
        try store.entities("RequestQueue?$orderby=RequestID").map { try RequestRecord($0) }
    }

    @Test func serverKeysReplaceLocalKeysEverywhere() throws {
        let store = try makeSampleStore()
        let partner = try store.create(set: "BusinessPartners", entity: ["CompanyName": .string("New Co")])
        let partnerKey = try #require(partner.entity?["BusinessPartnerID"])
        #expect(partnerKey == .string("~1"))
        let product = try store.create(set: "Products", entity: ["Name": .string("Pen"), "SupplierID": partnerKey])
        let productKey = try #require(product.entity?["ProductID"])
        #expect(productKey == .string("~2"))
        try store.update(
            set: "Products", key: [productKey], changes: ["Name": .string("Blue pen")],
            options: .init(nonMergeable: true))
        let order = try store.create(set: "SalesOrders", entity: ["CustomerID": partnerKey])
        let orderKey = try #require(order.entity?["SalesOrderID"])
        try store.create(
            set: "SalesOrderItems",
            entity: ["SalesOrderID": orderKey, "ItemPosition": .int(10), "ProductID": productKey, "Quantity": .int(2)])
        // A server entity pointed at the local partner: its PATCH carries the local key too.
        try store.update(set: "Products", key: [.string("HT-1001")], changes: ["SupplierID": partnerKey])
        #expect(
            try requests(store).filter(\.localKey).map(\.entitySet) == ["BusinessPartners", "Products", "SalesOrders"])
        #expect(try store.entities("BusinessPartners?$filter=offline.isLocal()").count == 1)

        // The service creates the partner and answers with its key.
        try store.acknowledge(
            requestID: partner.requestID!,
            serverImage: [
                "BusinessPartnerID": .string("0100000099"), "CompanyName": .string("New Co"), "Country": .string("DE"),
            ])
        #expect(try store.get(set: "BusinessPartners", key: [partnerKey]) == nil)
        // computed by the service
        #expect(try store.get(set: "BusinessPartners", key: [.string("0100000099")])?["Country"] == .string("DE"))
        #expect(try store.get(set: "Products", key: [productKey])?["SupplierID"] == .string("0100000099"))
        #expect(try store.get(set: "Products", key: [.string("HT-1001")])?["SupplierID"] == .string("0100000099"))
        #expect(try store.get(set: "SalesOrders", key: [orderKey])?["CustomerID"] == .string("0100000099"))
        var queued = try requests(store)
        #expect(queued.allSatisfy { ($0.body ?? "").contains("~1") == false }, "\(queued.map { $0.body ?? "" })")
        #expect(
            queued.first { $0.entitySet == "Products" && $0.method == .create }?.body?.contains(
                #""SupplierID":"0100000099""#) == true)

        // The order's key comes back: its item, whose key holds the order's key, moves with it.
        try store.acknowledge(
            requestID: order.requestID!,
            serverImage: ["SalesOrderID": .string("0500000099"), "CustomerID": .string("0100000099")])
        #expect(try store.get(set: "SalesOrderItems", key: [orderKey, .int(10)]) == nil)
        let item = try #require(try store.get(set: "SalesOrderItems", key: [.string("0500000099"), .int(10)]))
        #expect(item["ProductID"] == productKey && item["Quantity"] == .int(2))
        queued = try requests(store)
        let itemRequest = try #require(queued.first { $0.entitySet == "SalesOrderItems" })
        #expect(itemRequest.entityKey == "SalesOrderID='0500000099',ItemPosition=10")
        #expect(itemRequest.body?.contains("0500000099") == true)

        // The product: its create, then its (non-mergeable) update, which stays queued under the new key.
        try store.acknowledge(
            requestID: product.requestID!,
            serverImage: ["ProductID": .string("HT-9000"), "Name": .string("Pen"), "SupplierID": .string("0100000099")])
        // the pending update on top
        #expect(try store.get(set: "Products", key: [.string("HT-9000")])?["Name"] == .string("Blue pen"))
        #expect(
            try store.get(set: "SalesOrderItems", key: [.string("0500000099"), .int(10)])?["ProductID"]
                == .string("HT-9000"))
        queued = try requests(store)
        #expect(
            queued.first { $0.entitySet == "Products" && $0.method == .update && $0.entityKey == "'HT-9000'" } != nil)
        #expect(try store.entities("Products?$filter=offline.isLocal()").isEmpty)
        #expect(try store.entities("RequestQueue?$filter=contains(Body,'~') or contains(EntityKey,'~')").isEmpty)
    }

    @Test func acknowledgingPlainRequestsKeepsTheServerImage() throws {
        let store = try makeSampleStore()
        let u1 = try store.update(
            set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("one")],
            options: .init(nonMergeable: true))
        try store.update(
            set: "Products", key: [.string("HT-1001")], changes: ["Price": .null], options: .init(nonMergeable: true))
        // The service answers the first PATCH with 204: its image is the old one with the change.
        try store.acknowledge(requestID: u1.requestID!, serverImage: nil)
        let e = try #require(try store.get(set: "Products", key: [.string("HT-1001")]))
        #expect(e["Name"] == .string("one") && e["Price"] == nil)
        #expect(try requests(store).count == 1)
        let d = try store.delete(set: "Products", key: [.string("HT-1002")])
        #expect(throws: EntityError.self) { try store.acknowledge(requestID: d.requestID! + 100, serverImage: nil) }
        try store.acknowledge(requestID: d.requestID!, serverImage: nil)
        #expect(try store.get(set: "Products", key: [.string("HT-1002")]) == nil)
        // Out of order: the second request of an entity cannot be acknowledged before the first.
        let a = try store.update(
            set: "Products", key: [.string("HT-1003")], changes: ["Name": .string("a")],
            options: .init(nonMergeable: true))
        let b = try store.update(
            set: "Products", key: [.string("HT-1003")], changes: ["Name": .string("b")],
            options: .init(nonMergeable: true))
        #expect(throws: EntityError.self) { try store.acknowledge(requestID: b.requestID!, serverImage: nil) }
        try store.acknowledge(requestID: a.requestID!, serverImage: nil)
        try store.acknowledge(requestID: b.requestID!, serverImage: nil)
        #expect(try store.get(set: "Products", key: [.string("HT-1003")])?["Name"] == .string("b"))
    }

    static let computedKeys = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
         <edmx:DataServices><Schema Namespace="T" xmlns="http://docs.oasis-open.org/odata/ns/edm">
          <EntityType Name="Order"><Key><PropertyRef Name="ID"/></Key>
           <Property Name="ID" Type="Edm.Int32" Nullable="false"><Annotation Term="Org.OData.Core.V1.Computed" Bool="true"/></Property>
           <Property Name="Note" Type="Edm.String"/>
          </EntityType>
          <EntityType Name="Doc"><Key><PropertyRef Name="ID"/></Key>
           <Property Name="ID" Type="Edm.Guid" Nullable="false"><Annotation Term="Core.Computed"/></Property>
          </EntityType>
          <EntityType Name="Day"><Key><PropertyRef Name="D"/></Key><Property Name="D" Type="Edm.Date" Nullable="false"/></EntityType>
          <EntityContainer Name="C"><EntitySet Name="Orders" EntityType="T.Order"/><EntitySet Name="Docs" EntityType="T.Doc"/>
           <EntitySet Name="Days" EntityType="T.Day"/></EntityContainer>
         </Schema></edmx:DataServices>
        </edmx:Edmx>
        """

    @Test func localKeysByTypeAndTheComputedAnnotation() throws {
        let store = try OfflineStore.create(at: tempDir() + "/store", metadata: Array(Self.computedKeys.utf8))
        #expect(store.entities.schema.entityType(ofSet: "Orders")?.property("ID")?.computed == true)
        #expect(store.entities.schema.entityType(ofSet: "Docs")?.property("ID")?.computed == true)
        let a = try store.create(set: "Orders", entity: ["Note": .string("a")])
        let b = try store.create(set: "Orders", entity: [:])
        #expect(a.entity?["ID"] == .int(-1) && b.entity?["ID"] == .int(-2))
        let doc = try store.create(set: "Docs", entity: [:])
        guard case .guid? = doc.entity?["ID"] else { Issue.record("no local GUID"); return }
        #expect(throws: EntityError.self) { try store.create(set: "Days", entity: [:]) }  // a date cannot be made up
        #expect(try store.count(set: "Days") == 0)
        #expect(try requests(store).filter(\.localKey).count == 3)
        // V2: sap:creatable="false" marks a property the service computes.
        let v2 = try CSDL.parse(
            """
            <edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx" xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" xmlns:sap="http://www.sap.com/Protocols/SAPData">
             <edmx:DataServices m:DataServiceVersion="2.0"><Schema Namespace="S" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
              <EntityType Name="E"><Key><PropertyRef Name="K"/></Key><Property Name="K" Type="Edm.String" Nullable="false" MaxLength="10" sap:creatable="false"/></EntityType>
              <EntityContainer Name="C" m:IsDefaultEntityContainer="true"><EntitySet Name="Es" EntityType="S.E"/></EntityContainer>
             </Schema></edmx:DataServices></edmx:Edmx>
            """)
        #expect(v2.entityType(ofSet: "Es")?.property("K")?.computed == true)
    }
}
