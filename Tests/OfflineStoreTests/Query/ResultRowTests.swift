import Foundation
import Testing
import TestSupport
@testable import OfflineStore
import Storage

/// `forEach` and a prepared query's `forEachRow` hand out what `entities` returns, one entity at a
/// time: the same entities in the same order, each `ResultRow` column equal to the property of
/// that name (null where `entities` leaves the property out), on plain and covering indexes.
@Suite(.checksStores, .runsOffThePool) struct ResultRowTests {
    static let templates = [
        "SalesOrderItems?$filter=ProductID eq @p&$select=Quantity,NetAmount",
        "SalesOrderItems?$filter=ProductID eq @p&$select=Quantity&$orderby=NetAmount desc",
        "SalesOrderItems?$filter=ProductID eq @p",
        "SalesOrderItems?$filter=ProductID eq @p and Quantity gt 2&$select=DeliveryDate&$orderby=Quantity&$top=3",
        "SalesOrderItems(SalesOrderID='SO1',ItemPosition=@n)?$select=Quantity",
        "SalesOrderItems(SalesOrderID='SO1',ItemPosition=@n)",
        "SalesOrders('SO2')/Items?$select=ProductID&$filter=ProductID ne @p",
    ]

    @Test(arguments: [false, true])
    func rowsAreWhatEntitiesReturns(covering: Bool) throws {
        var r = SeededRandom(seed: 24)
        let store = try QueryDifferentialTests.makeStore(&r, covering: covering)
        let plan = try store.prepare(Self.templates[0]).explain(aliases: ["p": .string("HT-1000")])
        #expect(plan.contains("covering") == covering, "\(plan)")
        var rows = 0, nulls = 0
        for template in Self.templates {
            let query = try store.prepare(template)
            let columns = try query.columns
            for p in QueryDifferentialTests.products.prefix(6) {
                for n in [0, 10, 20] {
                    var aliases: [String: Value] = [:]
                    if query.parameters["p"] != nil { aliases["p"] = .string(p) }
                    if query.parameters["n"] != nil { aliases["n"] = .int(Int64(n)) }
                    let expected = try query.entities(aliases: aliases)
                    var streamed: [Properties] = []
                    try query.forEach(aliases: aliases) {
                        streamed.append($0); return true
                    }
                    #expect(streamed == expected, "\(template) \(aliases)")
                    var fromRows: [Properties] = []
                    try query.forEachRow(aliases: aliases) { row in
                        #expect(row.count == columns.count)
                        for k in 0..<row.count {
                            #expect(row.name(k) == columns[k])
                            let v = try row.value(k)
                            if v.isNull { nulls += 1 }
                            #expect(try row.value(columns[k]) == v)
                        }
                        #expect(try row.value("NoSuchColumn") == nil)
                        fromRows.append(try row.properties())
                        return true
                    }
                    #expect(fromRows == expected, "\(template) \(aliases)")
                    for (i, e) in expected.enumerated() where i < fromRows.count {
                        #expect(Set(e.keys).isSubset(of: Set(columns)), "\(template): \(e.keys) in \(columns)")
                    }
                    rows += expected.count
                }
            }
        }
        #expect(rows > 50 && nulls > 0, "\(rows) rows, \(nulls) null columns: the data exercises both")
    }

    @Test func columnsFollowSelectAndTheKey() throws {
        var r = SeededRandom(seed: 5)
        let store = try QueryDifferentialTests.makeStore(&r)
        #expect(
            try store.prepare("SalesOrderItems?$select=NetAmount,Quantity").columns == [
                "SalesOrderID", "ItemPosition", "Quantity", "NetAmount",
            ])
        let all = try store.prepare("SalesOrderItems").columns
        #expect(all.prefix(3) == ["SalesOrderID", "ItemPosition", "ProductID"] && all.count > 5, "\(all)")
    }

    @Test func returningFalseStops() throws {
        var r = SeededRandom(seed: 7)
        let store = try QueryDifferentialTests.makeStore(&r)
        let all = try store.entities("SalesOrderItems?$orderby=NetAmount,SalesOrderID,ItemPosition")
        #expect(all.count > 10)
        var seen: [Properties] = []
        try store.forEach("SalesOrderItems?$orderby=NetAmount,SalesOrderID,ItemPosition") {
            seen.append($0); return seen.count < 4
        }
        #expect(seen == Array(all.prefix(4)))
        var keys = 0
        try store.prepare("SalesOrderItems?$select=Quantity").forEachRow { _ in
            keys += 1; return keys < 2
        }
        #expect(keys == 2)
    }

    @Test func anErrorInTheBodyEndsTheCallAndIsThrown() throws {
        var r = SeededRandom(seed: 9)
        let store = try QueryDifferentialTests.makeStore(&r)
        struct Stop: Error {}
        var n = 0
        #expect(throws: Stop.self) {
            try store.forEach("SalesOrderItems") { _ in
                n += 1
                if n == 3 { throw Stop() }
                return true
            }
        }
        #expect(n == 3)
        // The read transaction ended: a write goes through.
        _ = try store.create(set: "Products", entity: ["ProductID": .string("After"), "Name": .string("x")])
    }

    @Test func aWriteFromTheClosureGoesThroughAndIsNotSeenByIt() throws {
        var r = SeededRandom(seed: 11)
        let store = try QueryDifferentialTests.makeStore(&r)
        let before = try store.entities("BusinessPartners").count
        #expect(before > 1)
        var seen = 0
        try store.forEach("BusinessPartners") { _ in
            seen += 1
            if seen == 1 {
                _ = try store.create(
                    set: "BusinessPartners", entity: ["BusinessPartnerID": .string("ZZ"), "CompanyName": .string("x")])
            }
            return true
        }
        #expect(seen == before, "the closure reads one snapshot")
        #expect(try store.get(set: "BusinessPartners", key: [.string("ZZ")]) != nil)
        #expect(try store.entities("BusinessPartners").count == before + 1)
    }
}
