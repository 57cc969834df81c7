import Foundation
import Testing
import TestSupport
@testable import OfflineStore
import Samples
@testable import Query
@testable import Storage

/// Random data and thousands of random `$filter`/`$orderby`/`$top`/`$skip` queries (seeded): the
/// planner's answer must equal a naive evaluation that scans and sorts everything.
@Suite(.checksStores, .runsOffThePool) struct QueryDifferentialTests {
    static let products = (0..<12).map { "HT-\(1000 + $0)" }
    static let companies = ["Alpha", "beta", "Gamma Co", "O'Neil", "Ünïcode", "zeta", "Alpha2", "Delta %"]

    /// A store with the sample schema, extra indexes, and random rows including nulls.
    /// With `covering`, the items' indexes carry properties (`INCLUDE`), the data is the same.
    static func makeStore(_ r: inout SeededRandom, covering: Bool = false) throws -> OfflineStore {
        var config = SampleData.configuration
        config.indexes["SalesOrderItems", default: []] +=
            covering
            ? [
                "ProductID INCLUDE Quantity, NetAmount", "ProductID, Quantity INCLUDE NetAmount, DeliveryDate",
                "DeliveryDate DESC INCLUDE ProductID, Quantity, NetAmount",
            ]
            : ["ProductID, Quantity", "DeliveryDate DESC"]
        config.indexes["SalesOrders", default: []] += ["GrossAmount"]
        let dir = TestScratch.directory("os-diff")
        let store = try OfflineStore.create(at: dir, metadata: Array(SampleData.metadata.utf8), configuration: config)
        func maybe(_ v: Value, _ r: inout SeededRandom) -> Value { Int.random(in: 0..<8, using: &r) == 0 ? .null : v }
        var partners: [Properties] = []
        for i in 0..<30 {
            partners.append([
                "BusinessPartnerID": .string("BP\(i)"),
                "CompanyName": .string(companies.randomElement(using: &r)! + "\(i % 4)"),
                "Country": maybe(.string(["US", "DE", "IN"].randomElement(using: &r)!), &r),
                "CreatedAt": maybe(
                    .dateTimeOffset(
                        EDMDateTimeOffset(
                            ticks: Int64.random(in: 0...(1 << 55), using: &r),
                            offsetMinutes: Int16.random(in: -120...120, using: &r) / 60 * 60)), &r),
            ])
        }
        var orders: [Properties] = []
        for i in 0..<60 {
            orders.append([
                "SalesOrderID": .string("SO\(i)"),
                "CustomerID": maybe(.string("BP\(Int.random(in: 0..<35, using: &r))"), &r),
                "GrossAmount": maybe(
                    .decimal(EDMDecimal(significand: Int128(Int.random(in: -1000...100_000, using: &r)), scale: 2)), &r),
                "LifecycleStatus": maybe(.string(["N", "P", "C"].randomElement(using: &r)!), &r),
            ])
        }
        var items: [Properties] = []
        for i in 0..<60 {
            for pos in 0..<Int.random(in: 0...5, using: &r) {
                items.append([
                    "SalesOrderID": .string("SO\(i)"), "ItemPosition": .int(Int64(pos * 10)),
                    "ProductID": maybe(.string(products.randomElement(using: &r)!), &r),
                    "Quantity": maybe(.int(Int64.random(in: -3...12, using: &r)), &r),
                    "NetAmount": maybe(
                        .decimal(EDMDecimal(significand: Int128(Int.random(in: 0...50_000, using: &r)), scale: 3)), &r),
                    "DeliveryDate": maybe(.date(EDMDate(days: Int32.random(in: 18_000...19_500, using: &r))), &r),
                ])
            }
        }
        try store.load(set: "BusinessPartners", entities: partners)
        try store.load(set: "SalesOrders", entities: orders)
        try store.load(set: "SalesOrderItems", entities: items)
        return store
    }

    // MARK: Random requests

    static func itemPredicate(_ r: inout SeededRandom, depth: Int = 0) -> String {
        let ops = ["eq", "ne", "gt", "ge", "lt", "le"]
        switch Int.random(in: 0..<(depth > 1 ? 9 : 12), using: &r) {
        case 0: return "ProductID \(ops.randomElement(using: &r)!) '\(products.randomElement(using: &r)!)'"
        case 1: return "Quantity \(ops.randomElement(using: &r)!) \(Int.random(in: -4...13, using: &r))"
        case 2:
            return
                "NetAmount \(ops.randomElement(using: &r)!) \(Int.random(in: 0...50))\(Bool.random(using: &r) ? ".5" : "")"
        case 3:
            return
                "DeliveryDate \(ops.randomElement(using: &r)!) 20\(Int.random(in: 19...23, using: &r))-0\(Int.random(in: 1...9, using: &r))-1\(Int.random(in: 0...9, using: &r))"
        case 4: return "ProductID in ('\(products.randomElement(using: &r)!)','\(products.randomElement(using: &r)!)')"
        case 5: return "startswith(ProductID,'HT-10\(Int.random(in: 0...1, using: &r))')"
        case 6:
            return ["Quantity eq null", "ProductID ne null", "NetAmount eq null", "DeliveryDate ne null"].randomElement(
                using: &r)!
        case 7: return "SalesOrderID eq 'SO\(Int.random(in: 0..<65, using: &r))'"
        case 8:
            return [
                "Quantity add 2 gt 7", "Quantity mul 2 le 6", "year(DeliveryDate) eq 2021", "month(DeliveryDate) ge 6",
                "Quantity div 2 eq 1", "Quantity mod 3 eq 0", "contains(ProductID,'01')", "endswith(ProductID,'5')",
                "SalesOrder/LifecycleStatus eq 'N'", "SalesOrder/GrossAmount gt 100",
            ].randomElement(using: &r)!
        case 9: return "(\(itemPredicate(&r, depth: depth + 1)) and \(itemPredicate(&r, depth: depth + 1)))"
        case 10: return "(\(itemPredicate(&r, depth: depth + 1)) or \(itemPredicate(&r, depth: depth + 1)))"
        default: return "not (\(itemPredicate(&r, depth: depth + 1)))"
        }
    }

    static func itemOrderBy(_ r: inout SeededRandom) -> String? {
        let props = ["ProductID", "Quantity", "NetAmount", "DeliveryDate", "SalesOrderID", "ItemPosition"]
        switch Int.random(in: 0..<4, using: &r) {
        case 0: return nil
        case 1: return props.randomElement(using: &r)! + (Bool.random(using: &r) ? " desc" : "")
        default:
            return (0..<Int.random(in: 2...3, using: &r)).map { _ in
                props.randomElement(using: &r)! + (Bool.random(using: &r) ? " desc" : " asc")
            }.joined(separator: ",")
        }
    }

    // MARK: Naive evaluation

    /// Scans everything, filters with the evaluator, sorts with the reference comparator.
    static func naive(_ store: OfflineStore, _ url: String) throws -> [Properties] {
        let query = try store.queries.bind(url)
        let set = try store.entities.set(query.path.entitySet)
        return try store.entities.read { t in
            let evaluator = ExpressionEvaluator(navigator: Navigator(store: store.entities, t: t))
            var rows: [(EntityRef, [Value], [UInt8])] = []
            try set.scan(t) { props in
                let e = EntityRef(set: set, properties: props)
                if let f = query.options.filter, try !evaluator.matches(f, e) { return true }
                let keys = try query.options.orderBy.map { try evaluator.evaluate($0.expression, e) }
                rows.append((e, keys, try set.encodeKey(try set.keyValues(props))))
                return true
            }
            rows.sort { a, b in
                for (i, o) in query.options.orderBy.enumerated() {
                    let c = sortCompare(a.1[i], b.1[i])
                    if c != 0 { return o.descending ? c > 0 : c < 0 }
                }
                return a.2.lexicographicallyPrecedes(b.2)
            }
            let skip = query.options.skip ?? 0
            return try rows.dropFirst(skip).prefix(query.options.top ?? Int.max).map { try $0.0.properties() }
        }
    }

    @Test func plannerAgreesWithNaiveEvaluation() throws {
        var r = SeededRandom(seed: testSeed("plannerAgreesWithNaiveEvaluation"))
        let store = try Self.makeStore(&r)
        var plans: [String: Int] = [:]
        var spilled = 0
        var tieGrouped = 0
        for n in 0..<1_500 {
            var params = ["$filter=" + Self.itemPredicate(&r)]
            let countURL = "SalesOrderItems?" + params[0]
            let orderBy = Self.itemOrderBy(&r)
            if let orderBy { params.append("$orderby=" + orderBy) }
            if Int.random(in: 0..<3, using: &r) == 0 { params.append("$top=\(Int.random(in: 0...15, using: &r))") }
            if Int.random(in: 0..<4, using: &r) == 0 { params.append("$skip=\(Int.random(in: 0...10, using: &r))") }
            let url = "SalesOrderItems?" + params.joined(separator: "&")
            // Every third query sorts with a tiny memory limit, so big sorts' spill path runs too.
            let engine = QueryEngine(store: store.entities, memorySortLimit: n % 3 == 0 ? 3 : 200_000)
            let planned = try engine.entities(url)
            let expected = try Self.naive(store, url)
            let plan = try store.explain(url)
            if n % 3 == 0, plan.contains("sort on the $orderby key"), expected.count > 3 { spilled += 1 }
            if plan.contains("ties put in key order") { tieGrouped += 1 }
            plans[String(plan.split(separator: "\n")[1].dropFirst(8).prefix(22)), default: 0] += 1
            if orderBy != nil || (!url.contains("$top") && !url.contains("$skip")) {
                func canonical(_ p: Properties) -> String {
                    p.keys.sorted().map { "\($0)=\(p[$0]!)" }.joined(separator: ";")
                }
                let a = orderBy != nil ? planned : planned.sorted { canonical($0) < canonical($1) }
                let b = orderBy != nil ? expected : expected.sorted { canonical($0) < canonical($1) }
                #expect(
                    a == b,
                    "query \(n): \(url)\nplanned \(a.count) rows, naive \(b.count); first difference at \(Array(zip(a, b)).firstIndex { $0.0 != $0.1 } ?? min(a.count, b.count))\n\(plan)"
                )
                if a != b { return }
            } else {
                #expect(planned.count == expected.count, "query \(n): \(url)")
            }
            let naiveCount = try Self.naive(store, countURL).count
            #expect(try store.queries.count(url) == naiveCount, "\(url)")
        }
        print(
            "access paths used: \(plans); sorts that spilled: \(spilled); index-prefix orders with tie groups: \(tieGrouped)"
        )
        #expect(spilled > 10)
        // Coverage, not a target: the random queries give 8 to 26 tie-grouped plans in 1,500 (seen
        // over seven runs); `> 10` failed about one run in ten, so the bound asks only that the path ran.
        #expect(tieGrouped >= 3)
        #expect(plans.keys.contains { $0.hasPrefix("index scan") })
        #expect(plans.keys.contains { $0.hasPrefix("key range") })
        #expect(try store.check().isConsistent)
    }

    /// The same random data with and without covering indexes, and random queries with `$select`:
    /// JSON responses, `entities(url)` and counts must be identical, whether or not the covering
    /// plan (which reads no entity row) is chosen; a third of them sort with a tiny memory limit,
    /// so spilled sorts carry index values too. Both stores pass `check` afterwards.
    @Test func coveringIndexesAnswerAsTheRowsDo() throws {
        let seed = testSeed("coveringIndexesAnswerAsTheRowsDo")
        var r1 = SeededRandom(seed: seed), r2 = SeededRandom(seed: seed)
        let plain = try Self.makeStore(&r1)
        let covering = try Self.makeStore(&r2, covering: true)
        var r = SeededRandom(seed: seed &+ 1)
        let columns = [
            "ProductID", "Quantity", "NetAmount", "DeliveryDate", "SalesOrderID", "ItemPosition", "CurrencyCode",
        ]
        var covered = 0, coveredSorts = 0
        let rounds = Int(ProcessInfo.processInfo.environment["COVERING_QUERIES"] ?? "") ?? 1_200
        let deadline = ContinuousClock.now + .seconds(120)
        for n in 0..<rounds where ContinuousClock.now < deadline {
            var params = [
                "$select="
                    + (0..<Int.random(in: 1...3, using: &r)).map { _ in columns.randomElement(using: &r)! }.joined(
                        separator: ",")
            ]
            switch Int.random(in: 0..<4, using: &r) {
            case 0: params.append("$filter=ProductID eq '\(Self.products.randomElement(using: &r)!)'")
            case 1:
                params.append(
                    "$filter=ProductID eq '\(Self.products.randomElement(using: &r)!)' and Quantity ge \(Int.random(in: -3...12, using: &r))"
                )
            case 2: params.append("$filter=" + Self.itemPredicate(&r))
            default: params.append("$filter=DeliveryDate lt 2021-0\(Int.random(in: 1...9, using: &r))-15")
            }
            // Without $orderby the order is the access path's, which may differ: no $top/$skip then,
            // and the answers are compared as sets.
            let orderBy = Self.itemOrderBy(&r)
            if let orderBy {
                params.append("$orderby=" + orderBy)
                if Int.random(in: 0..<3, using: &r) == 0 { params.append("$top=\(Int.random(in: 0...15, using: &r))") }
                if Int.random(in: 0..<4, using: &r) == 0 { params.append("$skip=\(Int.random(in: 0...10, using: &r))") }
            }
            if Int.random(in: 0..<6, using: &r) == 0 { params.append("$count=true") }
            let url = "SalesOrderItems?" + params.joined(separator: "&")
            let limit = n % 3 == 0 ? 3 : 200_000
            func json(_ store: OfflineStore) throws -> String {
                var out = ""
                try QueryEngine(store: store.entities, memorySortLimit: limit).execute(url) { out += $0 }
                return out
            }
            let plan = try covering.explain(url)
            if plan.contains("covering") {
                covered += 1
                if plan.contains("sort on") || plan.contains("top-") { coveredSorts += 1 }
            }
            let (a, b) = (try json(plain), try json(covering))
            var (ea, eb) = (
                try QueryEngine(store: plain.entities, memorySortLimit: limit).entities(url),
                try QueryEngine(store: covering.entities, memorySortLimit: limit).entities(url)
            )
            if orderBy == nil {
                func canonical(_ p: Properties) -> String {
                    p.keys.sorted().map { "\($0)=\(p[$0]!)" }.joined(separator: ";")
                }
                ea.sort { canonical($0) < canonical($1) }
                eb.sort { canonical($0) < canonical($1) }
            }
            #expect(orderBy == nil ? a.count == b.count : a == b, "query \(n): \(url)\n\(plan)")
            #expect(ea == eb, "query \(n): \(url)\n\(plan)")
            #expect(try plain.queries.count(url) == covering.queries.count(url), "\(url)")
            if ea != eb { return }
        }
        print("covering plans: \(covered), of which sorted: \(coveredSorts)")
        #expect(covered > 100)
        #expect(coveredSorts > 10)
        #expect(try plain.check().isConsistent)
        #expect(try covering.check().isConsistent)
    }
}
