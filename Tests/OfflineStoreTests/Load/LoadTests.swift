import TestSupport
import LMDB
import Foundation
import Samples
import Synchronization
import Testing
@testable import OfflineStore
@testable import Storage

/// Both forms of `load` write through one path: one transaction per call, nothing queued,
/// expanded children in their own sets, progress that only moves forward.
@Suite(.checksStores, .runsOffThePool) struct LoadTests {
    func sampleStore(mapSize: Int = 1 << 26) throws -> OfflineStore {
        let metadata = Array(SampleData.metadata.utf8)
        let env = try Environment(path: tempDir(), durability: .noSync, mapSize: mapSize)
        return OfflineStore(
            entities: try EntityStore(
                environment: env, schema: try CSDL.parse(metadata), metadata: metadata,
                configuration: SampleData.configuration.stored), lifecycle: Lifecycle())
    }

    /// The writer runs a body again after the map grows; the counts a first run reported are not
    /// reported a second time, so the calls are exactly 0, 10,000, 20,000 and the total, in order.
    @Test func progressOnlyMovesForwardWhenTheBodyRunsAgain() throws {
        let store = try sampleStore(mapSize: 1 << 16)  // far too small: the map must grow mid-load
        let total = 25_000
        let products = (0..<total).map { #"{"ProductID":"P\#($0)","Category":"C\#($0 % 7)","Price":"\#($0).5"}"# }
        let calls = Mutex<[Int]>([])
        let written = try store.load(
            set: "Products", json: Array(#"{"value":[\#(products.joined(separator: ","))]}"#.utf8)
        ) { n, all in
            #expect(all == total)
            calls.withLock { $0.append(n) }
        }
        #expect(written == total)
        #expect(store.entities.environment.mapSize > 1 << 16, "the map grew, so the body ran more than once")
        #expect(calls.withLock { $0 } == [0, 10_000, 20_000, total])
        #expect(try store.count(set: "Products") == total)
        #expect(try store.check().isConsistent)
    }

    @Test func expandedChildrenGoToTheirOwnSetsWithTheParentsKey() throws {
        let store = try sampleStore()
        let json =
            #"{"value":[{"SalesOrderID":"SO1","Items":[{"ItemPosition":10,"Quantity":2},{"ItemPosition":20}]},"#
            + #"{"SalesOrderID":"SO2","Items":{"results":[{"ItemPosition":10}]}}]}"#
        #expect(try store.load(set: "SalesOrders", json: Array(json.utf8)) == 5)
        #expect(try store.count(set: "SalesOrders") == 2)
        #expect(try store.count(set: "SalesOrderItems") == 3)
        let item = try store.get(set: "SalesOrderItems", key: [.string("SO1"), .int(10)])
        #expect(item?["Quantity"] == .int(2))
        #expect(try store.check().isConsistent)
    }

    /// One bad entity, in either form, and the call writes nothing: the error names its set and key.
    @Test func allOrNothingPerCall() throws {
        let store = try sampleStore()
        try store.load(set: "Products", entities: [["ProductID": .string("P0")]])
        let bad: [Properties] = [
            ["ProductID": .string("P1")], ["ProductID": .string("P2"), "Price": .string("cheap")],
        ]
        #expect {
            try store.load(set: "Products", entities: bad)
        } throws: { error in
            "\(error)".contains("Products('P2')") && "\(error)".contains("Price")
        }
        let json = #"{"value":[{"SalesOrderID":"SO1","Items":[{"ItemPosition":10},{"ItemPosition":"x"}]}]}"#
        #expect(throws: EntityError.self) { try store.load(set: "SalesOrders", json: Array(json.utf8)) }
        #expect(try store.count(set: "Products") == 1)
        #expect(try store.count(set: "SalesOrders") == 0)
        #expect(try store.count(set: "SalesOrderItems") == 0)
        #expect(throws: EntityError.unknownEntitySet("Nope")) { try store.load(set: "Nope", entities: [[:]]) }
        #expect(try store.check().isConsistent)
    }
}
