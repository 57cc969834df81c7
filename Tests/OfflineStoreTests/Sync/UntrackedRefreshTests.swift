#if DEBUG  // the fault hook exists in debug builds only
import LMDB
import Foundation
import Testing
@testable import OfflineStore
import Samples
@testable import Storage
import Sync
import TestSupport

/// The durable note that a service refused change tracking for a defining request
/// (`refresh/untracked/NAME` in `meta`, written when a full read retried without
/// `Prefer: odata.track-changes` succeeds), proven as the store's other durable structures are:
/// `check` knows its invariants (`RefreshCheckTests`); here every LMDB call of a refresh against
/// the hostile upstream's `no-delta` root (501 to track-changes, as Gateway answers for a service
/// without delta) is failed in turn, and `offline-store refresh` is SIGKILLed at random instants.
/// After each: `check` passes, a failed refresh left the state of one of its commits, and the
/// next refresh leaves the store as one without a fault does — the note included.
@Suite(.external, .checksStores, .serialized) struct UntrackedRefreshTests {
    static func untracked(_ store: OfflineStore) throws -> Int? {
        let m = Membership(store: store.entities)
        return try store.entities.read { t in try m.untracked(t, name: "P") }
    }

    @Test func everyCallOfARefreshThatFindsNoDeltaFailsCleanly() async throws {
        // A lifetime beyond the trials' time bound (a loaded CI run took 368 s, past the default 300 s).
        let upstream = try await HostileUpstream.start(["--lifetime", "900"])
        defer { Task { await upstream.stop() } }
        let template = try HostileUpstreamTests.store(upstream.root("no-delta")).path
        let before = try RefreshFaultTests.state(try QueueFaultTests.copy(template))
        let probe = try QueueFaultTests.copy(template)
        FaultInjection.countCalls(in: probe.entities.environment)
        let report = try await probe.refresh()
        let calls = FaultInjection.stop(probe.entities.environment).calls
        let after = try RefreshFaultTests.state(probe)
        #expect(report.requests.map(\.mode) == [.fullWithoutTracking] && report.received > 20, "\(report)")
        #expect(try Self.untracked(probe) == 501)
        var between: [Int: [String]] = [0: before]
        var committed = 0, trials = 0, failed = 0, recovered = 0
        let started = ContinuousClock.now
        for n in 1...calls.count {
            if calls[n - 1] == "mdb_txn_commit" { committed += 1 }
            if ContinuousClock.now - started > .seconds(min(RefreshFaultTests.secondsLimit, 480)) { break }
            let (codeName, code) = QueueFaultTests.codes[n % QueueFaultTests.codes.count]
            let store = try QueueFaultTests.copy(template)
            let env = store.entities.environment
            FaultInjection.fail(callNumber: n, with: code, in: env)
            let result: Result<RefreshReport, any Error>
            do { result = .success(try await store.refresh()) } catch { result = .failure(error) }
            #expect(FaultInjection.stop(env).injected)
            trials += 1
            let context = "call \(n) of \(calls.count) (\(calls[n - 1])) failing with \(codeName)"
            #expect(try store.check().isConsistent, "\(context)")
            let now = try RefreshFaultTests.state(store)
            switch result {
            case .success:
                recovered += 1
                #expect(now == after, "\(context): \(FlushFaultTests.diff(after, now))")
            case .failure:
                failed += 1
                let group = calls[n - 1] == "mdb_txn_commit" ? committed - 1 : committed
                if let expected = between[group] {
                    #expect(now == expected, "\(context): \(FlushFaultTests.diff(expected, now))")
                } else {
                    between[group] = now
                }
                _ = try await store.refresh()
                let again = try RefreshFaultTests.state(store)
                #expect(again == after, "\(context): refreshed again: \(FlushFaultTests.diff(after, again))")
                #expect(try Self.untracked(store) == 501, "\(context)")
            }
        }
        #expect(failed > 0 && between.count > 2, "failures fell between \(between.count) pairs of commits")
        print(
            "untracked refresh fault injection: \(calls.count) calls, \(trials) trials, \(failed) refreshes failed (\(between.count) commit intervals), \(recovered) recovered"
        )
    }

    /// `offline-store refresh` SIGKILLed at a random instant (0–300 ms after its start), on a
    /// fresh copy of a store that has never been refreshed, `UNTRACKED_KILLS` times (default 20):
    /// `check` passes after each kill, and the next refresh completes with the note and every
    /// product, whether the killed one had written the note or not.
    @Test func aRefreshThatFindsNoDeltaKilledAtRandomConverges() async throws {
        let upstream = try await HostileUpstream.start()
        defer { Task { await upstream.stop() } }
        let template = try HostileUpstreamTests.store(upstream.root("no-delta")).path
        let kills = RefreshKillTests.env("UNTRACKED_KILLS", 20)
        let logDir = tempDir() + "/logs"
        try FileManager.default.createDirectory(atPath: logDir, withIntermediateDirectories: true)
        var rng = SystemRandomNumberGenerator()
        var killed = 0, completed = 0, noted = 0
        for round in 0..<kills {
            let path = try QueueFaultTests.copy(template).path
            let pid = try RefreshKillTests.spawn(["refresh", "--store", path], logDir: logDir)
            try await Task.sleep(nanoseconds: UInt64.random(in: 0...300_000_000, using: &rng))
            if RefreshKillTests.reap(pid) == nil {
                kill(pid, SIGKILL)
                killed += 1
            } else {
                completed += 1
            }
            _ = RefreshKillTests.reap(pid, wait: true)
            let store = try OfflineStore.open(at: path)
            #expect(try store.check().isConsistent, "round \(round)")
            if try Self.untracked(store) != nil { noted += 1 }
            let report = try await store.refresh()
            #expect(report.requests.map(\.mode) == [.fullWithoutTracking], "round \(round): \(report)")
            #expect(try Self.untracked(store) == 501, "round \(round)")
            #expect(try store.count(set: "Products") == MemoryProbe.count("Products"), "round \(round)")
            #expect(try store.check().isConsistent, "round \(round)")
        }
        #expect(killed > 0, "no refresh was killed")
        print(
            "untracked refresh kill test: \(kills) rounds, \(killed) killed, \(completed) done first; the note was there after \(noted) of them"
        )
    }
}
#endif
