import NIOCore
import NIOHTTP1
import AsyncHTTPClient
import Foundation
import Testing
@testable import OfflineStore
import TestSupport

/// Issue 37, F1 under SIGKILL: a sidecar (offline `serve --sync-interval 0.2`) whose client creates
/// entities whose key the back end assigns (`Notes`, `Core.Computed` key: the sidecar gives a local
/// key, the flush the service's), killed at random instants while it writes and syncs, and started
/// again. Its refresh brings notes whose create's answer a kill lost; the create sent again is
/// answered from the back end's repeatability record and must settle onto that copy. Every
/// acknowledged write reaches the back end once, the queue drains, no note is twice locally.
/// Bounded by `OFFLINE_SERVE_ROUNDS` (default 6 kills) and `OFFLINE_SERVE_SECONDS` (60 s).
@Suite(.soak, .checksStores) struct SidecarAssignedKeyKillTests {
    /// The notes fixture's back end (an authority store) and an offline store of it that defines
    /// `Notes` (so a refresh brings the notes the sidecar created).
    static func stores() async throws -> (upstream: String, offline: String, server: ServerProcess) {
        let dir = tempDir()
        let metadata = Array(FlushFixture.notesMetadata.utf8)
        let upstream = try OfflineStore.create(at: dir + "/upstream", metadata: metadata)
        for (set, json) in FlushFixture.notesData { _ = try upstream.load(set: set, json: Array(json.utf8)) }
        let server = try await ServerProcess.start(store: dir + "/upstream", lifetime: 600)
        let configuration = try StoreConfiguration(
            json: Array(#"{"serviceRoot": "\#(server.url)", "definingRequests": [{"name": "N", "url": "Notes"}]}"#.utf8)
        )
        let offline = try OfflineStore.create(at: dir + "/offline", metadata: metadata, configuration: configuration)
        try await offline.refresh()
        return (dir + "/upstream", dir + "/offline", server)
    }

    @Test func aKilledSidecarCreatingNotesWhoseKeysTheServiceAssignsLosesAndDoublesNothing() async throws {
        let seed = testSeed("aKilledSidecarCreatingNotesWhoseKeysTheServiceAssignsLosesAndDoublesNothing")
        var random = SeededRandom(seed: seed)
        let (upstreamPath, offline, upstream) = try await Self.stores()
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let start = Date()
        var acknowledged: [String] = [], unanswered: [(title: String, id: String)] = []
        var kills = 0, n = 0
        func create(_ http: HTTP, _ title: String, _ id: String) async -> HTTP.Reply? {
            try? await http.send(
                .POST, "Notes", body: #"{"Title":"\#(title)"}"#, headers: [("Repeatability-Request-ID", id)])
        }
        func retryUnanswered(_ http: HTTP) async {
            for (title, id) in unanswered {
                let reply = await create(http, title, id)
                #expect(reply?.status == 201, "retry of \(title): \(reply?.text ?? "no answer")")
                acknowledged.append(title)
            }
            unanswered = []
        }
        do {
            while kills < OfflineServeSyncTests.rounds, Date().timeIntervalSince(start) < OfflineServeSyncTests.budget {
                let server = try await ServerProcess.start(
                    store: offline, lifetime: 300, extra: ["--sync-interval", "0.2"])
                let http = HTTP(client: client, base: server.url, timeout: .seconds(15))
                await retryUnanswered(http)
                let killAt = Date().addingTimeInterval(Double(Int.random(in: 200...1_500, using: &random)) / 1000)
                while Date() < killAt {
                    n += 1
                    let (title, id) = ("N-\(n)", UUID().uuidString)
                    let reply = await create(http, title, id)
                    if reply?.status == 201 { acknowledged.append(title) } else { unanswered.append((title, id)) }
                }
                server.kill()
                kills += 1
            }
            let server = try await ServerProcess.start(store: offline, lifetime: 300)
            let http = HTTP(client: client, base: server.url, timeout: .seconds(30))
            await retryUnanswered(http)
            let left = try await OfflineServeSyncTests.drain(http)
            #expect(left == 0, "the queue drains")
            #expect(OfflineServeTests.rows(try await http.get("ErrorArchive")).isEmpty, "nothing refused")
            // One more sync: the refresh after the last flush brings every note under its key.
            _ = try await http.send(.POST, "$sync")
            #expect(await server.stop() == 0)
        } catch {
            try? await client.shutdown()
            _ = await upstream.stop()
            throw error
        }
        try await client.shutdown()
        #expect(await upstream.stop() == 0)
        func titles(_ path: String) throws -> [String] {
            try OfflineStore.open(at: path, readOnly: true).entities("Notes?$filter=startswith(Title,'N-')").compactMap
            {
                if case .string(let t)? = $0["Title"] { t } else { nil }
            }
        }
        let there = try titles(upstreamPath), local = try titles(offline)
        let lost = Set(acknowledged).subtracting(there)
        #expect(lost.isEmpty, "acknowledged, not on the back end: \(lost.sorted().prefix(10))")
        #expect(there.count == Set(there).count, "doubled on the back end: \(there.count - Set(there).count)")
        #expect(local.count == Set(local).count, "twice locally: \(local.count - Set(local).count)")
        #expect(Set(local) == Set(there), "the sidecar holds what the back end holds")
        #expect(kills >= 1)
        print(
            "sidecar with assigned keys killed: \(kills) kills, \(acknowledged.count) creates acknowledged, \(there.count) on the back end (\(Set(there).count) distinct), \(local.count) locally, \(lost.count) lost; \(String(format: "%.1f", Date().timeIntervalSince(start))) s; seed \(seed)"
        )
    }
}
