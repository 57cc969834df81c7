import Foundation
import Testing
@testable import OfflineStore
import Storage
import TestSupport

/// `offline-store migrate` as a child process, SIGKILLed at random instants (issue 38, item 6):
/// each kill leaves the old store or the new one — never a mix — and `check` passes on it,
/// before and after it is opened writable (which rebuilds the indexes the migration emptied).
@Suite(.soak, .checksStores, .serialized) struct MigrationKillTests {
    static func env(_ name: String, _ fallback: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? fallback
    }

    /// `MIGRATE_KILL_NOTES` (40,000) notes with Legacy and Priority, and pending changes to some;
    /// `MIGRATE_KILLS` (12) kills within `MIGRATE_KILL_SECONDS` (60).
    @Test func aMigrationKilledAtRandomInstantsLeavesTheOldStoreOrTheNew() async throws {
        let notes = Self.env("MIGRATE_KILL_NOTES", 40_000)
        let kills = Self.env("MIGRATE_KILLS", 12)
        let budget = Double(Self.env("MIGRATE_KILL_SECONDS", 60))
        let template = tempDir() + "/template"
        var configuration = StoreConfiguration()
        configuration.indexes = ["Notes": ["Legacy", "Priority"]]
        do {
            let store = try OfflineStore.create(
                at: template, metadata: Array(MigrationTests.before.utf8), configuration: configuration)
            var json = #"{"value":["#
            for n in 1...notes {
                json +=
                    (n > 1 ? "," : "")
                    + #"{"NoteID":\#(n),"Title":"note \#(n)","Legacy":"l\#(n)","Priority":\#(n % 100)}"#
            }
            json += "]}"
            _ = try store.load(set: "Notes", json: Array(json.utf8))
            for n in stride(from: 1, through: min(notes, 200), by: 2) {
                try await store.update(set: "Notes", key: [.int(Int64(n))], changes: ["Legacy": .string("changed")])
            }
            try await store.create(
                set: "Notes", entity: ["Title": .string("new"), "Legacy": .string("x"), "Priority": .int(5)])
        }
        let metadataPath = tempDir() + "/after.xml"
        try Data(MigrationTests.after.utf8).write(to: URL(fileURLWithPath: metadataPath))
        let logDir = tempDir() + "/logs"
        try FileManager.default.createDirectory(atPath: logDir, withIntermediateDirectories: true)
        func copy(_ n: Int) throws -> String {
            let path = tempDir() + "/kill-\(n)"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: template + "/data.mdb", toPath: path + "/data.mdb")
            return path
        }
        func migrate(_ path: String) throws -> pid_t {
            try ChildProcess.spawnDetached(
                ["migrate", "--store", path, "--metadata", metadataPath], stdout: logDir + "/out",
                stderr: logDir + "/err")
        }
        // One migration to completion: how long one takes.
        let whole = try copy(0)
        let start = Date()
        let wholeStatus = RefreshKillTests.reap(try migrate(whole), wait: true)
        #expect(wholeStatus == 0, "\((try? String(contentsOfFile: logDir + "/err", encoding: .utf8)) ?? "")")
        let duration = Date().timeIntervalSince(start)
        var random = SeededRandom(seed: testSeed("MigrationKillTests (\(notes) notes)"))
        var killed = 0, completed = 0, old = 0, new = 0, rounds = 0
        let began = Date()
        while killed < kills && (Date().timeIntervalSince(began) < budget || killed < 3) {
            rounds += 1
            let path = try copy(rounds)
            let pid = try migrate(path)
            let delay = Double(random.next() % 1_000_000) / 1_000_000 * duration
            try await Task.sleep(nanoseconds: UInt64(delay * 1e9))
            if RefreshKillTests.reap(pid) != nil {
                completed += 1
            } else {
                kill(pid, SIGKILL)
                if RefreshKillTests.reap(pid, wait: true) == -SIGKILL { killed += 1 } else { completed += 1 }
            }
            let report = try OfflineStore.check(at: path)
            #expect(report.isConsistent, "round \(rounds), read-only: \(report)")
            let store = try OfflineStore.open(at: path)
            #expect(try store.check().isConsistent, "round \(rounds), opened writable")
            #expect(try store.count(set: "Notes") == notes + 1)
            let first = try #require(try store.get(set: "Notes", key: [.int(1)]))
            if store.schema.entityType(ofSet: "Notes")?.property("Legacy") != nil {
                old += 1
                #expect(first["Legacy"] == .string("changed") && first["Priority"] == .int(1), "old: \(first)")
                #expect(try store.entities("Notes?$filter=Legacy eq 'changed'").count == min(notes, 200) / 2)
            } else {
                new += 1
                #expect(first["Legacy"] == nil && first["Priority"] == .int(1), "new: \(first)")
                #expect(try store.entities("Notes?$filter=Priority eq 5").count == notes / 100 + 1)
            }
            if !report.isConsistent { break }
            try? FileManager.default.removeItem(atPath: path)
        }
        print(
            "MigrationKillTests: \(notes) notes, a whole migration \(String(format: "%.2f", duration)) s; \(rounds) rounds: \(killed) kills, \(completed) completed; \(old) left the old store, \(new) the new"
        )
        #expect(killed >= min(kills, 3))
    }
}
