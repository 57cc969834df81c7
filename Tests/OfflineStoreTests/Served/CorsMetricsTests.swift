import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore
import TestSupport

/// `serve --cors-origin` and `serve --metrics` (issue 41, item 8): a browser page of a listed
/// origin gets its preflight answered and the answers' CORS headers (what a browser checks
/// before it lets the page read them), any other origin none; `/metrics` gives the store's
/// metrics in Prometheus' text format, parsed by the reference Python client's parser.
@Suite(.checksStores, .runsOffThePool) struct CorsTests {
    static let page = "http://localhost:8081"

    @Test func aListedOriginIsAnsweredAsABrowserExpectsAndAnotherIsNot() async throws {
        let path = try await ServeTests.sampleStore()
        try await withServer(path, extra: ["--cors-origin", Self.page, "--cors-origin", "https://ui.example:8443"]) {
            http, _ in
            // The preflight a browser sends before a PATCH with If-Match from the page.
            let preflight = try await http.send(
                .OPTIONS, "Products('HT-1000')",
                headers: [
                    ("Origin", Self.page), ("Access-Control-Request-Method", "PATCH"),
                    ("Access-Control-Request-Headers", "content-type,if-match"),
                ])
            #expect(preflight.status == 204, "\(preflight.text)")
            #expect(preflight.header("Access-Control-Allow-Origin") == Self.page)
            #expect(preflight.header("Access-Control-Allow-Methods")?.contains("PATCH") == true)
            #expect(preflight.header("Access-Control-Allow-Headers") == "content-type,if-match")
            #expect(preflight.header("Access-Control-Max-Age") == "600")
            #expect(preflight.header("Access-Control-Allow-Credentials") == nil)
            // The request itself: its answer readable by the page, ETag exposed.
            let read = try await http.get("Products('HT-1000')", headers: [("Origin", Self.page)])
            #expect(read.status == 200 && read.header("Access-Control-Allow-Origin") == Self.page)
            #expect(read.header("Access-Control-Expose-Headers")?.contains("ETag") == true)
            #expect(read.headers[canonicalForm: "Vary"].contains("Origin"), "\(read.headers)")
            let etag = try #require(read.header("ETag"))
            let patch = try await http.send(
                .PATCH, "Products('HT-1000')", body: #"{"Name":"from a page"}"#,
                headers: [("Origin", Self.page), ("If-Match", etag)])
            #expect(patch.status == 204 && patch.header("Access-Control-Allow-Origin") == Self.page)
            // Another origin: no CORS header (its browser withholds the answer); its preflight 403.
            let other = try await http.get("Products('HT-1000')", headers: [("Origin", "http://evil.example")])
            #expect(other.status == 200 && other.header("Access-Control-Allow-Origin") == nil)
            let refused = try await http.send(
                .OPTIONS, "Products",
                headers: [("Origin", "http://evil.example"), ("Access-Control-Request-Method", "POST")])
            #expect(refused.status == 403 && refused.header("Access-Control-Allow-Origin") == nil)
            // $sync stays refused to a page of another origin, listed or not.
            let sync = try await http.send(.POST, "$sync", headers: [("Origin", Self.page)])
            #expect(sync.status == 404 || sync.status == 403, "\(sync.status) \(sync.text)")
        }
        // Without --cors-origin: no CORS header at all.
        try await withServer(path) { http, _ in
            let read = try await http.get("Products('HT-1000')", headers: [("Origin", Self.page)])
            #expect(read.status == 200 && read.header("Access-Control-Allow-Origin") == nil)
        }
    }

    @Test func aMalformedOriginIsRefusedAtStart() async throws {
        let path = try await ServeTests.sampleStore()
        let run = try await ChildProcess.run(
            ["serve", "--store", path, "--port", "0", "--cors-origin", "localhost:8081"], timeout: 60)
        #expect(run.status != 0 && run.stderr.contains("--cors-origin"), "\(run.stderr)")
    }
}

@Suite(.external, .checksStores, .runsOffThePool) struct MetricsEndpointTests {
    @Test func aPrometheusParserReadsTheStoresMetrics() async throws {
        let path = try await ServeTests.sampleStore()
        try await withServer(path, extra: ["--metrics"]) { http, server in
            let read = try await http.get("Products('HT-1000')")
            let etag = try #require(read.header("ETag"))
            let patch = try await http.send(
                .PATCH, "Products('HT-1000')", body: #"{"Name":"counted"}"#, headers: [("If-Match", etag)])
            #expect(patch.status == 204)
            let scrape = try await http.get("metrics")
            #expect(scrape.status == 200 && scrape.header("Content-Type")?.hasPrefix("text/plain") == true)
            #expect(scrape.text.contains("offline_store_commits"), "\(scrape.text)")
            let run = try await ChildProcess.run(
                executable: "/bin/sh", [repositoryRoot + "/scripts/prometheus-check.sh", server.url + "metrics"],
                timeout: 300)
            #expect(run.status == 0, "\(run.stdout)\(run.stderr.suffix(2_000))")
            let parsed = try #require(
                try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run.stdout)")
            let families = try #require(parsed["families"] as? [String: [String: Any]])
            #expect(families["offline_store_commits"]?["type"] as? String == "counter", "\(families.keys.sorted())")
            #expect((families["offline_store_commits"]?["samples"] as? Int ?? 0) >= 1)
        }
        // No --metrics: no endpoint (an entity set of that name would be read as usual).
        try await withServer(path) { http, _ in
            let none = try await http.get("metrics")
            #expect(none.status == 404)
        }
    }
}
