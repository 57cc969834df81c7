import NIOHTTP1
import AsyncHTTPClient
import Foundation
import Testing
import OfflineStore
import Samples

/// Examples/EmbeddedService as a user runs it: `offline-store serve` on the EPM sample, the example
/// creating its store from the served `$metadata` and syncing with it every half second. Its first
/// refresh brings the products, a price change posted to it is queued, its background flush
/// applies it on the service, and both processes stop cleanly on SIGTERM. Bounded: every wait is
/// at most `EMBEDDED_SERVICE_SECONDS` (default 120) seconds, each process lives at most 900 s (a safety bound: both are stopped by PID; under a full parallel CI run a test took over 300 s).
@Suite(.soak, .checksStores) struct EmbeddedServiceTests {
    static let seconds = Double(ProcessInfo.processInfo.environment["EMBEDDED_SERVICE_SECONDS"] ?? "") ?? 120

    /// Polls `condition` every 100 ms until it holds, for at most `seconds`.
    func wait(_ what: String, _ condition: () async throws -> Bool) async throws {
        let start = Date()
        while try await !condition() {
            if Date().timeIntervalSince(start) > Self.seconds {
                throw WaitTimedOut(description: "waited \(Self.seconds) s for \(what)")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    struct WaitTimedOut: Error, CustomStringConvertible { var description: String }

    /// Starts the example on `dir/offline` (created from `dir/metadata.xml`), syncing with `service`.
    static func launchExample(in dir: String, service: String, interval: String) async throws -> ServerProcess {
        let args = [
            "--store", dir + "/offline", "--metadata", dir + "/metadata.xml", "--service", service,
            "--interval", interval, "--port", "0", "--lifetime", "900",
        ]
        return try await ServerProcess.launch(
            CLI.built("embedded-service"), args, store: dir + "/offline", startTimeout: 60)
    }

    @Test func servesRefreshesAndFlushes() async throws {
        // The README's steps: `offline-store sample --store`, `serve`, the served $metadata saved.
        let dir = tempDir()
        let made = try await ChildProcess.run(["sample", "--store", dir + "/served"], timeout: Self.seconds)
        #expect(made.status == 0, "\(made.stderr)")
        let (before, productCount) = try {  // closed again before serve opens it
            let served = try OfflineStore.open(at: dir + "/served", readOnly: true)
            return (
                try served.get(set: "Products", key: [.string("HT-1000")])?["Price"], try served.count(set: "Products")
            )
        }()

        let server = try await ServerProcess.start(store: dir + "/served", lifetime: 900)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        var example: ServerProcess?
        do {
            let metadata = try await HTTP(client: client, base: server.url).get("$metadata")
            #expect(metadata.status == 200)
            try write(metadata.text, to: dir + "/metadata.xml")
            let service = try await Self.launchExample(in: dir, service: server.url, interval: "0.5")
            example = service
            #expect(service.url.hasPrefix("http://127.0.0.1:"))
            let http = HTTP(client: client, base: service.url)

            // The first round: the refresh brings every product.
            try await wait("the first refresh") { (try await http.get("status").object["rounds"] as? Int ?? 0) >= 1 }
            let all = try await http.get("products")
            #expect(all.status == 200)
            #expect((try all.json() as? [[String: Any]])?.count == productCount, "\(all.text.prefix(500))")
            let top = try await http.get("products?orderby=Price%20desc&top=2")
            let topRows = try #require(try top.json() as? [[String: Any]], "\(top.text)")
            #expect(topRows.count == 2)
            let one = try await http.get("products/HT-1001")
            #expect(one.status == 200 && one.object["ProductID"] as? String == "HT-1001", "\(one.text)")
            #expect(try await http.get("products/NOPE").status == 404)

            // A price change: refused when it is not a decimal, otherwise queued and served at once.
            #expect(try await http.send(.POST, "products/HT-1000/price", body: #"{"price":"abc"}"#).status == 400)
            let posted = try await http.send(.POST, "products/HT-1000/price", body: #"{"price":"4321.125"}"#)
            #expect(posted.status == 200, "\(posted.text)")
            #expect(posted.object["requestID"] is Int, "\(posted.text)")
            #expect(((posted.object["product"] as? [String: Any])?["Price"] as? Double) == 4321.125, "\(posted.text)")

            // The background flush sends it: the service's store has the new price, the queue empties.
            let expected = Value.decimal(try #require(EDMDecimal("4321.125")))
            #expect(before != expected)
            try await wait("the flush of the price change") {
                try OfflineStore.open(at: dir + "/served", readOnly: true).get(
                    set: "Products", key: [.string("HT-1000")])?["Price"] == expected
            }
            try await wait("an empty queue") { try await http.get("status").object["pendingRequests"] as? Int == 0 }
            let status = try await http.get("status").object
            #expect(status["state"] as? String != nil && status["lastError"] is NSNull, "\(status)")
            let events = status["events"] as? [[String: Any]] ?? []
            #expect(events.contains { ($0["Type"] as? String)?.lowercased() == "upload" }, "\(status)")

            try await client.shutdown()
            let exampleStatus = await service.stop()
            #expect(
                exampleStatus == 0, "embedded-service did not stop cleanly on SIGTERM: \(service.stderr.suffix(2000))")
            #expect(service.stderr.contains("flush: sent 1, succeeded 1"), "\(service.stderr.suffix(2000))")
        } catch {
            try? await client.shutdown()
            example?.kill()
            await server.stop()
            throw error
        }
        #expect(await server.stop() == 0, "serve did not stop cleanly: \(server.stderr.suffix(2000))")
    }

    /// SIGTERM while the example's `SyncService` is in the middle of a refresh of 60,000 products:
    /// the example exits 0 soon after, and its store passes `offline-store check` (the refresh
    /// stopped between transactions; the next one reads the request in full again).
    @Test func sigtermDuringASyncStopsCleanlyAndLeavesAStoreThatChecks() async throws {
        let dir = tempDir()
        _ = try OfflineStore.create(
            at: dir + "/served", metadata: Array(SampleData.metadata.utf8), configuration: SampleData.configuration)
        for set in ["BusinessPartners", "Products"] {
            let r = try await ChildProcess.run(
                ["generate", "--store", dir + "/served", "--set", set, "--count", set == "Products" ? "60000" : "100"],
                timeout: Self.seconds)
            #expect(r.status == 0, "\(r.stderr)")
        }
        try write(SampleData.metadata, to: dir + "/metadata.xml")
        let server = try await ServerProcess.start(store: dir + "/served", lifetime: 900)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        var example: ServerProcess?
        do {
            let service = try await Self.launchExample(in: dir, service: server.url, interval: "0.2")
            example = service
            let http = HTTP(client: client, base: service.url)
            try await wait("a refresh under way") {
                (try await http.get("status").object["state"] as? String) == "downloading"
            }
            try await client.shutdown()
            let started = ContinuousClock.now
            let status = await service.stop()  // SIGTERM, then waits for the exit
            #expect(status == 0, "embedded-service did not stop cleanly on SIGTERM: \(service.stderr.suffix(2000))")
            #expect(ContinuousClock.now - started < .seconds(30), "it took \(ContinuousClock.now - started) to stop")
            #expect(service.stderr.contains("sync stopped"), "\(service.stderr.suffix(2000))")
        } catch {
            try? await client.shutdown()
            example?.kill()
            await server.stop()
            throw error
        }
        #expect(await server.stop() == 0)
        let check = try await ChildProcess.run(["check", "--store", dir + "/offline"], timeout: Self.seconds)
        #expect(check.status == 0, "\(check.stdout) \(check.stderr)")
    }
}
