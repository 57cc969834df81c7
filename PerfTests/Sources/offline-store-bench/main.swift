import Foundation
import OfflineStore
import Samples

// offline-store-bench [--quick | --tiny | --count N] [--seed S] [--dir DIR] [--keep] [--json FILE] [--only changes]
//
// Builds the same generated SalesOrderItems in raw LMDB, OfflineStore and SQLite (GRDB), runs every
// workload against all three, prints one table and writes it as JSON (PerfTests/results/latest.json).

struct Options {
    var count = 1_000_000
    var mode = "full"
    var seed: UInt64 = 1
    var dir: String? = nil
    var keep = false
    /// `--only changes`: only the bulk load and the local-change workloads.
    var only: String? = nil
    /// Runs one workload against one contestant for a while, for a profiler (`profileWorkloads`).
    var profile: (workload: String, contestant: String)? = nil
    /// Concurrent writers for `--profile changes`.
    var writers = 64
    /// `--nosync` (with `--profile` only): OfflineStore's commits are not fsynced, so a profile of
    /// the local changes shows their CPU rather than this machine's disk.
    var noSync = false
    /// The `offline-store` executable for the load through the CLI (`CLILoad.swift`); by default
    /// the root package's build of the same configuration, if there is one.
    var offlineStore: String? = nil
    var json: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("results/latest.json").path

    static func parse(_ args: [String]) throws -> Options {
        var o = Options()
        if let env = ProcessInfo.processInfo.environment["PERF_COUNT"], let n = Int(env) {
            o.count = n; o.mode = "custom"
        }
        var i = 0
        func value() throws -> String {
            i += 1
            guard i < args.count else { throw BenchError("\(args[i - 1]) needs a value") }
            return args[i]
        }
        while i < args.count {
            switch args[i] {
            case "--quick": o.count = 100_000; o.mode = "quick"
            case "--tiny": o.count = 2_000; o.mode = "tiny"
            case "--full": o.count = 1_000_000; o.mode = "full"
            case "--count":
                guard let n = Int(try value()), n >= 200 else {
                    throw BenchError(
                        "--count needs a number ≥ 200 (the local-change workloads change 146 distinct rows)")
                }
                o.count = n; o.mode = "custom"
            case "--seed":
                guard let s = UInt64(try value()) else { throw BenchError("--seed needs a number") }
                o.seed = s
            case "--dir": o.dir = try value()
            case "--keep": o.keep = true
            case "--only":
                let w = try value()
                guard w == "changes" else {
                    throw BenchError("--only changes (the local-change workloads) is the one choice")
                }
                o.only = w
            case "--json": o.json = try value()
            case "--profile":
                let w = try value()
                guard profileWorkloads.contains(w) else {
                    throw BenchError("--profile " + profileWorkloads.joined(separator: "|"))
                }
                o.profile = (w, o.profile?.contestant ?? "OfflineStore")
            case "--writers":
                guard let w = Int(try value()), (1...1_024).contains(w) else {
                    throw BenchError("--writers needs a number from 1 to 1024")
                }
                o.writers = w
            case "--nosync": o.noSync = true
            case "--offline-store": o.offlineStore = try value()
            case "--contestant":
                let c = try value()
                o.profile = (o.profile?.workload ?? "read", c)
            case "-h", "--help":
                print(
                    "usage: offline-store-bench [--quick | --tiny | --full | --count N] [--seed S] [--dir DIR] [--keep] [--json FILE] [--only changes] [--offline-store PATH] [--profile \(profileWorkloads.joined(separator: "|")) [--contestant NAME] [--writers N] [--nosync]]"
                )
                exit(0)
            default: throw BenchError("unknown argument \(args[i]) (try --help)")
            }
            i += 1
        }
        if o.offlineStore == nil {
            #if DEBUG
            let configuration = "debug"
            #else
            let configuration = "release"
            #endif
            let built = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
                    ".build/\(configuration)/offline-store"
                ).path
            if FileManager.default.isExecutableFile(atPath: built) { o.offlineStore = built }
        }
        if o.noSync && o.profile == nil {
            throw BenchError("--nosync is for --profile only: the table compares durable commits")
        }
        return o
    }
}

/// `--profile` workloads: the basic ones and the queries (`q…`: OfflineStore through URLs) and the JSON stream.
let profileWorkloads = [
    "read", "find", "scan", "load", "qkey", "qfind", "qrange", "qscan", "qcount", "qcover", "qcoverprepared",
    "qprepared", "json", "sort", "changes", "batch",
]

/// A pointer that threads fill at disjoint indexes.
struct Shared<T>: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<T>
    init(_ p: UnsafeMutablePointer<T>) { pointer = p }
}

func log(_ s: String) {
    FileHandle.standardError.write(Data((s + "\n").utf8))
}

func run() throws {
    let args = Array(CommandLine.arguments.dropFirst())
    if args.first == "--sqlite-import" {
        // The child process of the load through the CLI (CLILoad.swift).
        guard args.count == 3 else { throw BenchError("--sqlite-import FILE DIR") }
        return try CLILoad.sqliteImport(file: args[1], dir: args[2])
    }
    let o = try Options.parse(args)
    let n = o.count
    let dir =
        o.dir ?? FileManager.default.temporaryDirectory.appendingPathComponent("offline-store-bench-\(getpid())").path
    if FileManager.default.fileExists(atPath: dir) {
        throw BenchError("\(dir) exists; give an empty or new --dir")
    }
    // The store makes only its own directory (no parents), as `offline-store init` does.
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { if !o.keep { try? FileManager.default.removeItem(atPath: dir) } }
    #if DEBUG
    log("warning: a debug build; measure with `swift run -c release`")
    #endif

    // MARK: The data set
    log(
        "data: \(grouped(Double(n))) SalesOrderItems, \(grouped(Double(max(n / 100, 1)))) Products, seed \(o.seed), in \(dir)"
    )
    var start = now()
    let store = try OfflineStore.create(
        at: dir + "/offline-store", metadata: Array(BenchSchema.metadata.utf8),
        configuration: StoreConfiguration(
            indexes: [BenchSchema.set: BenchSchema.indexes], durability: o.noSync ? .noSync : .full))
    try store.generate(set: "Products", count: max(n / 100, 1), seed: o.seed)
    var productIDs: [String] = []
    try store.scan(set: "Products") { p in
        if case .string(let id)? = p["ProductID"] { productIDs.append(id) }
        return true
    }
    let generator = try store.generator(set: BenchSchema.set, count: n, seed: o.seed)
    let items = [Item](unsafeUninitializedCapacity: n) { buffer, initialized in
        let chunk = 10_000
        let base = Shared(buffer.baseAddress!)
        DispatchQueue.concurrentPerform(iterations: (n + chunk - 1) / chunk) { c in
            for row in (c * chunk)..<min(n, (c + 1) * chunk) {
                (base.pointer + row).initialize(to: Item(generator.entity(row)))
            }
        }
        initialized = n
    }
    let rowBytes = items.prefix(1000).reduce(0) { $0 + RawLMDB.valueSize($1) + RawLMDB.keySize } / min(n, 1000)
    let storeRowBytes =
        try items.prefix(1000).reduce(0) { total, i in
            total + (try store.encodedSize(set: BenchSchema.set, entity: i.properties))
        } / min(n, 1000)
    log(
        "data: generated in \(fixed(Double(now() - start) / 1e9)) s; row ≈ \(rowBytes) bytes raw, \(storeRowBytes) in OfflineStore (key included)"
    )

    let raw = try RawLMDB(path: dir + "/lmdb")
    let offline = OfflineStoreContestant(store: store)
    let sqlite = try SQLiteContestant(path: dir + "/sqlite")
    var contestants: [any Contestant] = [raw, offline, sqlite]
    if let p = o.profile {
        contestants = contestants.filter { $0.name.lowercased().hasPrefix(p.contestant.lowercased()) }
        guard let c = contestants.first else { throw BenchError("no contestant \(p.contestant)") }
        try profile(p.workload, c, items: items, productIDs: productIDs, seed: o.seed, o)
        return
    }
    var results: [Result] = []
    func record(
        _ workload: String, _ unit: String, _ c: any Contestant, nsPerOp: Double, ops: Int, name: String? = nil,
        peakMiB: Double? = nil, peakRSSMiB: Double? = nil
    ) {
        results.append(
            Result(
                workload: workload, unit: unit, contestant: name ?? c.name, nsPerOp: nsPerOp,
                opsPerSecond: 1e9 / nsPerOp, operations: ops, peakMemoryDeltaMiB: peakMiB, peakRSSMiB: peakRSSMiB))
        log(
            "  \(name ?? c.name): \(grouped(nsPerOp)) ns/\(unit)"
                + (peakMiB.map { ", peak ΔRSS \(fixed($0, 1)) MiB" } ?? "")
                + (peakRSSMiB.map { ", peak RSS \(fixed($0, 1)) MiB" } ?? ""))
    }

    // MARK: Bulk load: all N rows, 50,000 per durable transaction, 3 secondary indexes maintained.
    let batch = 50_000
    log("bulk load, 3 indexes")
    for c in contestants {
        start = now()
        var at = 0
        while at < n {
            try c.load(items[at..<min(at + batch, n)])
            at += batch
        }
        let ns = Double(now() - start)
        record("bulk load, 3 indexes", "row", c, nsPerOp: ns / Double(n), ops: n)
        guard try c.count() == n else { throw BenchError("\(c.name) holds \(try c.count()) rows after loading \(n)") }
    }
    try sqlite.checkpoint()

    // MARK: The same data everywhere: spot checks, untimed.
    var random = BenchRandom(seed: o.seed)
    for _ in 0..<20 {
        let i = items[random.below(n)]
        let key = ItemKey(salesOrderID: i.salesOrderID, itemPosition: i.itemPosition)
        let seen = try contestants.map { c in try c.item(key).map { "\($0)" } ?? "missing in \(c.name)" }
        guard Set(seen).count == 1, seen[0] == "\(i)" else {
            throw BenchError("contestants disagree on \(key): \(seen)")
        }
    }
    for _ in 0..<5 {
        let p = productIDs[random.below(productIDs.count)]
        let counts = try contestants.map { try $0.find(productID: p) }
        guard Set(counts).count == 1 else { throw BenchError("contestants disagree on ProductID \(p): \(counts)") }
    }

    // `--only changes` skips the read, query, streaming and commit workloads.
    var plans: [(workload: String, url: String, plans: [(String, String)])] = []
    if o.only != "changes" {
        // Warm caches: one untimed scan each.
        for c in contestants { _ = try c.scan() }

        // MARK: Point reads by key: one read transaction and one decoded entity per read.
        let readsPerRound = min(100_000, max(n, 2_000))
        let keys = (0..<readsPerRound).map { _ in
            let i = items[random.below(n)]
            return ItemKey(salesOrderID: i.salesOrderID, itemPosition: i.itemPosition)
        }
        log("point read by key")
        for c in contestants {
            for k in keys.prefix(1_000) { _ = try c.get(k) }
            let ns = try medianNanos(rounds: 5, ops: keys.count) {
                for k in keys { guard try c.get(k) else { throw BenchError("\(c.name): \(k) missing") } }
            }
            record("point read by key", "read", c, nsPerOp: ns, ops: keys.count * 5)
        }

        // MARK: Index equality: all items of one product (~100), decoded.
        let queriesPerRound = min(1_000, max(productIDs.count * 10, 200))
        let products = (0..<queriesPerRound).map { _ in productIDs[random.below(productIDs.count)] }
        var rowsPerQuery = 0
        log("index equality (~100 rows)")
        for c in contestants {
            var rows = 0
            for p in products.prefix(50) { rows += try c.find(productID: p) }
            let ns = try medianNanos(rounds: 5, ops: products.count) {
                rows = 0
                for p in products { rows += try c.find(productID: p) }
            }
            rowsPerQuery = rows / products.count
            record("index equality, ~\(rowsPerQuery) rows", "query", c, nsPerOp: ns, ops: products.count * 5)
        }
        _ = rowsPerQuery

        // MARK: Full scan in key order, every row decoded.
        log("full scan")
        for c in contestants {
            var seen = 0
            let ns = try medianNanos(rounds: 3, ops: n) { seen = try c.scan() }
            guard seen == n else { throw BenchError("\(c.name) scanned \(seen) of \(n)") }
            record("full scan", "row", c, nsPerOp: ns, ops: n * 3)
        }

        // MARK: Queries: OfflineStore through OData URLs (`entities(url)`, and `query(url)` to JSON as an
        // extra line), the others by hand; every contestant's answers compared before timing.
        /// Compares every contestant's answers to the first `check` queries, records the plans, then
        /// times all of them (median of `rounds`); the label gets the rows per query.
        func queryWorkload(
            _ label: (Int) -> String, unit: String, _ queries: [BenchQuery], rounds: Int, check: Int,
            opsPerQuery: Int = 1
        ) throws {
            var rowsPerQuery = 0
            for q in queries.prefix(check) {
                let answers = try contestants.map { c in try c.queryItems(q).map { "\($0)" } }
                let compared = q.isOrdered ? answers : answers.map { $0.sorted() }
                guard Set(compared).count == 1 else {
                    throw BenchError(
                        "contestants disagree on \(q.url): "
                            + zip(contestants, answers).map { "\($0.name): \($1.count) rows \($1.prefix(2))" }.joined(
                                separator: "; "))
                }
                rowsPerQuery += answers[0].count
            }
            rowsPerQuery /= max(1, min(check, queries.count))
            let workload = label(rowsPerQuery)
            log(workload)
            var described: [(String, String)] = []
            for c in contestants {
                described.append((c.name, try c.plan(queries[0])))
            }
            plans.append((workload, queries[0].url, described))
            for (name, plan) in described { log("  plan, \(name): " + plan.replacingOccurrences(of: "\n", with: "; ")) }
            var totals: [Int] = []
            for c in contestants {
                for q in queries.prefix(max(1, queries.count / 10)) { _ = try c.query(q) }
                var rows = 0
                let ns = try medianNanos(rounds: rounds, ops: queries.count * opsPerQuery) {
                    rows = 0
                    for q in queries { rows += try c.query(q) }
                }
                totals.append(rows)
                guard rows == totals[0] else {
                    throw BenchError(
                        "\(c.name) returned \(rows) rows for the \(queries.count) queries, \(contestants[0].name) \(totals[0])"
                    )
                }
                record(workload, unit, c, nsPerOp: ns, ops: queries.count * rounds)
                if c === offline {
                    // The same URLs answered as OData JSON (what a server would send), bytes discarded.
                    for q in queries.prefix(max(1, queries.count / 10)) { _ = try offline.queryJSON(q) }
                    let nsJSON = try medianNanos(rounds: rounds, ops: queries.count * opsPerQuery) {
                        for q in queries { blackHole(try offline.queryJSON(q)) }
                    }
                    record(
                        workload, unit, c, nsPerOp: nsJSON, ops: queries.count * rounds, name: offline.name + ", JSON")
                }
            }
        }

        // 1. Point read by key through a URL: `SalesOrderItems(SalesOrderID='…',ItemPosition=…)`.
        try queryWorkload(
            { _ in "query: point read by key" }, unit: "read", keys.map { BenchQuery(.key($0)) }, rounds: 5, check: 20)
        log(PreparedReads.workload)
        record(
            PreparedReads.workload, "read", offline, nsPerOp: try PreparedReads.pointRead(offline, keys: keys),
            ops: keys.count * 5)

        // 2. Index equality: `$filter=ProductID eq '…'` (~100 rows).
        try queryWorkload(
            { "query: index equality, ~\($0) rows" }, unit: "query", products.map { BenchQuery(.product($0)) },
            rounds: 5, check: 5)

        // 3. Range + $orderby + $top 100 on the DeliveryDate index: a random 31-day window (~7,700 of
        //    1M rows match), the first 100 by date.
        let firstDay = EDMDate("2015-01-01")!.days, lastDay = EDMDate("2025-12-31")!.days
        let ranges = (0..<queriesPerRound).map { _ in
            let from = firstDay + Int32(random.below(Int(lastDay - firstDay) - 31))
            return BenchQuery(.deliveries(from: from, until: from + 31, top: 100))
        }
        try queryWorkload(
            { "query: range + orderby + top 100 (\($0) rows)" }, unit: "query", ranges, rounds: 5, check: 5)

        // 4. A filter on properties no contestant indexes: every row read, ~0.5% returned.
        let matches = try raw.query(BenchQuery(.cheapInCurrency))
        try queryWorkload(
            { "query: non-indexed filter, \(grouped(Double($0))) of \(grouped(Double(n))) match" }, unit: "row scanned",
            [BenchQuery(.cheapInCurrency)], rounds: 5, check: 1, opsPerQuery: n)
        _ = matches
        // 4b. `$count` with the same filter (FilteredCount.swift).
        try filteredCountWorkload(contestants, rows: n) { workload, c, ns in
            record(workload, "row scanned", c, nsPerOp: ns, ops: n * 5)
        }

        // 4b. A covering index for `$filter=ProductID eq '…'&$select=Quantity,NetAmount` (`CoveringWorkload.swift`).
        try runCoveringWorkload(
            raw: raw, offline: offline, sqlite: sqlite, products: products,
            record: { w, u, c, ns, ops, name in record(w, u, c, nsPerOp: ns, ops: ops, name: name) },
            plans: { plans.append(($0, $1, $2)) })

        // 5. Every row as one OData JSON response, streamed to a sink that counts the bytes: rows per
        //    second and the peak memory while streaming (ours streams 64 KiB chunks from one read
        //    transaction, so its peak should not grow with N). First the three streams are compared
        //    byte for byte.
        let streamLabel = "stream all rows to JSON"
        log(streamLabel)
        var digests: [StreamDigest] = []
        var heads: [[UInt8]] = []
        for c in contestants {
            var digest = StreamDigest()
            var head: [UInt8] = []
            try c.streamJSON { chunk in
                digest.add(chunk)
                if head.count < 1 << 20 { head.append(contentsOf: chunk.prefix((1 << 20) - head.count)) }
            }
            digests.append(digest)
            heads.append(head)
        }
        guard Set(digests.map(\.description)).count == 1 else {
            var detail = zip(contestants, digests).map { "\($0.name): \($1)" }.joined(separator: "; ")
            if let at = (0..<heads.map(\.count).min()!).first(where: { i in heads.contains { $0[i] != heads[0][i] } }) {
                for (c, h) in zip(contestants, heads) {
                    detail +=
                        "\n  \(c.name) at byte \(at): "
                        + String(decoding: h[max(0, at - 80)..<min(h.count, at + 80)], as: UTF8.self)
                }
            }
            throw BenchError("the JSON streams differ: \(detail)")
        }
        let jsonBytes = digests[0].bytes
        log("  all three streams: \(digests[0])")
        for c in contestants {
            var samples: [Double] = []
            var peakKiB: Int? = nil
            for _ in 0..<3 {
                var bytes = 0
                let (ns, delta) = try measureMemory { try c.streamJSON { bytes += $0.count } }
                guard bytes == jsonBytes else {
                    throw BenchError("\(c.name) streamed \(bytes) bytes, expected \(jsonBytes)")
                }
                samples.append(Double(ns) / Double(n))
                if let delta { peakKiB = max(peakKiB ?? 0, delta) }
            }
            samples.sort()
            record(
                "\(streamLabel), \(grouped(Double(jsonBytes) / Double(1 << 20))) MiB", "row", c, nsPerOp: samples[1],
                ops: n * 3,
                peakMiB: peakKiB.map { Double($0) / 1024 })
        }

        // 5b. Every row ordered by a property no contestant indexes, no $top (`SortWorkload.swift`).
        try runSortWorkload(
            raw: raw, offline: offline, sqlite: sqlite, n: n,
            record: { w, c, ns, ops, peak in record(w, "row", c, nsPerOp: ns, ops: ops, peakMiB: peak) },
            plans: { plans.append(($0, $1, $2)) })

        // MARK: Durable single-change commits: replace one item (a changed quantity moves its index entry).
        func changed(_ r: inout BenchRandom) -> Item {
            var i = items[r.below(n)]
            i.quantity = Int32(1 + r.below(1_000))
            i.changedAt += 10_000_000
            return i
        }
        let commits = o.mode == "tiny" ? 20 : 300
        let changes = (0..<commits).map { _ in changed(&random) }
        log("durable commit, 1 writer")
        for c in contestants {
            start = now()
            for i in changes { try c.upsert(i) }
            record(
                "durable commit, 1 writer", "commit", c, nsPerOp: Double(now() - start) / Double(commits), ops: commits)
        }
        // Group commit: 8 writers (the issue's case) and 16, each replacing its own items.
        for writers in [8, 16] {
            let perWriter = o.mode == "tiny" ? 2 : 400 / writers
            let concurrentChanges = (0..<writers).map { _ in (0..<perWriter).map { _ in changed(&random) } }
            log("durable commits, \(writers) writers")
            for c in contestants {
                let ns = try runThreads(writers) { t in
                    for i in concurrentChanges[t] { try c.upsert(i) }
                }
                record(
                    "durable commits, \(writers) writers", "commit", c,
                    nsPerOp: Double(ns) / Double(writers * perWriter), ops: writers * perWriter)
            }
        }
    }

    // MARK: Local changes with their queue record (`LocalChanges.swift`): 1, 8 and 64 writers, and a batch.
    var localChanges = LocalChangeWorkloads(mode: o.mode)
    try localChanges.fit(rows: n)
    try runLocalChanges(
        localChanges, contestants: contestants, offline: offline, sqlite: sqlite, items: items, seed: o.seed
    ) {
        workload, c, ns, changes, name in
        record(workload, "change", c, nsPerOp: ns, ops: changes, name: name)
    }

    // MARK: `load` of the data set as one JSON file, through the CLI, beside SQLite's JSON import (CLILoad.swift).
    if let binary = o.offlineStore {
        try CLILoad.run(store: store, dir: dir, n: n, offlineStore: binary) { workload, name, ns, peak in
            record(workload, "row", offline, nsPerOp: ns, ops: n, name: name, peakRSSMiB: peak)
        }
    } else {
        log(
            "\(CLILoad.workload): skipped (no offline-store executable: build the root package or pass --offline-store PATH)"
        )
    }

    let report = try store.check()
    guard report.isConsistent else { throw BenchError("OfflineStore check failed: \(report)") }

    // MARK: Ratios, table, JSON
    for i in results.indices {
        let same = results.filter { $0.workload == results[i].workload }
        if let r = same.first(where: { $0.contestant == raw.name }) {
            results[i].ratioToRawLMDB = results[i].nsPerOp / r.nsPerOp
        }
        if let s = same.first(where: { $0.contestant == sqlite.name }) {
            results[i].ratioToSQLite = results[i].nsPerOp / s.nsPerOp
        }
    }
    let machine = machineDescription()
    var build = "release"
    #if DEBUG
    build = "debug"
    #endif
    let header =
        "OfflineStore PerfTests: \(grouped(Double(n))) SalesOrderItems (\(o.mode), seed \(o.seed); a row is ~\(rowBytes) B raw, ~\(storeRowBytes) B in OfflineStore), \(build) build\nmachine: \(machine)\n"
    var planText =
        "plans (OfflineStore: store.explain(url); SQLite: EXPLAIN QUERY PLAN; raw LMDB: what it does by hand):\n"
    for p in plans {
        planText += "  \(p.workload) — \(p.url)\n"
        for (name, plan) in p.plans {
            planText +=
                "    " + pad(name + ":", 15)
                + plan.replacingOccurrences(of: "\n", with: "\n" + String(repeating: " ", count: 19)) + "\n"
        }
    }
    let text =
        header + "\n" + table(results)
        + "\nns/op: lower is better. ×raw LMDB, ×SQLite: this row's ns/op over theirs (0.50 = twice as fast).\n"
        + "query workloads: OfflineStore answers the OData URL with entities(url) (decoded Properties); \"OfflineStore, JSON\"\n"
        + "answers it with query(url, format: .json), bytes discarded; raw LMDB and SQLite decode into a struct.\n"
        + "peak ΔRSS: the peak resident memory during one run (VmHWM after clear_refs) over the resident memory before it.\n"
        + "peak RSS: of the whole child process (VmHWM, mapped file pages included), for the load through the CLI.\n"
        + LocalChangeWorkloads.notes
        + targets(results, raw: raw.name, offline: offline.name, sqlite: sqlite.name)
        + "\n" + planText
    print(text)

    struct Report: Codable {
        var date: String
        var machine: String
        var build: String
        var mode: String
        var count: Int
        var seed: UInt64
        var command: String
        var results: [Result]
        var plans: [Plan]
    }
    struct Plan: Codable {
        var workload: String
        var url: String
        var plans: [String: String]
    }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    let json = try encoder.encode(
        Report(
            date: ISO8601DateFormatter().string(from: Date()), machine: machine, build: build,
            mode: o.mode, count: n, seed: o.seed,
            command: CommandLine.arguments.joined(separator: " "), results: results,
            plans: plans.map {
                Plan(workload: $0.workload, url: $0.url, plans: Dictionary(uniqueKeysWithValues: $0.plans))
            }))
    try FileManager.default.createDirectory(
        atPath: (o.json as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    try json.write(to: URL(fileURLWithPath: o.json))
    log("wrote \(o.json)")
}

/// One workload against one contestant, for about ten seconds, for `perf record` or callgrind.
func profile(
    _ workload: String, _ c: any Contestant, items: [Item], productIDs: [String], seed: UInt64, _ o: Options
) throws {
    let n = items.count
    var random = BenchRandom(seed: seed)
    if workload == "load" {
        let start = now()
        var at = 0
        while at < n { try c.load(items[at..<min(at + 50_000, n)]); at += 50_000 }
        log("\(c.name) load: \(grouped(Double(now() - start) / Double(n))) ns/row")
        return
    }
    var at = 0
    while at < n { try c.load(items[at..<min(at + 50_000, n)]); at += 50_000 }
    if workload == "changes" || workload == "batch" {
        // Local changes, each to an item not changed before, until ten seconds or the items run out.
        var distinct = DistinctItems(items, seed: seed)
        let (writers, perWriter) = workload == "batch" ? (1, min(10_000, n)) : (o.writers, max(1, 1_600 / o.writers))
        log("\(c.name) \(workload): \(writers) writers, \(writers * perWriter) changes a round")
        let start = now(), cpuStart = processCPUNanos()
        var ops = 0
        while now() - start < 10_000_000_000 && distinct.next + writers * perWriter <= n {
            let work = (0..<writers).map { _ in distinct.take(perWriter) }
            if workload == "batch" { try c.changeBatch(work[0]) } else { _ = try c.changeConcurrently(work) }
            ops += writers * perWriter
        }
        let cpu = processCPUNanos()
        log(
            "\(c.name) \(workload): \(grouped(Double(now() - start) / Double(ops))) ns/change; CPU (all threads) "
                + "user \(grouped(Double(cpu.user - cpuStart.user) / Double(ops))), system \(grouped(Double(cpu.system - cpuStart.system) / Double(ops))) "
                + "ns/change (\(grouped(Double(ops))) changes)")
        return
    }
    if workload == "sort" { return try profileSort(c, n: n) }
    // `qcover`: the covering-index query (CoveringWorkload.swift), OfflineStore only.
    let coverURLs = productIDs.map { "\(BenchSchema.set)?$filter=ProductID eq '\($0)'&$select=Quantity,NetAmount" }
    if workload == "qcover" || workload == "qcoverprepared" {
        guard let offline = c as? OfflineStoreContestant else {
            throw BenchError("--profile \(workload) is for OfflineStore")
        }
        try offline.store.addIndex(set: BenchSchema.set, definition: "ProductID INCLUDE Quantity, NetAmount")
    }
    let start = now()
    var ops = 0
    while now() - start < 10_000_000_000 {
        switch workload {
        case "qprepared":
            let prepared = try (c as! OfflineStoreContestant).store.prepare(
                "\(BenchSchema.set)(SalesOrderID=@id,ItemPosition=@pos)")
            for _ in 0..<10_000 {
                let i = items[random.below(n)]
                blackHole(
                    try prepared.entities(aliases: ["id": .string(i.salesOrderID), "pos": .int(Int64(i.itemPosition))])
                        .count)
            }
            ops += 10_000
        case "qcover":
            let store = (c as! OfflineStoreContestant).store
            for _ in 0..<100 { blackHole(try store.entities(coverURLs[random.below(coverURLs.count)]).count) }
            ops += 100
        case "qcoverprepared":
            let prepared = try CoveringWorkload.Prepared((c as! OfflineStoreContestant).store)
            for _ in 0..<100 { try prepared.run(productIDs[random.below(productIDs.count)]) { blackHole($0) } }
            ops += 100
        case "read":
            for _ in 0..<10_000 {
                let i = items[random.below(n)]
                _ = try c.get(ItemKey(salesOrderID: i.salesOrderID, itemPosition: i.itemPosition))
            }
            ops += 10_000
        case "find":
            for _ in 0..<100 { _ = try c.find(productID: productIDs[random.below(productIDs.count)]) }
            ops += 100
        case "qkey":
            for _ in 0..<10_000 {
                let i = items[random.below(n)]
                _ = try c.query(BenchQuery(.key(ItemKey(salesOrderID: i.salesOrderID, itemPosition: i.itemPosition))))
            }
            ops += 10_000
        case "qfind":
            for _ in 0..<100 { _ = try c.query(BenchQuery(.product(productIDs[random.below(productIDs.count)]))) }
            ops += 100
        case "qrange":
            let first = EDMDate("2015-01-01")!.days
            for _ in 0..<100 {
                let from = first + Int32(random.below(4_000 - 31))
                _ = try c.query(BenchQuery(.deliveries(from: from, until: from + 31, top: 100)))
            }
            ops += 100
        case "qscan":
            _ = try c.query(BenchQuery(.cheapInCurrency))
            ops += n
        case "qcount":
            _ = try (c as! any FilteredCounting).countCheapInCurrency()
            ops += n
        case "json":
            var bytes = 0
            try c.streamJSON { bytes += $0.count }
            ops += n
        default:
            ops += try c.scan()
        }
    }
    log("\(c.name) \(workload): \(grouped(Double(now() - start) / Double(ops))) ns/op")
}

/// Where OfflineStore stands against the issue's targets.
func targets(_ results: [Result], raw: String, offline: String, sqlite: String) -> String {
    func ns(_ prefix: String, _ who: String) -> Double? {
        results.first { $0.workload.hasPrefix(prefix) && $0.contestant == who }?.nsPerOp
    }
    var lines = ["targets (measured, not asserted):"]
    func line(_ text: String, _ ok: Bool?) {
        lines.append("  " + (ok == nil ? "?" : ok! ? "met   " : "missed") + "  " + text)
    }
    if let o = ns("point read", offline), let r = ns("point read", raw), let s = ns("point read", sqlite) {
        line("point read ≤ 1.5× raw LMDB: \(fixed(o / r))×", o / r <= 1.5)
        line("point read ≥ 2× faster than SQLite: \(fixed(s / o))× faster", s / o >= 2)
    }
    if let p = ns(PreparedReads.workload, offline), let g = ns("point read", offline) {
        line("prepared point read ≤ 1.5× the plain get: \(fixed(p / g))×", p / g <= 1.5)
    }
    if let o = ns("index equality", offline), let s = ns("index equality", sqlite) {
        line("index equality ≥ 2× faster than SQLite: \(fixed(s / o))× faster", s / o >= 2)
    }
    if let o = ns("query: covering index", offline), let s = ns("query: covering index", sqlite) {
        line("covering-index query ≥ 2× faster than SQLite: \(fixed(s / o))× faster", s / o >= 2)
        if let p = ns("query: covering index", CoveringWorkload.preparedName) {
            line(
                "covering-index query, prepared and streamed, ≥ 2× faster than SQLite: \(fixed(s / p))× faster",
                s / p >= 2)
        }
    }
    if let o = ns("bulk load", offline), let s = ns("bulk load", sqlite) {
        line("bulk load ≥ 1.5× SQLite's rate: \(fixed(s / o))× SQLite's rate", s / o >= 1.5)
    }
    for who in ["OfflineStore CLI", "OfflineStore CLI, --batch 50000"] {
        if let o = ns(CLILoad.workload, who), let s = ns(CLILoad.workload, "SQLite (GRDB)") {
            line(
                "load of a JSON file through the CLI (\(who.dropFirst("OfflineStore CLI".count).drop { $0 == "," || $0 == " " }.isEmpty ? "all or nothing" : "--batch 50000")) ≥ 1.5× SQLite's import rate: \(fixed(s / o))×",
                s / o >= 1.5)
        }
    }
    if let o = ns("query: non-indexed filter", offline), let r = ns("query: non-indexed filter", raw),
        let s = ns("query: non-indexed filter", sqlite)
    {
        line(
            "non-indexed filter ≤ SQLite's time and ≤ 2.5× raw LMDB: \(fixed(o / s))× SQLite's, \(fixed(o / r))× raw LMDB",
            o <= s && o / r <= 2.5)
    }
    if let o = ns("stream all rows", offline), let s = ns("stream all rows", sqlite) {
        line("JSON streaming ≥ 1.3× faster than SQLite: \(fixed(s / o))× faster", s / o >= 1.3)
    }
    let sort = "sort on an unindexed property"
    func peak(_ who: String) -> Double? {
        results.first { $0.workload.hasPrefix(sort) && $0.contestant == who }?.peakMemoryDeltaMiB
    }
    if let o = ns(sort, offline), let s = ns(sort, sqlite), let om = peak(offline), let sm = peak(sqlite) {
        line(
            "unindexed sort, no $top ≤ SQLite's time and peak ΔRSS: \(fixed(o / s))× its time, \(fixed(om / sm))× its peak",
            o <= s && om <= sm)
    }
    if let o = ns("full scan", offline), let r = ns("full scan", raw) {
        line("full scan within 3× raw LMDB: \(fixed(o / r))×", o / r <= 3)
    }
    for (writers, factor) in [(8, 3.0), (64, 10.0)] {
        let w = LocalChangeWorkloads.writersLabel(writers)
        if let o = ns(w, offline), let s = ns(w, sqlite) {
            line(
                "durable changes + queue records, \(writers) writers ≥ \(Int(factor))× SQLite's changes/s: \(fixed(s / o))×",
                s / o >= factor)
        }
    }
    if let o = ns("batch of", offline), let s = ns("batch of", sqlite) {
        line("batch of changes + queue records ≥ SQLite's rate: \(fixed(s / o))× SQLite's rate", s / o >= 1)
    }
    return lines.joined(separator: "\n") + "\n"
}

do {
    try run()
} catch {
    log("offline-store-bench: \(error)")
    exit(1)
}
