import NIOHTTP1
import Foundation
import Testing
import TestSupport
@testable import OfflineStore
import Samples
import Storage

/// Two `offline-store refresh` processes on one store at random offsets (the second hardening
/// round's finding 1: the later refresh's membership sweep deleted entities the earlier one had
/// just marked, and `check` passed). The store's refresh lock (`flock` on `sync.lock`) lets one
/// run; the other is refused with "already running" and changes nothing. After every round the
/// store holds exactly what the service holds.
@Suite(.checksStores, .serialized) struct ConcurrentRefreshTests {
    @Test func twoRefreshProcessesAtOnceNeverLoseEntities() async throws {
        var r = SeededRandom(seed: testSeed("twoRefreshProcessesAtOnceNeverLoseEntities"))
        let (served, _) = try await FlushFixture.pair()
        let dir = tempDir()
        let offline = try OfflineStore.create(
            at: dir + "/offline", metadata: Array(SampleData.metadata.utf8), configuration: SampleData.configuration)
        for (name, url) in [
            ("Partners", "BusinessPartners"), ("Products", "Products"), ("Orders", "SalesOrders?$expand=Items"),
            // A to-one $expand: serve gives it no delta link, so every refresh reads it in full, in
            // pages of one — long enough that two refreshes started together overlap even on a
            // loaded machine (the others go by delta and take milliseconds).
            ("Suppliers", "Products?$expand=Supplier"),
        ] {
            try offline.define(name: name, url: url)
        }
        try await withServer(served) { http, server in
            var refused = 0, completed = 0
            for round in 0..<40 {  // a loaded CI run once had no overlap in 20
                if round >= 6 && refused > 0 { break }  // more rounds only until two overlapped
                // A change on the service between rounds, so that each round has something to do.
                let price = "\(100 + round).5"
                let reply = try await http.send(.PATCH, "Products('HT-1000')", body: #"{"Price":\#(price)}"#)
                #expect((200..<300).contains(reply.status), "\(reply.status) \(reply.text)")
                var pids: [(pid_t, String)] = []
                for i in 0..<2 {
                    let err = dir + "/err-\(round)-\(i)"
                    let pid = try ChildProcess.spawnDetached(
                        ["refresh", "--store", dir + "/offline", "--service", server.url, "--page-size", "1"],
                        stdout: dir + "/out-\(round)-\(i)", stderr: err)
                    pids.append((pid, err))
                    if i == 0 { try await Task.sleep(for: .milliseconds(Int.random(in: 0...3, using: &r))) }
                }
                for (pid, err) in pids {
                    var status: Int32 = 0
                    let started = Date()
                    while waitpid(pid, &status, WNOHANG) == 0 {
                        if Date().timeIntervalSince(started) > 120 { kill(pid, SIGKILL) }
                        try await Task.sleep(for: .milliseconds(10))
                    }
                    let text = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
                    let code = (status >> 8) & 0xFF
                    if status == 0 {
                        completed += 1
                    } else {
                        #expect(text.contains("already running"), "round \(round): exit \(code): \(text)")
                        refused += 1
                    }
                }
                try FlushFixture.expectInSync(offline, served, "round \(round)")
            }
            print(
                "ConcurrentRefreshTests: 6 rounds of two refresh processes: \(completed) completed, \(refused) refused")
            #expect(completed >= 6)
            #expect(refused > 0, "no round had two refreshes at once: the test did not test the lock")
        }
        #expect(try offline.check().isConsistent)
    }
}
