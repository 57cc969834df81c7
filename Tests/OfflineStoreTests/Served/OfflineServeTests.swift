import AsyncHTTPClient
import Foundation
import NIOHTTP1
import Testing
@testable import OfflineStore
import Samples

/// `offline-store serve` over an OFFLINE store (one with a service root and defining requests):
/// the local producer of issue 23. Two real `serve` processes on loopback — the upstream, an
/// authority store, and the offline store's — and the client speaks HTTP only: writes are queued
/// as the Swift API queues them, the store's own sets are readable, `POST /$sync` refreshes and
/// flushes, and every acknowledged write reaches the upstream exactly once.
@Suite(.checksStores) struct OfflineServeTests {
    /// An offline store of the sample service at `upstream`, refreshed (Products and the sales
    /// orders with their items).
    static func offlineStore(upstream: String) async throws -> String {
        let dir = tempDir() + "/offline"
        let configuration = try StoreConfiguration(
            json: Array(
                """
                {"serviceRoot": "\(upstream)",
                 "definingRequests": [{"name": "P", "url": "Products"}, {"name": "O", "url": "SalesOrders"}]}
                """.utf8))
        let store = try OfflineStore.create(
            at: dir, metadata: Array(SampleData.metadata.utf8), configuration: configuration)
        try await store.refresh()
        return dir
    }

    static func rows(_ reply: HTTP.Reply) -> [[String: Any]] { reply.object["value"] as? [[String: Any]] ?? [] }

    @Test func writesAreQueuedAndASyncPutsThemOnTheServiceExactlyOnce() async throws {
        let upstreamPath = try await ServeTests.sampleStore()
        try await withServer(upstreamPath) { upstream, _ in
            let offline = try await Self.offlineStore(upstream: upstream.base)
            try await withServer(offline) { http, server in
                // Reads as an authority store answers them; the role shows in what writes do.
                #expect(try await http.get("Products('HT-1000')").status == 200)

                let created = try await http.send(
                    .POST, "Products",
                    body: #"{"ProductID":"T-1","Name":"Local","Category":"Tablets","Price":10.5,"CurrencyCode":"EUR"}"#)
                #expect(created.status == 201, "\(created.text)")
                #expect(created.header("Location") == server.url + "Products('T-1')")
                let etag = try #require(created.header("ETag"))
                // Queued, not on the service yet.
                #expect(try await upstream.get("Products('T-1')").status == 404)
                let queue = Self.rows(try await http.get("RequestQueue?$orderby=RequestID"))
                #expect(queue.count == 1 && queue.first?["Method"] as? String == "POST")

                // An update of the pending create collapses into it; If-Match is the local image's.
                let stale = try await http.send(
                    .PATCH, "Products('T-1')", body: #"{"Price":11}"#, headers: [("If-Match", #"W/"0000""#)])
                #expect(stale.status == 412)
                let patched = try await http.send(
                    .PATCH, "Products('T-1')", body: #"{"Price":11}"#, headers: [("If-Match", etag)])
                #expect(patched.status == 204)
                #expect(try await http.get("Products('T-1')").header("ETag") == patched.header("ETag"))
                #expect(Self.rows(try await http.get("RequestQueue")).count == 1, "collapsed into the create")

                // A server entity changed and one deleted; SAP's request options from headers.
                let update = try await http.send(
                    .PATCH, "Products('HT-1000')", body: #"{"Name":"Renamed"}"#,
                    headers: [("OfflineOData.CustomTag", "rename"), ("OfflineOData.NonMergeable", "true")])
                #expect(update.status == 204, "\(update.text)")
                #expect(try await http.send(.DELETE, "Products('HT-1001')").status == 204)
                #expect(try await http.get("Products('HT-1001')").status == 404)
                let tagged = Self.rows(try await http.get("RequestQueue?$filter=CustomTag eq 'rename'"))
                #expect(tagged.count == 1 && tagged.first?["NonMergeable"] as? Bool == true)
                let badFlag = try await http.send(
                    .PATCH, "Products('HT-1000')", body: "{}", headers: [("OfflineOData.NonMergeable", "yes")])
                #expect(badFlag.status == 400)
                let remove = try await http.send(
                    .PATCH, "Products('HT-1000')", body: "{}", headers: [("OfflineOData.RemoveAfterUpload", "true")])
                #expect(remove.status == 400, "RemoveAfterUpload is for a create: \(remove.text)")

                // A key left out gets a local key, named by Location; the service will refuse the
                // create (its key is not computed there), which lands in ErrorArchive.
                let keyless = try await http.send(.POST, "Products", body: #"{"Name":"No key yet"}"#)
                #expect(keyless.status == 201, "\(keyless.text)")
                #expect(keyless.header("Location") == server.url + "Products('~1')")

                // The store's own sets are read-only, but for giving up an ErrorArchive entry.
                #expect(try await http.send(.POST, "RequestQueue", body: "{}").status == 405)
                #expect(try await http.send(.DELETE, "RequestQueue(1)").status == 405)
                // An offline store serves no delta links: refresh changes its data too.
                let tracked = try await http.get("Products", headers: [("Prefer", "odata.track-changes")])
                #expect(tracked.status == 200 && tracked.header("Preference-Applied") == nil)
                #expect(tracked.object["@odata.deltaLink"] == nil)
                #expect(try await http.get("Products?$deltatoken=1").status == 501)

                // Sync: refresh, then flush. Both ran to the end (200), but the service refused the
                // create: not a success, and the answer names it (issue 38).
                let sync = try await http.send(.POST, "$sync")
                #expect(sync.status == 200, "\(sync.text)")
                #expect(sync.object["succeeded"] as? Bool == false)
                let refusedLines = sync.object["refused"] as? [String]
                #expect(
                    refusedLines?.count == 1 && refusedLines?.first?.contains("POST Products") == true, "\(sync.text)")
                #expect((sync.object["flush"] as? String)?.contains("sent 4") == true, "\(sync.text)")
                let onService = try await upstream.get("Products('T-1')")
                #expect(onService.status == 200 && "\(onService.object["Price"]!)" == "11")
                #expect(try await upstream.get("Products('HT-1000')").object["Name"] as? String == "Renamed")
                #expect(try await upstream.get("Products('HT-1001')").status == 404)

                let archived = Self.rows(try await http.get("ErrorArchive"))
                #expect(archived.count == 1, "\(archived)")
                let failedID = try #require(archived.first?["RequestID"] as? Int)
                // SAP's fix-and-re-send over HTTP: a change of the entity revives its refused
                // request (it leaves the ErrorArchive, pending again, the fix collapsed into it)...
                let fixed = try await http.send(.PATCH, "Products('~1')", body: #"{"Name":"Fixed"}"#)
                #expect(fixed.status == 204, "\(fixed.text)")
                #expect(Self.rows(try await http.get("ErrorArchive")).isEmpty, "revived")
                let revived = Self.rows(try await http.get("RequestQueue"))
                #expect(
                    revived.count == 1 && revived.first?["Status"] as? String == "pending"
                        && (revived.first?["Body"] as? String)?.contains("Fixed") == true, "\(revived)")
                // ...and the next sync sends it again (the service still wants a key: refused again).
                let resent = try await http.send(.POST, "$sync")
                #expect(
                    (resent.object["flush"] as? String)?.contains("sent 1, succeeded 0, archived 1") == true,
                    "\(resent.text)")
                #expect(Self.rows(try await http.get("ErrorArchive")).first?["RequestID"] as? Int == failedID)
                #expect(try await http.send(.DELETE, "ErrorArchive(\(failedID + 1000))").status == 404)
                #expect(try await http.send(.DELETE, "ErrorArchive(\(failedID))").status == 204)
                #expect(try await http.get("Products('~1')").status == 404, "the create was given up")
                #expect(Self.rows(try await http.get("ErrorArchive")).isEmpty)
                #expect(Self.rows(try await http.get("RequestQueue")).isEmpty)
                let events = Self.rows(try await http.get("EventLog"))
                #expect(events.contains { $0["Type"] as? String == "Upload" })

                // A second sync sends nothing: each change reached the service once.
                let again = try await http.send(.POST, "$sync")
                #expect((again.object["flush"] as? String)?.contains("sent 0") == true, "\(again.text)")
                #expect(Self.rows(try await upstream.get("Products?$filter=ProductID eq 'T-1'")).count == 1)
            }
            let report = try OfflineStore.open(at: offline).check()
            #expect(report.isConsistent, "\(report)")
        }
    }

    @Test func anAtomicityGroupIsOneTransactionOfTheQueue() async throws {
        let upstreamPath = try await ServeTests.sampleStore()
        try await withServer(upstreamPath) { upstream, _ in
            let offline = try await Self.offlineStore(upstream: upstream.base)
            try await withServer(offline) { http, _ in
                let batch = """
                    {"requests":[
                     {"id":"1","atomicityGroup":"g","method":"POST","url":"Products",
                      "body":{"ProductID":"B-1","Name":"One"}},
                     {"id":"2","atomicityGroup":"g","method":"PATCH","url":"Products('HT-1000')","body":{"Name":"Two"}},
                     {"id":"3","atomicityGroup":"h","method":"POST","url":"Products","body":{"ProductID":"B-2"}},
                     {"id":"4","atomicityGroup":"h","method":"PATCH","url":"Products('NOPE')","body":{"Name":"x"}}
                    ]}
                    """
                let reply = try await http.send(.POST, "$batch", body: batch)
                #expect(reply.status == 200, "\(reply.text)")
                let statuses = (reply.object["responses"] as? [[String: Any]] ?? []).map { $0["status"] as? Int }
                #expect(statuses == [201, 204, 424, 404], "\(reply.text)")
                let queue = Self.rows(try await http.get("RequestQueue?$orderby=RequestID"))
                #expect(queue.count == 2, "the failed group queued nothing: \(queue)")
                let ids = Set(queue.compactMap { $0["TransactionID"] as? String })
                #expect(ids.count == 1 && ids.first?.hasPrefix("batch-") == true, "one change set: \(queue)")
                #expect(try await http.get("Products('B-2')").status == 404)

                let sync = try await http.send(.POST, "$sync")
                #expect(sync.object["succeeded"] as? Bool == true, "\(sync.text)")
                #expect(try await upstream.get("Products('B-1')").status == 200)
                #expect(try await upstream.get("Products('HT-1000')").object["Name"] as? String == "Two")
            }
        }
    }

    @Test func aServiceThatIsAwayFailsTheSyncNotTheService() async throws {
        // The upstream is started to build the store, then stopped.
        let upstreamPath = try await ServeTests.sampleStore()
        let server = try await ServerProcess.start(store: upstreamPath)
        let offline = try await Self.offlineStore(upstream: server.url)
        #expect(await server.stop() == 0)
        try await withServer(offline, extra: ["--sync-interval", "0.2"]) { http, _ in
            let created = try await http.send(.POST, "Products", body: #"{"ProductID":"A-1","Name":"Away"}"#)
            #expect(created.status == 201)
            let sync = try await http.send(.POST, "$sync")
            #expect(sync.status == 503, "\(sync.text)")
            #expect(sync.object["succeeded"] as? Bool == false)
            #expect((sync.object["refresh"] as? [String: Any])?["error"] != nil, "\(sync.text)")
            // Reads and writes go on, through syncs that keep failing in the background.
            for n in 0..<10 {
                #expect(try await http.get("Products('A-1')").status == 200)
                #expect(try await http.send(.PATCH, "Products('A-1')", body: #"{"Price":\#(n)}"#).status == 204)
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(Self.rows(try await http.get("RequestQueue")).count == 1)
        }
    }

    @Test func syncIsRefusedWhereItHasNoMeaning() async throws {
        let authority = try await ServeTests.sampleStore()
        try await withServer(authority) { http, _ async throws in
            #expect(try await http.send(.POST, "$sync").status == 404, "an authority store has no service")
            // An authority store's ErrorArchive is not for deleting either.
            #expect(try await http.send(.DELETE, "ErrorArchive(1)").status == 405)
        }
        let refused = try await CLI.run(["serve", "--store", authority, "--port", "0", "--sync-interval", "1"])
        #expect(refused.status != 0 && refused.stderr.contains("authority"), "\(refused.stderr)")
        let upstream = try await ServerProcess.start(store: authority)
        let offline = try await Self.offlineStore(upstream: upstream.url)
        #expect(await upstream.stop() == 0)
        try await withServer(offline) { http, _ async throws in
            #expect(try await http.get("$sync").status == 405)
        }
        let zero = try await CLI.run(["serve", "--store", offline, "--port", "0", "--sync-interval", "0"])
        #expect(zero.status != 0 && zero.stderr.contains("--sync-interval"), "\(zero.stderr)")
    }
}
