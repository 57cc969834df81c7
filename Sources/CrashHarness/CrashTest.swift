import LMDB
package import ArgumentParser
import CommandSupport
import Foundation
import OfflineStore
import Samples
import Synchronization

/// `offline-store crashtest`: SIGKILL at random instants of writes, flushes, refreshes and the
/// server's own work, then the checks that nothing acknowledged was lost and nothing applied
/// twice. See the DocC article "Durability and crash recovery" and `CrashHarness`.
package struct CrashTest: ParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(

        commandName: "crashtest",
        abstract:
            "Kill -9 worker processes and the server at random instants; check that nothing acknowledged is lost and nothing applied twice.",
        discussion: """
            Workers (this tool, hidden verb) make seeded random changes to their own offline stores and \
            flush them to, and refresh them from, an `offline-store serve` child on a free loopback port. \
            Each round SIGKILLs a worker (or, in phase serve, the server) at an instant aimed at the phase's \
            work, checks the stores, and starts what it killed again. At the end everything is flushed and \
            refreshed and the service must hold exactly the acknowledged changes, each applied once (its \
            change log against its repeatability records). Prints a line per round and a summary; exits \
            non-zero on any violation, with the seed and the round.
            Example: offline-store crashtest --kills 100 --seed 7 --phase all
            """)
    @Option(help: "Kills to make (workers and server together).") var kills = 100
    @Option(help: "The seed of the workload and of the kill instants (default: from the clock; printed).") var seed:
        UInt64?
    @Option(
        help:
            "Worker processes, each with its own offline store (request-queue optimization on in even ones, off in odd ones)."
    ) var workers = 2
    @Option(help: "What the kills aim at: write, flush, refresh, serve or all.") var phase = "all"
    @Option(help: "A time bound in seconds: stop killing after it, even with kills left.") var seconds: Double?
    @Option(help: "Keep the stores and logs in this directory (new or empty) instead of a temporary one.") var dir:
        String?
    @Option(help: "Products each worker changes.") var keys = 12
    @Option(help: "Writer threads in each worker.") var writers = 2
    @Option(help: .hidden) var falseAckAfter: Int?
    @Option(
        help:
            "The stores' durability: full (fsync every commit) or noSync (survives a process crash, which is all a kill tests; faster)."
    ) var durability = "full"

    package func run() throws {
        try runReportingErrors {
            guard kills >= 1 else { throw CLIError("--kills must be at least 1") }
            guard (1...16).contains(workers) else { throw CLIError("--workers must be 1…16") }
            guard (1...8).contains(writers), keys >= writers, keys <= 1000 else {
                throw CLIError("--writers must be 1…8 and --keys from --writers to 1000")
            }
            guard let phase = CrashHarness.Phase(rawValue: phase) else {
                throw CLIError("--phase must be write, flush, refresh, serve or all, not '\(phase)'")
            }
            guard let durability = Durability(rawValue: durability) else {
                throw CLIError("--durability must be full or noSync, not '\(durability)'")
            }
            if let seconds, !(seconds > 0 && seconds <= 30 * 86_400) {
                throw CLIError("--seconds must be a positive number up to 2592000 (30 days), not \(seconds)")
            }
            let seed = self.seed ?? UInt64(Date().timeIntervalSince1970 * 1000) % 1_000_000_000
            let directory: String
            if let dir {
                if let items = try? FileManager.default.contentsOfDirectory(atPath: dir), !items.isEmpty {
                    throw CLIError("--dir '\(dir)' is not empty")
                }
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
                directory = dir
            } else {
                directory = try makeTemporaryDirectory(prefix: "offline-store-crashtest-")
            }
            let harness = CrashHarness(
                directory: directory, seed: seed, phase: phase, workers: workers, keys: keys, writers: writers,
                kills: kills, seconds: seconds, durability: durability,
                falseAckAfter: falseAckAfter)
            try output(
                "crashtest: seed \(seed), phase \(phase.rawValue), \(workers) workers × \(writers) writers, \(kills) kills\(seconds.map { " or \($0) s" } ?? ""), durability \(durability.rawValue), in \(directory)"
            )
            let ok = try harness.run()
            if ok {
                if dir == nil { try? FileManager.default.removeItem(atPath: directory) }
            } else {
                Output.note("crashtest: the stores and logs are kept in \(directory)\n")
                throw ExitCode.failure
            }
        }
    }
}

/// The parent of a crash test: the stores, the child processes, the model of what was
/// acknowledged, the kills and the checks.
final class CrashHarness {
    enum Phase: String, CaseIterable { case write, flush, refresh, serve, all }

    let directory: String
    let seed: UInt64
    let phase: Phase
    let workerCount: Int
    let keys: Int
    let writers: Int
    let killTarget: Int
    let seconds: Double?
    let durability: Durability
    /// Worker 0 reports a change it never made after this many (the test that a loss is caught).
    let falseAckAfter: Int?
    var rng: _SplitMix
    let start = Date()

    var server: ServerChild!
    var workers: [WorkerChild?] = []
    var logs: [WorkerLog] = []
    var violations: [String] = []
    var round = 0
    var totals = Totals()
    /// The served store's change-log position and repeatability-record count before any flush.
    var baseline = (changes: UInt64(0), records: 0)

    struct Totals {
        var kills = 0, workerKills = 0, serverKills = 0
        var lost = 0, halfThere = 0, duplicated = 0
        var landed = 0, notLanded = 0, sentLeft = 0, unaimed = 0
    }

    init(
        directory: String, seed: UInt64, phase: Phase, workers: Int, keys: Int, writers: Int, kills: Int,
        seconds: Double?, durability: Durability, falseAckAfter: Int? = nil
    ) {
        self.falseAckAfter = falseAckAfter
        self.durability = durability
        self.directory = directory
        self.seed = seed
        self.phase = phase
        self.workerCount = workers
        self.keys = keys
        self.writers = writers
        self.killTarget = kills
        self.seconds = seconds
        self.rng = _SplitMix(state: seed)
    }

    var servedPath: String { directory + "/served" }
    var serviceFile: String { directory + "/service-url" }
    func clientPath(_ w: Int) -> String { directory + "/client-\(w)" }
    var elapsed: Double { Date().timeIntervalSince(start) }

    // MARK: The run

    /// Runs the rounds and the final check; false when anything was violated.
    package func run() throws -> Bool {
        try setUp()
        defer { tearDown() }
        while totals.kills < killTarget && elapsed < (seconds ?? .infinity) && violations.isEmpty {
            round += 1
            let p = phase == .all ? [Phase.write, .flush, .refresh, .serve][rng.below(4)] : phase
            let line = p == .serve ? try killServer() : try killWorker(p, rng.below(workerCount))
            try output("round \(round) [\(String(format: "%.1f", elapsed)) s]: \(line)")
            for (w, worker) in workers.enumerated() {
                if let worker, let why = worker.endedOnItsOwn() { violations.append("worker \(w) \(why)") }
            }
        }
        if violations.isEmpty { try finish() }
        let t = totals
        let acks = logs.reduce(0) { $0 + $1.acks }
        try output(
            "\(t.kills) kills, \(acks) operations acknowledged, \(t.lost) lost, \(t.duplicated) duplicated, \(String(format: "%.1f", elapsed)) s"
        )
        try output(
            "  (\(t.workerKills) worker kills: the change in flight landed \(t.landed) times, did not \(t.notLanded); a request was left sent \(t.sentLeft) times; \(t.serverKills) server kills; \(t.unaimed) kills at plain random instants; \(t.halfThere) half there)"
        )
        if !violations.isEmpty {
            for v in violations.prefix(20) { Output.note("violation: \(v)\n") }
            Output.note(
                "crashtest FAILED in round \(round) with seed \(seed) (phase \(phase.rawValue), \(workerCount) workers): rerun with --seed \(seed) --phase \(phase.rawValue) --workers \(workerCount) --kills \(round); kill instants depend on timing, so a rerun aims at the same phases but not the same instants\n"
            )
            return false
        }
        return true
    }

    func setUp() throws {
        let metadata = Array(SampleData.metadata.utf8)
        var servedConfiguration = SampleData.configuration
        servedConfiguration.durability = durability
        do {
            let served = try OfflineStore.create(at: servedPath, metadata: metadata, configuration: servedConfiguration)
            for set in SampleData.setsInLoadOrder {
                _ = try served.load(set: set, json: Array(SampleData.json(set).utf8))
            }
            baseline = (try served.changeToken(), try served.repeatRecordCount())
        }
        for w in 0..<workerCount {
            var configuration = SampleData.configuration
            configuration.requestQueueOptimization = w % 2 == 0
            configuration.durability = durability
            configuration.definingRequests = [
                DefiningRequest(name: "Products", url: "Products"),
                DefiningRequest(name: "Orders", url: "SalesOrders?$expand=Items"),
            ]
            let client = try OfflineStore.create(at: clientPath(w), metadata: metadata, configuration: configuration)
            for set in SampleData.setsInLoadOrder {
                _ = try client.load(set: set, json: Array(SampleData.json(set).utf8))
            }
            logs.append(
                WorkerLog(
                    acked: Dictionary(
                        uniqueKeysWithValues: CrashModel.keys(worker: w, count: keys).map { ($0, "absent") })))
        }
        try startServer()
        for w in 0..<workerCount { workers.append(try startWorker(w)) }
    }

    func tearDown() {
        for case let worker? in workers { worker.kill() }
        workers = workers.map { _ in nil }
        server?.kill()
    }

    func startServer() throws {
        let lifetime = max(60, (seconds ?? 3 * 3600) - elapsed + 600)
        server = try ServerChild.start(
            store: servedPath, lifetime: lifetime, logDir: directory, number: totals.serverKills)
        let tmp = serviceFile + ".tmp"
        try Array(server.url.utf8).withUnsafeBytes { bytes in
            guard FileManager.default.createFile(atPath: tmp, contents: Data(bytes)) else {
                throw CLIError("cannot write '\(tmp)'")
            }
        }
        guard rename(tmp, serviceFile) == 0 else {
            throw CLIError("cannot rename '\(tmp)': \(String(cString: strerror(errno)))")
        }
    }

    func startWorker(_ w: Int) throws -> WorkerChild {
        let args: [String] =
            [
                "_crash-worker", "--store", clientPath(w), "--service-file", serviceFile, "--seed",
                String(rng.next() % 1_000_000_000),
                "--worker", String(w), "--keys", String(keys), "--writers", String(writers),
            ]
            + (w == 0 ? falseAckAfter.map { ["--false-ack-after", String($0)] } ?? [] : [])
        return try WorkerChild.start(args, log: logs[w], stderr: directory + "/worker-\(w).err")
    }

    // MARK: Kills

    /// Waits for the next start of `activity` in worker `w`'s reports, then for a random part of
    /// the time the last one took; or, one kill in five, just a random time. Returns what it did.
    func aim(_ activity: String, worker w: Int) -> String {
        if rng.below(5) == 0 {
            let ms = rng.below(400)
            usleep(UInt32(ms * 1000))
            totals.unaimed += 1
            return "at random, \(ms) ms on"
        }
        let log = logs[w]
        let seen = log.begins(activity)
        let deadline = Date().addingTimeInterval(15)
        while log.begins(activity) == seen && Date() < deadline && !(workers[w]?.hasEnded ?? true) { usleep(300) }
        let fallback = ["op": 0.01, "flush": 0.1, "refresh": 0.3][activity] ?? 0.1
        let last = log.duration(activity) ?? fallback
        let delay = Double(rng.next() >> 11) * 0x1p-53 * last * 1.1
        usleep(UInt32(delay * 1e6))
        let what = activity == "op" ? "a write" : "a " + activity
        return
            "\(String(format: "%.1f", delay * 1000)) ms into \(what) of worker \(w) (the last took \(String(format: "%.1f", last * 1000)) ms)"
    }

    func killServer() throws -> String {
        let how = aim("flush", worker: rng.below(workerCount))
        server.kill()
        totals.kills += 1
        totals.serverKills += 1
        let report = try OfflineStore.check(at: servedPath)
        if !report.isConsistent { violations.append("round \(round): the served store after a kill: \(report)") }
        try startServer()
        return
            "server killed \(how); served store \(report.isConsistent ? "consistent" : "INCONSISTENT"); restarted at \(server.url)"
    }

    func killWorker(_ p: Phase, _ w: Int) throws -> String {
        let how = aim(p == .write ? "op" : p.rawValue, worker: w)
        guard let worker = workers[w] else { return "worker \(w) is not running" }
        let signal = worker.kill()
        workers[w] = nil
        if signal != SIGKILL {
            violations.append(
                "round \(round): worker \(w) had ended before the kill (\(worker.endDescription)): \(worker.stderrTail)"
            )
        }
        totals.kills += 1
        totals.workerKills += 1
        let found = try checkWorker(w)
        workers[w] = try startWorker(w)
        return "worker \(w) killed \(how); \(found)"
    }

    // MARK: Checks

    /// After worker `w` was killed: its store passes `check`; every acknowledged change is there
    /// and, unless the service already has it, queued; a change in flight is all there or not at
    /// all; nothing was refused. Takes what landed into the model. Returns a summary.
    func checkWorker(_ w: Int) throws -> String {
        let (acked, inFlight) = logs[w].takeForCheck()
        var model = acked
        let store = try OfflineStore.open(at: clientPath(w), readOnly: true)
        let report = try store.check()
        if !report.isConsistent { violations.append("round \(round): check of client store \(w): \(report)") }
        let ids = CrashModel.keys(worker: w, count: keys)
        let actual = try Dictionary(uniqueKeysWithValues: ids.map { ($0, try CrashModel.state(store, $0)) })
        let flying = Set(inFlight.flatMap { $0.ops.map(\.id) })
        for id in ids where !flying.contains(id) && actual[id] != model[id] {
            totals.lost += 1
            violations.append("round \(round): worker \(w): \(id) is \(actual[id]!), acknowledged \(model[id]!)")
        }
        var landed = 0
        for f in inFlight {
            let changed = f.ops.filter { actual[$0.id] != model[$0.id] }
            if changed.isEmpty {
                totals.notLanded += 1
            } else if changed.count == f.ops.count
                && f.ops.allSatisfy({ ($0.kind == "delete") == (actual[$0.id] == "absent") })
            {
                totals.landed += 1
                landed += 1
                for op in f.ops { model[op.id] = actual[op.id] }
            } else {
                totals.halfThere += 1
                violations.append(
                    "round \(round): worker \(w): the change in flight (\(f.ops.map { "\($0.kind):\($0.id)" })) is half there: \(f.ops.map { "\($0.id)=\(actual[$0.id]!) (was \(model[$0.id]!))" })"
                )
            }
        }
        logs[w].setModel(model)
        let queue = try store.entities("RequestQueue?$filter=EntitySet eq 'Products'")
        func text(_ p: Properties, _ name: String) -> String { if case .string(let s)? = p[name] { s } else { "" } }
        let queued = Set(
            ids.filter { id in
                queue.contains { text($0, "EntityKey").contains("'\(id)'") && text($0, "Status") != "error" }
            })
        let sent = queue.filter { text($0, "Status") == "sent" }.count
        totals.sentLeft += sent > 0 ? 1 : 0
        let refused = try store.entities("ErrorArchive")
        if !refused.isEmpty {
            totals.duplicated += refused.count
            violations.append(
                "round \(round): worker \(w): the service refused \(refused.count) requests (applied twice?): \(refused.prefix(3).map(\.description))"
            )
        }
        let served = try OfflineStore.open(at: servedPath, readOnly: true)
        var unqueued = 0
        for id in ids {
            let theirs = try CrashModel.state(served, id)
            if theirs != actual[id] && !queued.contains(id) {
                unqueued += 1
                violations.append(
                    "round \(round): worker \(w): \(id) is \(actual[id]!) here and \(theirs) on the service, and no request is queued for it"
                )
            }
        }
        totals.lost += unqueued
        return
            "check \(report.isConsistent ? "ok" : "FAILED"), \(logs[w].acks) acknowledged, in flight \(inFlight.isEmpty ? "nothing" : "\(inFlight.count) (\(landed) landed)"), \(queue.count) queued (\(sent) sent)"
    }

    /// The end: every worker stopped (and checked), each store flushed to the end and then
    /// refreshed; the service holds exactly the model, every client what the service holds, and
    /// the service's change log grew by exactly the number of repeatable writes it recorded.
    func finish() throws {
        for w in 0..<workerCount {
            if let worker = workers[w] { worker.kill() }
            workers[w] = nil
            let found = try checkWorker(w)
            try output("final: worker \(w) stopped; \(found)")
        }
        guard violations.isEmpty else { return }
        let url = server.url
        for pass in ["flush", "refresh"] {
            for w in 0..<workerCount {
                let store = try OfflineStore.open(at: clientPath(w))
                let line: String = try waitFor {
                    if pass == "flush" {
                        let r = try await store.flush(
                            serviceRoot: url, category: nil, batchSize: 50, headers: [], reconcile: false, progress: nil
                        )
                        return r.stopped == nil && r.archived == 0 && r.left == 0
                            ? "flushed: \(r)" : "FLUSH INCOMPLETE: \(r)"
                    }
                    return "refreshed: \(try await store.refresh(serviceRoot: url))"
                }
                if line.hasPrefix("FLUSH") { violations.append("final flush of worker \(w): \(line)") }
                try output("final: worker \(w) \(line)")
            }
        }
        let served = try OfflineStore.open(at: servedPath, readOnly: true)
        let theirs = try Self.contents(served, set: "Products")
        for w in 0..<workerCount {
            let store = try OfflineStore.open(at: clientPath(w), readOnly: true)
            let model = logs[w].model
            for id in CrashModel.keys(worker: w, count: keys) {
                let s = try CrashModel.state(served, id), mine = try CrashModel.state(store, id)
                if s != model[id] {
                    totals.lost += 1
                    violations.append("final: the service has \(id) as \(s); acknowledged \(model[id]!)")
                }
                if mine != model[id] {
                    violations.append("final: worker \(w)'s store has \(id) as \(mine); acknowledged \(model[id]!)")
                }
            }
            let mine = try Self.contents(store, set: "Products")
            if mine != theirs {
                violations.append(
                    "final: worker \(w)'s Products differ from the service's: only here \(mine.subtracting(theirs).sorted().prefix(5)), only there \(theirs.subtracting(mine).sorted().prefix(5))"
                )
            }
            let pending = try store.pendingRequestCount(), refused = try store.entities("ErrorArchive").count
            if pending != 0 || refused != 0 {
                violations.append("final: worker \(w): \(pending) requests still queued, \(refused) refused")
            }
            totals.duplicated += refused
            let report = try store.check()
            if !report.isConsistent { violations.append("final: check of client store \(w): \(report)") }
        }
        let changes = Int(try served.changeToken() - baseline.changes),
            records = try served.repeatRecordCount() - baseline.records
        try output("final: the service applied \(changes) changes and recorded \(records) repeatable requests")
        if changes != records {
            totals.duplicated += max(0, changes - records)
            violations.append(
                "final: the service's change log grew by \(changes) entries but it recorded \(records) repeatable requests: \(changes > records ? "a request was applied more than once or without its record" : "a record without its change")"
            )
        }
        let status = server.stop()
        if status != 0 {
            violations.append("final: serve did not stop cleanly (status \(status.map(String.init) ?? "none"))")
        }
        let report = try OfflineStore.check(at: servedPath)
        if !report.isConsistent { violations.append("final: check of the served store: \(report)") }
    }

    /// Every entity of `set` as a line (nulls left out), for comparing stores.
    static func contents(_ store: OfflineStore, set: String) throws -> Set<String> {
        var out: Set<String> = []
        try store.scan(set: set) { e in
            out.insert(try store.json(set: set, entity: Properties(e.filter { !$0.value.isNull })))
            return true
        }
        return out
    }
}

/// Runs `body` on the concurrency pool and waits for its value on this thread.
func waitFor<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let result = Mutex<Result<T, any Error>?>(nil)
    try blocking {
        do { let v = try await body(); result.withLock { $0 = .success(v) } } catch {
            result.withLock { $0 = .failure(error) }
        }
    }
    return try result.withLock { $0! }.get()
}
