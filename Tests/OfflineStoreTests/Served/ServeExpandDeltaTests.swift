import Foundation
import NIOHTTP1
import Testing
@testable import OfflineStore
import Samples
import Storage
import Sync

/// `serve`'s delta responses for requests with `$expand`: changes of every set the expand tree
/// reaches, in and out of scope, in OData JSON Format's delta shapes.
@Suite(.checksStores) struct ServeExpandDeltaTests {
    static func entries(_ reply: HTTP.Reply) throws -> [[String: Any]] {
        try #require(reply.object["value"] as? [[String: Any]], "\(reply.status) \(reply.text.prefix(500))")
    }

    /// Some item of `served` with the given quantity condition, as `SalesOrderItems(…)`.
    static func itemID(_ served: OfflineStore, _ filter: String, skip: Int = 0) throws -> (String, Properties) {
        let item = try #require(try served.entities("SalesOrderItems?$filter=\(filter)&$top=1&$skip=\(skip)").first)
        guard case .string(let order) = item["SalesOrderID"], case .int(let position) = item["ItemPosition"] else {
            throw EntityError.badInput("no item key")
        }
        return ("SalesOrderItems(SalesOrderID='\(order)',ItemPosition=\(position))", item)
    }

    @Test func serveReportsChangesOfEverySetTheExpandReaches() async throws {
        let path = try await ServeTests.sampleStore(items: 200)
        try await withServer(path) { http, _ in
            let track = [("Prefer", "odata.track-changes")]
            let url =
                "BusinessPartners?$select=CompanyName&$expand=SalesOrders($select=GrossAmount;$expand=Items($filter=Quantity%20ge%202;$select=Quantity))"
            let first = try await http.get(url, headers: track)
            #expect(first.header("Preference-Applied")?.contains("odata.track-changes") == true)
            #expect(first.header("OfflineStore-Delta-Expand") == "followed")
            var link = try #require(first.object["@odata.deltaLink"] as? String)
            #expect(try Self.entries(try await http.get(link)).isEmpty)

            let served = try RefreshTests.served(path)
            let (kept, _) = try Self.itemID(served, "Quantity ge 2")
            let (leaving, _) = try Self.itemID(served, "Quantity ge 2", skip: 1)
            let (doomed, _) = try Self.itemID(served, "Quantity ge 2", skip: 2)
            let (outside, _) = try Self.itemID(served, "Quantity lt 2")
            #expect(try await http.send(.PATCH, kept, body: #"{"Quantity":77}"#).status == 204)
            #expect(try await http.send(.PATCH, leaving, body: #"{"Quantity":1}"#).status == 204)
            #expect(try await http.send(.DELETE, doomed).status == 204)
            #expect(try await http.send(.PATCH, outside, body: #"{"NetAmount":1.5}"#).status == 204)
            #expect(
                try await http.send(.PATCH, "SalesOrders('0500000001')", body: #"{"CustomerID":"0100000002"}"#).status
                    == 204)
            let delta = try await http.get(link)
            #expect(delta.status == 200, "\(delta.text)")
            #expect(delta.header("OfflineStore-Delta-Expand") == "followed")
            let entries = try Self.entries(delta)
            func entry(_ id: String) -> [String: Any]? {
                entries.first { ($0["@odata.id"] as? String ?? $0["id"] as? String) == id }
            }
            #expect(entries.count == 5, "\(entries)")
            let k = try #require(entry(kept))
            #expect((k["@odata.context"] as? String)?.hasSuffix("$metadata#SalesOrderItems/$entity") == true)
            #expect(k["Quantity"] as? Int == 77 && k["NetAmount"] == nil)
            #expect(k["SalesOrderID"] != nil && k["ItemPosition"] != nil, "key and foreign key always: \(k)")
            let l = try #require(entry(leaving))
            #expect((l["@odata.context"] as? String)?.hasSuffix("#SalesOrderItems/$deletedEntity") == true)
            #expect(l["reason"] as? String == "changed")
            #expect(entry(doomed)?["reason"] as? String == "deleted")
            #expect(entry(outside)?["reason"] as? String == "changed", "never in scope: a removal a client ignores")
            // The order moved to another partner: written with its new foreign key and its items.
            let order = try #require(entry("SalesOrders('0500000001')"))
            #expect(order["CustomerID"] as? String == "0100000002")
            #expect(order["Items"] is [Any])
            link = try #require(delta.object["@odata.deltaLink"] as? String)
            #expect(try Self.entries(try await http.get(link)).isEmpty)

            // A partner leaving the root $filter takes its orders and their items with it.
            let narrow = try await http.get(
                "BusinessPartners?$filter=Country%20ne%20'XX'&$expand=SalesOrders($expand=Items)", headers: track)
            let narrowLink = try #require(narrow.object["@odata.deltaLink"] as? String)
            let partner = try #require(
                try served.entities("SalesOrders?$filter=CustomerID ne null&$top=1").first?["CustomerID"])
            guard case .string(let partnerID) = partner else { throw EntityError.badInput("no partner") }
            #expect(
                try await http.send(.PATCH, "BusinessPartners('\(partnerID)')", body: #"{"Country":"XX"}"#).status
                    == 204)
            let gone = try Self.entries(try await http.get(narrowLink))
            let orders = try served.entities("BusinessPartners('\(partnerID)')/SalesOrders")
            var items = 0
            for o in orders {
                guard case .string(let id)? = o["SalesOrderID"] else { continue }
                items += try served.entities("SalesOrders('\(id)')/Items").count
            }
            #expect(gone.count == 1 + orders.count + items, "the partner, its \(orders.count) orders, \(items) items")
            #expect(
                gone.allSatisfy {
                    ($0["@removed"] as? [String: Any])?["reason"] as? String == "changed"
                        || $0["reason"] as? String == "changed"
                })

            // A to-one expansion cannot be followed from the change log: no delta link, and a token is refused.
            let toOne = try await http.get("SalesOrderItems?$expand=Product", headers: track)
            #expect(toOne.status == 200 && toOne.object["@odata.deltaLink"] == nil)
            #expect(toOne.header("Preference-Applied") == nil && toOne.header("OfflineStore-Delta-Expand") == nil)
            #expect(try await http.get("SalesOrderItems?$expand=Product&$deltatoken=1").status == 400)
        }
    }
}
