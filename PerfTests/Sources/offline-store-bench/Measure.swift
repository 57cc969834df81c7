import Foundation
import Glibc
import Synchronization

/// One measured cell of the table.
struct Result: Codable, Sendable {
    var workload: String
    /// What one operation is: a row loaded or scanned, a read, a query, a commit.
    var unit: String
    var contestant: String
    var nsPerOp: Double
    var opsPerSecond: Double
    var operations: Int
    var ratioToRawLMDB: Double?
    var ratioToSQLite: Double?
    /// For the streaming workloads: the peak resident memory during one run over the resident
    /// memory just before it (MiB), the largest of the rounds.
    var peakMemoryDeltaMiB: Double?
    /// For workloads run in a child process: its peak resident memory (`VmHWM`), MiB.
    var peakRSSMiB: Double? = nil
}

/// A seeded generator (SplitMix64), the same on every machine.
struct BenchRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed ^ 0x5DEE_CE66_D1CE_4E5B }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { Int(next().multipliedFullWidth(by: UInt64(n)).high) }
}

@inline(__always)
func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Runs `body` (which does `ops` operations) `rounds` times and returns the median ns per operation.
func medianNanos(rounds: Int, ops: Int, _ body: () throws -> Void) rethrows -> Double {
    var samples: [Double] = []
    for _ in 0..<rounds {
        let start = now()
        try body()
        samples.append(Double(now() - start) / Double(max(ops, 1)))
    }
    samples.sort()
    return samples[samples.count / 2]
}

/// CPU time of the whole process so far (every thread), in ns: user and system (`getrusage`).
func processCPUNanos() -> (user: UInt64, system: UInt64) {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    func ns(_ t: timeval) -> UInt64 { UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_usec) * 1_000 }
    return (ns(u.ru_utime), ns(u.ru_stime))
}

/// Runs `threads` OS threads, each calling `body(thread)`, and returns the wall time in ns.
/// Threads (not tasks): the callers block in fsync, as a program's threads would.
func runThreads(_ threads: Int, _ body: @escaping @Sendable (Int) throws -> Void) throws -> UInt64 {
    let failure = Mutex<(any Error)?>(nil)
    let group = DispatchGroup()
    let startGate = DispatchSemaphore(value: 0)
    for t in 0..<threads {
        group.enter()
        let thread = Thread {
            startGate.wait()
            do { try body(t) } catch { failure.withLock { $0 = $0 ?? error } }
            group.leave()
        }
        thread.start()
    }
    let start = now()
    for _ in 0..<threads { startGate.signal() }
    group.wait()
    let elapsed = now() - start
    if let e = failure.withLock({ $0 }) { throw e }
    return elapsed
}

// MARK: Memory (Linux)

/// A field of /proc/self/status in KiB (`VmRSS`, `VmHWM`, `RssAnon`), or nil.
func procStatusKiB(_ field: String) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
    for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
        return Int(line.dropFirst(field.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
    }
    return nil
}

/// glibc's `malloc_trim` (malloc.h is not in the Glibc module): gives free heap back to the system.
@_silgen_name("malloc_trim")
func malloc_trim(_ pad: Int) -> Int32

/// Sets the peak resident memory (VmHWM) to the current resident memory: "5" to
/// /proc/self/clear_refs (Linux 4.0+). False where that is not allowed.
func resetPeakRSS() -> Bool {
    let fd = open("/proc/self/clear_refs", O_WRONLY)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return write(fd, "5", 1) == 1
}

/// Runs `body` once and returns its wall time in ns and the peak resident memory during it over
/// the resident memory just before it (KiB; nil if the peak cannot be reset). Freed heap is given
/// back to the system first (`malloc_trim`), so an earlier workload's free memory cannot hide this
/// one's allocations.
func measureMemory(_ body: () throws -> Void) rethrows -> (ns: UInt64, peakDeltaKiB: Int?) {
    _ = malloc_trim(0)
    let canReset = resetPeakRSS()
    let before = procStatusKiB("VmRSS")
    let start = now()
    try body()
    let ns = now() - start
    guard canReset, let before, let peak = procStatusKiB("VmHWM") else { return (ns, nil) }
    return (ns, max(0, peak - before))
}

// MARK: Output

func grouped(_ v: Double) -> String {
    let n = Int(v.rounded())
    let s = String(n)
    var out = ""
    for (i, c) in s.reversed().enumerated() {
        if i > 0 && i % 3 == 0 { out.append(",") }
        out.append(c)
    }
    return String(out.reversed())
}

func fixed(_ v: Double, _ digits: Int = 2) -> String { String(format: "%.\(digits)f", v) }

func pad(_ s: String, _ width: Int, right: Bool = false) -> String {
    let n = s.count
    if n >= width { return s }
    let space = String(repeating: " ", count: width - n)
    return right ? space + s : s + space
}

/// The side-by-side table: one line per workload and contestant.
func table(_ results: [Result]) -> String {
    let memory = results.contains { $0.peakMemoryDeltaMiB != nil }
    let rss = results.contains { $0.peakRSSMiB != nil }
    let w = (
        max(28, (results.map { "\($0.workload) (per \($0.unit))".count }.max() ?? 0)) + 2,
        max(15, (results.map(\.contestant.count).max() ?? 0) + 2), 12, 14, 10, 10, memory ? 15 : 0
    )
    var out =
        pad("workload", w.0) + pad("contestant", w.1) + pad("ns/op", w.2, right: true) + pad("ops/s", w.3, right: true)
        + pad("×raw LMDB", w.4, right: true) + pad("×SQLite", w.5, right: true)
        + (memory ? pad("peak ΔRSS MiB", w.6, right: true) : "")
        + (rss ? pad("peak RSS MiB", 14, right: true) : "") + "\n"
    out += String(repeating: "-", count: w.0 + w.1 + w.2 + w.3 + w.4 + w.5 + w.6 + (rss ? 14 : 0)) + "\n"
    var last = ""
    for r in results {
        let label = "\(r.workload) (per \(r.unit))"
        out +=
            pad(label == last ? "" : label, w.0) + pad(r.contestant, w.1) + pad(grouped(r.nsPerOp), w.2, right: true)
            + pad(grouped(r.opsPerSecond), w.3, right: true)
            + pad(r.ratioToRawLMDB.map { fixed($0) } ?? "-", w.4, right: true)
            + pad(r.ratioToSQLite.map { fixed($0) } ?? "-", w.5, right: true)
            + (memory ? pad(r.peakMemoryDeltaMiB.map { fixed($0, 1) } ?? "", w.6, right: true) : "")
            + (rss ? pad(r.peakRSSMiB.map { fixed($0, 1) } ?? "", 14, right: true) : "") + "\n"
        last = label
    }
    return out
}

/// What this machine is: for the README and the JSON.
func machineDescription() -> String {
    let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
    let model =
        cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
        .map { $0.split(separator: ":", maxSplits: 1).last!.trimmingCharacters(in: .whitespaces) } ?? "unknown CPU"
    let memory = ProcessInfo.processInfo.physicalMemory >> 30
    return
        "\(model), \(ProcessInfo.processInfo.activeProcessorCount) cores, \(memory) GiB, \(ProcessInfo.processInfo.operatingSystemVersionString)"
}
