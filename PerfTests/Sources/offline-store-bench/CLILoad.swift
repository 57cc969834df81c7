import Foundation
import GRDB
import OfflineStore

/// `load` of the whole data set from one OData JSON file through the command line — what a user
/// types — beside SQLite importing the same file with its own JSON functions (`json_each`, the
/// way to import JSON into SQLite without a program of one's own). Each runs in a process of its
/// own, so its peak RSS (`VmHWM`: mapped file pages included) is its own.
///
/// - OfflineStore: `offline-store init` (untimed), then `offline-store load` all or nothing (one
///   transaction), and again into a new store with `--batch 50000`.
/// - SQLite: this program run again as `--sqlite-import FILE DIR`: the contestant's table and three
///   indexes, the file read whole (SQLite parses a value, not a stream), one `INSERT … SELECT …
///   FROM json_each(?, '$.value')` in one durable transaction, decimals turned into thousandths,
///   dates into days and ticks as the contestant stores them (the GUID stays text: SQLite 3.40 has
///   no `unhex`).
enum CLILoad {
    static let workload = "load a JSON file through the CLI"

    static func run(
        store: OfflineStore, dir: String, n: Int, offlineStore binary: String,
        record: (_ workload: String, _ contestant: String, _ nsPerRow: Double, _ peakRSSMiB: Double) -> Void
    ) throws {
        let file = dir + "/items.json"
        guard FileManager.default.createFile(atPath: file, contents: nil) else {
            throw BenchError("cannot create \(file)")
        }
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
        try store.query(BenchSchema.set, format: .json) { out.write(Data($0)) }
        try out.close()
        let bytes = (try FileManager.default.attributesOfItem(atPath: file)[.size] as? NSNumber)?.intValue ?? 0
        log("\(workload): \(grouped(Double(bytes) / Double(1 << 20))) MiB of OData JSON, \(grouped(Double(n))) rows")
        let label = "\(workload), \(grouped(Double(bytes) / Double(1 << 20))) MiB"

        try Data(BenchSchema.metadata.utf8).write(to: URL(fileURLWithPath: dir + "/bench-metadata.xml"))
        try Data(StoreConfiguration(indexes: [BenchSchema.set: BenchSchema.indexes]).jsonText.utf8)
            .write(to: URL(fileURLWithPath: dir + "/bench-config.json"))
        for (name, extra) in [
            ("OfflineStore CLI", [String]()), ("OfflineStore CLI, --batch 50000", ["--batch", "50000"]),
        ] {
            let path = dir + "/cli-load-\(extra.isEmpty ? "all" : "batch")"
            let made = try Child.run(
                binary,
                [
                    "init", "--store", path, "--metadata", dir + "/bench-metadata.xml", "--config",
                    dir + "/bench-config.json",
                ])
            guard made.status == 0 else { throw BenchError("offline-store init failed (\(made.status))") }
            let r = try Child.run(binary, ["load", "--store", path, "--set", BenchSchema.set] + extra + [file])
            guard r.status == 0 else {
                throw BenchError(
                    "offline-store load\(extra.isEmpty ? "" : " " + extra.joined(separator: " ")) failed (\(r.status))")
            }
            let count = try OfflineStore.open(at: path, readOnly: true).count(set: BenchSchema.set)
            guard count == n else { throw BenchError("\(name) loaded \(count) of \(n) rows") }
            record(label, name, Double(r.nanoseconds) / Double(n), r.peakRSSMiB)
            try? FileManager.default.removeItem(atPath: path)
        }
        let sqlitePath = dir + "/sqlite-import"
        let r = try Child.run(CommandLine.arguments[0], ["--sqlite-import", file, sqlitePath])
        guard r.status == 0 else { throw BenchError("the SQLite import failed (\(r.status))") }
        let count = try DatabaseQueue(path: sqlitePath + "/items.sqlite").read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM SalesOrderItems") ?? 0
        }
        guard count == n else { throw BenchError("SQLite imported \(count) of \(n) rows") }
        record(label, "SQLite (GRDB)", Double(r.nanoseconds) / Double(n), r.peakRSSMiB)
        try? FileManager.default.removeItem(atPath: sqlitePath)
        try? FileManager.default.removeItem(atPath: file)
    }

    /// The child's side of the SQLite import (`--sqlite-import FILE DIR`).
    static func sqliteImport(file: String, dir: String) throws {
        let sqlite = try SQLiteContestant(path: dir)
        let text = try String(contentsOfFile: file, encoding: .utf8)
        func thousandths(_ name: String) -> String { "CAST(round(json_extract(value, '$.\(name)') * 1000) AS INTEGER)" }
        let changedAt = "json_extract(value, '$.ChangedAt')"
        try sqlite.pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO SalesOrderItems (\(SQLiteContestant.columns))
                    SELECT json_extract(value, '$.SalesOrderID'), json_extract(value, '$.ItemPosition'),
                      json_extract(value, '$.ProductID'), json_extract(value, '$.Note'), json_extract(value, '$.Quantity'),
                      json_extract(value, '$.QuantityUnit'), \(thousandths("NetAmount")), \(thousandths("TaxAmount")),
                      \(thousandths("GrossAmount")), json_extract(value, '$.CurrencyCode'),
                      CAST(julianday(json_extract(value, '$.DeliveryDate')) - 2440587.5 AS INTEGER),
                      CAST(round((julianday(\(changedAt)) - 2440587.5) * 864000000000) AS INTEGER),
                      CASE WHEN substr(\(changedAt), -1) = 'Z' THEN 0
                           ELSE (CASE WHEN substr(\(changedAt), -6, 1) = '-' THEN -1 ELSE 1 END)
                                * (CAST(substr(\(changedAt), -5, 2) AS INTEGER) * 60 + CAST(substr(\(changedAt), -2) AS INTEGER)) END,
                      json_extract(value, '$.ItemGUID')
                    FROM json_each(?, '$.value')
                    """, arguments: [text])
        }
    }
}

/// A child process run to its end: its status, wall time and peak RSS.
///
/// The peak is the child's `VmHWM`, sampled every 2 ms until it exits: `ru_maxrss` will not do,
/// since Linux carries the high-water mark across `exec`, and a spawned child starts from this
/// (large) process's.
enum Child {
    struct Outcome {
        var status: Int32
        var nanoseconds: UInt64
        var peakRSSMiB: Double
    }

    static func run(_ executable: String, _ arguments: [String]) throws -> Outcome {
        var pid: pid_t = 0
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        let start = now()
        let rc = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard rc == 0 else { throw BenchError("cannot run \(executable): \(String(cString: strerror(rc)))") }
        var status: Int32 = 0
        var peakKiB = 0
        while true {
            let w = waitpid(pid, &status, WNOHANG)
            if w == pid { break }
            if w < 0 && errno != EINTR { throw BenchError("waitpid: \(String(cString: strerror(errno)))") }
            if let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
                let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
                let kib = Int(line.split(separator: " ").dropFirst().first ?? "")
            {
                peakKiB = max(peakKiB, kib)
            }
            usleep(2_000)
        }
        let ns = now() - start
        let exited = status & 0x7F == 0
        return Outcome(
            status: exited ? (status >> 8) & 0xFF : 128 + (status & 0x7F), nanoseconds: ns,
            peakRSSMiB: Double(peakKiB) / 1024)
    }
}
