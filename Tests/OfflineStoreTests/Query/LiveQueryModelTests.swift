import Foundation
import Synchronization
import Testing
@testable import OfflineStore
import Query
import Samples
import Storage
import TestSupport

/// The live queries of the store against a model: after each random write to a set a query reads
/// (its own, its `$expand` tree's, the sets its `$filter` and `$orderby` reach), the live answer —
/// what `serve` streams (`observeRendering`, with ETags) — is what a fresh query answers, and
/// `observe` gives an element whenever that answer changed. The corpus: navigation in `$filter`
/// and `$orderby`, `$expand` one and two levels deep with nested options, `$select`, single
/// entities and navigation paths. Issue 37, F12 (a commit to an expanded set brought no element)
/// and F15 (a commit to a property a `$select` leaves out changed the ETag and brought none).
@Suite(.checksStores) struct LiveQueryModelTests {
    /// The newest element a consumer task has received, and how many.
    final class Latest<T: Sendable>: Sendable {
        let value = Mutex<(T?, Int)>((nil, 0))
        var latest: T? { value.withLock { $0.0 } }
        var count: Int { value.withLock { $0.1 } }
    }

    static func consume<T: Sendable>(_ stream: AsyncThrowingStream<T, any Error>) -> (Latest<T>, Task<Void, any Error>)
    {
        let latest = Latest<T>()
        let task = Task {
            for try await element in stream { latest.value.withLock { $0 = (element, $0.1 + 1) } }
        }
        return (latest, task)
    }

    static func rendering(_ store: OfflineStore, _ url: String, _ options: ResultOptions) throws -> [UInt8] {
        var out: [UInt8] = []
        try store.query(url, options: options, writeBytes: { out.append(contentsOf: $0) })
        return out
    }

    static func key(_ v: Value) -> String {
        if case .string(let s) = v { return "'\(s)'" }
        return "\(v)"
    }

    @Test func everyLiveAnswerIsAFreshQueryAfterRandomWritesToWhatItReads() async throws {
        let store = try await OfflineStore.open(at: try ServeTests.sampleStore())
        var random = SeededRandom(seed: testSeed("LiveQueryModelTests"))
        let steps = Int(ProcessInfo.processInfo.environment["LIVE_MODEL_STEPS"] ?? "") ?? 40
        let partners = try store.entities("BusinessPartners").map { $0["BusinessPartnerID"]! }
        let products = try store.entities("Products").map { $0["ProductID"]! }
        let orders = try store.entities("SalesOrders").map { $0["SalesOrderID"]! }
        let items = try store.entities("SalesOrderItems").map { [$0["SalesOrderID"]!, $0["ItemPosition"]!] }
        let (p0, o0, x0) = (Self.key(partners[0]), Self.key(orders[0]), Self.key(products[0]))
        let corpus = [
            "BusinessPartners?$expand=Products",
            "BusinessPartners(\(p0))?$expand=Products($select=Name)",
            "BusinessPartners?$select=CompanyName&$expand=SalesOrders($select=Note;$expand=Items($select=Quantity))",
            "SalesOrders(\(o0))?$expand=Items($expand=Product($select=Name,Price))",
            "SalesOrders(\(o0))/Items?$select=Quantity&$expand=Product($expand=Supplier($select=CompanyName))",
            "SalesOrderItems?$filter=Product/Supplier/Country eq 'DE'&$select=Quantity",
            "Products?$filter=Supplier/Country eq 'DE'&$select=Name",
            "Products?$orderby=Supplier/CompanyName,ProductID&$select=Name&$top=5",
            "SalesOrders?$filter=Items/any(i:i/Quantity gt 5)&$select=SalesOrderID",
            "Products?$select=Name&$top=8",
            "Products(\(x0))?$select=Name",
        ]
        let streamed = ResultOptions(serviceRoot: "http://model/", etags: true)
        var live: [(url: String, answer: Latest<[UInt8]>, elements: Latest<[Properties]>)] = []
        var tasks: [Task<Void, any Error>] = []
        defer { for t in tasks { t.cancel() } }
        for url in corpus {
            let (answer, a) = Self.consume(
                try store.observeRendering(url, options: streamed, limit: 1 << 22, otherProcessesEvery: .seconds(60)))
            let (elements, e) = Self.consume(try store.observe(url, otherProcessesEvery: .seconds(60)))
            live.append((url, answer, elements))
            tasks += [a, e]
        }
        for l in live {
            let fresh = try Self.rendering(store, l.url, streamed)
            #expect(try await eventually(within: 10) { l.answer.latest == fresh && l.elements.count == 1 }, "\(l.url)")
        }
        var failures: [String] = []
        var created: [Value] = []
        for step in 0..<steps {
            let before = try live.map { try Self.rendering(store, $0.url, ResultOptions()) }
            let counts = live.map(\.elements.count)
            let pick = { (n: Int) in Int(random.next() % UInt64(n)) }
            var write = ""
            switch random.next() % 9 {
            case 0:
                let p = partners[pick(partners.count)]
                write = "BusinessPartners(\(Self.key(p))) Country"
                let country = ["DE", "US", "FR"][pick(3)]
                try await store.update(set: "BusinessPartners", key: [p], changes: ["Country": .string(country)])
            case 1:
                let p = partners[pick(partners.count)]
                write = "BusinessPartners(\(Self.key(p))) CompanyName"
                try await store.update(
                    set: "BusinessPartners", key: [p], changes: ["CompanyName": .string("bp \(step)")])
            case 2:
                let p = products[pick(products.count)]
                write = "Products(\(Self.key(p))) Price"
                try await store.update(set: "Products", key: [p], changes: ["Price": ObserveTests.price(pick(200_000))])
            case 3:
                let p = products[pick(products.count)]
                write = "Products(\(Self.key(p))) SupplierID"
                try await store.update(
                    set: "Products", key: [p], changes: ["SupplierID": partners[pick(partners.count)]])
            case 4:
                let p = products[pick(products.count)]
                write = "Products(\(Self.key(p))) Name"
                try await store.update(set: "Products", key: [p], changes: ["Name": .string("product \(step)")])
            case 5 where created.count < 3:
                let id = Value.string("LM-\(step)")
                write = "create Products('LM-\(step)')"
                try await store.create(
                    set: "Products",
                    entity: [
                        "ProductID": id, "Name": .string("new \(step)"), "SupplierID": partners[pick(partners.count)],
                    ])
                created.append(id)
            case 5:
                write = "delete Products(\(Self.key(created[0])))"
                try await store.delete(set: "Products", key: [created.removeFirst()])
            case 6:
                let o = orders[pick(orders.count)]
                write = "SalesOrders(\(Self.key(o))) Note"
                try await store.update(set: "SalesOrders", key: [o], changes: ["Note": .string("note \(step)")])
            case 7:
                let i = items[pick(items.count)]
                write = "SalesOrderItems(\(i)) Quantity"
                try await store.update(set: "SalesOrderItems", key: i, changes: ["Quantity": .int(Int64(pick(10)))])
            default:
                let i = items[pick(items.count)]
                write = "SalesOrderItems(\(i)) ProductID"
                try await store.update(
                    set: "SalesOrderItems", key: i, changes: ["ProductID": products[pick(products.count)]])
            }
            for (n, l) in live.enumerated() {
                let fresh = try Self.rendering(store, l.url, streamed)
                if !(try await eventually(within: 3) { l.answer.latest == fresh }) {
                    failures.append("step \(step), \(write): the live answer of \(l.url) is stale")
                }
                // `observe` gives an element when what the URL answers changed (ETags aside: its
                // elements do not carry them), and that element is what a fresh query gives.
                if try Self.rendering(store, l.url, ResultOptions()) != before[n],
                    !(try await eventually(within: 3) { l.elements.count > counts[n] })
                {
                    failures.append("step \(step), \(write): observe(\(l.url)) gave no element")
                }
                let entities = try store.entities(l.url)
                if !(try await eventually(within: 3) { l.elements.latest == entities }) {
                    failures.append("step \(step), \(write): observe(\(l.url)) is not a fresh entities(url)")
                }
            }
            if failures.count > 20 { break }
        }
        #expect(failures.isEmpty, "\(failures.count) stale answers:\n\(failures.prefix(20).joined(separator: "\n"))")
    }
}
