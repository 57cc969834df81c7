import TestSupport
import Foundation
import Testing
@testable import OfflineStore

/// The typed API (`EntityCollection`) against a model with every EDM type the store supports:
/// values round-trip exactly through create, find and query; `findBy` finds the property of a
/// key path and uses an index; changes go through the queue; mismatches between a Swift type and
/// the schema are reported when the collection is opened, each named.
@Suite(.checksStores) struct TypedCollectionTests {
    static let metadata = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">
          <edmx:DataServices>
            <Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="T">
              <EnumType Name="Colour"><Member Name="Red" Value="1"/><Member Name="Green" Value="2"/><Member Name="Blue" Value="4"/></EnumType>
              <ComplexType Name="Address">
                <Property Name="Street" Type="Edm.String"/>
                <Property Name="City" Type="Edm.String" Nullable="false"/>
              </ComplexType>
              <EntityType Name="Thing">
                <Key><PropertyRef Name="ID"/></Key>
                <Property Name="ID" Type="Edm.Int32" Nullable="false"/>
                <Property Name="Name" Type="Edm.String" Nullable="false" MaxLength="40"/>
                <Property Name="Flag" Type="Edm.Boolean"/>
                <Property Name="Small" Type="Edm.Byte"/>
                <Property Name="Signed" Type="Edm.SByte"/>
                <Property Name="Short" Type="Edm.Int16"/>
                <Property Name="Big" Type="Edm.Int64"/>
                <Property Name="Ratio" Type="Edm.Single"/>
                <Property Name="Measure" Type="Edm.Double"/>
                <Property Name="Price" Type="Edm.Decimal" Precision="28" Scale="6"/>
                <Property Name="Exact" Type="Edm.Decimal" Precision="38" Scale="10"/>
                <Property Name="Day" Type="Edm.Date"/>
                <Property Name="DayAsDate" Type="Edm.Date"/>
                <Property Name="At" Type="Edm.DateTimeOffset"/>
                <Property Name="AtExact" Type="Edm.DateTimeOffset"/>
                <Property Name="Time" Type="Edm.TimeOfDay"/>
                <Property Name="Span" Type="Edm.Duration"/>
                <Property Name="Uid" Type="Edm.Guid"/>
                <Property Name="Gid" Type="Edm.Guid"/>
                <Property Name="Blob" Type="Edm.Binary"/>
                <Property Name="Colour" Type="T.Colour"/>
                <Property Name="Address" Type="T.Address"/>
                <Property Name="Tags" Type="Collection(Edm.String)"/>
              </EntityType>
            </Schema>
            <Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="C">
              <EntityContainer Name="C"><EntitySet Name="Things" EntityType="T.Thing"/></EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    enum Colour: String, Codable, Sendable, CaseIterable { case Red, Green, Blue }

    struct Address: Codable, Sendable, Equatable {
        var Street: String?
        var City: String
    }

    struct Thing: Codable, Sendable, Equatable {
        var ID: Int
        var Name: String
        var Flag: Bool?
        var Small: UInt8?
        var Signed: Int8?
        var Short: Int16?
        var Big: Int64?
        var Ratio: Float?
        var Measure: Double?
        var Price: Decimal?
        var Exact: EDMDecimal?
        var Day: EDMDate?
        var DayAsDate: Date?
        var At: Date?
        var AtExact: EDMDateTimeOffset?
        var Time: EDMTimeOfDay?
        var Span: EDMDuration?
        var Uid: UUID?
        var Gid: EDMGuid?
        var Blob: Data?
        var Colour: Colour?
        var Address: Address?
        var Tags: [String]?
    }

    /// A Swift name for a property, through `CodingKeys`; it reads a subset.
    struct Brief: Codable, Sendable, Equatable {
        var id: Int
        var name: String
        var price: Decimal?
        enum CodingKeys: String, CodingKey { case id = "ID", name = "Name", price = "Price" }
    }

    static func store() throws -> OfflineStore {
        try OfflineStore.create(
            at: tempDir() + "/s", metadata: Array(metadata.utf8),
            configuration: StoreConfiguration(indexes: ["Things": ["Name", "Colour"]]))
    }

    static func thing(_ id: Int) -> Thing {
        Thing(
            ID: id, Name: "thing \(id)", Flag: id % 2 == 0, Small: 255, Signed: -128, Short: -32768,
            Big: Int64.max - Int64(id),
            Ratio: 0.25, Measure: 1e-300, Price: Decimal(string: "12345678901234567890.123456")!,
            Exact: EDMDecimal("1234567890123456789012345678.0123456789")!, Day: EDMDate("2026-11-23")!,
            DayAsDate: Date(timeIntervalSince1970: 20_000 * 86_400),
            At: Date(timeIntervalSince1970: 1_700_000_000.123_456_7),
            AtExact: EDMDateTimeOffset("2026-11-23T10:30:00.1234567+02:00")!, Time: EDMTimeOfDay("23:59:59.9999999")!,
            Span: EDMDuration("P1DT2H3M4.5S")!, Uid: UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!,
            Gid: EDMGuid("00000000-0000-0000-0000-00000000002a")!, Blob: Data([0, 1, 2, 255]),
            Colour: id % 3 == 0 ? .Blue : .Green,
            Address: Address(Street: id % 2 == 0 ? nil : "Main St \(id)", City: "City \(id % 4)"),
            Tags: ["a", "b\u{1F600}", ""])
    }

    @Test func everyTypeRoundTripsExactlyThroughTheQueue() async throws {
        let store = try Self.store()
        let things = try store.collection(Thing.self, set: "Things")
        for id in 1...9 { try await things.create(Self.thing(id)) }
        var empty = Thing(ID: 100, Name: "nothing")
        try await things.create(empty)

        let one = try #require(try things.find(key: 3))
        #expect(one == Self.thing(3))
        #expect(one.Price?.description == "12345678901234567890.123456", "Decimal stays exact")
        #expect(one.AtExact?.offsetMinutes == 120 && one.AtExact?.description == "2026-11-23T10:30:00.1234567+02:00")
        #expect(try things.find(key: 42) == nil)
        #expect(try things.find(key: 100) == empty)
        #expect(try things.findAll().map(\.ID) == Array(1...9) + [100])
        // Stored as the store's own values: the untyped API and OData JSON see the same.
        let raw = try #require(try store.get(set: "Things", key: [.int(3)]))
        #expect(raw["Colour"] == .enumMember(4) && raw["Small"] == .int(255))
        #expect(raw["Price"] == .decimal(EDMDecimal("12345678901234567890.123456")!))

        // findBy: the key path's property, through an index when there is one.
        #expect(try things.property(\.Colour) == "Colour")
        #expect(try things.property(\.Address) == "Address")
        #expect(try things.findBy(\.Colour, .Blue).map(\.ID) == [3, 6, 9])
        #expect(try things.findBy(\.Name, "thing 5").map(\.ID) == [5])
        #expect(try things.findBy(\.Small, 255).count == 9)
        #expect(try store.explain("Things?$filter=Colour eq T.Colour'Blue'").contains("index"))
        #expect(try things.query("$filter=Big gt 9223372036854775800&$orderby=ID desc&$top=2").map(\.ID) == [6, 5])

        // Changes: update writes what the type names; replace and delete; all queued.
        empty.Price = Decimal(string: "0.000001")
        empty.Tags = []
        try await things.update(empty)
        #expect(try things.find(key: 100) == empty)
        var six = Self.thing(6)
        six.Name = "six"
        try await things.replace(six)
        try await things.delete(Self.thing(9))
        #expect(try things.find(key: 6)?.Name == "six")
        #expect(try things.find(key: 9) == nil)
        #expect(
            try store.pendingRequestCount() == 9,
            "creates of 1…8 and 100 (merged with their changes), 9's create and delete cancel out")

        // A subset type with Swift names.
        let briefs = try store.collection(Brief.self, set: "Things")
        #expect(try briefs.find(key: 100) == Brief(id: 100, name: "nothing", price: Decimal(string: "0.000001")))
        #expect(try briefs.property(\.name) == "Name")
        #expect(try briefs.findBy(\.name, "six").map(\.id) == [6])
    }

    @Test(.runsOffThePool) func mismatchesAreReportedWhenTheCollectionIsOpened() throws {
        let store = try Self.store()
        struct WrongTypes: Codable, Sendable { var ID: Int; var Name: Int; var Price: Double?; var Uid: String? }
        struct NotOptional: Codable, Sendable { var ID: Int; var Name: String; var Flag: Bool }
        struct Unknown: Codable, Sendable { var ID: Int; var Colour2: String? }
        struct NoKey: Codable, Sendable { var Name: String }
        for (open, expected) in [
            (
                { _ = try store.collection(WrongTypes.self, set: "Things") },
                [
                    "Name: a Int cannot hold Edm.String", "Price: a Double cannot hold Edm.Decimal",
                    "Uid: a String cannot hold Edm.Guid",
                ]
            ),
            (
                { _ = try store.collection(NotOptional.self, set: "Things") },
                ["Flag may be null in Things; declare it Optional"]
            ),
            ({ _ = try store.collection(Unknown.self, set: "Things") }, ["Things has no property 'Colour2'"]),
            ({ _ = try store.collection(NoKey.self, set: "Things") }, ["the key property ID of Things is not read"]),
            ({ _ = try store.collection(Thing.self, set: "Nope") }, ["unknown entity set 'Nope'"]),
        ] as [(() throws -> Void, [String])] {
            do {
                try open()
                Issue.record("no error for \(expected)")
            } catch {
                for e in expected { #expect("\(error)".contains(e), "\(error)") }
            }
        }
    }

    @Test func badValuesAreRefusedAndChangeNothing() async throws {
        let store = try Self.store()
        let things = try store.collection(Thing.self, set: "Things")
        var long = Self.thing(1)
        long.Name = String(repeating: "x", count: 41)
        await #expect(throws: EntityError.self) { try await things.create(long) }
        var notMidnight = Self.thing(2)
        notMidnight.DayAsDate = Date(timeIntervalSince1970: 86_400 + 1)
        await #expect(throws: EntityError.self) { try await things.create(notMidnight) }
        #expect(try store.count(set: "Things") == 0)
        #expect(try store.pendingRequestCount() == 0)
        // A stored value the type cannot hold is an error naming it, not a crash.
        try await store.create(set: "Things", entity: ["ID": .int(7), "Name": .string("x"), "Small": .int(200)])
        struct Tiny: Codable, Sendable { var ID: Int; var Name: String; var Small: Int8? }
        let tiny = try store.collection(Tiny.self, set: "Things")
        #expect(throws: EntityError.self) { _ = try tiny.find(key: 7) }
        #expect(throws: EntityError.self) { _ = try things.find(key: "seven") }
        #expect(throws: EntityError.self) { _ = try things.find(key: 1, 2) }
    }
}
