import TestSupport
import Foundation
import Testing
@testable import Query
import Storage

/// `QueryEngine.delta(_:entityChanges:…)`: the delta of a request with `$expand`, from changes of
/// every set its expand tree reaches, on the result store's orders and items.
@Suite(.runsOffThePool) struct DeltaExpandTests {
    static func delta(_ s: ResultStore, _ url: String, _ changes: [QueryEngine.DeltaChange]) throws -> JSON {
        var text = ""
        try s.engine.delta(
            url, entityChanges: { _ in changes },
            options: ResultOptions(deltaLink: { _ in "SalesOrders?$deltatoken=9" }),
            writeBytes: { text += String(decoding: $0, as: UTF8.self) })
        return try JSON.parse(text)
    }

    static func item(_ order: String, _ position: Int64) -> QueryEngine.DeltaChange {
        QueryEngine.DeltaChange(set: "SalesOrderItems", key: [.string(order), .int(position)])
    }

    @Test func theSetsOfTheTreeAndWhatCannotBeFollowed() throws {
        let s = try ResultStore()
        #expect(try s.engine.deltaSets("SalesOrders?$expand=Items") == ["SalesOrders", "SalesOrderItems"])
        #expect(try s.engine.deltaSets("Products") == ["Products"])
        for (url, word) in [
            ("SalesOrders?$expand=BusinessPartner", "'BusinessPartner'"),
            ("SalesOrders?$expand=Items($top=1)", "$top"), ("SalesOrders?$expand=Items($skip=1)", "$skip"),
            ("SalesOrders?$expand=Items($count=true)", "$count"), ("SalesOrders?$top=1&$expand=Items", "$top"),
        ] {
            #expect(throws: QueryError.self, "\(url)") { try s.engine.deltaSets(url) }
            do {
                _ = try s.engine.deltaSets(url)
            } catch let error as QueryError {
                #expect(error.description.contains(word), "\(url): \(error)")
            }
            var written = false
            #expect(throws: QueryError.self) {
                try s.engine.delta(url, entityChanges: { _ in [] }, writeBytes: { _ in written = true })
            }
            #expect(!written)
        }
    }

    @Test func childrenInAndOutOfScopeAndWhatADeletedParentLeaves() throws {
        let s = try ResultStore()
        try s.delete("SalesOrders", key: [.string("0500000000")])  // its item 10 is left behind
        let url = "SalesOrders?$select=SalesOrderID&$expand=Items($filter=Quantity ge 1;$select=Quantity)"
        let j = try Self.delta(
            s, url,
            [
                Self.item("0500000001", 10), QueryEngine.DeltaChange(set: "SalesOrders", key: [.string("0500000000")]),
                Self.item("0500000000", 20), QueryEngine.DeltaChange(set: "Products", key: [.string("HT-1000")]),
                Self.item("0500000001", 10),
            ])
        let v = j.entities
        #expect(j["@odata.context"]?.text == "$metadata#SalesOrders/$delta")
        #expect(j["@odata.deltaLink"]?.text == "SalesOrders?$deltatoken=9")
        // An item in scope: its set named, its key and foreign key written though not selected; once.
        #expect(
            v.first
                == .object([
                    ("@odata.context", .string("$metadata#SalesOrderItems/$entity")),
                    ("@odata.id", .string("SalesOrderItems(SalesOrderID='0500000001',ItemPosition=10)")),
                    ("SalesOrderID", .string("0500000001")), ("ItemPosition", .number("10")),
                    ("Quantity", .number("1")),
                ]))
        // The deleted order, then both of its items: out of scope with it (whatever their own filter says).
        #expect(v.dropFirst().first?["@removed"]?["reason"]?.text == "deleted")
        let removedItems = v.dropFirst(2).map { $0["id"]?.text ?? "" }
        #expect(
            removedItems == [
                "SalesOrderItems(SalesOrderID='0500000000',ItemPosition=10)",
                "SalesOrderItems(SalesOrderID='0500000000',ItemPosition=20)",
            ], "\(v)")
        #expect(
            v.dropFirst(2).allSatisfy {
                $0["@odata.context"]?.text == "$metadata#SalesOrderItems/$deletedEntity"
                    && $0["reason"]?.text == "changed"
            })
        #expect(v.count == 4, "a Products change is not in the tree; a key given twice is written once")
    }
}
