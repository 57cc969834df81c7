import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore
import Queue
import Remote
import Storage
import Sync

/// Issue 36, item 4: a transaction goes as one change set, or not at all. A header created with a
/// key the service assigns and the items that need that key go together, the items naming the
/// header by its Content-ID (`$1/Items`), where the service resolves such references (V4 always;
/// V2 when configured); one refused member leaves nothing of the transaction on the service.
/// Where the references cannot be used, the transaction is refused whole before anything is sent
/// — never split — unless the configuration allows splitting. Every store passes `check`.
@Suite(.checksStores) struct AtomicTransactionTests {
    /// A note with a comment and a line under it, as one transaction.
    static func noteWithChildren(_ store: OfflineStore, extra: [OfflineStore.Change] = []) async throws {
        try await store.apply(
            [.create(set: "Notes", entity: ["Title": .string("header")])], options: .init(transactionID: "T"))
        let note = try #require(try store.entities("Notes?$filter=Title eq 'header'").first?["NoteID"])
        try await store.apply(
            [
                .create(set: "Comments", entity: ["NoteID": note, "Text": .string("item")]),
                .create(set: "Lines", entity: ["NoteID": note, "LineNo": .int(1), "Text": .string("line")]),
            ] + extra, options: .init(transactionID: "T"))
    }

    @Test func aHeaderAndItsItemsGoAsOneChangeSetNamingTheHeaderByItsContentID() async throws {
        let (served, store) = try await FlushFixture.pair(notes: true)
        try await Self.noteWithChildren(store)
        let server = try await ServerProcess.start(store: served)
        let probe = ProbeBackend(server.url)
        let report = try await store.flush(backend: probe, batchSize: 10)
        await probe.shutdown()
        #expect(await server.stop() == 0)
        #expect(report.succeeded == 3 && report.archived == 0 && report.roundTrips == 1, "\(report)")
        let sent = probe.batches.flatMap { $0 }
        #expect(Set(sent.map(\.group)).count == 1 && sent.first?.group != nil, "one change set")
        let header = try #require(sent.first?.id)
        #expect(sent.map(\.url) == ["Notes", "$\(header)/Comments", "$\(header)/Lines"])
        let note = try #require(try store.entities("Notes?$filter=Title eq 'header'").first?["NoteID"])
        #expect(try store.entities("Comments?$filter=Text eq 'item'").first?["NoteID"] == note)
        #expect(try store.entities("Lines?$filter=Text eq 'line'").first?["NoteID"] == note)
        try FlushFixture.expectInSync(store, served)
    }

    @Test func oneRefusedMemberLeavesNothingOfTheTransactionOnTheService() async throws {
        let (served, store) = try await FlushFixture.pair(notes: true)
        // Tag 'blue' is made on the service meanwhile: the transaction's create of it is refused.
        try await Self.noteWithChildren(
            store, extra: [.create(set: "Tags", entity: ["TagID": .string("blue"), "Label": .string("mine")])])
        _ = try await OfflineStore.open(at: served).create(
            set: "Tags", entity: ["TagID": .string("blue"), "Label": .string("theirs")])
        let before = try FlushFixture.served(served)
        let server = try await ServerProcess.start(store: served)
        let report = try await store.flush(serviceRoot: server.url, batchSize: 10)
        #expect(await server.stop() == 0)
        #expect(report.succeeded == 0 && report.archived == 4, "\(report)")
        #expect(try FlushFixture.served(served) == before, "nothing of the transaction on the service")
        let errors = try FlushFixture.errors(store)
        #expect(
            errors.count == 4 && errors.filter { $0["CausedBy"] == nil }.map { $0["HTTPStatusCode"] } == [.int(409)])
        #expect(try store.requestHistory().filter { $0.outcome == "refused" }.count == 4)
    }

    /// A service that does not resolve Content-ID references (configured so): the transaction is
    /// archived whole before anything is sent, with the reason and what to configure.
    @Test func withoutReferencesTheTransactionIsRefusedWholeNotSplit() async throws {
        let (served, _) = try await FlushFixture.pair(notes: true)
        let store = try Self.offline(contentIDReferences: false, split: false)
        try await Self.noteWithChildren(store)
        let server = try await ServerProcess.start(store: served)
        let probe = ProbeBackend(server.url)
        let report = try await store.flush(backend: probe, batchSize: 10)
        #expect(report.archived == 3 && report.succeeded == 0 && report.sent == 0, "\(report)")
        #expect(probe.batches.isEmpty, "nothing sent")
        let root = try #require(try FlushFixture.errors(store).first { $0["CausedBy"] == nil })
        #expect(root["Code"] == .string("OfflineStore.TransactionNotSent"))
        guard case .string(let message)? = root["Message"] else { Issue.record("no message"); return }
        #expect(message.contains("contentIDReferences") && message.contains("splitTransactions"), "\(message)")
        // The way out: give it up (or configure, and retry).
        try store.resolveAllErrors()
        #expect(try store.entities("Notes?$filter=Title eq 'header'").isEmpty)
        await probe.shutdown()
        #expect(await server.stop() == 0)
        try FlushFixture.expectInSync(store, served)
    }

    /// Splitting, chosen in the configuration: the header goes first, the items after its answer.
    @Test func splittingIsAChoiceTheConfigurationMakes() async throws {
        let (served, _) = try await FlushFixture.pair(notes: true)
        let store = try Self.offline(contentIDReferences: false, split: true)
        try await Self.noteWithChildren(store)
        let server = try await ServerProcess.start(store: served)
        let probe = ProbeBackend(server.url)
        let report = try await store.flush(backend: probe, batchSize: 10)
        await probe.shutdown()
        #expect(await server.stop() == 0)
        #expect(report.succeeded == 3 && report.roundTrips == 2, "\(report)")
        try FlushFixture.expectInSync(store, served)
    }

    /// The same over V2's multipart `$batch`, to `serve` in its V2 dialect, configured to resolve
    /// Content-ID references: one change set, the item under `$<id>/Items`.
    @Test func aV2HeaderAndItsItemGoAsOneMultipartChangeSet() async throws {
        let dir = tempDir()
        var configuration = StoreConfiguration()
        let served = dir + "/served-v2"
        let authority = try OfflineStore.create(
            at: served, metadata: Array(Self.v2Metadata.utf8), configuration: configuration)
        _ = authority
        configuration.contentIDReferences = true
        let store = try OfflineStore.create(
            at: dir + "/offline-v2", metadata: Array(Self.v2Metadata.utf8), configuration: configuration)
        StoreRegistry.current?.add(served)
        StoreRegistry.current?.add(dir + "/offline-v2")
        try await store.apply(
            [.create(set: "Orders", entity: ["Note": .string("v2 header")])], options: .init(transactionID: "T"))
        let order = try #require(try store.entities("Orders").first?["OrderID"])
        try await store.apply(
            [.create(set: "Items", entity: ["OrderID": order, "Text": .string("v2 item")])],
            options: .init(transactionID: "T"))
        let server = try await ServerProcess.start(store: served)
        let report = try await store.flush(serviceRoot: server.url, batchSize: 10)
        #expect(await server.stop() == 0)
        #expect(report.succeeded == 2 && report.roundTrips == 1 && report.archived == 0, "\(report)")
        let theirs = try OfflineStore.open(at: served, readOnly: true)
        let items = try theirs.entities("Items")
        let orders = try theirs.entities("Orders")
        #expect(orders.count == 1 && items.count == 1 && items.first?["OrderID"] == orders.first?["OrderID"])
        #expect(try store.entities("Items").first?["OrderID"] == orders.first?["OrderID"], "the local key mapped")
    }

    /// `serve` takes `POST Set(key)/Navigation` (what a change set's `$1/Comments` becomes): the
    /// new entity's foreign key comes from the path, whatever the body says; a navigation without
    /// a referential constraint is refused (501), nothing made.
    @Test func serveCreatesUnderAnEntityByItsNavigation() async throws {
        let (served, _) = try await FlushFixture.pair(notes: true)
        try await withServer(served) { http, _ in
            let made = try await http.send(.POST, "Notes(2)/Comments", body: #"{"NoteID":3,"Text":"under two"}"#)
            #expect(made.status == 201, "\(made.text)")
            #expect(made.object["NoteID"] as? Int == 2 && made.object["Text"] as? String == "under two")
            let line = try await http.send(.POST, "Notes(2)/Lines", body: #"{"LineNo":7,"Text":"l"}"#)
            #expect(line.status == 201 && line.header("Location")?.hasSuffix("Lines(NoteID=2,LineNo=7)") == true)
            let bad = try await http.send(.POST, "Notes(2)/Nope", body: #"{}"#)
            #expect(bad.status >= 400 && bad.status < 600 && bad.status != 201)
        }
        #expect(try OfflineStore.open(at: served, readOnly: true).count(set: "Comments") == 2)
    }

    static func offline(contentIDReferences: Bool, split: Bool) throws -> OfflineStore {
        var configuration = StoreConfiguration()
        configuration.contentIDReferences = contentIDReferences
        configuration.splitTransactions = split
        return try FlushFixture.notesCopy(configuration, name: "offline")
    }

    /// Orders and their items, keys the service assigns, an association with a referential constraint.
    static let v2Metadata = """
        <edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx" xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" xmlns:sap="http://www.sap.com/Protocols/SAPData">
         <edmx:DataServices m:DataServiceVersion="2.0">
          <Schema Namespace="GW" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
           <EntityType Name="Order">
            <Key><PropertyRef Name="OrderID"/></Key>
            <Property Name="OrderID" Type="Edm.Int32" Nullable="false" sap:creatable="false" sap:updatable="false"/>
            <Property Name="Note" Type="Edm.String" MaxLength="40"/>
            <NavigationProperty Name="Items" Relationship="GW.Order_Items" FromRole="Order" ToRole="Item"/>
           </EntityType>
           <EntityType Name="Item">
            <Key><PropertyRef Name="ItemID"/></Key>
            <Property Name="ItemID" Type="Edm.Int32" Nullable="false" sap:creatable="false" sap:updatable="false"/>
            <Property Name="OrderID" Type="Edm.Int32"/>
            <Property Name="Text" Type="Edm.String" MaxLength="40"/>
            <NavigationProperty Name="Order" Relationship="GW.Order_Items" FromRole="Item" ToRole="Order"/>
           </EntityType>
           <Association Name="Order_Items">
            <End Type="GW.Order" Multiplicity="1" Role="Order"/>
            <End Type="GW.Item" Multiplicity="*" Role="Item"/>
            <ReferentialConstraint>
             <Principal Role="Order"><PropertyRef Name="OrderID"/></Principal>
             <Dependent Role="Item"><PropertyRef Name="OrderID"/></Dependent>
            </ReferentialConstraint>
           </Association>
           <EntityContainer Name="C" m:IsDefaultEntityContainer="true">
            <EntitySet Name="Orders" EntityType="GW.Order"/>
            <EntitySet Name="Items" EntityType="GW.Item"/>
            <AssociationSet Name="Order_Items_Set" Association="GW.Order_Items">
             <End EntitySet="Orders" Role="Order"/>
             <End EntitySet="Items" Role="Item"/>
            </AssociationSet>
           </EntityContainer>
          </Schema>
         </edmx:DataServices>
        </edmx:Edmx>
        """
}
