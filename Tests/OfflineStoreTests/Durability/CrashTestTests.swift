import AsyncHTTPClient
import CLMDB
import Foundation
import Testing
import TestSupport
@testable import OfflineStore
import Samples

/// `offline-store crashtest`, the product's own crash test, run as users run it — bounded here by
/// `CRASHTEST_KILLS` (default 20) and `CRASHTEST_SECONDS` (default 60); scripts/test.sh runs a
/// longer one. And the two things it relies on: that it reports a loss when there is one, and
/// that a killed process's reader slot is cleared when the store is next opened.
@Suite(.soak, .checksStores, .serialized) struct CrashTestTests {
    static func env(_ name: String, _ fallback: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? fallback
    }

    /// The summary line's figures: kills, operations acknowledged, lost, duplicated.
    static func summary(_ out: String) -> (kills: Int, acks: Int, lost: Int, duplicated: Int)? {
        for line in out.split(separator: "\n") where line.contains(" operations acknowledged, ") {
            let n = line.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
            if n.count >= 4 { return (n[0], n[1], n[2], n[3]) }
        }
        return nil
    }

    @Test(.runsOffThePool) func crashTestPassesWithEveryPhase() throws {
        let kills = Self.env("CRASHTEST_KILLS", 20), seconds = Self.env("CRASHTEST_SECONDS", 60)
        let seed = testSeed("crashTestPassesWithEveryPhase") % 1_000_000_000
        let dir = tempDir() + "/crashtest"
        let r = try ChildProcess.run(
            [
                "crashtest", "--kills", String(kills), "--seconds", String(seconds), "--seed", String(seed), "--phase",
                "all", "--dir", dir,
            ],
            timeout: Double(seconds) + 300)
        print("crashtest (seed \(seed)): \(r.stdout.split(separator: "\n").suffix(3).joined(separator: " | "))")
        #expect(
            r.status == 0 && r.signal == nil && !r.hung,
            "status \(r.status), signal \(String(describing: r.signal)), hung \(r.hung): \(r.stderr.suffix(3000))\n\(r.stdout.suffix(3000))"
        )
        let s = try #require(Self.summary(r.stdout), "no summary line: \(r.stdout.suffix(2000))")
        #expect(s.lost == 0 && s.duplicated == 0)
        #expect(s.kills >= min(kills, 5), "too few kills in \(seconds) s")
        #expect(s.acks > s.kills, "too few operations acknowledged to mean anything")
        // Exactly once, as the service counted it.
        let applied = r.stdout.split(separator: "\n").first { $0.hasPrefix("final: the service applied") }
        let counts = applied.map { $0.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) } } ?? []
        #expect(counts.count == 2 && counts[0] == counts[1] && counts[0] > 0, "\(applied ?? "no final count")")
    }

    /// A worker that reports a change it never made: the crash test finds it lost, says so with
    /// the seed, and fails.
    @Test(.runsOffThePool) func crashTestReportsALoss() throws {
        let dir = tempDir() + "/crashtest"
        let r = try ChildProcess.run(
            [
                "crashtest", "--kills", "4", "--seconds", "60", "--seed", "5", "--phase", "write", "--workers", "1",
                "--dir", dir, "--false-ack-after", "0",
            ], timeout: 400)
        #expect(r.status == 1, "\(r.stdout.suffix(2000))")
        #expect(r.stderr.contains("never-written"), "\(r.stderr.suffix(2000))")
        #expect(r.stderr.contains("with seed 5"), "\(r.stderr.suffix(2000))")
        #expect((Self.summary(r.stdout)?.lost ?? 0) >= 1, "\(r.stdout.suffix(2000))")
    }

    @Test(.runsOffThePool) func crashTestRefusesBadArguments() throws {
        for args in [
            ["--phase", "everything"], ["--kills", "0"], ["--workers", "0"], ["--seconds=-1"],
            ["--durability", "never"],
        ] {
            let r = try ChildProcess.run(["crashtest"] + args, timeout: 60)
            #expect(r.status != 0 && r.stderr.contains("offline-store: --"), "\(args): \(r.stderr)")
        }
    }

    /// The reader table's slots, by process id (`mdb_reader_list`).
    static func readerPIDs(_ env: OpaquePointer) -> [Int32] {
        final class Lines { var text = "" }
        let lines = Lines()
        _ = withUnsafeMutablePointer(to: &lines.text) { p in
            mdb_reader_list(
                env,
                { msg, ctx in
                    ctx!.assumingMemoryBound(to: String.self).pointee += String(cString: msg!)
                    return 0
                }, p)
        }
        // "    pid     thread     txnid" then one line a slot.
        return lines.text.split(separator: "\n").dropFirst().compactMap { Int32($0.split(separator: " ").first ?? "") }
    }

    /// A `serve` killed with SIGKILL leaves its reader slot (it keeps read transactions for
    /// reuse); with another process holding the store open, LMDB does not reset the table, so
    /// the next process to open the store clears it (`mdb_reader_check`) — no manual step.
    @Test func aKilledProcesssReaderSlotIsClearedAtTheNextOpen() async throws {
        let path = try await ServeTests.sampleStore()
        // This process holds the environment open throughout, as a live peer would.
        var env: OpaquePointer?
        #expect(mdb_env_create(&env) == 0)
        #expect(mdb_env_set_maxdbs(env, 1024) == 0)
        #expect(mdb_env_set_maxreaders(env, 510) == 0)
        #expect(mdb_env_open(env, path, UInt32(MDB_NOTLS | MDB_RDONLY), 0o644) == 0)
        defer { mdb_env_close(env) }
        let server = try await ServerProcess.start(store: path, lifetime: 60)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let reply = try await HTTP(client: client, base: server.url).get("Products?$top=2")
        try await client.shutdown()
        #expect(reply.status == 200)
        server.kill()
        #expect(
            Self.readerPIDs(env!).contains(server.pid),
            "the killed server held no reader slot: \(Self.readerPIDs(env!))")
        let stats = try await ChildProcess.run(["stats", "--store", path], timeout: 60)
        #expect(stats.status == 0, "\(stats.stderr)")
        #expect(
            !Self.readerPIDs(env!).contains(server.pid),
            "the dead server's slot is still there: \(Self.readerPIDs(env!))")
    }
}
