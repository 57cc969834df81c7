import Foundation
import OfflineStore
import Samples
import Synchronization
import TestSupport
import Testing

/// Issue 41, item 5: progress the same in every long verb — on stderr, line by line when stderr is
/// not a terminal, redrawn in place when it is — and the summary on a line of its own, with the
/// time the verb took, on stdout with no progress in it.
@Suite(.checksStores, .runsOffThePool) struct ProgressTests {
    /// Every report draws a line: small stores are done before the default interval.
    static let everyReport = ["OFFLINE_STORE_PROGRESS_INTERVAL_MS": "0"]

    /// `r` succeeded; stderr has progress lines of `verb` with the rate and the elapsed time (and
    /// `shows`, when given), whole lines and no carriage return; stdout is one summary line that
    /// starts with `summary` and gives the time taken, with nothing of the progress.
    func expectProgress(
        _ r: CLI.Result, verb: String, shows: String? = nil, summary: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)", sourceLocation: sourceLocation)
        let lines = r.stderr.split(separator: "\n").map(String.init)
        let progress = lines.filter { $0.hasPrefix(verb + ": ") || $0.hasPrefix(verb + " ") }
        #expect(
            !progress.isEmpty && progress.allSatisfy { $0.contains("/s, ") && $0.contains(" elapsed") },
            "\(r.stderr)", sourceLocation: sourceLocation)
        if let shows {
            #expect(progress.contains { $0.contains(shows) }, "\(r.stderr)", sourceLocation: sourceLocation)
        }
        #expect(
            !r.stderr.contains("\r") && r.stderr.hasSuffix("\n"), "\(r.stderr.debugDescription)",
            sourceLocation: sourceLocation)
        #expect(
            r.stdout.hasPrefix(summary) && !r.stdout.contains("elapsed") && !r.stdout.contains("\r"),
            "\(r.stdout)", sourceLocation: sourceLocation)
        let first = r.stdout.split(separator: "\n").first.map(String.init) ?? ""
        #expect(
            first.range(of: #" in [0-9]+\.[0-9]{2} s"#, options: .regularExpression) != nil, "\(r.stdout)",
            sourceLocation: sourceLocation)
    }

    /// A store made by `init` from the sample `$metadata`, nothing loaded.
    func emptySampleStore() async throws -> String {
        let dir = tempDir()
        try write(SampleData.metadata, to: dir + "/metadata.xml")
        let r = try await CLI.run(["init", "--store", dir + "/store", "--metadata", dir + "/metadata.xml"])
        #expect(r.status == 0, "\(r.stderr)")
        return dir
    }

    @Test func checkShowsProgressAndTheTimeItTook() async throws {
        let dir = try await CLITests().sampleStore()
        let r = try await CLI.run(["check", "--store", dir + "/store"], environment: Self.everyReport)
        expectProgress(r, verb: "check", shows: "rows (", summary: "ok: ")
        // Done of the total: the last line has them all.
        let last = r.stderr.split(separator: "\n").last.map(String.init) ?? ""
        let counts = last.split(separator: " ").dropFirst().first?.split(separator: "/").compactMap { Int($0) } ?? []
        #expect(counts.count == 2 && counts[0] == counts[1] && counts[0] > 0, "\(last)")
    }

    @Test func loadAndGenerateShowProgressAndTheTimeTheyTook() async throws {
        let dir = try await emptySampleStore()
        try write(SampleData.json("BusinessPartners"), to: dir + "/bp.json")
        let load = try await CLI.run(
            ["load", "--store", dir + "/store", "--set", "BusinessPartners", dir + "/bp.json"],
            environment: Self.everyReport)
        expectProgress(load, verb: "load BusinessPartners", shows: "(100%)", summary: "loaded ")
        let generate = try await CLI.run(
            ["generate", "--store", dir + "/store", "--set", "Products", "--count", "300", "--batch", "100"],
            environment: Self.everyReport)
        expectProgress(generate, verb: "generate Products", shows: "200/300 entities (66%)", summary: "generated 300")
        #expect(generate.stderr.contains(" left"), "the time left, when the total is known: \(generate.stderr)")
    }

    @Test func refreshAndFlushShowProgressAndTheTimeTheyTook() async throws {
        let servedPath = try await ServeTests.sampleStore()
        let dir = try await emptySampleStore()
        let store = dir + "/store"
        try await withServer(servedPath) { _, server in
            #expect(try await CLI.run(["define", "--store", store, "All", "Products"]).status == 0)
            let refresh = try await CLI.run(
                ["refresh", "--store", store, "--service", server.url, "--page-size", "10"],
                environment: Self.everyReport)
            expectProgress(refresh, verb: "refresh", shows: "/24 entities (", summary: "refreshed 1 request")
            #expect(refresh.stderr.contains("pages; All: full"), "\(refresh.stderr)")
            do {
                let offline = try OfflineStore.open(at: store)
                for id in ["HT-1001", "HT-1002", "HT-1003"] {
                    try await offline.update(set: "Products", key: [.string(id)], changes: ["Name": .string("renamed")])
                }
            }
            let flush = try await CLI.run(
                ["flush", "--store", store, "--service", server.url, "--batch-size", "1"],
                environment: Self.everyReport)
            expectProgress(flush, verb: "flush", shows: "/3 requests (", summary: "flush: sent 3, succeeded 3")
        }
    }

    @Test func migrateShowsProgressAndTheTimeItTook() async throws {
        let path = try MigrationTests.store("offline")
        let dir = tempDir()
        try write(MigrationTests.after, to: dir + "/after.xml")
        let r = try await CLI.run(
            ["migrate", "--store", path, "--metadata", dir + "/after.xml"], environment: Self.everyReport)
        expectProgress(r, verb: "migrate", shows: "rows (", summary: "migrated \(path) in ")
    }

    /// The library's callbacks: `check` counts every entity and index entry up to its total,
    /// never backwards; `migrate` the rows it rewrites, up to what its report says.
    @Test func checkAndMigrateReportTheirProgressToAProgram() async throws {
        let dir = try await CLITests().sampleStore()
        let seen = Mutex<[CheckProgress]>([])
        let report = try OfflineStore.check(at: dir + "/store") { p in seen.withLock { $0.append(p) } }
        let reports = seen.withLock { $0 }
        #expect(report.isConsistent && report.entities > 0)
        #expect(reports.first?.checked == 0 && reports.first?.set == "BusinessPartners", "\(reports.prefix(2))")
        #expect(zip(reports, reports.dropFirst()).allSatisfy { $0.checked <= $1.checked && $0.total == $1.total })
        let last = try #require(reports.last)
        #expect(last.set.isEmpty && last.checked == last.total, "\(last)")
        #expect(last.total == report.entities + report.indexEntries, "\(last) \(report)")

        let path = try MigrationTests.store("offline")
        let rewritten = Mutex<[(Int, Int)]>([])
        let migrated = try OfflineStore.migrate(at: path, metadata: Array(MigrationTests.after.utf8)) { done, total in
            rewritten.withLock { $0.append((done, total)) }
        }
        let counts = rewritten.withLock { $0 }
        #expect(migrated.rewrittenRows > 0)
        #expect(counts.last.map { $0 == (migrated.rewrittenRows, migrated.rewrittenRows) } == true, "\(counts)")
    }

    /// Not a terminal and no interval set: a line at most once a second, so a short run prints none.
    @Test func aShortRunPrintsNoProgressByDefault() async throws {
        let dir = try await CLITests().sampleStore()
        let r = try await CLI.run(["check", "--store", dir + "/store"])
        #expect(r.status == 0 && r.stderr.isEmpty && r.stdout.hasPrefix("ok: "), "\(r.stderr)")
    }

    @Test func aBadIntervalIsAClearError() async throws {
        let dir = try await CLITests().sampleStore()
        let r = try await CLI.run(
            ["check", "--store", dir + "/store"], environment: ["OFFLINE_STORE_PROGRESS_INTERVAL_MS": "soon"])
        #expect(r.status == 1, "\(r.stdout)")
        #expect(
            r.stderr.contains("OFFLINE_STORE_PROGRESS_INTERVAL_MS must be a whole number of milliseconds"),
            "\(r.stderr)")
    }

    /// On a terminal the line is redrawn in place and cleared at the end, so the summary that
    /// follows starts at the beginning of a line.
    @Test(arguments: ["check", "load"]) func onATerminalTheLineIsRedrawnAndCleared(verb: String) async throws {
        let dir = try await CLITests().sampleStore()
        let args =
            verb == "check"
            ? ["check", "--store", dir + "/store"]
            : ["load", "--store", dir + "/store", "--set", "Products", dir + "/Products.json"]
        // A pseudo-terminal: /dev/ptmx, unlocked (TIOCSPTLCK), its other end named by TIOCGPTN.
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        try #require(master >= 0)
        defer { close(master) }
        var unlock: Int32 = 0
        var number: Int32 = 0
        try #require(ioctl(master, 0x4004_5431, &unlock) == 0 && ioctl(master, 0x8004_5430, &number) == 0)
        let terminal = "/dev/pts/\(number)"
        let out = dir + "/stdout"
        let pid = try ChildProcess.spawn(
            CLI.executable, args, stdout: out, stderr: terminal,
            environment: Self.everyReport)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        #expect(status == 0)
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var poller = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
        while poll(&poller, 1, 200) > 0 {
            let n = read(master, &buffer, buffer.count)
            if n <= 0 { break }
            bytes += buffer[0..<n]
        }
        let shown = String(decoding: bytes, as: UTF8.self)
        let label = verb == "check" ? "check: " : "load Products: "
        #expect(shown.hasPrefix("\r\u{1B}[K" + label) && !shown.contains("\n"), "\(shown.debugDescription)")
        #expect(shown.hasSuffix("\r\u{1B}[K"), "the line is cleared at the end: \(shown.debugDescription)")
        let summary = String(decoding: FileManager.default.contents(atPath: out) ?? Data(), as: UTF8.self)
        #expect(
            summary.hasPrefix(verb == "check" ? "ok: " : "loaded 24 entities in ") && summary.hasSuffix(" s\n"),
            "\(summary)")
    }
}
