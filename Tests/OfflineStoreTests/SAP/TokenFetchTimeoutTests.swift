import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore
import Samples

/// Issue 37, finding 5: an OAuth token endpoint that answers 200 and then one byte every 5 s held
/// `refresh` past 150 s with `"timeouts": {"request": 5}` configured, and a sidecar's sync loop
/// behind it. The token fetch (`OAuth2ClientCredentials`) is now bounded by the configuration's
/// timeouts like every request: here `request` 3 s ends refresh, flush and `POST /$sync` within
/// seconds, against `scripts/hostile-upstream.sh`'s `token-drip` endpoint (its `token` endpoint,
/// which answers at once, proves the rest of the set-up works).
@Suite(.external, .checksStores, .serialized) struct TokenFetchTimeoutTests {
    static let secretVariable = "OFFLINE_STORE_TEST_TOKEN_SECRET"

    /// `request`: the request timeout — 3 s for the dripping endpoint; the prompt one's control gets
    /// 60 s, since a loaded run (every suite in parallel) took longer than 3 s to answer it.
    static func store(_ up: HostileUpstream, tokenMode: String, request: Int = 3) throws -> String {
        setenv(secretVariable, "token-secret", 1)
        let path = tempDir() + "/" + tokenMode
        let json = """
            {"serviceRoot": "\(up.root("ok"))", "definingRequests": [{"name": "P", "url": "Products"}],
             "timeouts": {"request": \(request), "idle": 10, "connect": 5},
             "authentication": {"type": "oauth2ClientCredentials", "tokenURL": "\(up.server.url)/\(tokenMode)",
                                "clientID": "client", "secretEnv": "\(secretVariable)"}}
            """
        _ = try OfflineStore.create(
            at: path, metadata: Array(SampleData.metadata.utf8),
            configuration: StoreConfiguration(json: Array(json.utf8)))
        return path
    }

    /// Runs `body` for at most `seconds` (then cancels it and leaves it): its error ("none"), and
    /// how long it took.
    static func bounded(
        _ seconds: Double, _ body: @escaping @Sendable () async throws -> Void
    ) async -> (error: String, took: Double) {
        final class Outcome: @unchecked Sendable {
            // @unchecked: `text` is guarded by `lock`.
            private var text: String?
            private let lock = NSLock()
            func set(_ value: String) { lock.withLock { text = value } }
            var value: String? { lock.withLock { text } }
        }
        let started = Date()
        let outcome = Outcome()
        let task = Task {
            do {
                try await body()
                outcome.set("none")
            } catch {
                outcome.set("\(error)")
            }
        }
        while Date().timeIntervalSince(started) < seconds {
            if let error = outcome.value { return (error, Date().timeIntervalSince(started)) }
            try? await Task.sleep(for: .milliseconds(100))
        }
        task.cancel()
        return ("still running after \(seconds) s", Date().timeIntervalSince(started))
    }

    @Test func aDrippingTokenEndpointEndsAtTheRequestTimeout() async throws {
        let up = try await HostileUpstream.start(["--drip-seconds", "5"])
        defer { Task { await up.stop() } }
        let prompt = try OfflineStore.open(at: try Self.store(up, tokenMode: "token", request: 60))
        #expect(try await prompt.refresh().received == 24)

        let store = try OfflineStore.open(at: try Self.store(up, tokenMode: "token-drip"))
        let refreshed = await Self.bounded(120) { try await store.refresh() }
        #expect(refreshed.took < 60, "refresh took \(refreshed.took) s: \(refreshed.error)")
        #expect(refreshed.error.contains("request timeout (3 s"), "\(refreshed.error)")

        try await store.create(
            set: "Products", entity: ["ProductID": .string("T-1"), "Name": .string("t"), "Category": .string("c")])
        let flushed = await Self.bounded(120) { _ = try await store.flush() }
        #expect(flushed.took < 60, "flush took \(flushed.took) s: \(flushed.error)")
        #expect(flushed.error.contains("request timeout"), "\(flushed.error)")
        #expect(try store.pendingRequestCount() == 1)

        // A sidecar's sync loop is not held behind it either.
        try await withServer(store.path) { http, server in
            let started = Date()
            let sync = try await http.send(.POST, "$sync")
            let took = Date().timeIntervalSince(started)
            #expect(sync.status == 503 && sync.text.contains("request timeout"), "\(sync.text) \(server.diagnosis())")
            #expect(took < 60, "POST /$sync took \(took) s")
        }
    }
}
