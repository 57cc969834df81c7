import LMDB
import TestSupport
import Foundation
import Synchronization
import Testing
@testable import Query
import Storage

/// What the result writer puts around entities for an OData server: `@odata.id` when the keys are
/// not all selected, `@odata.etag`, absolute links with a service root, the delta link.
@Suite(.runsOffThePool) struct ResultControlTests {
    // MARK: @odata.id

    @Test func odataIDExactlyWhenAKeyIsNotSelected() throws {
        let s = try ResultStore()
        let prices = try s.json("Products?$select=Price&$filter=startswith(ProductID,'HT')").entities
        #expect(prices.map(\.names) == Array(repeating: ["@odata.id", "Price"], count: 3))
        #expect(
            prices.map { $0["@odata.id"]?.text } == [
                "Products('HT-1000')", "Products('HT-1001')", "Products('HT-1002')",
            ])
        #expect(
            try s.text("Products?$select=Price&$top=1").hasPrefix(
                #"{"@odata.context":"$metadata#Products","value":[{"@odata.id":"Products('HT-1000')","Price":"#))
        for url in [
            "Products?$select=ProductID,Price", "Products", "Products?$select=*", "Products?$select=Price,ProductID",
        ] {
            #expect(try s.json(url).entities.allSatisfy { $0["@odata.id"] == nil && $0["ProductID"] != nil }, "\(url)")
        }
        // A single entity, and one line per entity.
        #expect(
            try s.text("Products('HT-1000')?$select=Name")
                == #"{"@odata.context":"$metadata#Products/$entity","@odata.id":"Products('HT-1000')","Name":"Notebook Basic 15"}"#
                + "\n")
        #expect(
            try s.text("Products?$select=Name&$top=1", format: .jsonl)
                == #"{"@odata.id":"Products('HT-1000')","Name":"Notebook Basic 15"}"# + "\n")
        #expect(try s.json("Products('HT-1000')?$select=ProductID")["@odata.id"] == nil)
    }

    @Test func odataIDOfCompositeKeys() throws {
        let s = try ResultStore()
        let items = try s.json("SalesOrderItems?$select=Quantity").entities
        #expect(
            items.map { $0["@odata.id"]?.text } == [
                "SalesOrderItems(SalesOrderID='0500000000',ItemPosition=10)",
                "SalesOrderItems(SalesOrderID='0500000000',ItemPosition=20)",
                "SalesOrderItems(SalesOrderID='0500000001',ItemPosition=10)",
            ])
        // One key property of two is not enough.
        #expect(
            try s.json("SalesOrderItems?$select=SalesOrderID,Quantity").entities.allSatisfy { $0["@odata.id"] != nil })
        #expect(
            try s.json("SalesOrderItems?$select=Quantity,ItemPosition").entities.allSatisfy { $0["@odata.id"] != nil })
        #expect(
            try s.json("SalesOrderItems?$select=ItemPosition,SalesOrderID").entities.allSatisfy {
                $0["@odata.id"] == nil
            })
        // Through a navigation path the canonical URL is still the entity's own set.
        #expect(
            try s.json("SalesOrders('0500000001')/Items?$select=Quantity").entities.first?["@odata.id"]?.text
                == "SalesOrderItems(SalesOrderID='0500000001',ItemPosition=10)")
    }

    @Test func odataIDInExpandedEntities() throws {
        let s = try ResultStore()
        let orders = try s.json(
            "SalesOrders?$select=SalesOrderID&$expand=Items($select=Quantity),BusinessPartner($select=CompanyName)"
        ).entities
        #expect(orders.count == 2)
        #expect(orders[0].names == ["SalesOrderID", "Items", "BusinessPartner"])
        guard case .array(let items)? = orders[0]["Items"] else { Issue.record("no Items"); return }
        #expect(items.map(\.names) == [["@odata.id", "Quantity"], ["@odata.id", "Quantity"]])
        #expect(
            items.map { $0["@odata.id"]?.text } == [
                "SalesOrderItems(SalesOrderID='0500000000',ItemPosition=10)",
                "SalesOrderItems(SalesOrderID='0500000000',ItemPosition=20)",
            ])
        #expect(orders[1]["BusinessPartner"]?.names == ["@odata.id", "CompanyName"])
        #expect(orders[1]["BusinessPartner"]?["@odata.id"]?.text == "BusinessPartners('0100000001')")
        // The other way round: the outer entity lacks its key, the expanded ones are whole.
        let partners = try s.json("BusinessPartners?$select=CompanyName&$expand=SalesOrders").entities
        #expect(
            partners.map { $0["@odata.id"]?.text } == [
                "BusinessPartners('0100000000')", "BusinessPartners('0100000001')",
            ])
        guard case .array(let orders2)? = partners[0]["SalesOrders"] else { Issue.record("no SalesOrders"); return }
        #expect(orders2.count == 1 && orders2[0]["@odata.id"] == nil && orders2[0]["SalesOrderID"] != nil)
    }

    @Test func odataIDOfAKeyWithQuotesBackslashesAndControlCharacters() throws {
        let s = try ResultStore()
        let text = try s.text("Products?$select=Name&$filter=Name eq 'Odd'")
        // The key literal doubles the single quote (URL syntax); JSON escapes `"`, `\` and the tab.
        #expect(text.contains(#"{"@odata.id":"Products('O''Neil \"x\"\\y\tz')","Name":"Odd"}"#))
        let id = try JSON.parse(text).entities.first?["@odata.id"]?.text
        #expect(id == "Products('" + ResultStore.specialKey.replacingOccurrences(of: "'", with: "''") + "')")
        // And the URL it names addresses the entity.
        #expect(try s.engine.entities("Products('O''Neil \"x\"\\y\tz')").first?["Name"] == .string("Odd"))
    }

    // MARK: @odata.etag

    @Test func etagsAreTheRowsTagsStableUntilTheRowChanges() throws {
        let s = try ResultStore()
        let options = ResultOptions(etags: true)
        let first = try s.json("Products?$select=Price&$filter=startswith(ProductID,'HT')", options: options).entities
        #expect(first.map(\.names) == Array(repeating: ["@odata.id", "@odata.etag", "Price"], count: 3))
        let keys: [[Value]] = ["HT-1000", "HT-1001", "HT-1002"].map { [.string($0)] }
        let stored = try keys.map { try s.rowTag("Products", $0) }
        #expect(first.map { $0["@odata.etag"]?.text } == stored)
        #expect(stored.allSatisfy { $0?.hasPrefix("W/\"") == true } && Set(stored).count == 3)
        #expect(try keys.map { try s.engine.etag(set: "Products", key: $0) } == stored)
        #expect(try s.engine.etag(set: "Products", key: [.string("nope")]) == nil)
        // The raw text escapes the tag's quotes.
        #expect(
            try s.text("Products?$top=1&$select=ProductID", options: options)
                .contains(#"{"@odata.etag":"W/\"\#(stored[0]!.dropFirst(3).dropLast())\"","ProductID":"HT-1000"}"#))

        // Unchanged rows keep their tags; a changed row gets another.
        #expect(
            try s.json("Products?$select=Price&$filter=startswith(ProductID,'HT')", options: options).entities == first)
        try s.merge("Products", key: keys[1], ["Price": .decimal(EDMDecimal(999))])
        let second = try s.json("Products?$select=Price&$filter=startswith(ProductID,'HT')", options: options).entities
        #expect(
            second[0]["@odata.etag"] == first[0]["@odata.etag"] && second[2]["@odata.etag"] == first[2]["@odata.etag"])
        #expect(second[1]["@odata.etag"] != first[1]["@odata.etag"])
        #expect(second[1]["@odata.etag"]?.text == (try s.rowTag("Products", keys[1])))
        // Without the option, no tags.
        #expect(try s.json("Products").entities.allSatisfy { $0["@odata.etag"] == nil })
    }

    @Test func etagOfASingleEntityAndOfExpandedOnes() throws {
        let s = try ResultStore()
        let tag = try s.rowTag("Products", [.string("HT-1000")])!
        var text = ""
        let summary = try s.engine.execute(
            "Products('HT-1000')?$select=ProductID", options: ResultOptions(etags: true), write: { text += $0 })
        #expect(summary.etag == tag)
        #expect(text.hasPrefix(#"{"@odata.context":"$metadata#Products/$entity","@odata.etag":"W/\""#))
        #expect(try JSON.parse(text).names == ["@odata.context", "@odata.etag", "ProductID"])
        // The header's tag comes back whether or not the body carries tags.
        #expect(try s.engine.execute("Products('HT-1000')", write: { _ in }).etag == tag)
        #expect(try s.engine.execute("Products", write: { _ in }).etag == nil)
        #expect(try s.engine.execute("Products/$count", write: { _ in }).etag == nil)

        let order = try s.json(
            "SalesOrders('0500000000')?$select=GrossAmount&$expand=Items($select=Quantity)",
            options: ResultOptions(etags: true))
        #expect(order.names == ["@odata.context", "@odata.id", "@odata.etag", "GrossAmount", "Items"])
        guard case .array(let items)? = order["Items"] else { Issue.record("no Items"); return }
        #expect(items.map(\.names) == Array(repeating: ["@odata.id", "@odata.etag", "Quantity"], count: 2))
        #expect(items[1]["@odata.etag"]?.text == (try s.rowTag("SalesOrderItems", [.string("0500000000"), .int(20)])))
    }

    // MARK: Links

    @Test func serviceRootMakesLinksAbsolute() throws {
        let s = try ResultStore()
        for root in ["http://127.0.0.1:8080/", "http://127.0.0.1:8080"] {
            var options = ResultOptions(serviceRoot: root)
            #expect(options.serviceRoot == "http://127.0.0.1:8080/")
            let page = try s.json("Products?$select=Name", pageSize: 2, options: options)
            #expect(page["@odata.context"]?.text == "http://127.0.0.1:8080/$metadata#Products")
            // A read in key order pages by key: the token names the last key sent (keyset).
            #expect(
                page["@odata.nextLink"]?.text?.hasPrefix("http://127.0.0.1:8080/Products?$select=Name&$skiptoken=k")
                    == true)
            // @odata.id stays relative: it is resolved against the context URL.
            #expect(page.entities.first?["@odata.id"]?.text == "Products('HT-1000')")
            #expect(
                try s.json("Products('HT-1000')", options: options)["@odata.context"]?.text
                    == "http://127.0.0.1:8080/$metadata#Products/$entity")
            options.deltaLink = { _ in "/Products?$deltatoken=7" }
            #expect(
                try s.json("Products", options: options)["@odata.deltaLink"]?.text
                    == "http://127.0.0.1:8080/Products?$deltatoken=7")
            options.deltaLink = { _ in "https://elsewhere/Products?$deltatoken=7" }
            #expect(
                try s.json("Products", options: options)["@odata.deltaLink"]?.text
                    == "https://elsewhere/Products?$deltatoken=7")
        }
        // Without a root everything is relative, as before.
        let plain = try s.json("Products", pageSize: 3)
        #expect(plain["@odata.context"]?.text == "$metadata#Products")
        #expect(plain["@odata.nextLink"]?.text?.hasPrefix("Products?$skiptoken=k") == true)
    }

    @Test func deltaLinkOnlyOnTheLastPage() throws {
        let s = try ResultStore()
        let calls = Mutex(0)
        let options = ResultOptions(deltaLink: { _ in
            calls.withLock { $0 += 1 }; return "Products?$deltatoken=1"
        })
        var url = "Products"
        var pages: [JSON] = []
        while pages.count < 5 {
            let page = try s.json(url, pageSize: 3, options: options)
            pages.append(page)
            guard let next = page["@odata.nextLink"]?.text else { break }
            url = next
        }
        #expect(pages.count == 2)
        #expect(pages[0]["@odata.nextLink"] != nil && pages[0]["@odata.deltaLink"] == nil)
        #expect(pages[1]["@odata.nextLink"] == nil && pages[1]["@odata.deltaLink"]?.text == "Products?$deltatoken=1")
        #expect(pages[1].names.last == "@odata.deltaLink")
        // Unpaged, empty and `$top`-cut collections end with it too; a single entity, a count and
        // JSON lines do not ask for it.
        #expect(try s.json("Products?$top=1", options: options)["@odata.deltaLink"] != nil)
        #expect(try s.json("Products?$filter=ProductID eq 'none'", options: options)["@odata.deltaLink"] != nil)
        #expect(try s.json("BusinessPartners('0100000000')/SalesOrders", options: options)["@odata.deltaLink"] != nil)
        let before = calls.withLock { $0 }
        #expect(try s.json("Products('HT-1000')", options: options)["@odata.deltaLink"] == nil)
        #expect(try s.text("Products/$count", options: options) == "4")
        #expect(try !s.text("Products", format: .jsonl, options: options).contains("deltaLink"))
        #expect(calls.withLock { $0 } == before)
        #expect(try s.json("Products").names == ["@odata.context", "value"])
    }

    /// The delta link must stand for the snapshot the entities were read from. The closure writes
    /// a product itself, and the sink writes another while the response streams; a closure run in
    /// a transaction of its own (before or after the query's) would count one of them that the
    /// response does not have.
    @Test func deltaLinkIsMadeFromTheResponsesSnapshot() throws {
        let s = try ResultStore()
        // Enough rows that the response is flushed in several 64 KiB chunks.
        let long = String(repeating: "n", count: 400)
        try s.insert("Products", (0..<400).map { ["ProductID": .string("P-\($0)"), "Name": .string(long)] })
        let store = s.store
        let options = ResultOptions(deltaLink: { t in
            try store.write { w in try store.set("Products").insert(w, ["ProductID": .string("in-closure")]) }
            return "Products?$deltatoken=\(try store.set("Products").count(t))"
        })
        var text = ""
        var chunks = 0
        try s.engine.execute(
            "Products?$select=ProductID,Name", options: options,
            writeBytes: { chunk in
                chunks += 1
                if chunks == 1 {
                    try store.write { w in try store.set("Products").insert(w, ["ProductID": .string("in-sink")]) }
                }
                text += String(decoding: chunk, as: UTF8.self)
            })
        #expect(chunks > 1)
        let j = try JSON.parse(text)
        #expect(j.entities.count == 404)
        #expect(j["@odata.deltaLink"]?.text == "Products?$deltatoken=404")
        #expect(try s.engine.count("Products") == 406)
    }

    // MARK: Delta responses

    @Test func deltaOfNewChangedDeletedAndLeftTheFilter() throws {
        let s = try ResultStore()
        try s.merge("Products", key: [.string("HT-1001")], ["Price": .decimal(EDMDecimal(1300))])  // still > 1000
        try s.merge("Products", key: [.string("HT-1002")], ["Price": .decimal(EDMDecimal(500))])  // leaves the filter
        try s.delete("Products", key: [.string("HT-1000")])
        try s.insert(
            "Products",
            [["ProductID": .string("HT-2000"), "Name": .string("New"), "Price": .decimal(EDMDecimal(2000))]])
        let options = ResultOptions(deltaLink: { _ in "Products?$deltatoken=42" })
        let keys: [[Value]] = ["HT-1001", "HT-1002", "HT-1000", "HT-2000", "never"].map { [.string($0)] }
        let text = try s.delta("Products?$filter=Price gt 1000&$select=Name", keys, options: options)
        #expect(
            text == #"{"@odata.context":"$metadata#Products/$delta","value":["#
                + #"{"@odata.id":"Products('HT-1001')","Name":"Notebook Basic 17"},"#
                + #"{"@odata.id":"Products('HT-1002')","@removed":{"reason":"changed"}},"#
                + #"{"@odata.id":"Products('HT-1000')","@removed":{"reason":"deleted"}},"#
                + #"{"@odata.id":"Products('HT-2000')","Name":"New"},"#
                + #"{"@odata.id":"Products('never')","@removed":{"reason":"deleted"}}"#
                + #"],"@odata.deltaLink":"Products?$deltatoken=42"}"# + "\n")
        // @odata.id even when every key property is selected; no filter means nothing leaves it.
        #expect(
            try s.delta("Products?$select=ProductID", [[.string("HT-1002")]])
                == #"{"@odata.context":"$metadata#Products/$delta","value":[{"@odata.id":"Products('HT-1002')","ProductID":"HT-1002"}]}"#
                + "\n")
        #expect(try s.delta("Products", []) == #"{"@odata.context":"$metadata#Products/$delta","value":[]}"# + "\n")
    }

    @Test func deltaWithETagsExpandCompositeKeysAndServiceRoot() throws {
        let s = try ResultStore()
        let options = ResultOptions(
            serviceRoot: "http://h/", etags: true, deltaLink: { _ in "SalesOrderItems?$deltatoken=3" })
        try s.delete("SalesOrderItems", key: [.string("0500000000"), .int(20)])
        let j = try JSON.parse(
            try s.delta(
                "SalesOrderItems?$filter=Quantity ge 2",
                [
                    [.string("0500000000"), .int(10)], [.string("0500000000"), .int(20)],
                    [.string("0500000001"), .int(10)],
                ],
                options: options))
        #expect(j["@odata.context"]?.text == "http://h/$metadata#SalesOrderItems/$delta")
        #expect(j["@odata.deltaLink"]?.text == "http://h/SalesOrderItems?$deltatoken=3")
        let v = j.entities
        #expect(v.count == 3)
        #expect(v[0].names.prefix(2) == ["@odata.id", "@odata.etag"])
        #expect(v[0]["@odata.id"]?.text == "SalesOrderItems(SalesOrderID='0500000000',ItemPosition=10)")
        #expect(v[0]["@odata.etag"]?.text == (try s.rowTag("SalesOrderItems", [.string("0500000000"), .int(10)])))
        // SalesOrderItem.SalesOrder has no constraint in the schema: the store cannot say which
        // order an item belongs to, so expanding it is an error, never null (issue 39).
        #expect {
            try s.delta(
                "SalesOrderItems?$expand=SalesOrder($select=GrossAmount)", [[.string("0500000000"), .int(10)]],
                options: options)
        } throws: { "\($0)".contains("'SalesOrder' has no referential constraint") }
        #expect(
            v[1]
                == .object([
                    ("@odata.id", .string("SalesOrderItems(SalesOrderID='0500000000',ItemPosition=20)")),
                    ("@removed", .object([("reason", .string("deleted"))])),
                ]))
        #expect(v[2]["@removed"]?["reason"]?.text == "changed")

        // An expansion inside a delta entry follows the normal rule for @odata.id.
        let orders = try JSON.parse(
            try s.delta(
                "SalesOrders?$select=GrossAmount&$expand=Items($select=SalesOrderID,ItemPosition)",
                [[.string("0500000000")]], options: ResultOptions(etags: true))
        ).entities
        #expect(orders.first?.names == ["@odata.id", "@odata.etag", "GrossAmount", "Items"])
        guard case .array(let items)? = orders.first?["Items"] else { Issue.record("no Items"); return }
        #expect(items.map(\.names) == [["@odata.etag", "SalesOrderID", "ItemPosition"]])
    }

    @Test func deltaFilterFollowsNavigationOfTheOneEntity() throws {
        let s = try ResultStore()
        let keys: [[Value]] = [[.string("0500000000")], [.string("0500000001")]]
        let j = try JSON.parse(
            try s.delta("SalesOrders?$filter=BusinessPartner/Country eq 'US'&$select=BusinessPartnerID", keys)
        ).entities
        #expect(j[0]["@removed"]?["reason"]?.text == "changed")
        #expect(j[1]["BusinessPartnerID"]?.text == "0100000001")
    }

    @Test func deltaReadsTheChangedKeysInItsTransaction() throws {
        let s = try ResultStore()
        var text = ""
        let seen = Mutex<UInt64>(0)
        try s.engine.delta(
            "Products?$select=Name",
            changes: { t in
                seen.withLock { $0 = t.id }
                return [[.string("HT-1000")]]
            }, options: ResultOptions(deltaLink: { t in "Products?$deltatoken=\(t.id)" }),
            writeBytes: { text += String(decoding: $0, as: UTF8.self) })
        let token = try JSON.parse(text)["@odata.deltaLink"]?.text
        #expect(token == "Products?$deltatoken=\(seen.withLock { $0 })")
    }

    @Test func deltaRefusesWhatAListOfChangesCannotHave() throws {
        let s = try ResultStore()
        for (url, word) in [
            ("Products?$orderby=Price", "$orderby"), ("Products?$top=2", "$top"), ("Products?$skip=1", "$skip"),
            ("Products?$count=true", "$count"), ("Products?$skiptoken=2", "$skiptoken"),
            ("Products('HT-1000')", "entity set"), ("SalesOrders('0500000000')/Items", "entity set"),
            ("Products/$count", "entity set"), ("Me", "entity set"),
        ] {
            var written = false
            do {
                try s.engine.delta(url, changed: [[.string("HT-1000")]], writeBytes: { _ in written = true })
                Issue.record("\(url) was accepted")
            } catch let error as QueryError {
                #expect(error.description.contains(word), "\(url): \(error)")
            }
            #expect(!written)
        }
        // A key of the wrong shape fails before output.
        var written = false
        #expect(throws: EntityError.self) {
            try s.engine.delta(
                "SalesOrderItems", changed: [[.string("0500000000")]], writeBytes: { _ in written = true })
        }
        #expect(!written)
    }
}
