import Foundation
import Testing
import OfflineStore
import Samples

@Suite(.checksStores) struct UpsertTests {
    func syncUpsert(_ store: OfflineStore, _ e: Properties) throws -> Bool {
        try store.upsert(set: "SalesOrderItems", entity: e)
    }

    @Test func upsertWritesOneEntityAndItsIndexesConcurrentCallersGroupCommit() async throws {
        let store = try OfflineStore.create(
            at: tempDir() + "/store", metadata: Array(SampleData.metadata.utf8),
            configuration: SampleData.configuration)
        try store.generate(set: "BusinessPartners", count: 20)
        try store.generate(set: "Products", count: 30)
        try store.generate(set: "SalesOrders", count: 10)
        let gen = try store.generator(set: "SalesOrderItems", count: 40)
        #expect(try syncUpsert(store, gen.entity(0)) == false)  // the blocking form
        var changed = gen.entity(0)
        changed["Quantity"] = .int(777)
        #expect(try await store.upsert(set: "SalesOrderItems", entity: changed) == true)
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for row in 1..<40 {
                group.addTask { try await store.upsert(set: "SalesOrderItems", entity: gen.entity(row)) }
            }
            for try await replaced in group { #expect(!replaced) }
        }
        #expect(try store.count(set: "SalesOrderItems") == 40)
        #expect(
            try store.find(set: "SalesOrderItems", index: "Quantity DESC,ProductID", where: .equals([.int(777)])).count
                == 1)
        #expect(try store.check().isConsistent)
        await #expect(throws: EntityError.self) {
            try await store.upsert(set: "SalesOrderItems", entity: ["Quantity": .int(1)])
        }
    }
}
