import Foundation
import Testing
import TestSupport
@testable import OfflineStore
@testable import Queue
@testable import Sync
import Storage

/// `offline-store flush` SIGKILLed at random instants while it uploads to a real `serve`, then
/// started again: the service applies every change exactly once. Each round the test makes local
/// changes (creates with keys the service assigns and their children, deep inserts, creates with
/// unique keys, updates, deletes) and kills a flush; reconciliation is off (`--no-reconcile`), so a change
/// applied twice would meet 409, 404 or 412 and land in ErrorArchive — which stays empty. Every
/// few rounds a flush runs to the end: the offline store then equals the service's store, entity
/// for entity, and the service's repeatability records are exactly the requests that left the
/// queue (one each). It runs until `FLUSH_KILLS` (default 24) flushes were killed or
/// `FLUSH_KILL_SECONDS` (default 60) passed; set both to raise it.
@Suite(.soak, .checksStores) struct FlushKillTests {
    @Test func aFlushKilledAtRandomAppliesEveryChangeExactlyOnce() async throws {
        var rng = SeededRandom(seed: testSeed("aFlushKilledAtRandomAppliesEveryChangeExactlyOnce"))
        let env = ProcessInfo.processInfo.environment
        let kills = env["FLUSH_KILLS"].flatMap(Int.init) ?? 24
        let seconds = env["FLUSH_KILL_SECONDS"].flatMap(Double.init) ?? 60
        let (served, path): (String, String) = try {
            let (served, store) = try FlushFixture.pair(notes: true, optimize: true)
            return (served, store.path)
        }()
        // The lifetime only bounds a server left behind. A CI run slowed this test to a minute a
        // round, so a lifetime of 4 × `seconds` + 120 s ended the server (status 0, at exactly
        // 360 s) before the final flush, which then found every connection refused.
        let server = try await ServerProcess.start(store: served, lifetime: max(1_800, seconds * 10))
        var acknowledged: Set<String> = []
        var totals = (kills: 0, finished: 0, changes: 0, sentLeft: 0, ackedByKilled: 0, completions: 0)
        let start = Date()
        var round = 0
        // Bounded by count and time; on a loaded machine (a round can take 20 s beside builds) the
        // time bound stretches, up to three times, until a kill has hit a request in flight.
        func proven() -> Bool { totals.kills >= 1 && totals.sentLeft > 0 }
        while totals.kills < kills
            && (Date().timeIntervalSince(start) < seconds
                || (!proven() && Date().timeIntervalSince(start) < 3 * seconds))
        {
            // 1. Local changes.
            let before: [Int64: String]
            do {
                let store = try OfflineStore.open(at: path)
                totals.changes += try await Self.change(store, round: round, rng: &rng)
                before = try Self.queued(store)
            }
            // 2. A flush, killed at a random instant (or done before it).
            let killed = try await Self.flushKilled(
                ["flush", "--store", path, "--service", server.url, "--batch-size", "2", "--no-reconcile"],
                after: Int.random(in: 5...250, using: &rng))
            if killed { totals.kills += 1 } else { totals.finished += 1 }
            // 3. After it: consistent, nothing refused, every request pending or sent.
            let store = try OfflineStore.open(at: path)
            let context = "round \(round)"
            let report = try store.check()
            #expect(report.isConsistent, "\(context): \(report)")
            let errors = try FlushFixture.errors(store)
            #expect(errors.isEmpty, "\(context): refused (applied twice?): \(errors)")
            let after = try Self.queued(store)
            let gone = Set(before.keys).subtracting(after.keys)
            acknowledged.formUnion(gone.map { before[$0]! })
            if killed { totals.ackedByKilled += gone.count }
            totals.sentLeft += try FlushFixture.queue(store).filter { $0.status == .sent }.count
            if !report.isConsistent || !errors.isEmpty { break }
            // 4. Now and then, and at the end: a flush to the end, and the two stores compared.
            if round % 6 == 5 || totals.kills >= kills || Date().timeIntervalSince(start) >= seconds {
                totals.completions += 1
                let queued = try Self.queued(store)
                let done = try await store.flush(
                    serviceRoot: server.url, category: nil, batchSize: 3, headers: [], reconcile: false, progress: nil)
                #expect(
                    done.stopped == nil && done.archived == 0 && done.left == 0,
                    "\(context): \(done); \(done.stopped == nil ? "" : server.diagnosis())")
                acknowledged.formUnion(queued.values)
                try FlushFixture.expectInSync(store, served, context)
                let records = try FlushFixture.repeatIDs(served)
                #expect(records.count == Set(records).count)
                #expect(
                    Set(records) == acknowledged,
                    "\(context): the service recorded \(records.count) requests, \(acknowledged.count) left the queue")
            }
            round += 1
        }
        #expect(await server.stop() == 0)
        print(
            "flush kill test: \(round) rounds, \(totals.kills) flushes killed, \(totals.finished) done before the kill; \(totals.changes) local changes, \(acknowledged.count) requests applied once each (\(totals.ackedByKilled) settled by flushes later killed); a request was left sent by a kill \(totals.sentLeft) times; \(totals.completions) full comparisons; \(String(format: "%.1f", Date().timeIntervalSince(start))) s"
        )
        #expect(totals.kills >= 1, "no flush killed in \(3 * seconds) s")
        #expect(totals.sentLeft > 0, "no kill hit a request in flight: the test proves little")
    }

    /// Request id → repeatability id of every queued request that goes as a request of its own
    /// (not the children of a deep insert, which go inline in their parent's).
    static func queued(_ store: OfflineStore) throws -> [Int64: String] {
        let records = try FlushFixture.queue(store)
        var roots: [String: Int64] = [:]
        for r in records where r.deepInsert {
            roots[r.transactionID ?? ""] = min(roots[r.transactionID ?? ""] ?? .max, r.id)
        }
        return Dictionary(
            uniqueKeysWithValues: records.filter { !$0.deepInsert || roots[$0.transactionID ?? ""] == $0.id }.map {
                ($0.id, $0.repeatabilityID.description)
            })
    }

    /// A few random local changes; returns how many.
    static func change(_ store: OfflineStore, round: Int, rng: inout SeededRandom) async throws -> Int {
        var n = 0
        let properties: Properties = [
            "Title": .string("r\(round)"), "Amount": .decimal(EDMDecimal("\(round).\(round % 10)5")!),
        ]
        let noteID: Value
        if Int.random(in: 0..<3, using: &rng) == 0 {
            // A deep insert: the note with a comment and a line inline, one POST.
            let made = try await store.create(
                set: "Notes",
                deep: NewEntity(
                    properties,
                    related: [
                        "Comments": [NewEntity(["Text": .string("deep c\(round)")])],
                        "Lines": [NewEntity(["LineNo": .int(9), "Text": .string("deep l\(round)")])],
                    ]))
            noteID = made[0].entity!["NoteID"]!
            n += 3
        } else {
            noteID = try await store.create(set: "Notes", entity: properties).entity!["NoteID"]!
            n += 1
        }
        if Int.random(in: 0..<2, using: &rng) == 0 {
            try await store.create(set: "Comments", entity: ["NoteID": noteID, "Text": .string("c\(round)")])
            n += 1
        }
        if Int.random(in: 0..<3, using: &rng) == 0 {
            try await store.create(
                set: "Lines", entity: ["NoteID": noteID, "LineNo": .int(1), "Text": .string("l\(round)")])
            n += 1
        }
        let notes = try store.entities("Notes?$select=NoteID").compactMap { $0["NoteID"] }
        let target = [noteID, notes.randomElement(using: &rng)!, .null][Int.random(in: 0..<3, using: &rng)]
        try await store.create(
            set: "Tags", entity: ["TagID": .string("T\(round)"), "Label": .string("t"), "NoteID": target])
        n += 1
        for _ in 0..<Int.random(in: 1...2, using: &rng) {
            let id = notes.randomElement(using: &rng)!
            try await store.update(
                set: "Notes", key: [id], changes: ["Title": .string("u\(round)-\(n)")],
                options: .init(nonMergeable: Int.random(in: 0..<3, using: &rng) == 0))
            n += 1
        }
        if Int.random(in: 0..<4, using: &rng) == 0,
            let tag = try store.entities("Tags?$select=TagID").compactMap({ $0["TagID"] }).randomElement(using: &rng)
        {
            try await store.delete(set: "Tags", key: [tag])
            n += 1
        }
        if Int.random(in: 0..<6, using: &rng) == 0, notes.count > 2 {
            try await store.delete(set: "Notes", key: [notes.randomElement(using: &rng)!])
            n += 1
        }
        return n
    }

    /// Starts `offline-store` with `args` and SIGKILLs it after `ms` milliseconds (reaping it
    /// either way); true when the kill ended it, false when it had ended by itself.
    static func flushKilled(_ args: [String], after ms: Int) async throws -> Bool {
        let pid = try spawn(args)
        try await Task.sleep(for: .milliseconds(ms))
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) == 0 { try await Task.sleep(for: .milliseconds(2)) }
        return status & 0x7F == SIGKILL
    }

    /// Starts `offline-store` with `args`, output to /dev/null; returns its PID.
    static func spawn(_ args: [String]) throws -> pid_t {
        try ChildProcess.spawnDetached(args, stdout: "/dev/null", stderr: "/dev/null")
    }
}
