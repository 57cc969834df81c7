import TestSupport
import Testing
@testable import Query
import Storage

/// A prepared point read by the full key (`PreparedStatement.PointRead`) skips binding and
/// planning: it must give what the general path gives for the bound query — the entity, nothing
/// for a missing key, `$select`'s properties — and the same errors.
@Suite(.runsOffThePool) struct PreparedPointReadTests {
    /// Runs `statement` with `values` both ways; each result as text: the entities or the error.
    static func both(
        _ r: ResultStore, _ statement: PreparedQuery, _ values: [String: Value]
    ) -> (fast: String, general: String) {
        func text(_ run: () throws -> [Properties]) -> String {
            do { return "\(try run())" } catch { return "error: \(error)" }
        }
        return (
            text { try statement.entities(aliases: values) },
            text { try r.engine.entities(try statement.statement.bind(values)) }
        )
    }

    @Test(arguments: [
        "SalesOrderItems(SalesOrderID=@id,ItemPosition=@pos)",
        "SalesOrderItems(ItemPosition=@pos,SalesOrderID=@id)",
        "SalesOrderItems(SalesOrderID=@id,ItemPosition=@pos)?$select=Quantity",
        "SalesOrderItems(SalesOrderID='0500000000',ItemPosition=@pos)",
        "SalesOrderItems(SalesOrderID=@id,ItemPosition=10)?$select=ProductID,Quantity",
        "SalesOrderItems(SalesOrderID=@pos,ItemPosition=@id)",
    ])
    func pointReadsGiveWhatTheGeneralPathGives(_ url: String) throws {
        let r = try ResultStore()
        let statement = try r.engine.prepare(url)
        #expect(statement.statement.pointRead != nil, "a point read: \(url)")
        let ids: [Value?] = [
            .string("0500000000"), .string("0500000001"), .string("0599999999"), .string(""), .int(5), .null, nil,
        ]
        let positions: [Value?] = [
            .int(10), .int(20), .int(30), .int(1 << 40), .decimal(EDMDecimal("1.5")!), .string("10"), .null, nil,
        ]
        var found = 0, errors = 0
        for id in ids {
            for pos in positions {
                for extra in [nil, "x"] as [String?] {
                    var values: [String: Value] = [:]
                    if let id { values["id"] = id }
                    if let pos { values["pos"] = pos }
                    if let extra { values[extra] = .int(1) }
                    let (fast, general) = Self.both(r, statement, values)
                    #expect(fast == general, "\(url) with \(values)")
                    if fast.hasPrefix("error") { errors += 1 } else if fast != "[]" { found += 1 }
                }
            }
        }
        // (With the aliases swapped, no value of the other's type is a key here: only errors and misses.)
        #expect(
            (found > 0 || url.contains("=@pos,")) && errors > 0, "both outcomes tried: \(found) found, \(errors) errors"
        )
    }

    @Test func anAliasUsedTwiceIsOneValue() throws {
        let r = try ResultStore()
        try r.insert(
            "SalesOrderItems", [["SalesOrderID": .string("7"), "ItemPosition": .int(7), "Quantity": .int(70)]])
        let statement = try r.engine.prepare("SalesOrderItems(SalesOrderID=@k,ItemPosition=@n)")
        #expect(statement.statement.pointRead != nil)
        let (fast, general) = Self.both(r, statement, ["k": .string("7"), "n": .int(7)])
        #expect(fast == general && fast.contains("70"))
    }

    @Test(arguments: [
        "SalesOrderItems?$filter=SalesOrderID eq @id",
        "SalesOrders(@id)?$expand=Items",
        "SalesOrders(@id)/Items",
        "SalesOrderItems(SalesOrderID=@id,ItemPosition=@pos)?$filter=Quantity gt 1",
    ])
    func otherRequestsTakeTheGeneralPath(_ url: String) throws {
        let r = try ResultStore()
        let statement = try r.engine.prepare(url)
        #expect(statement.statement.pointRead == nil, "\(url)")
    }
}
