import Foundation
import Samples
import TestSupport
import Testing

/// `offline-store query` writes one valid answer in every format (issue 41, item 6): a large
/// `$expand` past `limits.maxExpandedEntities` is read in pages and joined, not cut by an error
/// after megabytes of JSON; `--all-pages` joins the pages of `--page-size`; a page's next link
/// is never dropped silently.
@Suite(.checksStores, .runsOffThePool) struct QueryPagesCLITests {
    /// A store of the built-in sample whose configuration sets `limits`, made with the tool.
    static func store(_ dir: String, limits: String? = nil) throws -> String {
        let files = dir + "/files", store = dir + "/s"
        #expect(try CLI.run(["sample", "--files", files]).status == 0)
        var initArgs = ["init", "--store", store, "--metadata", files + "/metadata.xml"]
        if let limits {
            try #"{"limits": \#(limits)}"#.write(toFile: dir + "/c.json", atomically: true, encoding: .utf8)
            initArgs += ["--config", dir + "/c.json"]
        }
        #expect(try CLI.run(initArgs).status == 0)
        for set in SampleData.setsInLoadOrder {
            #expect(try CLI.run(["load", "--store", store, "--set", set, files + "/\(set).json"]).status == 0)
        }
        return store
    }

    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    @Test func anExpandPastTheBudgetIsOneValidAnswer() throws {
        let dir = tempDir()
        let tight = try Self.store(dir + "/tight", limits: #"{"maxExpandedEntities": 7}"#)
        let roomy = try Self.store(dir + "/roomy")
        let url = "SalesOrders?$expand=Items&$count=true"
        // Before: status 1 and JSON cut after the entities that fitted ("more than 7 related entities").
        let cut = try CLI.run(["query", "--store", tight, url])
        #expect(cut.status == 0, "\(cut.stderr)")
        let doc = try Self.json(cut.stdout)
        let orders = try #require(doc["value"] as? [[String: Any]])
        #expect(orders.count == 40 && doc["@odata.count"] as? Int == 40 && doc["@odata.nextLink"] == nil)
        #expect(orders.reduce(0) { $0 + (($1["Items"] as? [Any])?.count ?? 0) } == 100)
        for format in ["json", "jsonl", "table"] {
            let a = try CLI.run(["query", "--store", tight, url, "--format", format])
            let b = try CLI.run(["query", "--store", roomy, url, "--format", format])
            #expect(a.status == 0 && a.stdout == b.stdout, "\(format): \(a.stderr)")
        }
        // An order whose items and their products alone pass the budget fails the query: the
        // orders before it are written, then the error, and the output stays valid.
        let url2 = "SalesOrders?$expand=Items($expand=Product)"
        let failed = try CLI.run(["query", "--store", tight, url2])
        #expect(failed.status == 1 && failed.stderr.contains("more than 7 related entities"), "\(failed.stderr)")
        let partial = try Self.json(failed.stdout)
        let error = try #require(partial["error"] as? [String: Any])
        #expect((error["message"] as? String)?.contains("limits.maxExpandedEntities") == true)
        #expect((partial["value"] as? [Any])?.count == 3, "\(failed.stdout)")  // the 4th has 4 items: 8
        let lines = try CLI.run(["query", "--store", tight, url2, "--format", "jsonl"])
        let last = try Self.json(String(try #require(lines.stdout.split(separator: "\n").last)))
        #expect(lines.status == 1 && last["error"] != nil && lines.stdout.split(separator: "\n").count == 4)
        // A query that fails at its first entity writes nothing.
        let first = try CLI.run(["query", "--store", tight, "SalesOrders('0500000003')?$expand=Items($expand=Product)"])
        #expect(first.status == 1 && first.stdout.isEmpty, "\(first.stdout)")
    }

    @Test func allPagesJoinsThePagesOfEveryFormat() throws {
        let dir = tempDir()
        let store = try Self.store(dir)
        // Strings that look like JSON's structure, and JSON past one 64 KiB chunk of the engine's.
        let tricky = #"{"Note":"x]}\"{[\\ ,\"value\":[ ]"}"#
        #expect(try CLI.run(["update", "--store", store, "SalesOrders('0500000001')", tricky]).status == 0)
        #expect(try CLI.run(["generate", "--store", store, "--set", "SalesOrders", "--count", "200"]).status == 0)
        #expect(try CLI.run(["generate", "--store", store, "--set", "SalesOrderItems", "--count", "600"]).status == 0)
        let url = "SalesOrders?$expand=Items&$orderby=GrossAmount desc,SalesOrderID&$count=true"
        // Pages of one entity for JSON (the joins are all there is to it); of 7 and 100 for each.
        for (format, sizes) in [("json", ["1", "7", "100"]), ("jsonl", ["7", "100"]), ("table", ["7", "100"])] {
            let whole = try CLI.run(["query", "--store", store, url, "--format", format])
            #expect(whole.status == 0 && whole.stdout.utf8.count > 1 << 15, "\(format): \(whole.stdout.utf8.count)")
            for size in sizes {
                let joined = try CLI.run(
                    ["query", "--store", store, url, "--format", format, "--page-size", size, "--all-pages"])
                #expect(joined.status == 0 && joined.stdout == whole.stdout, "\(format) pages of \(size)")
            }
        }
        #expect(try CLI.run(["query", "--store", store, url]).stdout.utf8.count > 1 << 16)  // past one chunk
        let doc = try Self.json(
            try CLI.run(["query", "--store", store, url, "--page-size", "7", "--all-pages"]).stdout)
        let orders = try #require(doc["value"] as? [[String: Any]])
        #expect(orders.count == doc["@odata.count"] as? Int && doc["@odata.nextLink"] == nil)
        #expect(orders.contains { $0["Note"] as? String == #"x]}"{[\ ,"value":[ ]"# })
        // An empty answer and a single entity go out as written.
        let none = try CLI.run(["query", "--store", store, "SalesOrders?$filter=SalesOrderID eq 'none'", "--all-pages"])
        #expect(none.stdout == "{\"@odata.context\":\"$metadata#SalesOrders\",\"value\":[]}\n")
        let one = "SalesOrders('0500000001')?$expand=Items"
        #expect(
            try CLI.run(["query", "--store", store, one, "--page-size", "1", "--all-pages"]).stdout
                == (try CLI.run(["query", "--store", store, one, "--page-size", "1"]).stdout))
    }

    @Test func aPageNamesItsNextLinkInEveryFormat() throws {
        let store = try Self.store(tempDir())
        let url = "Products?$orderby=ProductID&$select=ProductID"
        let json = try CLI.run(["query", "--store", store, url, "--page-size", "5"])
        #expect(try Self.json(json.stdout)["@odata.nextLink"] as? String == url + "&$skiptoken=5")
        for format in ["json", "jsonl", "table"] {
            let page = try CLI.run(["query", "--store", store, url, "--page-size", "5", "--format", format])
            #expect(
                page.status == 0 && page.stderr.contains("next page: \(url)&$skiptoken=5"), "\(format): \(page.stderr)")
            #expect(!page.stdout.contains("next page"))
        }
        let jsonl = try CLI.run(["query", "--store", store, url, "--page-size", "5", "--format", "jsonl"])
        #expect(jsonl.stdout.split(separator: "\n").count == 5)
        // The last page has none.
        let last = try CLI.run(["query", "--store", store, url + "&$skiptoken=20", "--page-size", "5"])
        #expect(last.status == 0 && !last.stderr.contains("next page"), "\(last.stderr)")
    }
}
