import Foundation
import Glibc

// sync-bench: flush and refresh throughput of the `offline-store` tool against `offline-store serve`
// on loopback, each anchored on the same HTTP requests sent by a bare AsyncHTTPClient loop in the
// same run. See PerfTests/README.md, "Flush and refresh throughput", and `sync-bench --help`.

let usage = """
    sync-bench --offline-store PATH [--tiny | --full] [--changes N] [--entities M] [--delta K] [--page-size P]
               [--only flush|refresh] [--dir DIR] [--keep] [--no-check]

    Drives the release `offline-store` binary: `serve --lifetime` on a free loopback port (stopped by
    its pid), `init`, `generate`, `define`, `refresh`, `flush`, `check` as child processes, timed, with
    their CPU and peak resident set from wait4. Anchors: the same requests by a bare AsyncHTTPClient
    loop (a child process of this program), in the same run.

    flush:   N local changes (N/2 creates of new Products, N/2 PATCHes of distinct existing ones, made
             with the library), flushed with --batch-size 1 and 100; the anchor sends the same $batch
             requests (the same bodies and headers, If-Match with the service's ETags) one round trip
             after another.
    refresh: one defining request, SalesOrderItems (M entities, pages of P), read in full; then K
             PATCHes on the service and a delta refresh. The anchor GETs the same pages (Prefer:
             odata.maxpagesize, odata.track-changes), following @odata.nextLink, then the delta link.

    Sizes: default N 2,000, M 100,000, K 1,000; --tiny 200, 5,000, 100; --full 20,000, 1,000,000, 10,000.
    --offline-store defaults to $OFFLINE_STORE. --dir DIR: the stores go there (kept with --keep).
    --no-check: skip `offline-store check` of the client stores at the end.
    """

struct Options {
    var binary = ProcessInfo.processInfo.environment["OFFLINE_STORE"] ?? ""
    var changes = 2_000
    var entities = 100_000
    var delta = 1_000
    var pageSize = 1_000
    var mode = "default"
    var only: String?
    var dir: String?
    var keep = false
    var check = true

    static func parse(_ args: [String]) throws -> Options {
        var o = Options()
        var i = 0
        func value() throws -> String {
            i += 1
            guard i < args.count else { throw BenchError("\(args[i - 1]) needs a value") }
            return args[i]
        }
        func count(_ name: String, min: Int, max: Int) throws -> Int {
            guard let n = Int(try value()), n >= min, n <= max else {
                throw BenchError("\(name) needs a number from \(min) to \(max)")
            }
            return n
        }
        while i < args.count {
            switch args[i] {
            case "--offline-store": o.binary = try value()
            case "--tiny": (o.changes, o.entities, o.delta, o.mode) = (200, 5_000, 100, "tiny")
            case "--full": (o.changes, o.entities, o.delta, o.mode) = (20_000, 1_000_000, 10_000, "full")
            case "--changes": o.changes = try count("--changes", min: 2, max: 2_000_000); o.mode = "custom"
            case "--entities": o.entities = try count("--entities", min: 100, max: 100_000_000); o.mode = "custom"
            case "--delta": o.delta = try count("--delta", min: 1, max: 100_000); o.mode = "custom"
            case "--page-size": o.pageSize = try count("--page-size", min: 1, max: 1_000_000)
            case "--only":
                let w = try value()
                guard w == "flush" || w == "refresh" else { throw BenchError("--only flush or --only refresh") }
                o.only = w
            case "--dir": o.dir = try value()
            case "--keep": o.keep = true
            case "--no-check": o.check = false
            case "-h", "--help": print(usage); exit(0)
            default: throw BenchError("unknown option \(args[i]) (sync-bench --help)")
            }
            i += 1
        }
        guard !o.binary.isEmpty else {
            throw BenchError("give the offline-store binary: --offline-store PATH or OFFLINE_STORE=PATH")
        }
        guard access(o.binary, X_OK) == 0 else { throw BenchError("\(o.binary) is not an executable") }
        o.changes -= o.changes % 2
        guard o.delta <= o.entities else { throw BenchError("--delta must not exceed --entities") }
        return o
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
do {
    switch arguments.first {
    case "anchor-flush":
        guard arguments.count == 4, let batch = Int(arguments[2]), batch >= 1 else {
            throw BenchError("anchor-flush SERVICE BATCH FILE")
        }
        try await Anchor.flush(service: arguments[1], batch: batch, file: arguments[3])
    case "anchor-read":
        guard arguments.count == 3 || arguments.count == 4, let size = Int(arguments[2]), size >= 1 else {
            throw BenchError("anchor-read URL PAGESIZE [DELTAFILE]")
        }
        try await Anchor.read(url: arguments[1], pageSize: size, deltaFile: arguments.count == 4 ? arguments[3] : nil)
    default:
        let options = try Options.parse(arguments)
        try await SyncBench(options).run()
    }
} catch {
    FileHandle.standardError.write(Data("sync-bench: \(error)\n".utf8))
    exit(1)
}
