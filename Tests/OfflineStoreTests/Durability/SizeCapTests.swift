import TestSupport
import NIOHTTP1
import LMDB
import Foundation
import Testing
@testable import OfflineStore
import Queue
import Sync
import Samples
import Storage

/// A store with a size cap (`maxSizeBytes`): a write that would pass it fails with a clear error
/// and changes nothing, the store stays consistent and readable, and writes fit again once
/// entities are deleted (or the cap is raised) — for local writes, refresh and `serve`.
/// Every store a test made passes `check` afterwards (`.checksStores`).
@Suite(.serialized, .checksStores) struct SizeCapTests {
    /// A partner with a company name of the longest allowed (80 characters).
    static func partner(_ i: Int) -> Properties {
        [
            "BusinessPartnerID": .string(String(format: "C%09d", i)),
            "CompanyName": .string(String(repeating: "x", count: 80)),
            "Country": .string("DE"), "EmailAddress": .string("c\(i)@example.com"), "CurrencyCode": .string("EUR"),
        ]
    }

    static func isCapError(_ error: any Error) -> Bool {
        if case EnvironmentError.sizeCapReached = error { return "\(error)".contains("reached its size cap of") }
        return false
    }

    static func dataFileSize(_ store: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: store + "/data.mdb"))?[.size] as? NSNumber)?.intValue ?? 0
    }

    /// Creates partners through the queue until one fails (at most `limit`); returns how many fit.
    static func fill(_ store: OfflineStore, from first: Int, limit: Int = 5000) throws -> Int {
        for i in first..<(first + limit) {
            do {
                _ = try store.create(set: "BusinessPartners", entity: partner(i))
            } catch {
                #expect(isCapError(error), "\(error)")
                return i - first
            }
        }
        Issue.record("\(limit) partners fit under the cap")
        return limit
    }

    @Test(.runsOffThePool) func localWritesAtTheCapFailCleanlyAndResumeAfterDeletes() throws {
        let path = tempDir() + "/store"
        var configuration = SampleData.configuration
        configuration.maxSizeBytes = 256 << 10
        var store: OfflineStore? = try OfflineStore.create(
            at: path, metadata: Array(SampleData.metadata.utf8), configuration: configuration)
        StoreRegistry.current?.add(path)
        let s = try #require(store)
        let fitted = try Self.fill(s, from: 0)
        #expect(fitted > 50, "only \(fitted) partners fit")
        #expect(Self.dataFileSize(path) <= 256 << 10, "data file \(Self.dataFileSize(path)) bytes")
        // Nothing of the refused write was kept: entities and queue hold exactly the fitted ones.
        #expect(try s.count(set: "BusinessPartners") == fitted)
        #expect(try s.pendingRequestCount() == fitted)
        #expect(try s.get(set: "BusinessPartners", key: [.string(String(format: "C%09d", fitted))]) == nil)
        #expect(try s.get(set: "BusinessPartners", key: [.string("C000000000")])?["Country"] == .string("DE"))
        let report = try s.check()
        #expect(report.problems.isEmpty && !report.isDamaged, "\(report.problems)")
        // An update that needs room (a longer e-mail address) fails too, and leaves the entity as it was.
        let big = Properties(["EmailAddress": .string(String(repeating: "y", count: 250))])
        var updated = 0
        for i in 0..<fitted {
            do {
                _ = try s.update(set: "BusinessPartners", key: [.string(String(format: "C%09d", i))], changes: big);
                updated += 1
            } catch {
                #expect(Self.isCapError(error), "\(error)")
                #expect(
                    try s.get(set: "BusinessPartners", key: [.string(String(format: "C%09d", i))])?["EmailAddress"]
                        == .string("c\(i)@example.com"))
                break
            }
        }
        #expect(updated < fitted, "every update fit")
        // Deleting frees pages (the creates collapse away): writes fit again.
        for i in stride(from: fitted - 1, to: fitted / 2, by: -1) {
            do { _ = try s.delete(set: "BusinessPartners", key: [.string(String(format: "C%09d", i))]) } catch {
                Issue.record("delete \(i) of \(fitted): \(error)"); throw error
            }
        }
        let refitted = try Self.fill(s, from: 100_000)
        #expect(refitted > 10, "after deleting half, only \(refitted) partners fit")
        // The deletes may have used the reserve above the cap (64 KiB here), never more.
        #expect(Self.dataFileSize(path) <= (256 + 64) << 10, "data file \(Self.dataFileSize(path)) bytes")
        // The cap is kept in the store: a new open honours it; a larger one given at open is kept.
        store = nil
        let reopened = try OfflineStore.open(at: path)
        #expect(reopened.configuration.maxSizeBytes == 256 << 10)
        #expect(throws: EnvironmentError.self) {
            try reopened.create(set: "BusinessPartners", entity: Self.partner(200_000))
        }
        _ = consume reopened
        let raised = try OfflineStore.open(at: path, maxSizeBytes: 1 << 20)
        #expect(try Self.fill(raised, from: 300_000) > 10)
        _ = consume raised
        #expect(try OfflineStore.open(at: path, readOnly: true).configuration.maxSizeBytes == 1 << 20)
    }

    /// Issue 37, F6: an offline store full of pending creates uploads them: the flush's bookkeeping
    /// (marking requests sent, settling their answers) may use the reserve above the cap, and the
    /// settled queue frees room, so writes fit again. Before, every flush failed at the cap.
    @Test func aFullOfflineStoreFlushesAndWritesFitAfterIt() async throws {
        let (served, _) = try await FlushFixture.pair()
        let path = tempDir() + "/capped"
        var configuration = SampleData.configuration
        configuration.maxSizeBytes = 256 << 10
        let store = try OfflineStore.create(
            at: path, metadata: Array(SampleData.metadata.utf8), configuration: configuration)
        StoreRegistry.current?.add(path)
        let fitted = try Self.fill(store, from: 0)
        #expect(fitted > 50, "only \(fitted) partners fit")
        let server = try await ServerProcess.start(store: served)
        let report = try await store.flush(serviceRoot: server.url, batchSize: 50)
        #expect(report.stopped == nil && report.succeeded == fitted && report.left == 0, "\(report)")
        #expect(try store.pendingRequestCount() == 0)
        #expect(await server.stop() == 0)
        #expect(Self.dataFileSize(path) <= (256 << 10) + (64 << 10), "data file \(Self.dataFileSize(path)) bytes")
        // The queue's room is free again: local writes fit.
        _ = try await store.create(set: "BusinessPartners", entity: Self.partner(fitted + 1))
        #expect(try OfflineStore.open(at: served, readOnly: true).count(set: "BusinessPartners") >= fitted)
    }

    @Test(.runsOffThePool) func badCapsAreRefused() throws {
        #expect(throws: EntityError.self) { try StoreConfiguration(json: Array(#"{"maxSizeBytes":1000}"#.utf8)) }
        #expect(throws: EntityError.self) { try StoreConfiguration(json: Array(#"{"maxSizeBytes":"1M"}"#.utf8)) }
        #expect(try StoreConfiguration(json: Array(#"{"maxSizeBytes":1048576}"#.utf8)).maxSizeBytes == 1 << 20)
        let dir = tempDir()
        try write(SampleData.metadata, to: dir + "/m.xml")
        for bad in ["100K", "-1", "0", "12X", "99999999999G"] {
            let r = try CLI.run(["init", "--store", dir + "/s", "--metadata", dir + "/m.xml", "--max-size=\(bad)"])
            #expect(r.status != 0 && r.stderr.contains("--max-size must be"), "\(bad): \(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: dir + "/s"))
        }
        let ok = try CLI.run(["init", "--store", dir + "/s", "--metadata", dir + "/m.xml", "--max-size", "2M"])
        #expect(ok.status == 0, "\(ok.stderr)")
        StoreRegistry.current?.add(dir + "/s")
        #expect(try OfflineStore.open(at: dir + "/s", readOnly: true).configuration.maxSizeBytes == 2 << 20)
    }

    /// A refresh into a capped store stops at the group of pages that does not fit (pages of 10,
    /// written 16 pages to a transaction: `Refresher.groupParts`): the groups before it are kept
    /// whole, nothing of that group is; after the cap is raised the next refresh completes.
    @Test func refreshIntoACappedStoreStopsAtAWholePageAndCompletesAfterRaising() async throws {
        let servedPath = try await ServeTests.sampleStore(items: 4000)
        let items = DefiningRequest(name: "Items", url: "SalesOrderItems")
        let path = tempDir() + "/offline"
        var configuration = SampleData.configuration
        configuration.maxSizeBytes = 512 << 10
        do {
            let offline = try OfflineStore.create(
                at: path, metadata: Array(SampleData.metadata.utf8), configuration: configuration)
            StoreRegistry.current?.add(path)
            try offline.define(name: items.name, url: items.url)
            try await withServer(servedPath) { _, server in
                do {
                    _ = try await offline.refresh(serviceRoot: server.url, pageSize: 10)
                    Issue.record("a refresh of 4000 items fit in 512 KiB")
                } catch {
                    #expect("\(error)".contains("reached its size cap of 512 KiB"), "\(error)")
                }
            }
            let kept = try offline.count(set: "SalesOrderItems")
            #expect(
                kept > 0 && kept < 4000 && kept % 160 == 0, "\(kept) items kept: not whole groups of 16 pages of 10")
            let report = try offline.check()
            #expect(report.problems.isEmpty && !report.isDamaged, "\(report.problems)")
            #expect(Self.dataFileSize(path) <= 512 << 10)
        }
        let raised = try OfflineStore.open(at: path, maxSizeBytes: 64 << 20)
        let total = try OfflineStore.open(at: servedPath, readOnly: true).count(set: "SalesOrderItems")
        try await withServer(servedPath) { _, server in
            _ = try await raised.refresh(serviceRoot: server.url, pageSize: 100)
        }
        #expect(try raised.count(set: "SalesOrderItems") == total)
    }

    /// `serve` on a capped store answers a write that does not fit with 507 and an OData error;
    /// after a DELETE, writes are accepted again.
    @Test func serveAnswers507AtTheCapAndAcceptsWritesAfterADelete() async throws {
        let servedPath = try await ServeTests.sampleStore()
        let cap = max(Self.dataFileSize(servedPath) + (128 << 10), 256 << 10) & ~4095
        try await withServer(servedPath, extra: ["--max-size", "\(cap)"]) { http, _ in
            var created: [Int] = []
            var refused: HTTP.Reply?
            for i in 0..<3000 {
                let body = try String(
                    decoding: JSONSerialization.data(withJSONObject: [
                        "BusinessPartnerID": String(format: "S%09d", i),
                        "CompanyName": String(repeating: "z", count: 80),
                        "Country": "DE", "EmailAddress": "s\(i)@example.com", "CurrencyCode": "EUR",
                    ]), as: UTF8.self)
                let r = try await http.send(
                    .POST, "BusinessPartners", body: body, headers: [("Content-Type", "application/json")])
                if r.status == 201 { created.append(i); continue }
                refused = r
                break
            }
            let reply = try #require(refused, "3000 partners fit under the cap")
            #expect(reply.status == 507, "\(reply.status): \(String(decoding: reply.body, as: UTF8.self))")
            let message = (reply.object["error"] as? [String: Any])?["message"] as? String
            #expect(message?.contains("reached its size cap") == true, "\(String(decoding: reply.body, as: UTF8.self))")
            #expect(created.count > 10, "only \(created.count) partners fit")
            // Reads still work and the refused partner is absent.
            #expect(try await http.get("BusinessPartners('\(String(format: "S%09d", created.count))')").status == 404)
            let count = try await http.get("BusinessPartners/$count")
            #expect(count.status == 200)
            for i in created.suffix(created.count / 2) {
                let d = try await http.send(.DELETE, "BusinessPartners('\(String(format: "S%09d", i))')")
                #expect(d.status == 204, "DELETE \(i): \(d.status)")
            }
            let body =
                #"{"BusinessPartnerID":"T000000001","CompanyName":"after","Country":"DE","EmailAddress":"t@example.com","CurrencyCode":"EUR"}"#
            let again = try await http.send(
                .POST, "BusinessPartners", body: body, headers: [("Content-Type", "application/json")])
            #expect(again.status == 201, "\(again.status): \(String(decoding: again.body, as: UTF8.self))")
        }
        #expect(
            Self.dataFileSize(servedPath) <= cap + max(cap / 16, 64 << 10),
            "data file \(Self.dataFileSize(servedPath)) bytes, cap \(cap)")
        let report = try OfflineStore.check(at: servedPath)
        #expect(report.problems.isEmpty && !report.isDamaged, "\(report.problems)")
    }
}
