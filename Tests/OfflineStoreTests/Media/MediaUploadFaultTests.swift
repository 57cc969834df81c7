#if DEBUG  // the fault hook exists in debug builds only
import Foundation
import LMDB
import Testing
@testable import OfflineStore
@testable import Storage
import TestSupport

/// A stream changed offline, with every `mdb_*` call failed in turn (`EIO`): the local change
/// (`replaceStream`: the stream's record, its request and the file the queue keeps, in one
/// transaction) and the flush that sends it (marking it sent, then settling it). After each
/// trial `check` passes — the queue keeps exactly the files of its stream replacements, each
/// whole — and the change is there whole or not at all; a flush after the failed one brings the
/// service the bytes, once.
@Suite(.checksStores, .runsOffThePool) struct MediaUploadFaultTests {
    @Test func everyLMDBCallOfReplacingAStreamOfflineCanFail() async throws {
        let old = MediaFixture.random(50_000, seed: 21)
        let new = MediaFixture.random(80_000, seed: 22)
        let copy = try MediaFixture.copy(of: "http://127.0.0.1:9/")
        try copy.load(set: "Photos", entities: [["Id": .int(1), "Name": .string("one")]])
        func reset() async throws {
            _ = try copy.undo(set: "Photos", key: [.int(1)])
            try await copy.putStream("Photos(1)", contentType: "image/png", bytes: old)
        }
        try await reset()
        let env = copy.entities.environment
        FaultInjection.countCalls(in: env)
        try await copy.replaceStream("Photos(1)", contentType: "image/png", bytes: new)
        let calls = FaultInjection.stop(env).calls
        #expect(calls.count > 5, "\(calls)")
        try await reset()
        var failed = 0
        for n in 1...calls.count {
            let what = "call \(n) (\(calls[n - 1]))"
            FaultInjection.fail(callNumber: n, with: EIO, in: env)
            let result = await Result {
                try await copy.replaceStream("Photos(1)", contentType: "image/png", bytes: new)
            }
            let injected = FaultInjection.stop(env).injected
            let now = try copy.openStream("Photos(1)").bytes()
            if case .success = result {
                #expect(try now == new && copy.pendingRequestCount() == 1, "\(what)")
            } else {
                failed += 1
                #expect(try injected && now == old && copy.pendingRequestCount() == 0, "\(what): half a change")
            }
            _ = try await MediaFixture.settle(copy)
            let report = try copy.check()
            #expect(report.isConsistent && report.orphanStreamFiles == 0, "\(what): \(report)")
            try await reset()
        }
        print("MediaUploadFaultTests: \(calls.count) fault trials of replaceStream, \(failed) failed it")
    }

    @Test func everyLMDBCallOfCreatingAMediaEntityOfflineCanFail() async throws {
        let copy = try MediaFixture.copy(of: "http://127.0.0.1:9/")
        let bytes = MediaFixture.random(40_000, seed: 24)
        func create() async throws {
            _ = try await copy.createMedia(
                set: "Photos", entity: ["Id": .int(7), "Name": .string("seven")], contentType: "image/png",
                bytes: bytes)
        }
        let env = copy.entities.environment
        FaultInjection.countCalls(in: env)
        try await create()
        let calls = FaultInjection.stop(env).calls
        _ = try copy.undo(set: "Photos", key: [.int(7)])
        var failed = 0
        for n in 1...calls.count {
            let what = "call \(n) (\(calls[n - 1]))"
            FaultInjection.fail(callNumber: n, with: EIO, in: env)
            let result = await Result { try await create() }
            FaultInjection.stop(env)
            let there = try copy.get(set: "Photos", key: [.int(7)]) != nil
            if case .success = result {
                #expect(try there && copy.pendingRequestCount() == 2, "\(what)")
                #expect(try copy.openStream("Photos(7)").bytes() == bytes, "\(what)")
            } else {
                failed += 1
                #expect(try !there && copy.pendingRequestCount() == 0, "\(what): half a create")
            }
            _ = try await MediaFixture.settle(copy)
            let report = try copy.check()
            #expect(report.isConsistent && report.orphanStreamFiles == 0, "\(what): \(report)")
            _ = try copy.undo(set: "Photos", key: [.int(7)])
        }
        print("MediaUploadFaultTests: \(calls.count) fault trials of createMedia, \(failed) failed it")
    }
}

/// The flush of a stream replacement with each of its `mdb_*` calls failed in turn: 72 trials of
/// two flushes, an upload and a read back each. In the soak tier: beside the whole fast tier run
/// unbounded (plain `swift test`) its uploads took the service and the pool long enough to push
/// other suites' timers past their bounds; `scripts/test.sh` runs it with the tier at most 12 wide.
@Suite(.soak, .checksStores, .runsOffThePool) struct MediaUploadFlushFaultTests {
    @Test func everyLMDBCallOfFlushingAStreamReplacementCanFail() async throws {
        let authority = try await MediaFixture.authority(photo: MediaFixture.random(30_000, seed: 23), cover: [1])
        try await withServer(authority.path) { http, server in
            let store = try MediaFixture.copy(of: server.url)
            try await store.refresh()
            // Each trial replaces photo 1 with bytes of its own and flushes: the same calls each
            // time (the service's version is the one the last trial sent, which the copy holds).
            var round: UInt64 = 0
            func replace() async throws -> [UInt8] {
                round += 1
                let bytes = MediaFixture.random(60_000, seed: 100 + round)
                try await store.replaceStream("Photos(1)", contentType: "image/png", bytes: bytes)
                return bytes
            }
            let env = store.entities.environment
            _ = try await replace()
            FaultInjection.countCalls(in: env)
            let first = try await store.flush()
            let calls = FaultInjection.stop(env).calls
            #expect(first.succeeded == 1, "\(first)")
            var failed = 0
            for n in 1...calls.count {
                let what = "call \(n) (\(calls[n - 1]))"
                let bytes = try await replace()
                FaultInjection.fail(callNumber: n, with: EIO, in: env)
                let result = await Result { try await store.flush() }
                FaultInjection.stop(env)
                if case .failure = result { failed += 1 }
                let checked = try store.check()
                #expect(checked.isConsistent, "\(what): \(checked)")
                #expect(try store.openStream("Photos(1)").bytes() == bytes, "\(what)")
                // The next flush settles it: sent again (found applied if the first got there).
                let again = try await store.flush()
                #expect(again.archived == 0 && again.stopped == nil, "\(what): \(again)")
                #expect(try store.pendingRequestCount() == 0, "\(what)")
                #expect(try await http.get("Photos(1)/$value").body == bytes, "\(what)")
                let info = try #require(try store.streamInfo("Photos(1)"))
                #expect(!info.pendingUpload && info.sha256 == MediaFixture.sha256(bytes), "\(what)")
                _ = try await MediaFixture.settle(store)
                let report = try store.check()
                #expect(report.isConsistent && report.orphanStreamFiles == 0, "\(what): \(report)")
            }
            print(
                "MediaUploadFaultTests: \(calls.count) fault trials of a flush of a stream replacement, \(failed) failed it"
            )
        }
    }
}
#endif
