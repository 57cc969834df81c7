import NIOCore
import AsyncHTTPClient
import Foundation
import NIOHTTP1
import Testing
@testable import OfflineStore
import Samples
import TestSupport

/// An offline store served with `--sync-interval` while a client keeps writing — the sidecar of
/// issue 23 under stress, two real `serve` processes on loopback:
///
/// - the upstream (an authority `serve`) is killed and started again on the same port while
///   syncs run: every write the offline `serve` acknowledged reaches it exactly once, reads of
///   the offline store never fail;
/// - the offline `serve` itself is killed (SIGKILL) while the client writes and syncs run, and
///   started again; requests whose answer never came are sent again with their
///   `Repeatability-Request-ID`: nothing acknowledged is lost or doubled, locally or upstream.
///
/// Then both stores pass `check`. Bounded by `OFFLINE_SERVE_ROUNDS` (default 6 restarts each)
/// and `OFFLINE_SERVE_SECONDS` (default 60 s each).
@Suite(.soak, .checksStores) struct OfflineServeSyncTests {
    static let rounds = ProcessInfo.processInfo.environment["OFFLINE_SERVE_ROUNDS"].flatMap(Int.init) ?? 6
    static let budget = ProcessInfo.processInfo.environment["OFFLINE_SERVE_SECONDS"].flatMap(Double.init) ?? 60

    /// The authority upstream on a fixed port (so the offline store's serviceRoot stays true).
    static func upstream(_ store: String, port: Int) async throws -> ServerProcess {
        try await ServerProcess.launch(
            CLI.executable,
            ["serve", "--store", store, "--host", "127.0.0.1", "--port", String(port), "--lifetime", "600"],
            store: store, startTimeout: 60)
    }

    /// `POST /$sync` until the offline store's queue is empty (at most `attempts` times).
    static func drain(_ http: HTTP, attempts: Int = 10) async throws -> Int {
        for _ in 0..<attempts {
            _ = try await http.send(.POST, "$sync")
            let left = OfflineServeTests.rows(try await http.get("RequestQueue")).count
            if left == 0 { return 0 }
        }
        return OfflineServeTests.rows(try await http.get("RequestQueue")).count
    }

    /// Products on the upstream named `name`, by key.
    static func upstreamProducts(_ path: String, named name: String) throws -> [String: Properties] {
        let store = try OfflineStore.open(at: path, readOnly: true)
        var out: [String: Properties] = [:]
        for e in try store.entities("Products?$filter=Name eq '\(name)'") {
            if case .string(let k)? = e["ProductID"] { out[k] = e }
        }
        return out
    }

    @Test func writesReachAnUpstreamThatIsKilledAndStartedAgainExactlyOnce() async throws {
        let seed = testSeed("writesReachAnUpstreamThatIsKilledAndStartedAgainExactlyOnce")
        var random = SeededRandom(seed: seed)
        let upstreamPath = try await ServeTests.sampleStore()
        var upstream = try await ServerProcess.start(store: upstreamPath, lifetime: 600)
        let port = try #require(URL(string: upstream.url)?.port)
        let offline = try await OfflineServeTests.offlineStore(upstream: upstream.url)
        let start = Date()
        var acknowledged: [String] = [], lastPrice: Int? = nil, readFailures = 0, restarts = 0
        try await withServer(offline, extra: ["--sync-interval", "0.3"]) { http, _ in
            let http = HTTP(client: http.client, base: http.base, timeout: .seconds(30))
            // The writer and reader run while the upstream is killed and started again.
            let deadline = Date().addingTimeInterval(Self.budget)
            let writer = Task {
                var made: [String] = [], price: Int? = nil, n = 0
                while Date() < deadline, n < 2_000 {
                    n += 1
                    let key = "S-\(n)"
                    let reply = try await http.send(
                        .POST, "Products", body: #"{"ProductID":"\#(key)","Name":"sidecar"}"#)
                    #expect(reply.status == 201, "\(reply.text)")
                    if reply.status == 201 { made.append(key) }
                    if n % 5 == 0, reply.status == 201 {
                        let patched = try await http.send(
                            .PATCH, "Products('HT-1000')", body: #"{"Price":\#(n)}"#)
                        #expect(patched.status == 204, "\(patched.text)")
                        if patched.status == 204 { price = n }
                    }
                    try await Task.sleep(for: .milliseconds(10))
                }
                return (made, price)
            }
            let reader = Task {
                var failures = 0
                while Date() < deadline {
                    let page = try? await http.get("Products?$orderby=ProductID desc&$top=5")
                    if page?.status != 200 { failures += 1 }
                    try await Task.sleep(for: .milliseconds(20))
                }
                return failures
            }
            while Date() < deadline, restarts < Self.rounds {
                try await Task.sleep(for: .milliseconds(Int.random(in: 300...3_000, using: &random)))
                if Bool.random(using: &random) { upstream.kill() } else { _ = await upstream.stop() }
                try await Task.sleep(for: .milliseconds(Int.random(in: 100...2_000, using: &random)))
                upstream = try await Self.upstream(upstreamPath, port: port)
                restarts += 1
            }
            (acknowledged, lastPrice) = try await writer.value
            readFailures = try await reader.value
            let left = try await Self.drain(http)
            #expect(left == 0, "the queue drains once the upstream stays up")
            #expect(OfflineServeTests.rows(try await http.get("ErrorArchive")).isEmpty, "nothing refused")
        }
        #expect(await upstream.stop() == 0)
        let there = try Self.upstreamProducts(upstreamPath, named: "sidecar")
        let lost = acknowledged.filter { there[$0] == nil }
        #expect(lost.isEmpty, "acknowledged, not on the upstream: \(lost.prefix(10))")
        #expect(there.count == acknowledged.count, "exactly the acknowledged creates: \(there.count)")
        let price = try OfflineStore.open(at: upstreamPath, readOnly: true).get(
            set: "Products", key: [.string("HT-1000")])?["Price"]
        if let lastPrice, case .decimal(let d)? = price {
            #expect("\(d)" == "\(lastPrice)", "the last update won")
        } else {
            #expect(lastPrice == nil, "HT-1000's price: \(String(describing: price))")
        }
        #expect(readFailures == 0, "reads of the offline store never fail")
        #expect(try OfflineStore.check(at: upstreamPath).isConsistent)
        #expect(try OfflineStore.check(at: offline).isConsistent)
        print(
            "offline serve, upstream restarted: \(restarts) restarts, \(acknowledged.count) creates acknowledged, \(there.count) on the upstream, \(lost.count) lost, \(readFailures) failed reads; \(String(format: "%.1f", Date().timeIntervalSince(start))) s; seed \(seed)"
        )
        #expect(restarts >= 1)
    }

    @Test func aKilledOfflineServeLosesAndDoublesNothing() async throws {
        let seed = testSeed("aKilledOfflineServeLosesAndDoublesNothing")
        var random = SeededRandom(seed: seed)
        let upstreamPath = try await ServeTests.sampleStore()
        let upstream = try await ServerProcess.start(store: upstreamPath, lifetime: 600)
        let offline = try await OfflineServeTests.offlineStore(upstream: upstream.url)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let start = Date()
        var acknowledged: [String] = [], unanswered: [(key: String, id: String)] = []
        var kills = 0, replayed = 0, n = 0
        func create(_ http: HTTP, _ key: String, _ id: String) async -> HTTP.Reply? {
            try? await http.send(
                .POST, "Products", body: #"{"ProductID":"\#(key)","Name":"killed sidecar"}"#,
                headers: [("Repeatability-Request-ID", id)])
        }
        // The writes whose answer never came, sent again with their ids: applied now, or replayed.
        func retryUnanswered(_ http: HTTP) async {
            for (key, id) in unanswered {
                let reply = await create(http, key, id)
                #expect(reply?.status == 201, "retry of \(key): \(reply?.text ?? "no answer")")
                if reply?.header("Repeatability-Result") == "replayed" { replayed += 1 }
                acknowledged.append(key)
            }
            unanswered = []
        }
        do {
            while kills < Self.rounds, Date().timeIntervalSince(start) < Self.budget {
                let server = try await ServerProcess.start(
                    store: offline, lifetime: 300, extra: ["--sync-interval", "0.2"])
                let http = HTTP(client: client, base: server.url, timeout: .seconds(15))
                await retryUnanswered(http)
                let killAt = Date().addingTimeInterval(Double(Int.random(in: 200...1_500, using: &random)) / 1000)
                while Date() < killAt {
                    n += 1
                    let (key, id) = ("K-\(n)", UUID().uuidString)
                    let reply = await create(http, key, id)
                    if reply?.status == 201 { acknowledged.append(key) } else { unanswered.append((key, id)) }
                    #expect(reply == nil || reply?.status == 201, "\(key): \(reply?.text ?? "")")
                }
                // While a write is in flight and, as likely as not, a sync.
                n += 1
                let pending = (key: "K-\(n)", id: UUID().uuidString)
                async let inFlight = create(http, pending.key, pending.id)
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...5, using: &random)))
                server.kill()
                kills += 1
                if let reply = await inFlight, reply.status == 201 {
                    acknowledged.append(pending.key)
                } else {
                    unanswered.append(pending)
                }
            }
            // A last start: the unanswered sent again, then a drain to the upstream.
            let server = try await ServerProcess.start(store: offline, lifetime: 300)
            let http = HTTP(client: client, base: server.url, timeout: .seconds(30))
            await retryUnanswered(http)
            let left = try await Self.drain(http)
            #expect(left == 0)
            #expect(OfflineServeTests.rows(try await http.get("ErrorArchive")).isEmpty, "nothing refused, no 409")
            #expect(await server.stop() == 0)
        } catch {
            try? await client.shutdown()
            _ = await upstream.stop()
            throw error
        }
        try await client.shutdown()
        #expect(await upstream.stop() == 0)
        let there = try Self.upstreamProducts(upstreamPath, named: "killed sidecar")
        let local = try OfflineStore.open(at: offline, readOnly: true).entities(
            "Products?$filter=Name eq 'killed sidecar'"
        ).count
        let lost = acknowledged.filter { there[$0] == nil }
        #expect(lost.isEmpty, "acknowledged, not on the upstream: \(lost.prefix(10))")
        #expect(there.count == acknowledged.count && local == acknowledged.count, "each once: \(there.count), \(local)")
        #expect(try OfflineStore.check(at: upstreamPath).isConsistent)
        #expect(try OfflineStore.check(at: offline).isConsistent)
        print(
            "offline serve killed: \(kills) kills, \(acknowledged.count) creates acknowledged (\(replayed) replayed after a kill), \(there.count) on the upstream, \(lost.count) lost; \(String(format: "%.1f", Date().timeIntervalSince(start))) s; seed \(seed)"
        )
        #expect(kills >= 1)
    }
}
