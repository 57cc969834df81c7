import TestSupport
import Foundation
import Testing
import OfflineStore
import Samples

@Suite(.checksStores, .runsOffThePool) struct GeneratorTests {
    static let counts = [
        ("BusinessPartners", 50), ("Products", 300), ("SalesOrders", 1_000), ("SalesOrderItems", 4_000),
    ]

    /// A store from the sample $metadata, generated parents first.
    func sampleStore(seed: UInt64, batch: Int = 700) throws -> OfflineStore {
        let store = try OfflineStore.create(
            at: tempDir() + "/store", metadata: Array(SampleData.metadata.utf8),
            configuration: SampleData.configuration)
        for (set, n) in Self.counts {
            var calls: [(Int, Int)] = []
            let written = try store.generate(set: set, count: n, seed: seed, batchSize: batch) {
                calls.append(($0, $1))
            }
            #expect(written == n)
            #expect(calls.count == (n + batch - 1) / batch && calls.last?.0 == n && calls.allSatisfy { $0.1 == n })
        }
        return store
    }

    func all(_ store: OfflineStore, _ set: String) throws -> [Properties] {
        var out: [Properties] = []
        try store.scan(set: set) {
            out.append($0); return true
        }
        return out
    }

    @Test func generatesCountsWithValidForeignKeysAndAConsistentStore() throws {
        let store = try sampleStore(seed: 42)
        for (set, n) in Self.counts { #expect(try store.count(set: set) == n, "\(set)") }
        let report = try store.check()
        #expect(report.isConsistent, "\(report)")

        let partners = Set(try all(store, "BusinessPartners").map { $0["BusinessPartnerID"]! })
        let products = Set(try all(store, "Products").map { $0["ProductID"]! })
        let orders = Set(try all(store, "SalesOrders").map { $0["SalesOrderID"]! })
        for p in try all(store, "Products") {
            if let s = p["SupplierID"] { #expect(partners.contains(s)) }
        }
        var nullCustomers = 0
        for o in try all(store, "SalesOrders") {
            if let c = o["CustomerID"] { #expect(partners.contains(c)) } else { nullCustomers += 1 }
        }
        #expect(
            nullCustomers > 30 && nullCustomers < 200, "nullable foreign keys are null about 10%: \(nullCustomers)/1000"
        )
        var itemsPerOrder: [Value: Int] = [:]
        for i in try all(store, "SalesOrderItems") {
            let order = try #require(i["SalesOrderID"])
            #expect(orders.contains(order))
            itemsPerOrder[order, default: 0] += 1
            if let p = i["ProductID"] { #expect(products.contains(p)) }
            guard case .int(let pos)? = i["ItemPosition"] else { Issue.record("no ItemPosition"); continue }
            #expect(pos % 10 == 0 && pos >= 10)
            if case .string(let c)? = i["CurrencyCode"] { #expect(c.count <= 5) }
            if case .decimal(let d)? = i["NetAmount"] { #expect(d.scale == 3) }
        }
        // 4,000 items over 1,000 orders: the key hangs each item from an existing order.
        #expect(itemsPerOrder.count == 1_000 && itemsPerOrder.values.allSatisfy { $0 == 4 })
    }

    @Test func sameSeedSameEntitiesOtherSeedOthers() throws {
        let a = try sampleStore(seed: 7), b = try sampleStore(seed: 7, batch: 333), c = try sampleStore(seed: 8)
        for (set, _) in Self.counts {
            #expect(try all(a, set) == all(b, set), "\(set)")
            #expect(try all(a, set) != all(c, set), "\(set)")
        }
        // A generator is a function of the row: any row, in any order.
        let gen = try a.generator(set: "SalesOrders", count: 1_000, seed: 7)
        let stored = try all(a, "SalesOrders")
        let byKey = Dictionary(uniqueKeysWithValues: stored.map { ($0["SalesOrderID"]!, $0) })
        for row in [999, 0, 500] {
            let e = gen.entity(row)
            #expect(byKey[e["SalesOrderID"]!] == e)
        }
    }

    @Test func childrenBeforeParentsIsAClearError() throws {
        let store = try OfflineStore.create(at: tempDir() + "/store", metadata: Array(SampleData.metadata.utf8))
        #expect(throws: EntityError.self) { try store.generate(set: "SalesOrderItems", count: 10) }
        #expect(try store.count(set: "SalesOrderItems") == 0)
        // Nullable foreign keys without parents are simply null.
        #expect(try store.generate(set: "SalesOrders", count: 10) == 10)
        #expect(try all(store, "SalesOrders").allSatisfy { $0["CustomerID"] == nil })
    }

    static let everyType = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:DataServices>
            <Schema Namespace="T" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <EnumType Name="Color"><Member Name="Red" Value="1"/><Member Name="Green" Value="2"/><Member Name="Blue" Value="3"/></EnumType>
              <EnumType Name="Access" IsFlags="true"><Member Name="None" Value="0"/><Member Name="Read" Value="1"/><Member Name="Write" Value="2"/><Member Name="Admin" Value="4"/></EnumType>
              <ComplexType Name="Point2">
                <Property Name="X" Type="Edm.Int16" Nullable="false"/>
                <Property Name="Label" Type="Edm.String" MaxLength="6"/>
              </ComplexType>
              <ComplexType Name="Address">
                <Property Name="Street" Type="Edm.String" MaxLength="30"/>
                <Property Name="City" Type="Edm.String" MaxLength="12" Nullable="false"/>
                <Property Name="Where" Type="T.Point2"/>
              </ComplexType>
              <EntityType Name="Thing">
                <Key><PropertyRef Name="Region"/><PropertyRef Name="Serial"/><PropertyRef Name="Variant"/></Key>
                <Property Name="Region" Type="Edm.String" MaxLength="2" Nullable="false"/>
                <Property Name="Serial" Type="Edm.Guid" Nullable="false"/>
                <Property Name="Variant" Type="Edm.Byte" Nullable="false"/>
                <Property Name="Name" Type="Edm.String" MaxLength="20" Nullable="false"/>
                <Property Name="Description" Type="Edm.String"/>
                <Property Name="Flag" Type="Edm.Boolean"/>
                <Property Name="Tiny" Type="Edm.SByte"/>
                <Property Name="Small" Type="Edm.Int16"/>
                <Property Name="Medium" Type="Edm.Int32"/>
                <Property Name="Large" Type="Edm.Int64"/>
                <Property Name="Ratio" Type="Edm.Single"/>
                <Property Name="Weight" Type="Edm.Double"/>
                <Property Name="Price" Type="Edm.Decimal" Precision="9" Scale="2"/>
                <Property Name="Rate" Type="Edm.Decimal" Precision="5" Scale="5"/>
                <Property Name="Count" Type="Edm.Decimal" Precision="4" Scale="0"/>
                <Property Name="Day" Type="Edm.Date"/>
                <Property Name="At" Type="Edm.DateTimeOffset"/>
                <Property Name="Opens" Type="Edm.TimeOfDay"/>
                <Property Name="Lasts" Type="Edm.Duration"/>
                <Property Name="Id2" Type="Edm.Guid"/>
                <Property Name="Blob" Type="Edm.Binary" MaxLength="5"/>
                <Property Name="Where" Type="Edm.GeographyPoint"/>
                <Property Name="Color" Type="T.Color"/>
                <Property Name="Access" Type="T.Access"/>
                <Property Name="Home" Type="T.Address"/>
                <Property Name="Tags" Type="Collection(Edm.String)" MaxLength="8"/>
                <Property Name="Stops" Type="Collection(T.Point2)"/>
                <Property Name="Code" Type="Edm.String" MaxLength="1"/>
              </EntityType>
              <EntityContainer Name="C"><EntitySet Name="Things" EntityType="T.Thing"/></EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    @Test func everyEDMTypeFitsItsFacets() throws {
        let store = try OfflineStore.create(
            at: tempDir() + "/store", metadata: Array(Self.everyType.utf8),
            configuration: StoreConfiguration(indexes: ["Things": ["Color, Day DESC"]]))
        let n = 3_000
        #expect(try store.generate(set: "Things", count: n, seed: 5, batchSize: 1_000) == n)  // upsert validates each
        #expect(try store.count(set: "Things") == n)  // keys are unique
        let report = try store.check()
        #expect(report.isConsistent, "\(report)")
        let things = try all(store, "Things")
        var nulls = 0
        var kinds = Set<String>()
        for t in things {
            if t["Description"] == nil { nulls += 1 }
            for (k, v) in t { kinds.insert("\(k):\(String(describing: v).prefix(while: { $0 != "(" }))") }
            if case .string(let s)? = t["Region"] { #expect(s.count <= 2) }
            if case .string(let s)? = t["Name"] { #expect(s.count <= 20 && !s.isEmpty) }
            if case .binary(let b)? = t["Blob"] { #expect(b.count <= 5) }
            if case .decimal(let d)? = t["Price"] { #expect(d.scale == 2 && d.significand < 10_000_000_00) }
            if case .collection(let tags)? = t["Tags"] {
                for case .string(let s) in tags { #expect(s.count <= 8) }
            }
            if case .enumMember(let c)? = t["Color"] { #expect((1...3).contains(c)) }
            if case .enumMember(let a)? = t["Access"] { #expect((0...7).contains(a)) }
            if case .complex(let home)? = t["Home"] { #expect(home["City"] != nil) }
        }
        #expect(nulls > n / 20 && nulls < n / 6, "nullable properties are null about 10%: \(nulls)/\(n)")
        for name in [
            "Flag", "Tiny", "Small", "Medium", "Large", "Ratio", "Weight", "Price", "Rate", "Count", "Day", "At",
            "Opens", "Lasts", "Id2", "Blob", "Where", "Color", "Access", "Home", "Tags", "Stops", "Code",
        ] {
            #expect(kinds.contains { $0.hasPrefix(name + ":") }, "\(name) never generated")
        }
        // The JSON writer accepts every value.
        _ = try store.json(set: "Things", entity: things[0])
    }

    @Test func cliGenerate() throws {
        let dir = tempDir()
        try write(SampleData.metadata, to: dir + "/metadata.xml")
        #expect(try CLI.run(["init", "--store", dir + "/s", "--metadata", dir + "/metadata.xml"]).status == 0)
        let p = try CLI.run(["generate", "--store", dir + "/s", "--set", "Products", "--count", "500", "--seed", "9"])
        #expect(p.status == 0 && p.stdout.hasPrefix("generated 500 Products"), "\(p.stdout)\(p.stderr)")
        let bad = try CLI.run(["generate", "--store", dir + "/s", "--set", "SalesOrderItems", "--count", "5"])
        #expect(bad.status != 0 && bad.stderr.contains("generate SalesOrders first"), "\(bad.stderr)")
        let check = try CLI.run(["check", "--store", dir + "/s"])
        #expect(check.status == 0 && check.stdout.contains("ok: 500 entities"), "\(check.stdout)")
    }
}
