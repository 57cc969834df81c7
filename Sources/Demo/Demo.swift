import NIOHTTP1
import NIOCore
package import ArgumentParser
import AsyncHTTPClient
import CommandSupport
import Foundation
import OfflineStore
import Samples
import Server
import Storage  // JSON: reading back the OData JSON that the public query API wrote
import Synchronization

package struct Demo: ParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(

        abstract: "The whole offline story, against a server in this process.",
        discussion: """
            Generates an EPM data set (business partners, products, sales orders, items; --size partners, \
            half as many products, 5 orders a partner, 3 items an order), serves it on a free loopback \
            port, opens an offline store with two defining requests and shows, step by step: the \
            download, findAll and findBy, a navigation read with its plan, offline changes with tags, \
            the request queue before and after collapse, flush, a change on the server, a refresh that \
            rebases a pending change, a refused request in the ErrorArchive and its resolution, the \
            EventLog and check. Progress and emphasis on a terminal; plain lines otherwise. Exit 0 \
            when every step did what it shows.
            Example: offline-store demo --size 40 --store /tmp/demo
            """)
    @Option(
        help:
            "Keep the demo's two stores (server, offline) in this new directory (default: a temporary one, removed at the end)."
    )
    var store: String?
    @Option(help: "Business partners in the generated data set (10…200000); the rest scales with it.")
    var size = Demo.defaultSize

    /// The whole story in under a minute in a debug build on 2 busy cores (43 s measured, load 6–7).
    static let defaultSize = 4_000

    package func run() throws {
        try runReportingErrors {
            guard (10...200_000).contains(size) else { throw CLIError("--size must be 10…200000, not \(size)") }
            if let store, FileManager.default.fileExists(atPath: store) {
                throw CLIError("--store '\(store)' exists; give a new directory")
            }
            // A fresh private directory (mkdtemp: unpredictable name, mode 0700), never a fixed
            // name that a planted symlink could redirect.
            let scratch = store == nil ? try makeTemporaryDirectory(prefix: "offline-store-demo-") : nil
            defer { if let scratch { try? FileManager.default.removeItem(atPath: scratch) } }
            let dir = store ?? scratch!
            if store != nil { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
            let out = DemoOutput(tty: isatty(1) == 1, steps: DemoStory.steps)
            try out.write("offline-store demo: stores in \(dir) (--size \(size))")
            let size = self.size
            let failure = Mutex<(any Error)?>(nil)
            try blocking {
                do { try await DemoStory(out: out, dir: dir, size: size).run() } catch {
                    failure.withLock { $0 = error }
                }
            }
            if let error = failure.withLock({ $0 }) { throw error }
        }
    }
}

/// A step that did not do what the story says it does.
struct DemoFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// The story, step by step. Each step prints what it does and checks it: a step that does not
/// happen as told stops the demo with an error (exit 1).
final class DemoStory {
    static let steps = 13
    let out: DemoOutput
    let dir: String
    let size: Int
    let started = ContinuousClock.now

    // Figures for the summary.
    var serverCounts: [(String, Int)] = []
    var downloaded = 0
    var downloadTime = Duration.zero
    var changesMade = 0
    var requestsAfterCollapse = 0
    var flushed = 0
    var refreshes = 0
    var archived = 0
    var resolved = 0
    /// Prints the offline store's lifecycle (from step 2 on).
    var watcher: LifecycleWatcher?

    init(out: DemoOutput, dir: String, size: Int) {
        self.out = out
        self.dir = dir
        self.size = size
    }

    static let salesURL = "BusinessPartners?$filter=Country eq 'US'&$expand=SalesOrders($expand=Items)"
    static let productURL = "Products"

    package func run() async throws {
        let (server, served) = try await step1Server()
        do {
            try await story(url: server.url, server: served)
        } catch {
            try? await server.stop()
            throw error
        }
        try await server.stop()
        try summary()
    }

    func story(url: String, server: OfflineStore) async throws {
        let store = try await step2Open(url: url, server: server)
        try await step3Find(store)
        let order = try await step4Items(store)
        let products = try store.entities("Products?$orderby=ProductID&$top=3&$select=ProductID")
        guard products.count == 3,
            let partner = try store.entities("BusinessPartners?$orderby=BusinessPartnerID&$top=1").first
        else {
            throw DemoFailure("the download brought too few products or partners for the story; use a larger --size")
        }
        let ids = products.map { Self.string($0["ProductID"]) }
        let partnerID = Self.string(partner["BusinessPartnerID"])
        let firstRequests = try await step5Changes(store, product: ids[0], partner: partnerID, order: order)
        try await step6Collapse(store, product: ids[0], firstRequests: firstRequests)
        try await step7Flush(store, server: server, order: order)
        let pending = try await step8ServerChange(store, url: url, server: server, rebased: ids[1], deleted: ids[2])
        try await step9Refresh(store, rebased: ids[1], deleted: ids[2], pending: pending)
        let refused = try await step10Refused(store, server: server, rebased: ids[1], deleted: ids[2])
        try await step11Resolve(store, refused: refused, deleted: ids[2])
        try await step12Events(store)
        try await step13Check(store, server: server)
    }

    // MARK: 1. The server

    /// The running server and its store (the one the server uses: LMDB wants one handle per process).
    func step1Server() async throws -> (InProcessServer, OfflineStore) {
        try await out.step(1, "the server: a generated EPM data set, served in this process") {
            let path = dir + "/server"
            var configuration = SampleData.configuration
            configuration.durability = .noSync  // the demo's server: a crash loses nothing worth keeping
            let server = try OfflineStore.create(
                at: path, metadata: Array(SampleData.metadata.utf8), configuration: configuration)
            let plan = [
                ("BusinessPartners", size), ("Products", max(size / 2, 20)), ("SalesOrders", size * 5),
                ("SalesOrderItems", size * 15),
            ]
            for (set, count) in plan {
                let start = ContinuousClock.now
                try server.generate(set: set, count: count, seed: 11, batchSize: 10_000) { [out] done, total in
                    out.progress("generating \(set): \(done) of \(total)")
                }
                let n = try server.count(set: set)
                guard n == count else { throw DemoFailure("generated \(count) \(set), the store has \(n)") }
                serverCounts.append((set, n))
                try out.line("\(set): \(n) generated (\(DemoOutput.seconds(ContinuousClock.now - start)))")
            }
            let us = try server.find(set: "BusinessPartners", index: "Country", where: .equals([.string("US")])).count
            try out.line(
                "each BusinessPartner has an Address (City, PostalCode, Street, Country); \(us) of them are in the US")
            guard us > 0 else { throw DemoFailure("no US partner in the data set; use a larger --size") }
            let running = try await InProcessServer.start(store: server)
            try out.line("serving \(path) at \(running.url) (offline-store serve, in this process)")
            return (running, server)
        }
    }

    // MARK: 2. Open and download

    func step2Open(url: String, server: OfflineStore) async throws -> OfflineStore {
        try await out.step(2, "open an offline store with two defining requests, and download") {
            try out.line("SG_Sales:   \(Self.salesURL)")
            try out.line("SG_Product: \(Self.productURL)")
            // The store's lifecycle, printed as it goes from here on (`state:` lines).
            let lifecycle = Lifecycle()
            let watcher = LifecycleWatcher(lifecycle, out: out)
            self.watcher = watcher
            let configuration = StoreConfiguration(
                serviceRoot: url,
                definingRequests: [
                    .init(name: "SG_Sales", url: Self.salesURL),
                    .init(name: "SG_Product", url: Self.productURL),
                ],
                indexes: SampleData.configuration.indexes)
            let store = try OfflineStore.create(
                at: dir + "/offline", metadata: Array(SampleData.metadata.utf8), configuration: configuration,
                lifecycle: lifecycle)
            try await watcher.settle(past: 0)
            try out.line("created, empty; its service: \(url)")
            let start = ContinuousClock.now
            let report = try await refresh(store)
            downloadTime = ContinuousClock.now - start
            downloaded = report.received
            // What arrived is exactly what the defining requests select on the server.
            let expected: [(String, String)] = [
                ("BusinessPartners", "BusinessPartners?$filter=Country eq 'US'"),
                ("SalesOrders", "SalesOrders?$filter=BusinessPartner/Country eq 'US'"),
                ("SalesOrderItems", "SalesOrderItems?$filter=SalesOrder/BusinessPartner/Country eq 'US'"),
                ("Products", "Products"),
            ]
            var counts: [String] = []
            for (set, query) in expected {
                let (local, remote) = (try store.count(set: set), try server.entities(query).count)
                guard local == remote else {
                    throw DemoFailure("\(set): \(local) downloaded, the server selects \(remote)")
                }
                counts.append("\(set) \(local)")
            }
            try out.line("local: " + counts.joined(separator: ", ") + " (each as many as the server selects)")
            return store
        }
    }

    /// A refresh, its lifecycle printed as it goes, then its report.
    func refresh(_ store: OfflineStore) async throws -> RefreshReport {
        let mark = watcher?.opens ?? 0
        let report = try await store.refresh()
        try await watcher?.settle(past: mark)
        try out.line("refresh: \(report)")
        refreshes += 1
        return report
    }

    // MARK: 3. findAll, findBy

    func step3Find(_ store: OfflineStore) async throws {
        try await out.step(3, "findAll and findBy") {
            var start = ContinuousClock.now
            let all = try store.entities("Products")
            try out.line("findAll Products: \(all.count) entities (\(DemoOutput.seconds(ContinuousClock.now - start)))")
            guard all.count == (try store.count(set: "Products")) else {
                throw DemoFailure("findAll disagrees with the count")
            }
            start = ContinuousClock.now
            let us = try store.find(set: "BusinessPartners", index: "Country", where: .equals([.string("US")]))
            try out.line(
                "findBy BusinessPartners, index Country = 'US': \(us.count) entities (\(DemoOutput.seconds(ContinuousClock.now - start)))"
            )
            guard us.count == (try store.count(set: "BusinessPartners")) else {
                throw DemoFailure("findBy Country = 'US' is not every local partner")
            }
            guard let category = all.lazy.compactMap({ $0["Category"] }).first else {
                throw DemoFailure("no product has a category")
            }
            start = ContinuousClock.now
            let inCategory = try store.find(set: "Products", index: "Category,Price DESC", where: .equals([category]))
            try out.line(
                "findBy Products, index (Category, Price DESC), Category = \(demoText(category)): \(inCategory.count) entities, dearest first (\(DemoOutput.seconds(ContinuousClock.now - start)))"
            )
            for p in inCategory.prefix(3) {
                try out.line("  \(demoText(p["ProductID"])) \(demoText(p["Name"])) \(demoText(p["Price"]))")
            }
        }
    }

    // MARK: 4. An order's items with their products

    func step4Items(_ store: OfflineStore) async throws -> (id: String, items: [Int64]) {
        try await out.step(4, "the items of one order with each item's product: a navigation read, not a join") {
            guard let order = try store.entities("SalesOrders?$orderby=SalesOrderID&$top=1").first else {
                throw DemoFailure("no sales order was downloaded; use a larger --size")
            }
            let id = Self.string(order["SalesOrderID"])
            try out.line(
                "SQL did: SELECT … FROM SalesOrderItems i LEFT JOIN Products p ON p.ProductID = i.ProductID WHERE i.SalesOrderID = ?"
            )
            let url =
                "SalesOrders('\(id)')/Items?$select=ItemPosition,ProductID,Quantity,NetAmount&$expand=Product($select=Name,Category,Price)"
            try out.line("OData: \(url)")
            try out.line("plan: " + (try store.explain(url)).replacingOccurrences(of: "\n", with: "\n         "))
            var text = ""
            try store.query(url) { text += $0 }
            guard case .array(let items)? = try JSON.parse(text)["value"], !items.isEmpty else {
                throw DemoFailure("order \(id) has no items")
            }
            var positions: [Int64] = []
            for item in items {
                let product = item["Product"]
                let described = product.map { p in
                    p == .null
                        ? "(no product)" : "\(demoText(p["Name"])), \(demoText(p["Category"])), \(demoText(p["Price"]))"
                }
                try out.line(
                    "  item \(demoText(item["ItemPosition"])): \(demoText(item["Quantity"])) × \(demoText(item["ProductID"])) → \(described ?? "(no product)")"
                )
                if case .number(let n)? = item["ItemPosition"], let position = Int64(n) { positions.append(position) }
            }
            try out.line("\(items.count) items of SalesOrders('\(id)'), each with its product, in one read")
            return (id, positions)
        }
    }

    // MARK: 5. Offline changes

    /// The changes made in step 5, with their tags, and the requests that hold them.
    func step5Changes(
        _ store: OfflineStore, product: String, partner: String, order: (id: String, items: [Int64])
    ) async throws -> [Int64] {
        try await out.step(5, "offline changes with custom tags (no connection needed)") {
            var requests: [Int64] = []
            func record(_ what: String, _ receipt: OfflineStore.ChangeReceipt) throws {
                changesMade += 1
                guard let id = receipt.requestID else { throw DemoFailure("\(what): no request was queued") }
                requests.append(id)
                try out.line("\(what) → request #\(id)")
            }
            let price = try store.get(set: "Products", key: [.string(product)])?["Price"]
            try record(
                "create Products('DEMO-1') [tag new-product]",
                try await store.create(
                    set: "Products",
                    entity: [
                        "ProductID": .string("DEMO-1"), "Name": .string("Demo Headset"),
                        "Category": .string("Headsets"), "SupplierID": .string(partner),
                        "Price": .decimal(EDMDecimal("129.00")!), "CurrencyCode": .string("USD"),
                    ],
                    options: ChangeOptions(customTag: "new-product")))
            try record(
                "update Products('\(product)') Price \(demoText(price)) → 499.00 [tag price-change]",
                try await store.update(
                    set: "Products", key: [.string(product)], changes: ["Price": .decimal(EDMDecimal("499.00")!)],
                    options: ChangeOptions(customTag: "price-change")))
            try record(
                "create SalesOrders('DEMO-SO-1') for BusinessPartners('\(partner)') [tag new-order]",
                try await store.create(
                    set: "SalesOrders",
                    entity: [
                        "SalesOrderID": .string("DEMO-SO-1"), "CustomerID": .string(partner),
                        "GrossAmount": .decimal(EDMDecimal("757.00")!), "CurrencyCode": .string("USD"),
                        "LifecycleStatus": .string("N"), "Note": .string("created offline"),
                    ],
                    options: ChangeOptions(customTag: "new-order")))
            for (position, item, quantity, amount) in [(10, "DEMO-1", 2, "258.00"), (20, product, 1, "499.00")] {
                try record(
                    "create SalesOrderItems(SalesOrderID='DEMO-SO-1',ItemPosition=\(position)) [tag new-order]",
                    try await store.create(
                        set: "SalesOrderItems",
                        entity: [
                            "SalesOrderID": .string("DEMO-SO-1"), "ItemPosition": .int(Int64(position)),
                            "ProductID": .string(item), "Quantity": .int(Int64(quantity)),
                            "NetAmount": .decimal(EDMDecimal(amount)!), "CurrencyCode": .string("USD"),
                        ],
                        options: ChangeOptions(customTag: "new-order")))
            }
            let dropped = order.items.last!
            try record(
                "delete SalesOrderItems(SalesOrderID='\(order.id)',ItemPosition=\(dropped)) [tag drop-item]",
                try await store.delete(
                    set: "SalesOrderItems", key: [.string(order.id), .int(dropped)],
                    options: ChangeOptions(customTag: "drop-item")))
            let local = try store.entities("SalesOrders('DEMO-SO-1')/Items").count
            try out.line(
                "read back at once: SalesOrders('DEMO-SO-1') has \(local) items; offline.isLocal() holds for "
                    + "\(try store.entities("SalesOrders?$filter=offline.isLocal()").count) order")
            return requests
        }
    }

    // MARK: 6. The queue, before and after collapse

    func step6Collapse(_ store: OfflineStore, product: String, firstRequests: [Int64]) async throws {
        try await out.step(6, "the request queue before and after collapse") {
            let before = try queue(store)
            try out.line("before: \(before.count) requests for \(changesMade) changes")
            for r in before { try out.line("  " + describe(r)) }
            guard before.count == firstRequests.count else {
                throw DemoFailure("\(before.count) requests queued for \(firstRequests.count) changes")
            }
            try out.line("4 more changes, each folded into what is pending:")
            let rename = try await store.update(
                set: "Products", key: [.string("DEMO-1")], changes: ["Name": .string("Demo Headset Pro")],
                options: ChangeOptions(customTag: "rename"))
            try out.line(
                "  update Products('DEMO-1') Name [tag rename] → merged into request #\(rename.requestID ?? -1) (still one create)"
            )
            let again = try await store.update(
                set: "Products", key: [.string(product)], changes: ["Price": .decimal(EDMDecimal("449.00")!)],
                options: ChangeOptions(customTag: "price-change"))
            try out.line(
                "  update Products('\(product)') Price → 449.00 [tag price-change] → merged into request #\(again.requestID ?? -1)"
            )
            let scratch = try await store.create(
                set: "Products", entity: ["ProductID": .string("DEMO-2"), "Name": .string("Mistake")],
                options: ChangeOptions(customTag: "scratch"))
            try out.line("  create Products('DEMO-2') [tag scratch] → request #\(scratch.requestID ?? -1)")
            let gone = try await store.delete(
                set: "Products", key: [.string("DEMO-2")], options: ChangeOptions(customTag: "scratch"))
            try out.line(
                "  delete Products('DEMO-2') → cancels request #\(scratch.requestID ?? -1): \(gone.requestID == nil ? "no request at all" : "request #\(gone.requestID!)")"
            )
            changesMade += 4
            guard rename.requestID == firstRequests[0], again.requestID == firstRequests[1], gone.requestID == nil
            else {
                throw DemoFailure("the changes did not collapse as the table says")
            }
            let after = try queue(store)
            requestsAfterCollapse = after.count
            try out.line("after: \(after.count) requests for \(changesMade) changes")
            for r in after { try out.line("  " + describe(r)) }
            guard after.count == before.count else {
                throw DemoFailure("collapse left \(after.count) requests, not \(before.count)")
            }
        }
    }

    func queue(_ store: OfflineStore) throws -> [Properties] { try store.entities("RequestQueue?$orderby=RequestID") }

    /// `#3 POST SalesOrderItems(…) [new-order] pending, after #2`.
    func describe(_ r: Properties) -> String {
        var s =
            "#\(demoText(r["RequestID"])) \(Self.string(r["Method"])) \(Self.string(r["EntitySet"]))(\(Self.string(r["EntityKey"])))"
        if case .string(let tag)? = r["CustomTag"] { s += " [\(tag)]" }
        s += " \(Self.string(r["Status"]))"
        if case .collection(let deps)? = r["Dependencies"], !deps.isEmpty {
            s += ", after " + deps.map { "#" + demoText($0) }.joined(separator: ", ")
        }
        if case .string(let body)? = r["Body"], Self.string(r["Method"]) == "PATCH" { s += " " + body }
        return s
    }

    // MARK: 7. Flush

    func step7Flush(_ store: OfflineStore, server: OfflineStore, order: (id: String, items: [Int64])) async throws {
        try await out.step(7, "flush: the queue goes to the server in $batch round trips") {
            let report = try await flush(store)
            guard report.stopped == nil, report.archived == 0, report.succeeded == requestsAfterCollapse else {
                throw DemoFailure("the flush did not send every request: \(report)")
            }
            guard try store.pendingRequestCount() == 0 else { throw DemoFailure("requests are left after the flush") }
            let product = try server.get(set: "Products", key: [.string("DEMO-1")])
            let items = try server.entities("SalesOrders('DEMO-SO-1')/Items").count
            let dropped = try server.get(set: "SalesOrderItems", key: [.string(order.id), .int(order.items.last!)])
            let scratch = try server.get(set: "Products", key: [.string("DEMO-2")])
            try out.line(
                "on the server now: Products('DEMO-1') \(demoText(product?["Name"])), SalesOrders('DEMO-SO-1') with \(items) items, "
                    + "the deleted item \(dropped == nil ? "gone" : "still there"), Products('DEMO-2') \(scratch == nil ? "never sent" : "there")"
            )
            guard product?["Name"] == .string("Demo Headset Pro"), items == 2, dropped == nil, scratch == nil else {
                throw DemoFailure("the server does not hold what was flushed")
            }
            try out.line("the queue is empty; the server's ETags are kept for the next If-Match")
        }
    }

    /// A flush, its lifecycle printed as it goes, then its report.
    func flush(_ store: OfflineStore) async throws -> FlushReport {
        try out.line("\(try store.pendingRequestCount()) requests to send")
        let mark = watcher?.opens ?? 0
        let report = try await store.flush(batchSize: 50)
        try await watcher?.settle(past: mark)
        try out.line("flush: \(report)")
        flushed += report.succeeded
        archived += report.archived
        return report
    }

    // MARK: 8. Meanwhile, on the server

    /// Returns the ids of the two pending requests.
    func step8ServerChange(
        _ store: OfflineStore, url: String, server: OfflineStore, rebased: String, deleted: String
    ) async throws -> [Int64] {
        try await out.step(8, "meanwhile: new local changes wait, and another client changes the server") {
            let a = try await store.update(
                set: "Products", key: [.string(rebased)], changes: ["Price": .decimal(EDMDecimal("19.99")!)],
                options: ChangeOptions(customTag: "discount"))
            try out.line(
                "local, pending: update Products('\(rebased)') Price → 19.99 [tag discount] → request #\(a.requestID ?? -1)"
            )
            let b = try await store.update(
                set: "Products", key: [.string(deleted)], changes: ["Name": .string("Renamed offline")],
                options: ChangeOptions(customTag: "rename-offline"))
            try out.line(
                "local, pending: update Products('\(deleted)') Name → 'Renamed offline' [tag rename-offline] → request #\(b.requestID ?? -1)"
            )
            // Another client: plain HTTP to the served store.
            let (patch, delete) = try await Self.otherClient(url: url, rebased: rebased, deleted: deleted)
            try out.line("another client: PATCH Products('\(rebased)') {\"Name\":\"Renamed on the server\"} → \(patch)")
            try out.line("another client: DELETE Products('\(deleted)') → \(delete)")
            guard (200..<300).contains(patch), (200..<300).contains(delete) else {
                throw DemoFailure("the server refused the other client's changes")
            }
            guard try server.get(set: "Products", key: [.string(deleted)]) == nil else {
                throw DemoFailure("the server still has Products('\(deleted)')")
            }
            return [a.requestID ?? -1, b.requestID ?? -1]
        }
    }

    /// Another client of the served store: a PATCH and a DELETE with AsyncHTTPClient, as any HTTP
    /// client would send them; returns their status codes.
    static func otherClient(url: String, rebased: String, deleted: String) async throws -> (patch: Int, delete: Int) {
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            var patch = HTTPClientRequest(url: url + "Products('\(rebased)')")
            patch.method = .PATCH
            patch.headers.add(name: "Content-Type", value: "application/json")
            patch.body = .bytes(Array(#"{"Name":"Renamed on the server"}"#.utf8))
            let patched = try await client.execute(patch, timeout: .seconds(30))
            var delete = HTTPClientRequest(url: url + "Products('\(deleted)')")
            delete.method = .DELETE
            let deleted = try await client.execute(delete, timeout: .seconds(30))
            try await client.shutdown()
            return (Int(patched.status.code), Int(deleted.status.code))
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    // MARK: 9. Refresh and rebase

    func step9Refresh(_ store: OfflineStore, rebased: String, deleted: String, pending: [Int64]) async throws {
        try await out.step(9, "refresh: the pending change is rebased on the server's new image") {
            let report = try await refresh(store)
            let local = try store.get(set: "Products", key: [.string(rebased)])
            try out.line(
                "Products('\(rebased)'): Name \(demoText(local?["Name"])) from the server, Price \(demoText(local?["Price"])) from request #\(pending[0]), still pending"
            )
            guard local?["Name"] == .string("Renamed on the server"), local?["Price"] == .decimal(EDMDecimal("19.99")!)
            else {
                throw DemoFailure("Products('\(rebased)') was not rebased")
            }
            let kept = try store.get(set: "Products", key: [.string(deleted)])
            let retained = report.requests.reduce(0) { $0 + $1.retained }
            try out.line(
                "Products('\(deleted)'): deleted on the server, kept locally (\(retained) retained) while request #\(pending[1]) is pending: Name \(demoText(kept?["Name"]))"
            )
            guard report.rebased >= 1, kept != nil else {
                throw DemoFailure("the refresh did not rebase and retain as told: \(report)")
            }
            let queued = try queue(store)
            try out.line(
                "queue: "
                    + queued.map {
                        "#\(demoText($0["RequestID"])) \(Self.string($0["Method"])) \(Self.string($0["EntitySet"]))(\(Self.string($0["EntityKey"])))"
                    }.joined(separator: ", "))
        }
    }

    // MARK: 10. A refusal

    func step10Refused(
        _ store: OfflineStore, server: OfflineStore, rebased: String, deleted: String
    ) async throws -> Int64 {
        try await out.step(10, "flush: the server refuses one request; it goes to the ErrorArchive") {
            let report = try await flush(store)
            guard report.succeeded == 1, report.archived == 1 else {
                throw DemoFailure("expected one success and one refusal: \(report)")
            }
            let onServer = try server.get(set: "Products", key: [.string(rebased)])
            try out.line(
                "server: Products('\(rebased)') Name \(demoText(onServer?["Name"])), Price \(demoText(onServer?["Price"])): both changes kept (If-Match had the refreshed ETag)"
            )
            guard onServer?["Price"] == .decimal(EDMDecimal("19.99")!),
                onServer?["Name"] == .string("Renamed on the server")
            else {
                throw DemoFailure("the server does not have the rebased change")
            }
            let errors = try store.entities("ErrorArchive")
            guard errors.count == 1, let e = errors.first, case .int(let id)? = e["RequestID"] else {
                throw DemoFailure("expected one ErrorArchive entry, found \(errors.count)")
            }
            try out.line(
                "ErrorArchive: request #\(id) \(Self.string(e["RequestMethod"])) \(Self.string(e["RequestURL"])) [\(Self.string(e["CustomTag"]))]: "
                    + "HTTP \(demoText(e["HTTPStatusCode"])) \(Self.string(e["Code"])) \(Self.string(e["Message"]))")
            let inError = try store.entities("Products?$filter=offline.inErrorState()&$select=ProductID").map {
                Self.string($0["ProductID"])
            }
            try out.line("Products?$filter=offline.inErrorState(): \(inError.joined(separator: ", "))")
            guard inError == [deleted] else { throw DemoFailure("the entity in error is not Products('\(deleted)')") }
            return id
        }
    }

    // MARK: 11. Resolve

    func step11Resolve(_ store: OfflineStore, refused: Int64, deleted: String) async throws {
        try await out.step(11, "resolve the error: give the change up, and the next refresh settles the entity") {
            let dropped = try store.resolveError(requestID: refused)
            resolved += 1
            try out.line(
                "resolveError(requestID: \(refused)): dropped " + dropped.map { "#\($0)" }.joined(separator: ", ")
                    + "; ErrorArchive \(try store.count(set: "ErrorArchive")) entries, queue \(try store.pendingRequestCount()) requests"
            )
            guard try store.count(set: "ErrorArchive") == 0, try store.pendingRequestCount() == 0 else {
                throw DemoFailure("the error is not resolved")
            }
            let report = try await refresh(store)
            let gone = try store.get(set: "Products", key: [.string(deleted)]) == nil
            try out.line("Products('\(deleted)'): \(gone ? "gone locally too, as on the server" : "still here")")
            guard gone, report.removed >= 1 else {
                throw DemoFailure("Products('\(deleted)') was not removed by the refresh: \(report)")
            }
        }
    }

    // MARK: 12. EventLog

    func step12Events(_ store: OfflineStore) async throws {
        try await out.step(12, "the EventLog: every upload and download") {
            let events = try store.entities("EventLog?$orderby=EventID")
            for e in events {
                var counts: [String] = []
                if case .int(let n)? = e["Requests"] { counts.append("\(n) requests") }
                if case .int(let n)? = e["Entities"] { counts.append("\(n) entities") }
                try out.line(
                    "#\(demoText(e["EventID"])) \(Self.string(e["Type"])) \(Self.string(e["Outcome"])), \(counts.joined(separator: ", ")): "
                        + Self.string(e["Details"]))
            }
            let uploads = events.filter { Self.string($0["Type"]).lowercased() == "upload" }.count
            let downloads = events.filter { Self.string($0["Type"]).lowercased() == "download" }.count
            try out.line("\(uploads) uploads, \(downloads) downloads")
            guard uploads == 2, downloads == refreshes else {
                throw DemoFailure("the EventLog has \(uploads) uploads and \(downloads) downloads")
            }
        }
    }

    // MARK: 13. check

    func step13Check(_ store: OfflineStore, server: OfflineStore) async throws {
        try await out.step(13, "check: both stores, and the offline copy against the server") {
            let local = try store.check()
            try out.line("offline store: \(local)")
            let remote = try server.check()
            try out.line("server store: \(remote)")
            guard local.isConsistent, remote.isConsistent else { throw DemoFailure("check found problems") }
            // The offline copy is exactly what the defining requests select on the server.
            for (set, query) in [
                ("BusinessPartners", "BusinessPartners?$filter=Country eq 'US'"),
                ("SalesOrders", "SalesOrders?$filter=BusinessPartner/Country eq 'US'"),
                ("SalesOrderItems", "SalesOrderItems?$filter=SalesOrder/BusinessPartner/Country eq 'US'"),
                ("Products", "Products"),
            ] {
                let mine = Set(try store.entities(set)), theirs = Set(try server.entities(query))
                guard mine == theirs else {
                    throw DemoFailure(
                        "\(set): the offline copy differs from the server (\(mine.subtracting(theirs).count) local only, \(theirs.subtracting(mine).count) server only)"
                    )
                }
                try out.line("\(set): \(mine.count) entities, the same on both sides")
            }
        }
    }

    func summary() throws {
        try out.write("== summary")
        try out.line("server: " + serverCounts.map { "\($0.0) \($0.1)" }.joined(separator: ", "))
        try out.line("download: \(downloaded) entities in \(DemoOutput.seconds(downloadTime))")
        try out.line("changes: \(changesMade) made offline, \(requestsAfterCollapse) requests after collapse")
        try out.line(
            "flush: \(flushed) requests applied by the server, \(archived) refused and \(resolved) resolved; \(refreshes) refreshes"
        )
        try out.line("total: \(DemoOutput.seconds(ContinuousClock.now - started))")
        try out.write("ok: the whole story ran")
    }

    static func string(_ v: Value?) -> String {
        if case .string(let s)? = v { return s }
        return demoText(v)
    }
}
