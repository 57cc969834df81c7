import TestSupport
import Query
import Foundation
import Samples
import Testing
@testable import Storage
@testable import Sync

/// What a parse builds of the service's data or a file (finding 8 of the second hardening round):
/// members nobody reads are checked and dropped as they are read, so megabytes of small values in
/// an annotation, an unknown property or a document member cost no tree.
@Suite(.runsOffThePool) struct JSONShapeTests {
    static let schema = try! CSDL.parse(Array(SampleData.metadata.utf8))
    static let shapes = schema.entityShapes()

    static func parse(_ text: String, set: String = "Products") throws -> (JSON, DroppedMembers) {
        var dropped = DroppedMembers()
        let json = try JSON.parse(Array(text.utf8), shape: shapes[set]!, dropped: &dropped)
        return (json, dropped)
    }

    @Test func declaredPropertiesAndReadAnnotationsAreBuiltTheRestIsDropped() throws {
        let (json, dropped) = try Self.parse(
            ##"{"@odata.etag":"W/\"1\"","ProductID":"P1","Name@odata.type":"#String","Name":"n","AddedLater":[1,{"x":[2]}],"@com.example.big":[0,0,0],"Price":1.5,"Other":null}"##
        )
        #expect(json == (try JSON.parse(#"{"@odata.etag":"W/\"1\"","ProductID":"P1","Name":"n","Price":1.5}"#)))
        #expect(dropped.count == 2)
        #expect(dropped.first?.owner == "Products" && dropped.first?.name == "AddedLater")
    }

    @Test func expandedEntitiesAreShapedAsTheirOwnSetsV4AndV2() throws {
        let v4 = #"{"SalesOrderID":"S1","Items":[{"SalesOrderID":"S1","ItemPosition":10,"Junk":[1,2]}],"Junk":1}"#
        let (json, dropped) = try Self.parse(v4, set: "SalesOrders")
        #expect(json == (try JSON.parse(#"{"SalesOrderID":"S1","Items":[{"SalesOrderID":"S1","ItemPosition":10}]}"#)))
        #expect(dropped.count == 2 && dropped.first?.owner == "SalesOrderItems")
        let v2 =
            #"{"__metadata":{"uri":"x","etag":"W/\"2\""},"SalesOrderID":"S1","Items":{"results":[{"ItemPosition":10,"Junk":0}],"__count":"1"},"BusinessPartner":{"__deferred":{"uri":"y"}}}"#
        let (json2, dropped2) = try Self.parse(v2, set: "SalesOrders")
        #expect(
            json2
                == (try JSON.parse(
                    #"{"__metadata":{"uri":"x","etag":"W/\"2\""},"SalesOrderID":"S1","Items":{"results":[{"ItemPosition":10}]},"BusinessPartner":{"__deferred":{"uri":"y"}}}"#
                )))
        #expect(dropped2.count == 1)
    }

    /// Bad JSON in a dropped member is the same error, at the same place, as a whole parse gives.
    @Test func badJSONInADroppedMemberIsStillAnError() throws {
        for text in [
            #"{"ProductID":"P1","AddedLater":[1,2,}"#, #"{"ProductID":"P1","@a":"\x"}"#,
            #"{"ProductID":"P1","AddedLater":01}"#, "{\"ProductID\":\"P1\",\"AddedLater\":\"\u{1}\"}",
            #"{"ProductID":"P1","AddedLater":[tru]}"#, #"{"ProductID":"P1","AddedLater":"\ud800"}"#,
            #"{"ProductID":"P1","AddedLater":"#, #"{"ProductID":"P1","AddedLater":{"a" 1}}"#,
        ] {
            var whole: JSONError? = nil
            do { _ = try JSON.parse(text) } catch { whole = error }
            #expect(whole != nil, "\(text)")
            var shaped: JSONError? = nil
            do { _ = try Self.parse(text) } catch let e as JSONError { shaped = e }
            #expect(shaped == whole, "\(text)")
            var validated: JSONError? = nil
            do { try JSON.validate(Array(text.utf8)) } catch { validated = error }
            #expect(validated == whole, "\(text)")
        }
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        #expect(throws: JSONError.self) { _ = try Self.parse(#"{"AddedLater":\#(deep)}"#) }
    }

    /// A stream drops the document's other members as they go by, keeps the wanted ones, and a
    /// read's answer that is not a collection is refused.
    @Test func aStreamKeepsTheLinksAndDropsTheRest() throws {
        let page =
            #"{"@odata.context":"$metadata#Products","@big":[0,0,{"a":[0]}],"value":[{"ProductID":"A"},{"ProductID":"B"}],"@odata.count":7,"@odata.nextLink":"Products?p=1","@odata.deltaLink":{"not":"a string"}}"#
        for size in [1, 3, 16, 1 << 20] {
            let stream = EntityObjectStream(bytes: Array(page.utf8), chunkSize: size)
            stream.collectionOnly = true
            stream.wanted = PayloadReader.pageMembers
            var ids: [String] = []
            try stream.forEach { o in if case .string(let id)? = try o.parse()["ProductID"] { ids.append(id) } }
            #expect(ids == ["A", "B"])
            #expect(stream.annotations.map(\.0) == ["@odata.count", "@odata.nextLink"])
        }
        let reader = PayloadReader(schema: Self.schema, shapes: Self.shapes)
        let v2 = try reader.page(
            Array(
                #"{"d":{"__count":"2","results":[{"ProductID":"A","X":[0]}],"__next":"Products?$skiptoken=1"}}"#.utf8),
            set: "Products", options: nil)
        #expect(v2.rows.count == 1 && v2.count == 2 && v2.nextLink == "Products?$skiptoken=1")
        #expect(v2.skippedProperties == 1)
        for text in [#"{"ProductID":"A"}"#, #"[{"ProductID":"A"}]"#, #"{"value":3}"#, #"{"d":{"ProductID":"A"}}"#] {
            #expect(throws: EntityError.self, "\(text)") {
                _ = try reader.page(Array(text.utf8), set: "Products", options: nil)
            }
        }
    }

    /// A page read as it streams gives the same rows, removals, links and counts in chunks as
    /// read whole, whatever the chunk size.
    /// An entity whose expansion brings more rows than a part holds is split over several parts,
    /// each of at most `chunkRows` rows: together they are the page read whole.
    @Test func anEntityThatExpandsToManyRowsComesInBoundedParts() throws {
        let reader = PayloadReader(schema: Self.schema, shapes: Self.shapes)
        let query = try DefiningRequests.bind(
            "BusinessPartners?$expand=SalesOrders($expand=Items)", schema: Self.schema)
        func order(_ p: Int, _ o: Int) -> String {
            let items = (0..<30).map { #"{"SalesOrderID":"S\#(p)-\#(o)","ItemPosition":\#($0),"Quantity":1}"# }
            return #"{"SalesOrderID":"S\#(p)-\#(o)","Items":[\#(items.joined(separator: ","))]}"#
        }
        func partner(_ p: Int, orders: Int) -> String {
            let list = (0..<orders).map { order(p, $0) }.joined(separator: ",")
            return #"{"BusinessPartnerID":"P\#(p)","SalesOrders":[\#(list)]}"#
        }
        let text = #"{"value":[\#(partner(1, orders: 1)),\#(partner(2, orders: 4)),\#(partner(3, orders: 1))]}"#
        let whole = try reader.page(Array(text.utf8), set: "BusinessPartners", options: query.options)
        #expect(whole.rows.count == 3 + 6 + 6 * 30 && whole.topLevel == 3)
        for chunk in [7, 40, 100] {
            var parts: [ServerPage] = []
            try reader.readPage(
                EntityObjectStream(bytes: Array(text.utf8), chunkSize: 64), set: "BusinessPartners",
                options: query.options, chunkRows: chunk
            ) { parts.append($0) }
            #expect(parts.allSatisfy { $0.rows.count <= chunk }, "\(parts.map(\.rows.count))")
            #expect(parts.count > whole.rows.count / chunk, "\(parts.map(\.rows.count))")
            func keys(_ rows: [ServerRow]) -> [String] {
                rows.map { "\($0.set) \($0.entity.keys.sorted())\($0.entity)" }
            }
            #expect(keys(parts.flatMap(\.rows)) == keys(whole.rows))
            #expect(parts.reduce(0) { $0 + $1.topLevel } == 3)
        }
    }

    @Test func aPageInChunksIsThePageWhole() throws {
        let reader = PayloadReader(schema: Self.schema, shapes: Self.shapes)
        var items: [String] = []
        for i in 0..<25 {
            items.append(
                i % 7 == 3
                    ? #"{"@removed":{"reason":"deleted"},"@id":"Products('R\#(i)')"}"#
                    : #"{"ProductID":"P\#(i)","Name":"n\#(i)","AddedLater":[\#(i)]}"#)
        }
        let text = #"{"value":[\#(items.joined(separator: ","))],"@odata.deltaLink":"Products?$deltatoken=9"}"#
        let whole = try reader.page(Array(text.utf8), set: "Products", options: nil)
        #expect(whole.rows.count == 21 && whole.removed.count == 4 && whole.skippedProperties == 21)
        for chunk in [1, 2, 5, 100] {
            var parts: [ServerPage] = []
            try reader.readPage(
                EntityObjectStream(bytes: Array(text.utf8), chunkSize: 7), set: "Products", options: nil,
                chunkRows: chunk
            ) { parts.append($0) }
            #expect(parts.dropLast().allSatisfy { $0.received == chunk && $0.deltaLink == nil })
            #expect(parts.last?.deltaLink == "Products?$deltatoken=9")
            #expect(parts.flatMap(\.rows).map { $0.entity["ProductID"] } == whole.rows.map { $0.entity["ProductID"] })
            #expect(parts.flatMap(\.removed).map(\.key) == whole.removed.map(\.key))
            #expect(parts.reduce(0) { $0 + $1.skippedProperties } == 21)
            #expect(parts.reduce(0) { $0 + $1.topLevel } == 21)
        }
    }

    /// An entity object larger than the stream's `largeObjectBytes` is parsed as it streams by:
    /// the same JSON and the same dropped members as the object parsed whole, whatever the chunk
    /// size; bad JSON in it is an error on the same line.
    @Test func aLargeObjectParsedAsItStreamsIsTheObjectParsedWhole() throws {
        let objects = [
            #"{"ProductID":"A","AddedLater":[1,[2,{"x":"]}"}]],"Name":"a\"b","@x":{"y":[]}}"#,
            #"{"SalesOrderID":"S","Items":[{"ItemPosition":1,"Junk":"j"},{"ItemPosition":2}],"Other":{}}"#,
            "{\n \"ProductID\" : \"B\" ,\n \"Price\" : 1.50 }",
        ]
        for (k, object) in objects.enumerated() {
            let set = k == 1 ? "SalesOrders" : "Products"
            let text = #"{"value":[\#(object),\#(object)]}"#
            var want: [JSON] = []
            var wantDropped = DroppedMembers()
            try EntityObjectStream(bytes: Array(text.utf8)).forEach {
                want.append(try $0.parse(shape: Self.shapes[set]!, dropped: &wantDropped))
            }
            for (size, large) in [(1, 1), (3, 8), (7, 4), (64, 16), (1 << 20, 1)] {
                let stream = EntityObjectStream(bytes: Array(text.utf8), chunkSize: size)
                stream.shape = Self.shapes[set]
                stream.largeObjectBytes = large
                var got: [JSON] = []
                var dropped = DroppedMembers()
                try stream.forEach { got.append(try $0.parse(shape: Self.shapes[set]!, dropped: &dropped)) }
                #expect(got == want, "\(object), chunk \(size), large \(large)")
                #expect(dropped == wantDropped, "\(object)")
            }
        }
        for bad in [
            "{\"value\":[{\"ProductID\":\"A\",\n\"AddedLater\":[1,}]}",
            "{\"value\":[{\"ProductID\":\"A\",\n\"Name\":tru}]}",
            "{\"value\":[{\"ProductID\":\"A\",\n\"Name\":\"x",
        ] {
            var whole: JSONError? = nil
            do { try EntityObjectStream(bytes: Array(bad.utf8)).forEach { _ = try $0.parse() } } catch let e
                as JSONError
            {
                whole = e
            }
            for size in [1, 5, 1 << 20] {
                let stream = EntityObjectStream(bytes: Array(bad.utf8), chunkSize: size)
                stream.shape = Self.shapes["Products"]
                stream.largeObjectBytes = 2
                var got: JSONError? = nil
                do {
                    var dropped = DroppedMembers()
                    try stream.forEach { _ = try $0.parse(shape: Self.shapes["Products"]!, dropped: &dropped) }
                } catch let e as JSONError { got = e }
                #expect(
                    whole != nil && got?.line == whole?.line,
                    "\(bad.debugDescription), chunk \(size): \(String(describing: got)) against \(String(describing: whole))"
                )
            }
        }
    }
}
