import Foundation
import TestSupport
import Testing
@testable import OfflineStore
import Samples
import Storage

/// Features of the query engine end to end, on the built-in sample.
@Suite(.checksStores, .runsOffThePool) struct QueryEngineTests {
    static func sampleStore() throws -> OfflineStore {
        let dir = TestScratch.directory("os-q")
        let store = try OfflineStore.create(
            at: dir, metadata: Array(SampleData.metadata.utf8), configuration: SampleData.configuration)
        for set in SampleData.setsInLoadOrder { try store.load(set: set, json: Array(SampleData.json(set).utf8)) }
        return store
    }

    func run(_ store: OfflineStore, _ url: String, pageSize: Int? = nil) throws -> JSON {
        var text = ""
        try store.query(url, pageSize: pageSize) { text += $0 }
        return try JSON.parse(text)
    }

    func values(_ j: JSON) -> [JSON] {
        if case .array(let a)? = j["value"] { return a }
        return []
    }

    @Test func filterOrderTopSelectCount() throws {
        let s = try Self.sampleStore()
        let j = try run(
            s,
            "BusinessPartners?$filter=Country eq 'US'&$orderby=CompanyName desc&$top=2&$select=CompanyName&$count=true")
        #expect(j["@odata.count"] == .number("5"))
        // The key is not selected: @odata.id identifies each entity.
        #expect(
            values(j) == [
                .object([
                    ("@odata.id", .string("BusinessPartners('0100000014')")),
                    ("CompanyName", .string("Robert Brown Entertainment")),
                ]),
                .object([
                    ("@odata.id", .string("BusinessPartners('0100000004')")),
                    ("CompanyName", .string("Panorama Studios")),
                ]),
            ])
    }

    @Test func navigationAndExpand() throws {
        let s = try Self.sampleStore()
        let items = values(try run(s, "SalesOrders('0500000003')/Items?$select=ItemPosition"))
        #expect(items.count == 4)
        let partner = try run(s, "SalesOrders('0500000003')/BusinessPartner?$select=BusinessPartnerID")
        #expect(partner["BusinessPartnerID"] == .string("0100000005"))  // (3 * 7) % 16 = 5
        let expanded = values(
            try run(
                s,
                "SalesOrders?$filter=SalesOrderID eq '0500000003'&$expand=Items($filter=ItemPosition ge 20;$orderby=ItemPosition desc;$top=2;$select=ItemPosition;$count=true),BusinessPartner($select=CompanyName)&$select=SalesOrderID"
            ))
        #expect(expanded.count == 1)
        #expect(
            expanded[0]["Items"]
                == .array([
                    .object([
                        ("@odata.id", .string("SalesOrderItems(SalesOrderID='0500000003',ItemPosition=40)")),
                        ("ItemPosition", .number("40")),
                    ]),
                    .object([
                        ("@odata.id", .string("SalesOrderItems(SalesOrderID='0500000003',ItemPosition=30)")),
                        ("ItemPosition", .number("30")),
                    ]),
                ]))
        #expect(expanded[0]["Items@odata.count"] == .number("3"))
        #expect(
            expanded[0]["BusinessPartner"]
                == .object([
                    ("@odata.id", .string("BusinessPartners('0100000005')")), ("CompanyName", .string("TECUM")),
                ]))
        // V2 path form and lambdas over collection navigation.
        #expect(values(try run(s, "BusinessPartners?$expand=SalesOrders/Items&$top=1"))[0]["SalesOrders"] != nil)
        let withBig = try s.entities("SalesOrders?$filter=Items/any(i:i/Quantity ge 8)")
        #expect(!withBig.isEmpty && withBig.count < 40)
        #expect(try s.entities("SalesOrders?$filter=Items/all(i:i/Quantity ge 1)").count == 40)
    }

    @Test func countAndPaging() throws {
        let s = try Self.sampleStore()
        var text = ""
        try s.query("SalesOrderItems/$count") { text += $0 }
        #expect(text == "100")
        var url = "SalesOrderItems?$orderby=NetAmount desc"
        var seen: [JSON] = []
        var pages = 0
        while true {
            let page = try run(s, url, pageSize: 30)
            seen += values(page)
            pages += 1
            guard case .string(let next)? = page["@odata.nextLink"] else { break }
            url = next
        }
        #expect(pages == 4 && seen.count == 100)
        #expect(seen == values(try run(s, "SalesOrderItems?$orderby=NetAmount desc")))
    }

    @Test func planUsesIndexes() throws {
        let s = try Self.sampleStore()
        #expect(try s.explain("Products('HT-1001')").contains("point read"))
        #expect(try s.explain("BusinessPartners?$filter=Country eq 'US'").contains("index scan on 'Country'"))
        #expect(
            try s.explain("Products?$filter=Category eq 'Notebooks' and Price gt 100").contains(
                "index scan on 'Category,Price DESC' equal to ('Notebooks'), range > 100"))
        #expect(try s.explain("SalesOrderItems?$orderby=Quantity desc,ProductID&$top=5").contains("streamed"))
        #expect(try s.explain("SalesOrderItems?$orderby=NetAmount&$top=5").contains("top-5 heap"))
        #expect(try s.explain("SalesOrderItems?$orderby=Quantity desc&$top=5").contains("ties put in key order"))
        #expect(try s.explain("SalesOrders('0500000001')/Items").contains("key range scan"))
        #expect(
            try s.explain("SalesOrders?$filter=CustomerID in ('0100000001','0100000002')").contains("2 index probes"))
        #expect(try s.explain("BusinessPartners?$filter=startswith(CompanyName,'Te')").contains("prefix 'Te'"))
    }

    @Test func errorsNameWhatAndWhere() throws {
        let s = try Self.sampleStore()
        func message(_ url: String) -> String {
            do { _ = try s.entities(url); return "no error" } catch { return "\(error)" }
        }
        #expect(
            message("BusinessPartners?$filter=Countr eq 'US'") == "unknown property 'Countr' in $filter at column 1")
        #expect(message("BusinessPartners?$filter=CompanyName eq 5").contains("at column"))
        #expect(message("BusinessPartners?$filter=Country eq 'US' and").contains("$filter"))
        #expect(message("Nope").contains("Nope"))
        #expect(message("BusinessPartners?$top=-1").contains("$top"))
        #expect(message("BusinessPartners?$expand=Nope").contains("Nope"))
    }
}

extension QueryEngineTests {
    @Test func repeatedURLsReuseTheirBinding() throws {
        let s = try Self.sampleStore()
        let url = "SalesOrderItems?$filter=Quantity ge 5&$orderby=NetAmount desc&$top=3"
        let first = try s.entities(url)
        try s.load(
            set: "SalesOrderItems",
            entities: [
                [
                    "SalesOrderID": .string("0500000001"), "ItemPosition": .int(99),
                    "Quantity": .int(9), "NetAmount": .decimal(EDMDecimal("99999.000")!),
                ]
            ])
        let second = try s.entities(url)  // the cached binding runs against the new data
        #expect(second.count == 3 && second[0]["ItemPosition"] == .int(99) && first[0]["ItemPosition"] != .int(99))
        for _ in 0..<2 { #expect(throws: QueryError.self) { try s.entities("SalesOrderItems?$filter=Nope eq 1") } }
    }
}
