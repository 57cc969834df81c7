import TestSupport
import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore
import Queue
import Sync
import Samples
import Storage

/// Refresh against a real `offline-store serve` process on loopback: the served store has the
/// sample data, the offline store is a separate, empty store made from the same `$metadata`.
/// Every store a test made passes `check` afterwards (`.checksStores`), membership included.
@Suite(.checksStores) struct RefreshTests {
    static let notebooks = DefiningRequest(name: "Notebooks", url: "Products?$filter=Category eq 'Notebooks'")
    static let pricey = DefiningRequest(name: "Pricey", url: "Products?$filter=Price gt 500")
    static let partners = DefiningRequest(name: "Partners", url: "BusinessPartners?$expand=SalesOrders")
    static let newOrders = DefiningRequest(
        name: "NewOrders",
        url: "SalesOrders?$filter=LifecycleStatus eq 'N'&$select=SalesOrderID,GrossAmount,LifecycleStatus")

    /// An empty offline store from the sample `$metadata`, with `requests` defined through the API.
    static func offlineStore(_ requests: [DefiningRequest], optimize: Bool = true) throws -> OfflineStore {
        var configuration = SampleData.configuration
        configuration.requestQueueOptimization = optimize
        let store = try OfflineStore.create(
            at: tempDir() + "/offline", metadata: Array(SampleData.metadata.utf8), configuration: configuration)
        for r in requests { try store.define(name: r.name, url: r.url) }
        return store
    }

    /// The same as `offlineStore(_:optimize:)`, for an `async` caller (which the compiler picks): built
    /// off the concurrency pool, so the tests beside this one do not wait for a thread meanwhile.
    static func offlineStore(_ requests: [DefiningRequest], optimize: Bool = true) async throws -> OfflineStore {
        try await offThePool { try offlineStore(requests, optimize: optimize) }
    }

    typealias Contents = [String: [[UInt8]: Properties]]

    /// Every service set's entities, by key bytes.
    static func contents(_ store: OfflineStore) throws -> Contents {
        var out: Contents = [:]
        for name in store.schema.serviceSetNames {
            let set = try store.entities.set(name)
            var rows: [[UInt8]: Properties] = [:]
            try store.scan(set: name) { p in
                rows[try set.encodeKey(try set.keyValues(p))] = p
                return true
            }
            out[name] = rows
        }
        return out
    }

    /// What `requests` return on `served` — top-level entities and (one level of) expanded ones —
    /// united per set. With `$select` on the top level, the selected properties only.
    static func union(_ served: OfflineStore, _ requests: [DefiningRequest]) throws -> Contents {
        var out: Contents = [:]
        for name in served.schema.serviceSetNames { out[name] = [:] }
        for r in requests {
            let query = try served.queries.bind(r.url)
            let set = try served.entities.set(query.path.entitySet)
            let select = query.options.select.map { Set($0.properties.map { $0.description }) }
            for var e in try served.entities(r.url) {
                let key = try set.keyValues(e)
                if let select { e = Properties(e.filter { select.contains($0.key) || set.type.key.contains($0.key) }) }
                let bytes = try set.encodeKey(key)
                if let old = out[set.name]![bytes] { for (k, v) in old where e[k] == nil { e[k] = v } }
                out[set.name]![bytes] = e
                for x in query.options.expand {
                    let child = try served.entities.set(x.entitySet)
                    for c in try served.entities("\(set.name)(\(set.describeKey(key)))/\(x.navigation.name)") {
                        out[child.name]![try child.encodeKey(try child.keyValues(c))] = c
                    }
                }
            }
        }
        return out
    }

    /// Expects `a` and `b` to hold the same entities, naming the first differences.
    /// With `atLeast`, an entity of `a` may have more properties than its twin in `b` (one a
    /// request with `$select` holds after another request brought all of them).
    static func expectSame(
        _ a: Contents, _ b: Contents, _ what: String, atLeast: Bool = false,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for set in Set(a.keys).union(b.keys).sorted() {
            let x = a[set] ?? [:], y = b[set] ?? [:]
            let onlyX = Set(x.keys).subtracting(y.keys), onlyY = Set(y.keys).subtracting(x.keys)
            let differ = Set(x.keys).intersection(y.keys).filter { k in
                atLeast ? !y[k]!.allSatisfy { $0.value.isNull || x[k]![$0.key] == $0.value } : !same(x[k]!, y[k]!)
            }
            #expect(
                onlyX.isEmpty && onlyY.isEmpty && differ.isEmpty,
                "\(what): \(set): \(onlyX.count) only in the store, \(onlyY.count) only expected, \(differ.count) differ; e.g. \(onlyX.first.map { x[$0]!.description } ?? "") \(onlyY.first.map { y[$0]!.description } ?? "") \(differ.first.map { "\(x[$0]!) vs \(y[$0]!)" } ?? "")",
                sourceLocation: sourceLocation)
        }
    }

    /// Equal, a null and an absent property counting alike.
    static func same(_ a: Properties, _ b: Properties) -> Bool {
        Properties(a.filter { !$0.value.isNull }) == Properties(b.filter { !$0.value.isNull })
    }

    static func served(_ path: String) throws -> OfflineStore { try OfflineStore.open(at: path, readOnly: true) }

    @Test func overlappingRequestsGiveTheUnionThroughFullAndDeltaReadsAndUndefine() async throws {
        let servedPath = try await ServeTests.sampleStore()
        let requests = [Self.notebooks, Self.pricey, Self.partners, Self.newOrders]
        let offline = try await Self.offlineStore(requests)
        try await withServer(servedPath) { http, server in
            // 1. The first refresh: full reads, pages of 3 entities.
            let first = try await offline.refresh(serviceRoot: server.url, pageSize: 3)
            #expect(first.requests.map(\.mode) == [.full, .full, .full, .full])
            #expect(
                first.requests.allSatisfy { $0.pages > 1 }, "server paging exercised: \(first.requests.map(\.pages))")
            Self.expectSame(
                try Self.contents(offline), try Self.union(try Self.served(servedPath), requests),
                "after the first refresh")
            #expect(try offline.count(set: "SalesOrderItems") == 0)
            // ETags from the service are kept.
            let etagCount = try offline.entities.read { t in try t.count(offline.entities.serverETags) }
            #expect(etagCount == (try Self.contents(offline).values.reduce(0) { $0 + $1.count }))

            // 2. Change the served store over HTTP.
            let served = try Self.served(servedPath)
            let cheapOther = try #require(
                served.entities("Products?$filter=Price le 500 and Category ne 'Notebooks'").first)
            let cheapNotebook = try #require(
                served.entities("Products?$filter=Price le 500 and Category eq 'Notebooks'").first)
            let dearNotebook = try #require(
                served.entities("Products?$filter=Price gt 500 and Category eq 'Notebooks'").first)
            let dearOther = try #require(
                served.entities("Products?$filter=Price gt 500 and Category ne 'Notebooks'").first)
            func id(_ p: Properties) -> String { "Products(\(EntitySetHandle.literal(p["ProductID"]!)))" }
            #expect(
                try await http.send(
                    .POST, "Products", body: #"{"ProductID":"N-1","Name":"New","Category":"Notebooks","Price":10.00}"#
                ).status == 201)
            // enters Pricey
            #expect(try await http.send(.PATCH, id(cheapOther), body: #"{"Price":999.00}"#).status == 204)
            // leaves both: removed
            #expect(try await http.send(.PATCH, id(cheapNotebook), body: #"{"Category":"Tablets"}"#).status == 204)
            // leaves Notebooks, Pricey holds it
            #expect(try await http.send(.PATCH, id(dearNotebook), body: #"{"Category":"Tablets"}"#).status == 204)
            #expect(try await http.send(.DELETE, id(dearOther)).status == 204)
            #expect(
                try await http.send(.PATCH, "BusinessPartners('0100000001')", body: #"{"CompanyName":"Becker Bonn"}"#)
                    .status == 204)
            #expect(try await http.send(.DELETE, "SalesOrders('0500000003')").status == 204)
            #expect(
                try await http.send(.PATCH, "SalesOrders('0500000000')", body: #"{"LifecycleStatus":"C"}"#).status
                    == 204)

            let second = try await offline.refresh(serviceRoot: server.url, pageSize: 3)
            #expect(
                second.requests.map(\.mode) == [.delta, .delta, .delta, .delta],
                "Partners has $expand: serve's delta follows it too")
            Self.expectSame(try Self.contents(offline), try Self.union(served, requests), "after the delta refresh")
            #expect(try offline.get(set: "Products", key: [.string("N-1")]) != nil)
            #expect(try offline.get(set: "Products", key: cheapNotebook.keyValues(of: "ProductID")) == nil)
            #expect(
                try offline.get(set: "Products", key: dearNotebook.keyValues(of: "ProductID"))?["Category"]
                    == .string("Tablets"))
            #expect(try offline.get(set: "SalesOrders", key: [.string("0500000003")]) == nil)
            #expect(second.removed >= 3)

            // 3. Nothing changed: nothing written.
            let third = try await offline.refresh(serviceRoot: server.url, pageSize: 3)
            #expect(third.written == 0 && third.removed == 0, "\(third)")

            // 4. A subset, then undefine: Partners' exclusive entities go, NewOrders keeps its orders.
            let subset = try await offline.refresh(serviceRoot: server.url, subset: ["Pricey"])
            #expect(subset.requests.map(\.name) == ["Pricey"])
            let removed = try offline.undefine(name: "Partners")
            #expect(removed > 0)
            #expect(try offline.count(set: "BusinessPartners") == 0)
            let remaining = [Self.notebooks, Self.pricey, Self.newOrders]
            #expect(offline.definingRequests.map(\.name) == remaining.map(\.name))
            Self.expectSame(
                try Self.contents(offline), try Self.union(served, remaining), "after undefine", atLeast: true)
            // Kept in the store: it opens with the same defining requests.
            #expect(try OfflineStore.open(at: offline.path, readOnly: true).definingRequests == remaining)
        }
    }

    @Test func rebaseKeepsPendingChangesOnTheNewServerImage() async throws {
        let servedPath = try await ServeTests.sampleStore()
        let offline = try await Self.offlineStore([Self.notebooks, Self.pricey])
        try await withServer(servedPath) { http, server in
            try await offline.refresh(serviceRoot: server.url)
            let served = try Self.served(servedPath)
            let products = try served.entities("Products?$filter=Category eq 'Notebooks'")
            let (updated, deleted) = (products[0], products[1])
            let ukey = updated.keyValues(of: "ProductID"), dkey = deleted.keyValues(of: "ProductID")
            func url(_ key: [Value]) -> String { "Products(\(EntitySetHandle.literal(key[0])))" }
            // Local changes: an update, a delete, and a create of a key the service will also get.
            try await offline.update(set: "Products", key: ukey, changes: ["Price": .decimal(EDMDecimal("1.50")!)])
            try await offline.delete(set: "Products", key: dkey)
            try await offline.create(
                set: "Products",
                entity: ["ProductID": .string("C-1"), "Name": .string("mine"), "Category": .string("Notebooks")])
            // The same entities change on the server.
            #expect(
                try await http.send(.PATCH, url(ukey), body: #"{"Name":"renamed on the server","WeightMeasure":9.5}"#)
                    .status == 204)
            #expect(try await http.send(.PATCH, url(dkey), body: #"{"Name":"also renamed"}"#).status == 204)
            #expect(
                try await http.send(
                    .POST, "Products", body: #"{"ProductID":"C-1","Name":"theirs","Category":"Notebooks","Price":7.00}"#
                ).status == 201)

            let report = try await offline.refresh(serviceRoot: server.url)
            #expect(report.rebased == 3, "\(report)")  // once each, though both requests bring two of them
            let queue = RequestQueue(store: offline.entities)
            let set = try offline.entities.set("Products")
            func base(_ key: [Value]) throws -> Properties? {
                try offline.entities.read { t in
                    try t.get(offline.entities.base(ofSet: "Products"), try set.encodeKey(key)).map {
                        try set.codec.decode($0)
                    }
                }
            }
            let newServerU = try #require(try served.get(set: "Products", key: ukey))
            #expect(try base(ukey).map { Self.same($0, newServerU) } == true, "base/ has the new server image")
            var expectedU = newServerU
            expectedU["Price"] = .decimal(EDMDecimal("1.50")!)
            #expect(
                try offline.get(set: "Products", key: ukey).map { Self.same($0, expectedU) } == true,
                "new image + pending PATCH")
            #expect(try offline.get(set: "Products", key: dkey) == nil, "a pending delete keeps it deleted")
            #expect(try base(dkey)?["Name"] == .string("also renamed"))
            // The pending create of a key the service now has became a replace of the service's entity.
            #expect(try offline.get(set: "Products", key: [.string("C-1")])?["Name"] == .string("mine"))
            #expect(try base([.string("C-1")])?["Name"] == .string("theirs"))
            let methods = try offline.entities("RequestQueue?$orderby=RequestID").map { $0["Method"] }
            #expect(methods == [.string("PATCH"), .string("DELETE"), .string("PUT")])
            #expect(try offline.entities.read { t in try queue.check(t) }.isEmpty)

            // Undo restores the NEW server image.
            try offline.undo(set: "Products", key: ukey)
            #expect(try offline.get(set: "Products", key: ukey).map { Self.same($0, newServerU) } == true)
            try offline.undo(set: "Products", key: dkey)
            #expect(try offline.get(set: "Products", key: dkey)?["Name"] == .string("also renamed"))
            try offline.undo(set: "Products", key: [.string("C-1")])
            #expect(try offline.get(set: "Products", key: [.string("C-1")])?["Name"] == .string("theirs"))
        }
    }

    @Test func aServerDeleteOfALocallyUpdatedEntityKeepsItUntilItsChangesGo() async throws {
        let servedPath = try await ServeTests.sampleStore()
        let offline = try await Self.offlineStore([Self.notebooks])
        try await withServer(servedPath) { http, server in
            try await offline.refresh(serviceRoot: server.url)
            let key = try #require(try offline.entities("Products").first).keyValues(of: "ProductID")
            try await offline.update(set: "Products", key: key, changes: ["Name": .string("local")])
            #expect(try await http.send(.DELETE, "Products(\(EntitySetHandle.literal(key[0])))").status == 204)
            let report = try await offline.refresh(serviceRoot: server.url)
            #expect(report.requests[0].retained == 1 && report.removed == 0, "\(report)")
            #expect(try offline.get(set: "Products", key: key)?["Name"] == .string("local"), "local wins until flushed")
            // Retained: once its change is gone (here undone; a flush would get 404), the next refresh removes it.
            try offline.undo(set: "Products", key: key)
            let after = try await offline.refresh(serviceRoot: server.url)
            #expect(after.removed == 1, "\(after)")
            #expect(try offline.get(set: "Products", key: key) == nil)
        }
    }

    @Test func anExpiredDeltaLinkFallsBackToAFullRead() async throws {
        let servedPath = try await ServeTests.sampleStore()
        let fresh = tempDir() + "/fresh"
        try FileManager.default.copyItem(atPath: servedPath, toPath: fresh)
        let offline = try await Self.offlineStore([Self.notebooks, Self.pricey])
        try await withServer(servedPath) { http, server in
            try await offline.refresh(serviceRoot: server.url)
            #expect(
                try await http.send(
                    .POST, "Products", body: #"{"ProductID":"N-9","Category":"Notebooks","Price":900.00}"#
                ).status == 201)
            #expect(try await http.send(.PATCH, "Products('HT-1000')", body: #"{"Price":3.00}"#).status == 204)
            let delta = try await offline.refresh(serviceRoot: server.url)
            #expect(delta.requests.map(\.mode) == [.delta, .delta])
        }
        // The service comes back from an older copy: its change log is behind our token (410).
        try await withServer(fresh) { _, server in
            let report = try await offline.refresh(serviceRoot: server.url)
            #expect(report.requests.map(\.mode) == [.fullAfterExpiredDelta, .fullAfterExpiredDelta], "\(report)")
            Self.expectSame(
                try Self.contents(offline), try Self.union(try Self.served(fresh), [Self.notebooks, Self.pricey]),
                "after the fallback")
            #expect(try offline.get(set: "Products", key: [.string("N-9")]) == nil)
            let again = try await offline.refresh(serviceRoot: server.url)
            #expect(again.requests.map(\.mode) == [.delta, .delta] && again.written == 0)
        }
    }

    @Test func compactionFoldsChainsAndDropsObsoleteRequests() async throws {
        let servedPath = try await ServeTests.sampleStore()
        let offline = try await Self.offlineStore([Self.notebooks], optimize: false)
        var k1: [Value] = []
        try await withServer(servedPath) { _, server in
            try await offline.refresh(serviceRoot: server.url)
            let products = try offline.entities("Products")
            k1 = products[0].keyValues(of: "ProductID")
            let k2 = products[1].keyValues(of: "ProductID")
            try await offline.update(set: "Products", key: k1, changes: ["Name": .string("a")])
            try await offline.update(set: "Products", key: k1, changes: ["Price": .decimal(EDMDecimal(5))])
            // what the server has
            try await offline.update(set: "Products", key: k2, changes: ["Name": products[1]["Name"]!])
            let off = try await offline.refresh(serviceRoot: server.url)
            let pending = try offline.pendingRequestCount()
            #expect(off.compacted == 0 && pending == 3, "optimization off: nothing compacted")
        }
        // The same queue in a store with the optimization on: one PATCH with both properties, and
        // the PATCH that changes nothing is gone with its server image.
        let queue = RequestQueue(store: offline.entities)
        let removed = try await offline.entities.write { t in try queue.compact(t, optimize: true) }
        #expect(removed == 2)
        let rows = try offline.entities("RequestQueue")
        #expect(rows.count == 1)
        let body = "\(rows.first?["Body"] ?? .null)"
        #expect(body.contains("Name") && body.contains("Price"), "\(body)")
        #expect(try offline.get(set: "Products", key: k1)?["Name"] == .string("a"))
        #expect(try offline.check().isConsistent)
    }

    @Test func theToolDefinesRefreshesAndUndefines() async throws {
        let servedPath = try await ServeTests.sampleStore()
        let dir = tempDir()
        try write(SampleData.metadata, to: dir + "/metadata.xml")
        try await withServer(servedPath) { _, server in
            // Defining requests and the service root from --config at init.
            try write(
                #"{"serviceRoot":"\#(server.url)","definingRequests":[{"name":"Notebooks","url":"Products?$filter=Category eq 'Notebooks'"}]}"#,
                to: dir + "/config.json")
            let store = dir + "/offline"
            #expect(
                try CLI.run([
                    "init", "--store", store, "--metadata", dir + "/metadata.xml", "--config", dir + "/config.json",
                ]).status == 0)
            let first = try CLI.run(["refresh", "--store", store, "--page-size", "2"])
            #expect(
                first.status == 0 && first.stdout.hasPrefix("refreshed 1 request (Notebooks: full): "),
                "\(first.stdout)\(first.stderr)")
            let define = try CLI.run(["define", "--store", store, "Pricey", "Products?$filter=Price gt 500"])
            #expect(define.status == 0 && define.stdout == "defined Pricey\n")
            let bad = try CLI.run(["define", "--store", store, "Bad", "Products?$top=1"])
            #expect(bad.status == 1 && bad.stderr.contains("$top is not allowed"), "\(bad.stderr)")
            let subset = try CLI.run(["refresh", "--store", store, "--subset", "Pricey", "--service", server.url])
            #expect(subset.status == 0 && subset.stdout.contains("(Pricey: full)"), "\(subset.stdout)\(subset.stderr)")
            let unknown = try CLI.run(["refresh", "--store", store, "--subset", "Nope"])
            #expect(unknown.status == 1 && unknown.stderr.contains("no defining request named 'Nope'"))
            let offline = try OfflineStore.open(at: store, readOnly: true)
            Self.expectSame(
                try Self.contents(offline), try Self.union(try Self.served(servedPath), [Self.notebooks, Self.pricey]),
                "through the tool")
            let undefine = try CLI.run(["undefine", "--store", store, "Notebooks"])
            #expect(
                undefine.status == 0 && undefine.stdout.hasPrefix("undefined Notebooks: "),
                "\(undefine.stdout)\(undefine.stderr)")
            let again = try CLI.run(["refresh", "--store", store])
            #expect(again.status == 0 && again.stdout.contains("(Pricey: delta)"), "\(again.stdout)\(again.stderr)")
            #expect(try CLI.run(["check", "--store", store]).status == 0)
            let offlineAfter = try OfflineStore.open(at: store, readOnly: true)
            Self.expectSame(
                try Self.contents(offlineAfter), try Self.union(try Self.served(servedPath), [Self.pricey]),
                "after undefine through the tool")
        }
    }

    @Test(.runsOffThePool) func defineChecksNamesAndURLs() throws {
        let offline = try Self.offlineStore([])
        for (name, url) in [
            ("bad name", "Products"), ("", "Products"), ("A", "Products('HT-1000')"), ("A", "Products?$top=3"),
            ("A", "Products?$orderby=Price"), ("A", "Nope"), ("A", "Products?$filter=Nope eq 1"), ("A", "RequestQueue"),
            ("A", "Products/$count"), ("A", "BusinessPartners('x')/SalesOrders"),
        ] {
            #expect(throws: (any Error).self, "\(name) \(url)") { try offline.define(name: name, url: url) }
        }
        try offline.define(name: "A", url: "Products?$select=Name&$expand=Supplier($select=CompanyName)")
        try offline.define(name: "A", url: "Products")
        #expect(offline.definingRequests == [DefiningRequest(name: "A", url: "Products")])
        #expect(throws: RefreshError.self) { try offline.undefine(name: "B") }
        // From the configuration at create: checked the same way.
        var configuration = SampleData.configuration
        configuration.definingRequests = [DefiningRequest(name: "X", url: "Products?$top=1")]
        #expect(throws: (any Error).self) {
            try OfflineStore.create(
                at: tempDir() + "/c", metadata: Array(SampleData.metadata.utf8), configuration: configuration)
        }
    }
}

extension Properties {
    /// The values of the named key properties, in order.
    func keyValues(of names: String...) -> [Value] { names.map { self[$0] ?? .null } }
}
