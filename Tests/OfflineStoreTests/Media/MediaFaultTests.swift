import NIOHTTP1
#if DEBUG  // the fault hook exists in debug builds only
import AsyncHTTPClient
import Foundation
import LMDB
import Testing
@testable import OfflineStore
@testable import Storage
import TestSupport

/// Storing a stream, with every `mdb_*` call it makes failed in turn (`EIO`): the store's own
/// write (`putStream`) and a refresh's download of a changed stream. After each trial `check`
/// passes, the stream is whole — the old bytes or the new, never a record without its file —
/// and once swept no file is left that no record names; the next refresh brings the new bytes.
@Suite(.checksStores, .runsOffThePool) struct MediaFaultTests {
    static func files(_ store: OfflineStore) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: store.path + "/streams").count) ?? 0
    }

    @Test func everyLMDBCallOfStoringAStreamCanFail() async throws {
        let old = MediaFixture.random(70_000, seed: 11)
        let new = MediaFixture.random(90_000, seed: 12)
        let store = try await MediaFixture.authority(photo: old, cover: [1])
        let env = store.entities.environment
        FaultInjection.countCalls(in: env)
        try await store.putStream("Photos(1)", contentType: "image/png", bytes: new)
        let calls = FaultInjection.stop(env).calls
        #expect(calls.count > 3, "\(calls)")
        try await store.putStream("Photos(1)", contentType: "image/png", bytes: old)
        for n in 1...calls.count {
            FaultInjection.fail(callNumber: n, with: EIO, in: env)
            let result = await Result { try await store.putStream("Photos(1)", contentType: "image/png", bytes: new) }
            let injected = FaultInjection.stop(env).injected
            let now = try store.openStream("Photos(1)").bytes()
            if case .success = result {
                #expect(now == new)
            } else {
                #expect(injected && now == old, "call \(n) (\(calls[n - 1])) failed the write but the stream changed")
            }
            store.entities.sweepStreamsIfNeeded()
            _ = try await MediaFixture.settle(store)
            #expect(Self.files(store) == 2, "call \(n) (\(calls[n - 1])): a file no record names was left")
            let report = try store.check()
            #expect(report.isConsistent && report.orphanStreamFiles == 0, "call \(n) (\(calls[n - 1])): \(report)")
            try await store.putStream("Photos(1)", contentType: "image/png", bytes: old)
        }
        print("MediaFaultTests: \(calls.count) fault trials of putStream")
    }

    @Test func everyLMDBCallOfARefreshDownloadingAStreamCanFail() async throws {
        let old = MediaFixture.random(40_000, seed: 13)
        let new = MediaFixture.random(60_000, seed: 14)
        let authority = try await MediaFixture.authority(photo: old, cover: [2])
        try await withServer(authority.path) { _, server in
            let copy = try MediaFixture.copy(of: server.url)
            try await copy.refresh()
            let template = tempDir() + "/template"
            // The service changes the stream; a refresh of a copy of `template` downloads it.
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            let put = try await MediaFixture.send(
                client, .PUT, server.url + "Photos(1)/$value", body: new, headers: [("Content-Type", "image/png")])
            try await client.shutdown()
            #expect(put.status == 204)
            let path = copy.path
            try FileManager.default.copyItem(atPath: path, toPath: template)
            func trialStore(_ n: Int) throws -> OfflineStore {
                let dir = tempDir() + "/trial-\(n)"
                try FileManager.default.copyItem(atPath: template, toPath: dir)
                try? FileManager.default.removeItem(atPath: dir + "/lock.mdb")
                return try OfflineStore.open(at: dir)
            }
            let counted = try trialStore(0)
            FaultInjection.countCalls(in: counted.entities.environment)
            let report = try await counted.refresh()
            let calls = FaultInjection.stop(counted.entities.environment).calls
            let downloaded = try counted.openStream("Photos(1)").bytes()
            #expect(report.streamsDownloaded == 1 && downloaded == new)
            var failed = 0
            for n in 1...calls.count {
                let store = try trialStore(n)
                let env = store.entities.environment
                FaultInjection.fail(callNumber: n, with: EIO, in: env)
                let result = await Result { try await store.refresh() }
                FaultInjection.stop(env)
                if case .failure = result { failed += 1 }
                let check = try store.check()
                #expect(check.isConsistent, "call \(n) (\(calls[n - 1])): \(check)")
                // Whole: the old bytes, the new, or none yet (announced changed, not downloaded).
                if let info = try store.streamInfo("Photos(1)"), info.downloaded {
                    let bytes = try store.openStream("Photos(1)").bytes()
                    #expect(bytes == old || bytes == new, "call \(n) (\(calls[n - 1]))")
                }
                try await store.refresh()
                #expect(try store.openStream("Photos(1)").bytes() == new, "call \(n) (\(calls[n - 1]))")
                _ = try await MediaFixture.settle(store)
                #expect(Self.files(store) == 4, "call \(n) (\(calls[n - 1])): \(Self.files(store)) files")
            }
            print("MediaFaultTests: \(calls.count) fault trials of a refresh downloading a stream, \(failed) failed it")
        }
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
#endif
