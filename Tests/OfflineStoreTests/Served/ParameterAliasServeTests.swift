import Foundation
import Testing
import OfflineStore
import Samples
import TestSupport

/// Parameter aliases end to end: through `offline-store serve` over HTTP, the `query` command, and
/// `store.prepare` against the equivalent literal URLs on random values.
@Suite(.checksStores) struct ParameterAliasServeTests {
    static func ids(_ reply: HTTP.Reply, _ property: String) -> [String] {
        ((reply.object["value"] as? [[String: Any]]) ?? []).compactMap { $0[property] as? String }
    }

    @Test func servedURLsUseAliases() async throws {
        try await withServer(try ServeTests.sampleStore(items: 300)) { http, _ in
            let one = try await http.get("Products?$filter=ProductID%20eq%20@p&@p='HT-1001'")
            #expect(one.status == 200)
            #expect(Self.ids(one, "ProductID") == ["HT-1001"])

            let byKey = try await http.get("Products(@k)?@k='HT-1000'")
            #expect(byKey.status == 200 && byKey.object["ProductID"] as? String == "HT-1000")

            // A value that is itself an expression, in $orderby; the same as the literal URL.
            let aliased = try await http.get(
                "Products?$filter=Price%20gt%20@min&$orderby=@o%20desc,ProductID&@min=100&@o=Price")
            let literal = try await http.get("Products?$filter=Price%20gt%20100&$orderby=Price%20desc,ProductID")
            #expect(aliased.status == 200 && !Self.ids(aliased, "ProductID").isEmpty)
            #expect(Self.ids(aliased, "ProductID") == Self.ids(literal, "ProductID"))

            // A function argument, percent-encoded alias name.
            let contains = try await http.get("Products?$filter=contains(Name,@w)&%40w='Notebook'")
            let containsLiteral = try await http.get("Products?$filter=contains(Name,'Notebook')")
            #expect(contains.status == 200 && Self.ids(contains, "ProductID") == Self.ids(containsLiteral, "ProductID"))

            // No value: null, so nothing has a null ProductID.
            let unbound = try await http.get("Products?$filter=ProductID%20eq%20@nothing")
            #expect(unbound.status == 200 && Self.ids(unbound, "ProductID").isEmpty)

            // Paging keeps the aliases in the next link.
            let page = try await http.get(
                "SalesOrderItems?$filter=Quantity%20ge%20@q&@q=1", headers: [("Prefer", "odata.maxpagesize=100")])
            let next = try #require(page.object["@odata.nextLink"] as? String)
            #expect(next.contains("@q=1"))
            let second = try await http.get(next)
            #expect(second.status == 200 && (second.object["value"] as? [Any])?.isEmpty == false)

            for (url, fragment) in [
                ("Products?$filter=ProductID%20eq%20@p&@p='a'&@p='b'", "parameter alias given twice in @p"),
                ("Products?$filter=ProductID%20eq%20@p&@p='a", "unterminated string literal in @p at column 1"),
                ("Products?$filter=ProductID%20eq%20@p&@1p=1", "must start with a letter"),
            ] {
                let bad = try await http.get(url)
                #expect(bad.status == 400, "\(url)")
                let message = (bad.object["error"] as? [String: Any])?["message"] as? String
                #expect(message?.contains(fragment) == true, "\(url): \(message ?? bad.text)")
            }
        }
    }

    @Test(.runsOffThePool) func queryCommandUsesAliases() throws {
        let store = try ServeTests.sampleStore()
        let r = try CLI.run([
            "query", "--store", store, "Products?$filter=ProductID eq @p&@p='HT-1001'", "--format", "jsonl",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.split(separator: "\n").count == 1 && r.stdout.contains("\"HT-1001\""))
        let bad = try CLI.run(["query", "--store", store, "Products?$filter=ProductID eq @p&@p='a'&@p='b'"])
        #expect(bad.status != 0 && bad.stderr.contains("parameter alias given twice in @p"))
    }

    /// A prepared query run with random values answers what the literal URL with those values
    /// answers. Bounded by count (PREPARED_ROUNDS, default 150) and time (20 s).
    @Test(.runsOffThePool) func preparedMatchesLiteralURLsOnRandomValues() throws {
        let store = try OfflineStore.open(at: try ServeTests.sampleStore(items: 600))
        let items = try store.entities("SalesOrderItems")
        let products = try store.entities("Products").compactMap { string($0["ProductID"]) }
        let byProduct = try store.prepare(
            "SalesOrderItems?$filter=ProductID eq @p and Quantity gt @q&$orderby=SalesOrderID,ItemPosition")
        let byKey = try store.prepare("SalesOrderItems(SalesOrderID=@id,ItemPosition=@pos)")
        let cheap = try store.prepare("Products?$filter=contains(Name,@w) or Price lt @max&$orderby=ProductID&$top=5")
        #expect(byProduct.parameters.count == 2 && byKey.parameters.count == 2 && cheap.parameters.count == 2)
        let rounds = Int(ProcessInfo.processInfo.environment["PREPARED_ROUNDS"] ?? "") ?? 150
        let seed = testSeed("preparedMatchesLiteralURLsOnRandomValues")
        var random = SeededRandom(seed: seed)
        let deadline = Date().addingTimeInterval(20)
        var nonEmpty = 0
        for round in 0..<rounds where Date() < deadline {
            let product = random.next() % 10 == 0 ? nil : products[Int(random.next() % UInt64(products.count))]
            let quantity = Int64(random.next() % 12)
            let literal =
                "SalesOrderItems?$filter=ProductID eq \(product.map { "'\($0)'" } ?? "null") and Quantity gt \(quantity)&$orderby=SalesOrderID,ItemPosition"
            let a = try byProduct.entities(aliases: ["p": product.map { .string($0) } ?? .null, "q": .int(quantity)])
            #expect(a == (try store.entities(literal)), "seed \(seed) round \(round): \(literal)")
            if !a.isEmpty { nonEmpty += 1 }

            let item = items[Int(random.next() % UInt64(items.count))]
            let id = try #require(string(item["SalesOrderID"]))
            let pos = random.next() % 8 == 0 ? 99 : try #require(int(item["ItemPosition"]))
            let b = try byKey.entities(aliases: ["id": .string(id), "pos": .int(pos)])
            #expect(
                b == (try store.entities("SalesOrderItems(SalesOrderID='\(id)',ItemPosition=\(pos))")),
                "seed \(seed) round \(round)")

            let word = ["Note", "book", "x", "'", ""][Int(random.next() % 5)]
            let max = Int64(random.next() % 3000)
            let c = try cheap.entities(aliases: ["w": .string(word), "max": .int(max)])
            let quotedWord = word.replacingOccurrences(of: "'", with: "''")
            let encoded = "'\(quotedWord)'".addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            #expect(
                c
                    == (try store.entities(
                        "Products?$filter=contains(Name,\(encoded)) or Price lt \(max)&$orderby=ProductID&$top=5")),
                "seed \(seed) round \(round): word \(word), max \(max)")
        }
        #expect(nonEmpty > 0)
        // Wrong values are refused by name, nothing run.
        #expect(throws: QueryError.self) { try byKey.entities(aliases: ["id": .int(1), "pos": .int(1)]) }
        #expect(throws: QueryError.self) { try byKey.entities(aliases: ["pos": .int(1)]) }
    }
}

private func string(_ v: Value?) -> String? {
    if case .string(let s)? = v { return s }
    return nil
}

private func int(_ v: Value?) -> Int64? {
    if case .int(let i)? = v { return i }
    return nil
}
