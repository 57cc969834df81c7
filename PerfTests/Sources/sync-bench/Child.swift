import Foundation
import Glibc

/// A finished child process: its exit status, wall time and resource use (`wait4`).
struct ChildRun {
    var status: Int32
    var wallSeconds: Double
    /// User + system CPU of the child.
    var cpuSeconds: Double
    /// Peak resident set (`ru_maxrss`), MiB: with the store's memory map's resident pages.
    var peakRSSMiB: Double
    /// Peak anonymous resident memory (`RssAnon`, sampled every 20 ms), MiB: what the process
    /// allocated, without the memory map's file pages.
    var peakAnonMiB: Double
    var stdout: String
    var stderr: String
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }

/// Starts `args[0]` (a path) with `args[1...]`, its standard output and error going to the files
/// `out` and `err`. Returns the pid.
func spawn(_ args: [String], out: String, err: String) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    posix_spawn_file_actions_addopen(&actions, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    var cargs: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
    defer { for p in cargs { free(p) } }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, args[0], &actions, nil, &cargs, environ)
    guard rc == 0 else { throw BenchError("cannot start \(args[0]): \(String(cString: strerror(rc)))") }
    return pid
}

/// Waits for `pid`; its resource use comes from `wait4`.
func reap(_ pid: pid_t) throws -> (status: Int32, usage: rusage) {
    var status: Int32 = 0
    var usage = rusage()
    while wait4(pid, &status, 0, &usage) < 0 {
        guard errno == EINTR else { throw BenchError("wait4(\(pid)): \(String(cString: strerror(errno)))") }
    }
    let code = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
    return (code, usage)
}

/// Runs a command to its end, timed; fails unless it exits 0 (or `allowFailure`).
@discardableResult
func runChild(_ args: [String], in dir: String, allowFailure: Bool = false) throws -> ChildRun {
    let out = dir + "/child.out", err = dir + "/child.err"
    let start = DispatchTime.now().uptimeNanoseconds
    let pid = try spawn(args, out: out, err: err)
    var anonKiB = 0.0
    var status: Int32 = 0
    var usage = rusage()
    while true {
        let r = wait4(pid, &status, WNOHANG, &usage)
        if r == pid { break }
        guard r == 0 || errno == EINTR else { throw BenchError("wait4(\(pid)): \(String(cString: strerror(errno)))") }
        anonKiB = max(anonKiB, statusField("/proc/\(pid)/status", "RssAnon:"))
        usleep(20_000)
    }
    status = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
    let wall = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    let r = ChildRun(
        status: status, wallSeconds: wall, cpuSeconds: seconds(usage.ru_utime) + seconds(usage.ru_stime),
        peakRSSMiB: Double(usage.ru_maxrss) / 1024, peakAnonMiB: anonKiB / 1024,
        stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
        stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    if r.status != 0 && !allowFailure {
        throw BenchError(
            "\(args.map { $0.contains(" ") ? "'\($0)'" : $0 }.joined(separator: " ")) exited with \(r.status): \(r.stderr.prefix(600))\(r.stdout.suffix(300))"
        )
    }
    return r
}

/// `offline-store serve` on a free loopback port, with a bounded lifetime; stopped by its pid.
final class Server {
    let pid: pid_t
    let url: String
    private var stopped = false

    init(binary: String, store: String, lifetime: Int, dir: String) throws {
        let out = dir + "/serve.out", err = dir + "/serve.err"
        pid = try spawn(
            [
                binary, "serve", "--store", store, "--host", "127.0.0.1", "--port", "0", "--lifetime", String(lifetime),
                "--log-level", "warning",
            ], out: out, err: err)
        var found: String?
        for _ in 0..<400 {
            if let text = try? String(contentsOfFile: out, encoding: .utf8), let r = text.range(of: "http://") {
                let rest = text[r.lowerBound...]
                found = String(rest.prefix { !$0.isWhitespace })
                break
            }
            if kill(pid, 0) != 0 || waitpid(pid, nil, WNOHANG) == pid {
                throw BenchError("serve did not start: \((try? String(contentsOfFile: err, encoding: .utf8)) ?? "")")
            }
            usleep(50_000)
        }
        guard let found else {
            kill(pid, SIGKILL); _ = try? reap(pid); throw BenchError("serve printed no address in 20 s")
        }
        url = found.hasSuffix("/") ? found : found + "/"
    }

    /// User + system CPU seconds of the server so far (`/proc/PID/stat`).
    func cpuSeconds() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return 0 }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After the command: state is field 3, utime 14, stime 15 (1-based over the whole line).
        guard fields.count > 13, let u = Double(fields[11]), let s = Double(fields[12]) else { return 0 }
        return (u + s) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Resets the server's peak resident set (`VmHWM`) to its current size.
    func resetPeak() {
        let fd = open("/proc/\(pid)/clear_refs", O_WRONLY)
        guard fd >= 0 else { return }
        _ = "5".withCString { write(fd, $0, 1) }
        Glibc.close(fd)
    }

    /// `VmHWM` of the server, MiB.
    func peakMiB() -> Double { statusField("/proc/\(pid)/status", "VmHWM:") / 1024 }

    /// SIGTERM, then waits for the exit; fails unless it exits 0.
    func stop() throws {
        guard !stopped else { return }
        stopped = true
        kill(pid, SIGTERM)
        let (status, _) = try reap(pid)
        guard status == 0 else { throw BenchError("serve exited with \(status)") }
    }

    deinit {
        if !stopped { kill(pid, SIGKILL); _ = try? reap(pid) }
    }
}

/// A kB field of a `/proc/PID/status` file (0 when absent).
func statusField(_ path: String, _ name: String) -> Double {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8),
        let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name) }),
        let kb = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    else { return 0 }
    return kb
}
