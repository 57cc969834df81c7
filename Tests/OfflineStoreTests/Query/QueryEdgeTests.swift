import Foundation
import TestSupport
import Testing
@testable import OfflineStore
import Samples
import Storage
@testable import Query

/// Regression tests for the hostile-input findings: unbounded work from a short URL, refused
/// options, skip tokens, page sizes, overflow semantics and error messages.
@Suite(.checksStores, .runsOffThePool) struct QueryEdgeTests {
    /// The error `url` fails with (nil when it answers), and what it wrote.
    static func failure(
        _ engine: QueryEngine, _ url: String, pageSize: Int? = nil
    ) -> (error: QueryError?, output: String) {
        var text = ""
        do {
            try engine.execute(url, pageSize: pageSize, write: { text += $0 })
            return (nil, text)
        } catch let e as QueryError {
            return (e, text)
        } catch {
            Issue.record("\(type(of: error)) escaped for \(url.prefix(120)): \(error)")
            return (nil, text)
        }
    }

    static func ids(_ store: OfflineStore, _ url: String) throws -> [Int64] {
        try store.entities(url).map { if case .int(let i)? = $0["ID"] { i } else { -42 } }
    }

    // MARK: Unbounded work

    /// `SalesOrders?$expand=BusinessPartner($expand=SalesOrders($expand=BusinessPartner(…)))`, about `bytes` long.
    static func cyclicExpand(bytes: Int) -> String {
        var names: [String] = []
        while "SalesOrders?$expand=".count + names.joined().count + names.count * 10 < bytes {
            names.append(names.count % 2 == 0 ? "BusinessPartner" : "SalesOrders")
        }
        return "SalesOrders?$expand=" + names.joined(separator: "($expand=")
            + String(repeating: ")", count: names.count - 1)
    }

    @Test func cyclicExpandFailsFastBeforeAnyOutput() throws {
        let store = try QueryEngineTests.sampleStore()
        let url = Self.cyclicExpand(bytes: 700)
        #expect(url.utf8.count >= 700)
        let start = Date()
        let (error, output) = Self.failure(store.queries, url)
        #expect(Date().timeIntervalSince(start) < 1, "took \(Date().timeIntervalSince(start)) s")
        #expect(output.isEmpty)
        #expect(error?.description.contains("limits.maxExpansionDepth") == true, "\(String(describing: error))")
        #expect(error?.option == "$expand")
        // At the limit it answers.
        let five =
            "SalesOrders?$top=2&$select=SalesOrderID&$expand=BusinessPartner($select=BusinessPartnerID;$expand=SalesOrders($select=SalesOrderID;$expand=BusinessPartner($select=BusinessPartnerID;$expand=SalesOrders($select=SalesOrderID;$expand=BusinessPartner($select=BusinessPartnerID)))))"
        #expect(Self.failure(store.queries, five).error == nil)
        #expect(try store.check().isConsistent)
    }

    @Test func expandedEntitiesHaveABudgetPerResponse() throws {
        let store = try QueryEngineTests.sampleStore()
        let url =
            "SalesOrders?$expand=BusinessPartner($expand=SalesOrders($expand=BusinessPartner($expand=SalesOrders)))"
        // Unlimited, to count what the request expands.
        var counted = 0
        _ = try store.entities.read { t in
            let executor = QueryExecutor(store: store.entities, t: t)
            let query = try store.queries.bind(url)
            var out = ResultWriter(schema: store.schema, format: .json) { _ in }
            let set = try store.entities.set("SalesOrders")
            let plan = Planner.plan(set, options: query.options)
            let shape = try EntityShape(set: set, options: query.options, store: store.entities, etags: false)
            try executor.run(plan) { e in
                try out.entity(e, shape: shape, executor: executor); return true
            }
            counted = executor.expansions.spent
        }
        #expect(counted > 200, "\(counted)")
        let tight = QueryEngine(store: store.entities, limits: QueryLimits(maxExpandedEntities: counted - 1))
        let (error, _) = Self.failure(tight, url)
        #expect(error?.description.contains("limits.maxExpandedEntities") == true, "\(String(describing: error))")
        #expect(
            Self.failure(QueryEngine(store: store.entities, limits: QueryLimits(maxExpandedEntities: counted)), url)
                .error == nil)
        // The budget is per response: each page of a paged request has its own.
        let paged = Self.failure(
            QueryEngine(store: store.entities, limits: QueryLimits(maxExpandedEntities: counted / 4)), url, pageSize: 2)
        #expect(paged.error == nil && paged.output.contains("@odata.nextLink"))
        #expect(Self.failure(store.queries, url).error == nil)  // the default budget
        // Server-driven pages (a page size, as `serve` always has) stop before the entity whose
        // expansions would pass the budget instead of failing: the next link continues at it, and
        // the pages together are the unlimited result.
        let whole = try #require(
            try JSONSerialization.jsonObject(with: Data(Self.failure(store.queries, url).output.utf8))
                as? [String: Any])
        let expected = try #require(whole["value"] as? [Any])
        let cut = QueryEngine(store: store.entities, limits: QueryLimits(maxExpandedEntities: counted / 3))
        var next: String? = url
        var got: [Any] = []
        var pages = 0
        while let u = next, pages < 100 {
            let (error, text) = Self.failure(cut, u, pageSize: 1_000)
            #expect(error == nil, "\(String(describing: error))")
            guard error == nil, let page = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
            else { break }
            got += page["value"] as? [Any] ?? []
            next = page["@odata.nextLink"] as? String
            pages += 1
        }
        #expect(pages >= 3, "\(pages)")
        #expect(
            (got as NSArray).isEqual(to: expected),
            "\(got.count) entities in \(pages) pages, \(expected.count) expected")
    }

    @Test func limitsComeFromTheStoreConfiguration() throws {
        let json = try JSON.parse(#"{"limits": {"maxExpansionDepth": 1, "maxNodeCount": 7}}"#)
        let config = try StoreConfiguration(json: json)
        #expect(config.limits == QueryLimits(maxExpansionDepth: 1, maxNodeCount: 7))
        #expect(try StoreConfiguration(json: config.json) == config)
        #expect(StoreConfiguration().json["limits"] == nil)  // defaults are not written
        for bad in [
            #"{"limits": {"maxExpansionDepht": 1}}"#, #"{"limits": {"maxNodeCount": -1}}"#,
            #"{"limits": {"maxNodeCount": 1.5}}"#,
            #"{"limits": {"maxNodeCount": "9"}}"#, #"{"limits": [1]}"#,
        ] {
            #expect(throws: EntityError.self, "\(bad)") { try StoreConfiguration(json: try JSON.parse(bad)) }
        }
        let dir = TestScratch.directory("os-limits")
        var configuration = SampleData.configuration
        configuration.limits = QueryLimits(maxExpansionDepth: 1)
        do {
            let store = try OfflineStore.create(
                at: dir, metadata: Array(SampleData.metadata.utf8), configuration: configuration)
            _ = try store.load(set: "BusinessPartners", json: Array(SampleData.json("BusinessPartners").utf8))
        }
        let reopened = try OfflineStore.open(at: dir)
        #expect(reopened.queries.limits.maxExpansionDepth == 1)
        #expect(Self.failure(reopened.queries, "BusinessPartners?$expand=SalesOrders").error == nil)
        #expect(
            Self.failure(reopened.queries, "BusinessPartners?$expand=SalesOrders($expand=Items)").error?.description
                .contains("maxExpansionDepth") == true)
        #expect(try reopened.check().isConsistent)
    }

    @Test func nodeCountBoundsFiltersOrderByAndInLists() throws {
        let store = try QueryEngineTests.sampleStore()
        let engine = store.queries
        let conjuncts = (0..<40).map { "Quantity ne \($0)" }.joined(separator: " and ")  // 40 × 3 nodes
        #expect(
            Self.failure(engine, "SalesOrderItems?$filter=" + conjuncts).error?.description.contains(
                "limits.maxNodeCount") == true)
        let thirty = (0..<30).map { "Quantity ne \($0)" }.joined(separator: " and ")
        #expect(Self.failure(engine, "SalesOrderItems?$filter=" + thirty).error == nil)
        let orderBy = Array(repeating: "Quantity", count: 1_000).joined(separator: ",")
        #expect(
            Self.failure(engine, "SalesOrderItems?$orderby=" + orderBy).error?.description.contains("maxNodeCount")
                == true)
        let keys = (0..<150).map { "'05000000\(String(format: "%02d", $0 % 100))'" }.joined(separator: ",")
        let inList = "SalesOrders?$filter=SalesOrderID in (\(keys))"
        #expect(Self.failure(engine, inList).error?.description.contains("maxNodeCount") == true)
        let roomy = QueryEngine(store: store.entities, limits: QueryLimits(maxNodeCount: 1_000))
        #expect(try roomy.entities(inList).count == 40)
        // Expand items count too.
        let wide =
            "SalesOrders?$expand="
            + Array(repeating: "Items($filter=Quantity gt 1 and Quantity lt 9)", count: 1).joined()
        #expect(Self.failure(engine, wide).error == nil)
    }

    @Test func deepNestingFailsFastWithoutExhaustingTheStack() throws {
        let store = try QueryEngineTests.sampleStore()
        let start = Date()
        for url in [
            "SalesOrderItems?$filter=" + String(repeating: "(", count: 50_000) + "true"
                + String(repeating: ")", count: 50_000),
            "SalesOrderItems?$filter=" + String(repeating: "not ", count: 50_000) + "true",
            "SalesOrderItems?$filter=" + String(repeating: "-", count: 50_000) + "Quantity eq 1",
            "SalesOrderItems?$filter=" + String(repeating: "tolower(", count: 10_000) + "ProductID"
                + String(repeating: ")", count: 10_000) + " eq 'x'",
            "SalesOrderItems?$filter=Quantity" + String(repeating: " add 1", count: 50_000) + " eq 1",
            "SalesOrders?$expand=" + String(repeating: "Items($expand=", count: 5_000) + "SalesOrder"
                + String(repeating: ")", count: 5_000),
        ] {
            let (error, output) = Self.failure(store.queries, url)
            #expect(error != nil && output.isEmpty, "\(url.prefix(60))")
        }
        #expect(Date().timeIntervalSince(start) < 10)
    }

    @Test func nestedLambdasAreBounded() throws {
        let store = try QueryEngineTests.sampleStore()
        let two = "BusinessPartners?$filter=SalesOrders/any(o:o/Items/any(i:i/Quantity gt 1))"
        #expect(Self.failure(store.queries, two).error == nil)
        let three =
            "BusinessPartners?$filter=SalesOrders/any(o:o/Items/any(i:i/SalesOrder/Items/all(j:j/Quantity gt 1)))"
        #expect(Self.failure(store.queries, three).error?.description.contains("limits.maxAnyAllDepth") == true)
        let counted = "BusinessPartners?$filter=SalesOrders/any(o:o/Items/any(i:i/SalesOrder/Items/$count gt 1))"
        #expect(Self.failure(store.queries, counted).error?.description.contains("maxAnyAllDepth") == true)
        let nested =
            "SalesOrders?$expand=BusinessPartner($expand=SalesOrders($filter=Items/any(i:i/SalesOrder/Items/any(j:j/SalesOrder/Items/any(k:k/Quantity gt 1)))))"
        #expect(Self.failure(store.queries, nested).error?.option == "$expand")
        #expect(
            try QueryEngine(store: store.entities, limits: QueryLimits(maxAnyAllDepth: 3)).entities(three).count <= 16)
    }

    // MARK: Refused options, skip tokens, page sizes

    @Test func skipTokensThisStoreDidNotWriteAreRefused() throws {
        let store = try QueryEngineTests.sampleStore()
        for token in [
            "-5", "-1", "abc", "", "1e3", "+5", " 5", "9223372036854775808", "99999999999999999999999", "5;x", "%2D5",
        ] {
            let (error, output) = Self.failure(
                store.queries, "SalesOrderItems?$orderby=NetAmount&$skiptoken=" + token, pageSize: 10)
            #expect(error?.option == "$skiptoken" && output.isEmpty, "'\(token)': \(String(describing: error))")
        }
        // A real one pages on; an offset past the end is an empty last page.
        let all = try store.entities("SalesOrderItems?$orderby=NetAmount,SalesOrderID,ItemPosition").count
        #expect(all == 100)
        let last = try JSON.parse(
            Self.failure(store.queries, "SalesOrderItems?$orderby=NetAmount&$skiptoken=95", pageSize: 10).output)
        if case .array(let rows)? = last["value"] { #expect(rows.count == 5) } else { Issue.record("no value") }
        #expect(last["@odata.nextLink"] == nil)
        let past = try JSON.parse(
            Self.failure(
                store.queries, "SalesOrderItems?$skiptoken=9223372036854775807&$top=3&$orderby=Quantity", pageSize: 10
            ).output)
        #expect(past["value"] == .array([]))
        #expect(Paging.nextLink("S?$SkipToken=4&$top=9", offset: 8) == "S?$top=9&$skiptoken=8")
        #expect(Paging.nextLink("S?%24skiptoken=4", offset: 8) == "S?$skiptoken=8")
    }

    @Test func searchAndNonJSONFormatsAreRefused() throws {
        let store = try QueryEngineTests.sampleStore()
        let e = store.queries
        #expect(Self.failure(e, "Products?$search=blue").error?.description == "$search is not supported")
        #expect(
            Self.failure(e, "SalesOrders?$expand=Items($search=blue)").error?.description
                == "$search is not supported in $expand")
        for format in [
            "xml", "atom", "application/xml", "csv", "json;odata.metadata=full", "application/json;odata.metadata=none",
            "application/json;IEEE754Compatible=true", "jsonx",
        ] {
            #expect(Self.failure(e, "Products?$top=1&$format=" + format).error?.option == "$format", "\(format)")
        }
        for format in [
            "json", "JSON", "application/json", "application/json;odata.metadata=minimal",
            "application/json;odata.metadata=minimal;odata.streaming=true", "application/json; charset=utf-8",
        ] {
            let (error, output) = Self.failure(e, "Products?$top=1&$select=ProductID&$format=" + format)
            #expect(error == nil && output.contains("HT-1000"), "\(format): \(String(describing: error))")
        }
    }

    @Test func pageSizesMustBePositive() throws {
        let store = try QueryEngineTests.sampleStore()
        for size in [0, -1, Int.min] {
            #expect(
                Self.failure(store.queries, "Products", pageSize: size).error?.description.contains("page size") == true
            )
        }
        let one = try JSON.parse(Self.failure(store.queries, "Products?$orderby=Price", pageSize: .max).output)
        if case .array(let rows)? = one["value"] { #expect(rows.count == 24) } else { Issue.record("no value") }
        #expect(one["@odata.nextLink"] == nil)
        let skipped = try JSON.parse(
            Self.failure(store.queries, "Products?$skip=9223372036854775800&$top=100&$orderby=Price", pageSize: .max)
                .output)
        #expect(skipped["value"] == .array([]))
    }

    // MARK: Overflow semantics

    /// IDs of the edge rows where the stored value of `property` is one of `texts`, or null.
    static func rows(_ property: String, nullOr texts: Set<String>) -> Set<Int64> {
        let values = EdgeStore.columns.first { $0.0 == property }!.1
        return Set(
            EdgeStore.ids.enumerated().filter { i, _ in
                let v = values[i % values.count]
                return v == "null" || texts.contains(v)
            }.map(\.1))
    }

    @Test func overflowIsNullInFilterAndOrderBy() throws {
        let store = try EdgeStore.create()
        func matching(_ filter: String) throws -> Set<Int64> { Set(try Self.ids(store, "Things?$filter=" + filter)) }
        #expect(try matching("I64 add 1 eq null") == Self.rows("I64", nullOr: ["9223372036854775807"]))
        #expect(try matching("I64 sub 1 eq null") == Self.rows("I64", nullOr: ["-9223372036854775808"]))
        #expect(try matching("I64 mul -1 eq null") == Self.rows("I64", nullOr: ["-9223372036854775808"]))
        #expect(try matching("-I64 eq null") == Self.rows("I64", nullOr: ["-9223372036854775808"]))
        #expect(try matching("I64 div -1 eq null") == Self.rows("I64", nullOr: ["-9223372036854775808"]))
        #expect(try matching("I64 mod -1 eq null") == Self.rows("I64", nullOr: []))  // Int64.min mod -1 is 0
        // The entity does not match either way: null is neither greater nor smaller.
        #expect(try matching("I64 add 1 gt 0").isDisjoint(with: Self.rows("I64", nullOr: ["9223372036854775807"])))
        // …and like any null, it makes `gt` false, so `not (… gt 0)` holds (OData: a comparison with null is false).
        #expect(try matching("not (I64 add 1 gt 0)").isSuperset(of: Self.rows("I64", nullOr: ["9223372036854775807"])))
        // Decimal: 38 significant digits.
        // 10³⁸-1 plus 1 is 1E+38, one significant digit; 1 + 1E-38 needs 39 digits, 1E+300 + 1 and 1 - 1E-300 need 301.
        #expect(
            try matching("Dec add 1 eq null")
                == Self.rows("Dec", nullOr: ["1e300", "-1e-300", "0.00000000000000000000000000000000000001"]))
        #expect(
            try matching("Dec add 0.5 eq null")
                == Self.rows(
                    "Dec",
                    nullOr: [
                        "99999999999999999999999999999999999999",
                        "-99999999999999999999999999999999999999", "1e300", "-1e-300",
                    ]))
        #expect(try matching("Dec mul 10 eq null") == Self.rows("Dec", nullOr: []))  // scale, not digits, grows
        #expect(
            try matching("Dec mul 3 eq null")
                == Self.rows(
                    "Dec",
                    nullOr: ["99999999999999999999999999999999999999", "-99999999999999999999999999999999999999"]))
        // Dates and instants: years -9999 to 9999; the spec's date arithmetic goes through midnight.
        #expect(try matching("Dt add duration'P1D' eq null") == Self.rows("Dt", nullOr: ["\"9999-12-31\""]))
        #expect(try matching("Dt sub duration'PT1S' eq null") == Self.rows("Dt", nullOr: ["\"-9999-01-01\""]))
        #expect(
            try matching("Dto add duration'PT0.0000001S' eq null")
                == Self.rows("Dto", nullOr: ["\"9999-12-31T23:59:59.9999999Z\""]))
        // every instant - 29,227 years
        #expect(try matching("Dto sub duration'P10675199D' eq null") == Set(EdgeStore.ids))
        #expect(
            try matching("Dur add Dur eq null")
                == Self.rows(
                    "Dur", nullOr: ["\"PT922337203685.4775807S\"", "\"-PT922337203685.4775807S\"", "\"P10675199D\""]))
        #expect(try matching("-Dur eq null") == Self.rows("Dur", nullOr: []))  // -(Int64.max) fits
        #expect(try matching("2020-01-01 sub duration'PT1H' eq 2019-12-31").count == EdgeStore.ids.count)
        #expect(try matching("2020-01-01 add duration'PT23H59M' eq 2020-01-01").count == EdgeStore.ids.count)
        // $orderby: an overflowing key sorts as null (first ascending, then by key).
        let ordered = try Self.ids(store, "Things?$orderby=I64 add 1,ID&$select=ID")
        let nulls = Self.rows("I64", nullOr: ["9223372036854775807"])
        #expect(Set(ordered.prefix(nulls.count)) == nulls, "\(ordered)")
        #expect(ordered.count == EdgeStore.ids.count)
        // Division by zero still fails the request (the spec says so); Double follows IEEE 754.
        for f in ["I64 div 0 eq 1", "I32 mod 0 eq 1", "Dec div 0 eq 1", "I64 divby 0 eq 1", "Dec mod 0.0 eq 1"] {
            #expect(Self.failure(store.queries, "Things?$filter=" + f).error?.message == "division by zero", "\(f)")
        }
        // 1.79e308, 5e-324 and INF (rows 0, 2, 3 and again 8, 10, 11) over zero are INF.
        #expect(try matching("Dbl div 0 eq INF") == Set([0, 2, 3, 8, 10, 11].map { EdgeStore.ids[$0] }))
        #expect(try store.check().isConsistent)
    }

    @Test func formerTrapsAnswer() throws {
        let store = try QueryEngineTests.sampleStore()
        let e = store.queries
        let cases: [(String, Bool)] = [  // url, answers (else a QueryError)
            ("Products?$skip=9223372036854775800&$top=100&$orderby=Price", true),
            ("Products?$filter=substring(Name,9223372036854775807) eq ''", true),
            ("Products?$filter=substring(Name,1,9223372036854775807) eq 'otebook 0'", true),
            ("Products?$filter=substring(Name,-9223372036854775808,9223372036854775807) ne null", true),
            ("Products?$filter=substring(Name,0,-9223372036854775808) ne null", false),
            ("Products?$filter=Price mul 1e-9223372036854775808M eq 1", false),
            (
                "Products?$filter=Price add 1 eq -85070591730234615865843651857942052864 add -85070591730234615865843651857942052864",
                true
            ),
            (
                "Products?$filter=-(-85070591730234615865843651857942052864 add -85070591730234615865843651857942052864) eq null",
                true
            ),
            ("Products?$filter=duration'PT922337203685.9999999S' eq duration'PT1S'", false),
            ("Products?$filter=cast('/Date(-9223372036854775808)/',Edm.DateTimeOffset) eq null", true),
            ("Products?$filter=cast('/Date(1--9223372036854775808)/',Edm.DateTimeOffset) eq null", true),
            ("Products?$filter=2020-01-01T00:00:00Z add duration'P10675199D' eq null", true),
            ("Products?$filter=cast(1E30M,Edm.Int64) eq null", true),
            ("Products?$filter=floor(-1e-39M) eq -1 and ceiling(1e-39M) eq 1 and round(1e-39M) eq 0", true),
        ]
        for (url, answers) in cases {
            let (error, output) = Self.failure(e, url)
            #expect((error == nil) == answers, "\(url): \(String(describing: error))")
            if answers { #expect(output.hasPrefix("{")) }
        }
        #expect(try store.entities("Products?$filter=cast(1E30M,Edm.Int64) eq null").count == 24)
        #expect(
            try store.entities("Products?$filter=floor(-1e-39M) eq -1 and ceiling(1e-39M) eq 1 and round(1e-39M) eq 0")
                .count == 24)
        #expect(try store.entities("Products?$filter=substring(Name,1,9223372036854775807) eq 'otebook 0'").count == 1)
    }

    /// A reversed key-prefix scan whose prefix sorts before, between or after the stored keys
    /// (found by `plannerAgreesWithNaiveEvaluation`, seed 3127867435: `SalesOrderID eq 'SO1'`
    /// with no such order answered every row from the end of the set down).
    @Test func reversedKeyPrefixScansStayInTheirPrefix() throws {
        let store = try QueryEngineTests.sampleStore()
        func positions(_ id: String) throws -> [Int64] {
            let url = "SalesOrderItems?$filter=SalesOrderID eq '\(id)'&$orderby=ItemPosition desc"
            #expect(try store.explain(url).contains("reversed"), "\(url)")
            return try store.entities(url).map { if case .int(let i)? = $0["ItemPosition"] { i } else { -1 } }
        }
        #expect(try positions("0") == [])  // before every key
        #expect(try positions("0500000000") == [10])  // the first order
        #expect(try positions("05000000005") == [])  // between two orders
        #expect(try positions("0500000039") == [40, 30, 20, 10])  // the last order
        #expect(try positions("9") == [])  // after every key
    }

    // MARK: Error messages

    @Test func errorMessagesAreShortAndEscaped() throws {
        let store = try QueryEngineTests.sampleStore()
        let e = store.queries
        let digits = String(repeating: "7", count: 100_000)
        let huge = Self.failure(e, "Products?$filter=Price eq 1\(digits)x").error
        #expect(
            huge != nil && huge!.description.count < 200 && huge!.description.contains("…"),
            "\(String(describing: huge))")
        let name = String(repeating: "N", count: 100_000)
        let unknown = Self.failure(e, "Products?$filter=\(name) eq 1").error?.description ?? ""
        #expect(
            unknown.count < 200 && unknown.hasPrefix("unknown property 'NNNN") && unknown.contains("…'"), "\(unknown)")
        for (url, shown) in [
            ("Products?$filter=Na\u{1B}[2Jme eq 'x'", "\\u001B"), ("Products?$filter=Name eq 1\u{202E}", "\\u202E"),
            ("Products?$filter=Name eq 'a' and Namex\u{7}y eq 1", "\\u0007"), ("Products?$f\u{1B}x=1", "\\u001B"),
            ("Products?$filter=Name eq 1\u{85}", "\\u0085"), ("Products?$filter=Nam\u{2028}e eq 1", "\\u2028"),
        ] {
            let text = Self.failure(e, url).error?.description ?? ""
            #expect(text.contains(shown), "\(text)")
            #expect(!text.unicodeScalars.contains { QueryError.isUnsafe($0) }, "\(text.debugDescription)")
        }
        // The not-found error (an EntityError) escapes the key taken from the URL, too.
        do {
            try e.execute("Products('\u{1B}[31m')", write: { _ in })
            Issue.record("found")
        } catch let error as EntityError {
            #expect(!"\(error)".contains("\u{1B}") && "\(error)".contains("\\u001B"), "\(error)")
        }
        #expect(QueryError.quoting("a\u{1B}b\u{0}c\u{9F}d\u{FEFF}") == "a\\u001Bb\\u0000c\\u009Fd\\uFEFF")
        #expect(QueryError.quoting(String(repeating: "é", count: 41)) == String(repeating: "é", count: 40) + "…")
        #expect(
            QueryError("x '\(String(repeating: "1", count: 50))' y \(3)", option: "$filter", column: 2).description
                == "x '\(String(repeating: "1", count: 40))…' y 3 in $filter at column 2")
    }
}
