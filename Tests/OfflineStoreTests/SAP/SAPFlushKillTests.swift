import Foundation
import Testing
import TestSupport
@testable import OfflineStore
import Storage

/// `offline-store flush` SIGKILLed at random instants against SAP Gateway V2 (mock-sap's
/// GWSAMPLE_BASIC, which does not honour `Repeatability-Request-ID`): every change is on the
/// server once. Client-assigned keys (products) are settled by reconciliation: 0 duplicates, 0
/// lost, asserted. Server-assigned keys (sales orders, numbered by the service) have nothing in
/// the answer that identifies a lost first attempt, and mock-sap honours no idempotency header:
/// the duplicates there are counted and reported — the figure the README quotes — and every one
/// must have been flagged in doubt (an `InDoubt` event, written with the settlement: flags at
/// least the duplicates). With a create marker (`createMarkers`: the order's `Note` carries the
/// request's identity), a create sent again is first looked up by it: 0 duplicates, 0 lost, no
/// flag, asserted. Bounded by `SAP_KILLS` (default 8) and `SAP_KILL_SECONDS` (default 60), each run.
@Suite(.external, .checksStores, .serialized) struct SAPFlushKillTests {
    static let service = MockSAP.gwsample

    @Test(arguments: [false, true]) func aFlushKilledAtRandomAgainstGatewayLosesNothing(markers: Bool) async throws {
        var rng = SeededRandom(seed: testSeed("aFlushKilledAtRandomAgainstGatewayLosesNothing") &+ (markers ? 1 : 0))
        let env = ProcessInfo.processInfo.environment
        let kills = env["SAP_KILLS"].flatMap(Int.init) ?? 8
        let seconds = env["SAP_KILL_SECONDS"].flatMap(Double.init) ?? 60
        let sap = try await MockSAP.start(["--latency-ms", "40"], lifetime: max(1_800, seconds * 10))
        defer { Task { await sap.stop() } }
        let path = try await SAPFlush.store(sap, createMarkers: markers ? ["SalesOrderSet": "Note"] : [:]).path
        var created: [String] = []  // client-keyed products created offline
        var orders = 0  // server-keyed orders created offline
        var orderRequests: [Int64] = []  // their request ids
        var totals = (kills: 0, finished: 0, sentLeft: 0, completions: 0)
        let start = Date()
        var round = 0
        while totals.kills < kills && Date().timeIntervalSince(start) < seconds {
            do {
                let store = try OfflineStore.open(at: path)
                for i in 0..<Int.random(in: 1...3, using: &rng) {
                    let id = "K\(round)-\(i)"
                    try await store.create(
                        set: "ProductSet", entity: SAPFlushTests.product(id, "kill \(round)", price: "\(round).5"))
                    created.append(id)
                }
                let products = try store.entities("ProductSet?$select=ProductID").compactMap { $0["ProductID"] }
                try await store.update(
                    set: "ProductSet", key: [products.randomElement(using: &rng)!],
                    changes: ["Name": .string("u\(round)")])
                if Int.random(in: 0..<2, using: &rng) == 0 {
                    let partner = try store.entities("BusinessPartnerSet?$top=1")[0]
                    let order = try await store.create(
                        set: "SalesOrderSet",
                        entity: [
                            "Note": .string("kill order \(round)"), "CustomerID": partner["BusinessPartnerID"]!,
                            "CurrencyCode": .string("EUR"),
                        ])
                    orders += 1
                    if let id = order.requestID { orderRequests.append(id) }
                }
            }
            let killed = try await FlushKillTests.flushKilled(
                ["flush", "--store", path, "--batch-size", "2"], after: Int.random(in: 20...400, using: &rng))
            if killed { totals.kills += 1 } else { totals.finished += 1 }
            let store = try OfflineStore.open(at: path)
            totals.sentLeft += try FlushFixture.queue(store).filter { $0.status == .sent }.count
            round += 1
        }
        // Complete: a flush that runs to the end, then the server read back.
        let store = try OfflineStore.open(at: path)
        let done = try await store.flush()
        totals.completions += 1
        #expect(done.stopped == nil && done.left == 0, "\(done)")
        let errors = try FlushFixture.errors(store)
        #expect(errors.isEmpty, "refused: \(errors)")
        let there = try await sap.entities(Self.service, "ProductSet?$filter=startswith(ProductID,'K')")
        let ids = there.compactMap { $0["ProductID"] as? String }
        let duplicates = ids.count - Set(ids).count
        let lost = Set(created).subtracting(ids)
        // Without markers an order is known by its Note; with them, by the marker its Note carries
        // (its request's repeatability id, which the outcome record keeps).
        var markerOf: [String] = []
        for id in orderRequests {
            let row = try store.entities("RequestHistory?$filter=RequestID eq \(id)").first
            if case .guid(let g)? = row?["RepeatabilityID"] {
                markerOf.append(String(g.description.filter { $0 != "-" }.uppercased()))
            }
        }
        if markers { #expect(markerOf.count == orders, "every order's outcome is recorded") }
        let theirOrders = try await sap.entities(
            Self.service, markers ? "SalesOrderSet" : "SalesOrderSet?$filter=startswith(Note,'kill order')")
        let orderNotes = theirOrders.compactMap { $0["Note"] as? String }.filter { !markers || markerOf.contains($0) }
        let orderDuplicates = orderNotes.count - Set(orderNotes).count
        let ordersLost = orders - Set(orderNotes).count
        // Each order the service holds more than once: one of its copies is named by a flag.
        let flagged = try store.entities("EventLog?$filter=Type eq 'InDoubt'").compactMap { e -> String? in
            if case .string(let d)? = e["Details"] { d } else { nil }
        }
        let flags = flagged.count
        var unflagged: [String] = []
        for note in Set(orderNotes) where orderNotes.filter({ $0 == note }).count > 1 {
            let keys = theirOrders.filter { $0["Note"] as? String == note }.compactMap { $0["SalesOrderID"] as? String }
            if !keys.contains(where: { key in flagged.contains { $0.contains("'\(key)'") } }) { unflagged.append(note) }
        }
        print(
            "SAP flush kill test\(markers ? " with create markers" : ""): \(round) rounds, \(totals.kills) flushes killed, \(totals.finished) done before the kill; a request left sent by a kill \(totals.sentLeft) times; client-keyed creates \(created.count): on the server \(ids.count), duplicates \(duplicates), lost \(lost.count); server-keyed creates \(orders): on the server \(orderNotes.count), duplicates \(orderDuplicates), lost \(ordersLost), flagged in doubt \(flags); \(String(format: "%.1f", Date().timeIntervalSince(start))) s"
        )
        #expect(duplicates == 0)
        #expect(lost.isEmpty, "lost: \(lost.sorted())")
        #expect(ordersLost == 0)
        if markers {
            #expect(orderDuplicates == 0, "an order created twice though its marker was looked up")
            #expect(flags == 0, "nothing in doubt: \(flagged)")
        }
        #expect(unflagged.isEmpty, "created twice, flagged in doubt nowhere: \(unflagged.sorted()); flags: \(flagged)")
        #expect(totals.kills >= 1)
        #expect(try SAPFlush.queued(store).isEmpty)
        // Every product the store has is the server's, name for name.
        for p in try store.entities("ProductSet?$filter=startswith(ProductID,'K')") {
            guard case .string(let id)? = p["ProductID"] else { continue }
            let theirs = there.first { $0["ProductID"] as? String == id }
            #expect(theirs?["Name"] as? String == { if case .string(let n)? = p["Name"] { n } else { nil } }(), "\(id)")
        }
    }
}
