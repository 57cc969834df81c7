import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore
import Samples
import Storage
import TestSupport

/// `offline-store refresh` as a child process, SIGKILLed at random instants; and a large refresh
/// whose memory is measured.
@Suite(.soak, .checksStores, .serialized) struct RefreshKillTests {
    static func env(_ name: String, _ fallback: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? fallback
    }

    /// Starts `offline-store` with `args` (output to files in `logDir`), without waiting.
    static func spawn(_ args: [String], logDir: String) throws -> pid_t {
        try ChildProcess.spawnDetached(args, stdout: logDir + "/out", stderr: logDir + "/err")
    }

    /// The exit status of `pid` once it has ended (nil while it runs); -signal when a signal ended it.
    static func reap(_ pid: pid_t, wait: Bool = false) -> Int32? {
        var status: Int32 = 0
        guard waitpid(pid, &status, wait ? 0 : WNOHANG) == pid else { return nil }
        return status & 0x7F == 0 ? (status >> 8) & 0xFF : -(status & 0x7F)
    }

    /// Two requests with `$expand` — Busy's to-one expansion read in full every time (many pages,
    /// a sweep, generations), Orders through a delta that reports changed items too — and two
    /// plain ones with delta links; Busy's products overlap Pricey's and Cheap's.
    static let requests = [
        DefiningRequest(name: "Orders", url: "SalesOrders?$expand=Items"),
        DefiningRequest(name: "Busy", url: "SalesOrderItems?$filter=Quantity ge 5&$expand=Product"),
        DefiningRequest(name: "Pricey", url: "Products?$filter=Price gt 500"),
        DefiningRequest(name: "Cheap", url: "Products?$filter=Price le 500"),
    ]

    /// SIGKILL `refresh` at random instants (at least `REFRESH_KILLS`, default 20, within about
    /// `REFRESH_KILL_SECONDS`, default 60), changing the served store now and then; after each
    /// kill the store passes `check`; a last refresh to completion gives exactly the union.
    @Test func refreshKilledAtRandomInstantsConverges() async throws {
        let items = Self.env("REFRESH_KILL_ITEMS", 5_000)
        let kills = Self.env("REFRESH_KILLS", 20)
        let budget = Double(Self.env("REFRESH_KILL_SECONDS", 60))
        let servedPath = try await ServeTests.sampleStore(items: items)
        let offline = try await RefreshTests.offlineStore(Self.requests)
        let offlinePath = offline.path
        let logDir = tempDir() + "/logs"
        try FileManager.default.createDirectory(atPath: logDir, withIntermediateDirectories: true)
        var random = SeededRandom(seed: testSeed("RefreshKillTests (\(items) items)"))
        try await withServer(servedPath) { http, server in
            let args = ["refresh", "--store", offlinePath, "--service", server.url, "--page-size", "50"]
            // One refresh to completion: how long one takes.
            let start = Date()
            let first = try Self.spawn(args, logDir: logDir)
            let firstStatus = Self.reap(first, wait: true)
            var duration = Date().timeIntervalSince(start)
            #expect(firstStatus == 0, "\((try? String(contentsOfFile: logDir + "/err", encoding: .utf8)) ?? "")")
            var killed = 0, completed = 0, rounds = 0
            let began = Date()
            while killed < kills && (Date().timeIntervalSince(began) < budget || killed < 3) {
                rounds += 1
                if rounds % 4 == 0 {
                    // The service changes: deltas have something to say, the full read something to sweep.
                    let n = rounds
                    _ = try await http.send(
                        .PATCH, "SalesOrderItems(SalesOrderID='0500000001',ItemPosition=10)",
                        body: #"{"Quantity":\#(n % 9)}"#)
                    _ = try await http.send(
                        .POST, "Products", body: #"{"ProductID":"K-\#(n)","Price":\#(400 + n * 10).00}"#)
                    _ = try await http.send(.DELETE, "Products('K-\(n - 8)')")
                    _ = try await http.send(
                        .DELETE, "SalesOrderItems(SalesOrderID='05000000\(n % 30 + 10)',ItemPosition=10)")
                }
                let started = Date()
                let pid = try Self.spawn(args, logDir: logDir)
                // An instant within the time the last whole refresh took (a little past it, sometimes).
                let delay = Double(random.next() % 1_000_000) / 1_000_000 * duration * 1.1
                try await Task.sleep(nanoseconds: UInt64(delay * 1e9))
                if let status = Self.reap(pid) {
                    duration = Date().timeIntervalSince(started)
                    #expect(
                        status == 0,
                        "refresh failed: \((try? String(contentsOfFile: logDir + "/err", encoding: .utf8)) ?? "")")
                    completed += 1
                } else {
                    kill(pid, SIGKILL)
                    let status = Self.reap(pid, wait: true)
                    if status == -SIGKILL { killed += 1 } else { completed += 1 }
                }
                let report = try OfflineStore.check(at: offlinePath)
                #expect(report.isConsistent, "after round \(rounds) (\(killed) kills): \(report)")
                if !report.isConsistent { break }
            }
            print(
                "RefreshKillTests: \(killed) kills, \(completed) completed, \(rounds) rounds; the last whole refresh took \(String(format: "%.2f", duration)) s"
            )
            #expect(killed >= min(kills, 3))
            // To completion.
            let last = try Self.spawn(args, logDir: logDir)
            #expect(
                Self.reap(last, wait: true) == 0,
                "\((try? String(contentsOfFile: logDir + "/err", encoding: .utf8)) ?? "")")
            let store = try OfflineStore.open(at: offlinePath, readOnly: true)
            #expect(try store.check().isConsistent)
            RefreshTests.expectSame(
                try RefreshTests.contents(store),
                try RefreshTests.union(try RefreshTests.served(servedPath), Self.requests), "after \(killed) kills")
        }
    }

    /// A refresh of `REFRESH_BIG_COUNT` (default 100,000) generated items, in a child process whose
    /// anonymous memory (RssAnon: not the mapped store) is sampled: its peak stays far below the
    /// size of the data.
    @Test func aLargeRefreshStreamsInBoundedMemory() async throws {
        let count = Self.env("REFRESH_BIG_COUNT", 100_000)
        let servedPath = try await ServeTests.sampleStore()
        let generate = try await CLI.run([
            "generate", "--store", servedPath, "--set", "SalesOrderItems", "--count", String(count), "--seed", "3",
        ])
        #expect(generate.status == 0, "\(generate.stderr)")
        let offline = try await RefreshTests.offlineStore([DefiningRequest(name: "Items", url: "SalesOrderItems")])
        let offlinePath = offline.path
        try await withServer(servedPath) { _, server in
            let start = Date()
            let run = try await MemoryProbe.run(["refresh", "--store", offlinePath, "--service", server.url])
            let (peakKB, out) = (run.peak / 1024, run.out)
            let seconds = Date().timeIntervalSince(start)
            #expect(run.status == 0, "\(run.err)")
            let store = try OfflineStore.open(at: offlinePath, readOnly: true)
            let total = try RefreshTests.served(servedPath).count(set: "SalesOrderItems")
            #expect(try store.count(set: "SalesOrderItems") == total)
            let dataBytes =
                try FileManager.default.attributesOfItem(atPath: offlinePath + "/data.mdb")[.size] as? Int ?? 0
            print(
                "RefreshKillTests: refreshed \(total) items in \(String(format: "%.1f", seconds)) s; peak RssAnon \(peakKB / 1024) MiB, data.mdb \(dataBytes >> 20) MiB; \(out)"
            )
            #expect(peakKB * 1024 > MemoryProbe.sampled, "peak RssAnon \(peakKB) kB: not sampled")
            // Flat in the number of entities: the pages being parsed and written and the next one
            // asked for meanwhile (17–18 MiB at 100,000 in a debug build without that request,
            // 17–24 MiB with it, on 2026-11-27).
            #expect(peakKB * 1024 < 28 << 20, "peak RssAnon \(peakKB) kB for \(dataBytes) bytes of data")
            if count >= 100_000 {
                #expect(peakKB * 1024 * 2 < dataBytes, "peak RssAnon \(peakKB) kB for \(dataBytes) bytes of data")
            }
        }
    }
}
