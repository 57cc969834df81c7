import AsyncHTTPClient
import Foundation
import NIOHTTP1
import Testing
@testable import OfflineStore
import Samples

/// `offline-store serve` as a real process, driven over HTTP on loopback: every status code the
/// service gives, paging, writes with ETags, `$batch`, repeatable requests. The integrity check
/// runs on the store after each test (`.checksStores`).
@Suite(.checksStores) struct ServeTests {
    /// A store with the sample data, and `items` generated sales order items.
    static func sampleStore(items: Int = 0) throws -> String {
        let dir = tempDir() + "/store"
        let store = try OfflineStore.create(
            at: dir, metadata: Array(SampleData.metadata.utf8), configuration: SampleData.configuration)
        for set in SampleData.setsInLoadOrder { _ = try store.load(set: set, json: Array(SampleData.json(set).utf8)) }
        if items > 0 { _ = try store.generate(set: "SalesOrderItems", count: items, seed: 7) }
        return dir
    }

    /// The same as `sampleStore(items:)`, for an `async` caller (which the compiler picks): built
    /// off the concurrency pool (150,000 items take seconds in a debug build, and the tests beside
    /// this one would wait for a thread that long).
    static func sampleStore(items: Int = 0) async throws -> String {
        try await offThePool { try sampleStore(items: items) }
    }

    @Test func readsAnswerWithTheRightStatusAndContentType() async throws {
        try await withServer(try Self.sampleStore()) { http, server in
            let root = try await http.get("")
            #expect(root.status == 200)
            let listed = (root.object["value"] as? [[String: Any]])?.compactMap { $0["name"] as? String }
            #expect(listed?.contains("Products") == true)
            // Only what $metadata describes: not the store's own sets.
            #expect(listed?.contains("RequestQueue") == false && listed?.contains("EventLog") == false)
            #expect(root.header("OData-Version") == "4.0")

            let metadata = try await http.get("$metadata")
            #expect(metadata.status == 200 && metadata.header("Content-Type") == "application/xml")
            #expect(metadata.text.contains("<EntityType Name=\"Product\">"))

            let one = try await http.get("Products('HT-1000')")
            #expect(one.status == 200)
            #expect(one.object["ProductID"] as? String == "HT-1000")

            let count = try await http.get("Products/$count")
            #expect(count.status == 200 && count.header("Content-Type") == "text/plain")
            #expect(Int(count.text) == (try OfflineStore.open(at: server.store, readOnly: true).count(set: "Products")))

            let missing = try await http.get("Products('NOPE')")
            #expect(missing.status == 404)
            #expect(
                ((missing.object["error"] as? [String: Any])?["message"] as? String)?.contains("does not exist") == true
            )

            let badFilter = try await http.get("Products?$filter=Price%20gt%20'x'")
            #expect(badFilter.status == 400)
            let error = badFilter.object["error"] as? [String: Any]
            #expect(error?["target"] as? String == "$filter")
            #expect((error?["message"] as? String)?.contains("column") == true)

            let unknownSet = try await http.get("Nothing")
            #expect(unknownSet.status == 404)
            let unknownNavigation = try await http.get("Products('HT-1000')/Nothing")
            #expect(unknownNavigation.status == 404)
            let unknownExpand = try await http.get("Products?$expand=Nothing")
            #expect(unknownExpand.status == 400)

            let xmlOnly = try await http.get("Products", headers: [("Accept", "application/xml")])
            #expect(xmlOnly.status == 406)

            let wrongMethod = try await http.send(.DELETE, "Products")
            #expect(wrongMethod.status == 405 && wrongMethod.header("Allow") != nil)
            let options = try await http.send(.OPTIONS, "Products")
            #expect(options.status == 405)
        }
    }

    /// `--lifetime` stops the server by itself, cleanly (it once sent SIGTERM with raise() from a
    /// dispatch worker thread, which blocks the signal: the server never stopped).
    @Test func lifetimeStopsTheServerCleanly() async throws {
        let server = try await ServerProcess.start(store: try Self.sampleStore(), lifetime: 1)
        let start = Date()
        var status: Int32 = 0
        while waitpid(server.pid, &status, WNOHANG) == 0 {
            if Date().timeIntervalSince(start) > 30 {
                server.kill()
                Issue.record("serve --lifetime 1 still running after 30 s")
                return
            }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        #expect(status & 0x7F == 0 && (status >> 8) & 0xFF == 0, "exit status \(status): \(server.stderr.suffix(2000))")
    }

    @Test func serverDrivenPagingDeliversEveryEntityOnce() async throws {
        let store = try await Self.sampleStore(items: 5_000)
        let expected = try OfflineStore.open(at: store, readOnly: true).entities(
            "SalesOrderItems?$filter=Quantity ge 0"
        ).count
        #expect(expected > 3_000)
        try await withServer(store) { http, _ in
            var next: String? = "SalesOrderItems?$select=SalesOrderID,ItemPosition&$filter=Quantity%20ge%200"
            var seen = Set<String>(), pages = 0, total = 0
            while let url = next {
                let page = try await http.get(url, headers: [("Prefer", "odata.maxpagesize=700")])
                #expect(page.status == 200)
                #expect(page.header("Preference-Applied") == "odata.maxpagesize=700")
                let rows = page.object["value"] as? [[String: Any]] ?? []
                #expect(rows.count <= 700)
                for r in rows { seen.insert("\(r["SalesOrderID"]!)/\(r["ItemPosition"]!)") }
                total += rows.count
                pages += 1
                next = page.object["@odata.nextLink"] as? String
                if pages > 100 { break }
            }
            #expect(
                total == expected && seen.count == expected,
                "\(total) rows, \(seen.count) distinct, \(expected) expected")
            #expect(pages == (expected + 699) / 700)
        }
    }

    /// A delta link covers the defining query's entities: a read with `$orderby`, `$top`, `$skip`
    /// and `$count` gets a link without them (a delta request refuses them), and the link works.
    @Test func aDeltaLinkLeavesOutOrderAndWindow() async throws {
        try await withServer(try Self.sampleStore()) { http, _ in
            let first = try await http.get(
                "Products?$filter=Price%20gt%200&$orderby=Price%20desc&$top=3&$skip=1&$count=true&$select=Name",
                headers: [("Prefer", "odata.track-changes")])
            #expect(first.status == 200)
            let link = try #require(first.object["@odata.deltaLink"] as? String)
            for option in ["$orderby", "$top", "$skip", "$count"] { #expect(!link.contains(option), "\(link)") }
            #expect(link.contains("$filter=") && link.contains("$select=Name"))
            let changed = try await http.send(.PATCH, "Products('HT-1000')", body: #"{"Name":"Renamed"}"#)
            #expect(changed.status == 204)
            let delta = try await http.get(link)
            #expect(delta.status == 200, "\(delta.text)")
            let names = (delta.object["value"] as? [[String: Any]])?.compactMap { $0["Name"] as? String }
            #expect(names == ["Renamed"])
        }
    }

    @Test func aLargeResponseStreamsInBoundedMemory() async throws {
        let store = try await Self.sampleStore(items: 60_000)
        // This test is about memory, not the write timeout (120 s), which a parallel test run on
        // two cores can come near while the client reads a 20 MB body.
        try await withServer(store, extra: ["--write-timeout", "900"]) { http, server in
            // A response cut short says why in the server's log: quote it with the failure.
            let reply: HTTP.Reply
            do { reply = try await http.get("SalesOrderItems") } catch {
                Issue.record("\(error); serve's log: \(server.stderr.suffix(3000))")
                return
            }
            #expect(reply.status == 200)
            #expect(reply.body.count > 4 << 20, "a response larger than the inline limit")
            let rows = reply.object["value"] as? [[String: Any]]
            let stored = try OfflineStore.open(at: store, readOnly: true).count(set: "SalesOrderItems")
            #expect(rows?.count == stored)
            // Anonymous memory (not the mapped file) stays far below the response's size.
            let status = (try? String(contentsOfFile: "/proc/\(server.pid)/status", encoding: .utf8)) ?? ""
            if let line = status.split(separator: "\n").first(where: { $0.hasPrefix("RssAnon:") }),
                let kb = Int(line.split(separator: " ").dropFirst().first ?? "")
            {
                #expect(kb * 1024 < reply.body.count / 2, "RssAnon \(kb) kB for a \(reply.body.count)-byte response")
            }
        }
    }
}
