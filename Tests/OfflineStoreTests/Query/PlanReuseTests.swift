import Foundation
import Testing
import TestSupport
@testable import OfflineStore
@testable import Query
import Storage

/// A prepared query reuses its last plan choice while the alias values cannot change it
/// (`PlanCache`): every run's plan must be the plan a fresh planner makes for the same values, and
/// its result what the same URL with the values as alias options (`&@p='…'`) returns.
@Suite(.checksStores, .runsOffThePool) struct PlanReuseTests {
    /// Templates with aliases in every sargable position: index and key equalities, ranges,
    /// `startswith`, `in`, a nullable property (an alias of null changes the shape), and the key.
    static let templates = [
        "SalesOrderItems?$filter=ProductID eq @p&$select=Quantity,NetAmount",
        "SalesOrderItems?$filter=ProductID eq @p and Quantity gt @q&$orderby=Quantity&$select=NetAmount",
        "SalesOrderItems?$filter=SalesOrderID eq @o and ItemPosition eq @n",
        "SalesOrderItems?$filter=SalesOrderID eq @o&$orderby=ItemPosition desc",
        "SalesOrderItems?$filter=ItemPosition ge @n and SalesOrderID eq @o",
        "SalesOrderItems?$filter=DeliveryDate eq @d&$select=ProductID",
        "SalesOrderItems?$filter=DeliveryDate eq @d and ProductID eq @p&$top=3&$orderby=NetAmount",
        "SalesOrderItems?$filter=startswith(ProductID,@s)&$select=Quantity",
        "SalesOrderItems?$filter=ProductID in ('HT-1001','HT-1003') and Quantity le @q",
        "SalesOrderItems?$filter=Quantity eq @q or ProductID eq @p&$select=Quantity",
        "SalesOrders?$filter=GrossAmount gt @g&$orderby=GrossAmount&$select=GrossAmount",
    ]

    static func values(_ name: String, _ r: inout SeededRandom) -> Value {
        func maybeNull(_ v: Value) -> Value { Int.random(in: 0..<4, using: &r) == 0 ? .null : v }
        switch name {
        case "p": return .string(QueryDifferentialTests.products.randomElement(using: &r)!)
        case "q": return .int(Int64.random(in: 0...12, using: &r))
        case "o": return maybeNull(.string("SO\(Int.random(in: 0..<60, using: &r))"))
        case "n": return .int(Int64(10 * Int.random(in: 0...5, using: &r)))
        case "d": return maybeNull(.date(EDMDate(days: Int32.random(in: 19_000...19_060, using: &r))))
        case "s": return .string(["HT-", "HT-10", "HT-100", "X", ""].randomElement(using: &r)!)
        case "g":
            return maybeNull(
                .decimal(EDMDecimal(significand: Int128(Int.random(in: 0...100_000, using: &r)), scale: 2)))
        default: preconditionFailure(name)
        }
    }

    @Test(arguments: [false, true])
    func reusedPlansAreFreshPlans(covering: Bool) throws {
        var r = SeededRandom(seed: 2024)
        let store = try QueryDifferentialTests.makeStore(&r, covering: covering)
        var runs = 0, rows = 0
        var reuses = 0
        for template in Self.templates {
            let query = try store.prepare(template)
            let setName = String(template.prefix { $0 != "?" })
            let set = try query.engine.store.set(setName)
            let names = query.parameters.keys.sorted()
            for _ in 0..<40 {
                var aliases: [String: Value] = [:]
                for name in names { aliases[name] = Self.values(name, &r) }
                let bound = try query.statement.bind(aliases)
                let reading: ResultReading = bound.options.select == nil ? .entities : .selected
                let fresh = Planner.plan(set, options: bound.options, reading: reading)
                let reused = Planner.plan(set, options: bound.options, reading: reading, reuse: query.plans)
                #expect(reused.description == fresh.description, "\(template) \(aliases)")
                #expect(reused.covering == fresh.covering)
                // The result, through the prepared query (its cache), against the plain URL.
                let got = try query.entities(aliases: aliases)
                let url = query.statement.url(with: aliases)
                let expected = try store.entities(url)
                #expect(got == expected, "\(url)")
                runs += 1
                rows += got.count
            }
            reuses += query.plans.reuses
        }
        // Each run plans twice through the cache (above and in `entities`): most reuse a choice.
        #expect(runs == 40 * Self.templates.count && rows > 200, "\(runs) runs, \(rows) rows")
        #expect(reuses > runs, "\(reuses) plans reused in \(runs) runs")
        // A covering plan is among them, or the test does not reach the case it is for.
        let plan = try store.prepare(Self.templates[0]).explain(aliases: ["p": .string("HT-1000")])
        #expect(plan.contains("covering") == covering, "\(plan)")
    }

    /// A new index makes a new set handle: the remembered choice is not used for it.
    @Test func anIndexAddedAfterPreparingIsUsed() throws {
        var r = SeededRandom(seed: 9)
        let store = try QueryDifferentialTests.makeStore(&r)
        let query = try store.prepare("SalesOrders?$filter=LifecycleStatus eq @s&$select=LifecycleStatus")
        let before = try query.entities(aliases: ["s": .string("N")])
        let set = try query.engine.store.set("SalesOrders")
        let bound = try query.statement.bind(["s": .string("N")])
        #expect(
            !Planner.plan(set, options: bound.options, reading: .selected, reuse: query.plans).description.contains(
                "index scan"))
        try store.addIndex(set: "SalesOrders", definition: "LifecycleStatus")
        let after = try query.entities(aliases: ["s": .string("N")])
        #expect(Set(after.map { "\($0)" }) == Set(before.map { "\($0)" }))
        let newSet = try query.engine.store.set("SalesOrders")
        let plan = Planner.plan(newSet, options: bound.options, reading: .selected, reuse: query.plans)
        #expect(plan.description.contains("index scan on"), "\(plan)")
    }
}
