import CommandSupport
import Foundation
import Synchronization

/// Child processes of `crashtest`: this tool started again with other arguments.
enum Spawn {
    /// This executable (`/proc/self/exe`), else the path it was started by.
    static let executable: String = {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        return n > 0
            ? String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : CommandLine.arguments[0]
    }()

    /// Starts `offline-store args`: stdin from /dev/null, stdout to `stdoutFD` (dup'ed) or the file
    /// `stdoutPath`, stderr appended to `stderrPath`. Swift's backtracer is off in the child, so a
    /// crash ends it at once.
    static func start(
        _ args: [String], stdoutFD: Int32? = nil, stdoutPath: String? = nil, stderrPath: String
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if let stdoutFD {
            posix_spawn_file_actions_adddup2(&actions, stdoutFD, 1)
        } else {
            posix_spawn_file_actions_addopen(
                &actions, 1, stdoutPath ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        }
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        let argv = ([executable] + args).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in argv + envp { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        guard rc == 0 else { throw CLIError("cannot start \(executable): \(String(cString: strerror(rc)))") }
        return pid
    }

    /// `waitpid` status → the signal that ended the process, or nil for an exit.
    static func signal(_ status: Int32) -> Int32? { status & 0x7F == 0 ? nil : status & 0x7F }
    static func describe(_ status: Int32) -> String {
        signal(status).map { "killed by signal \($0)" } ?? "exited with status \((status >> 8) & 0xFF)"
    }
}

/// `offline-store serve` on 127.0.0.1, a free port, with a bounded lifetime; stopped by PID.
final class ServerChild {
    let pid: pid_t
    let url: String
    private var reaped = false

    private init(pid: pid_t, url: String) {
        self.pid = pid
        self.url = url
    }

    /// Starts it and waits (at most 60 s) for its first line, which names the URL.
    static func start(store: String, lifetime: Double, logDir: String, number: Int) throws -> ServerChild {
        let out = logDir + "/serve-\(number).out", err = logDir + "/serve.err"
        let pid = try Spawn.start(
            ["serve", "--store", store, "--host", "127.0.0.1", "--port", "0", "--lifetime", String(Int(lifetime))],
            stdoutPath: out, stderrPath: err)
        let start = Date()
        while true {
            if let text = try? String(contentsOfFile: out, encoding: .utf8),
                let line = text.split(separator: "\n").first,
                let at = line.range(of: " at ")
            {
                return ServerChild(pid: pid, url: String(line[at.upperBound...]))
            }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                let text = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
                throw CLIError("serve \(Spawn.describe(status)) before listening: \(text.suffix(2000))")
            }
            if Date().timeIntervalSince(start) > 60 {
                Foundation.kill(pid, SIGKILL)
                waitpid(pid, nil, 0)
                throw CLIError("serve did not listen within 60 s")
            }
            usleep(5_000)
        }
    }

    /// SIGKILL, and reaps it.
    func kill() {
        guard !reaped else { return }
        Foundation.kill(pid, SIGKILL)
        waitpid(pid, nil, 0)
        reaped = true
    }

    /// SIGTERM, then up to 20 s for a clean exit (SIGKILL after). Returns the exit status, nil
    /// when a signal ended it.
    func stop() -> Int32? {
        Foundation.kill(pid, SIGTERM)
        let start = Date()
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) == 0 {
            if Date().timeIntervalSince(start) > 20 {
                Foundation.kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                break
            }
            usleep(10_000)
        }
        reaped = true
        return Spawn.signal(status) == nil ? (status >> 8) & 0xFF : nil
    }
}

/// A running `_crash-worker`: its PID and a thread reading its reports into its `WorkerLog`.
final class WorkerChild {
    let pid: pid_t
    let stderrPath: String
    private let readerDone = DispatchSemaphore(value: 0)
    private var status: Int32?

    private init(pid: pid_t, stderrPath: String) {
        self.pid = pid
        self.stderrPath = stderrPath
    }

    static func start(_ args: [String], log: WorkerLog, stderr: String) throws -> WorkerChild {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw CLIError("pipe: \(String(cString: strerror(errno)))") }
        // Close-on-exec: no other child may hold the write end (only this thread spawns).
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let pid: pid_t
        do {
            pid = try Spawn.start(args, stdoutFD: fds[1], stderrPath: stderr)
        } catch {
            close(fds[0])
            close(fds[1])
            throw error
        }
        close(fds[1])  // the child's copy is the only writer: its death is our end of file
        let child = WorkerChild(pid: pid, stderrPath: stderr)
        let (fd, done) = (fds[0], child.readerDone)
        log.restarted()
        let reader = Thread {
            var pending: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                pending.append(contentsOf: chunk[0..<n])
                while let nl = pending.firstIndex(of: 10) {
                    log.handle(String(decoding: pending[..<nl], as: UTF8.self))
                    pending.removeSubrange(...nl)
                }
            }
            // A last line without its newline was cut by the kill: not a report.
            close(fd)
            done.signal()
        }
        reader.start()
        return child
    }

    /// True once it has ended (reaped here).
    var hasEnded: Bool {
        if status != nil { return true }
        var s: Int32 = 0
        if waitpid(pid, &s, WNOHANG) == pid { status = s }
        return status != nil
    }

    /// A description of how it ended when it ended without being killed; nil while it runs.
    func endedOnItsOwn() -> String? { hasEnded ? "\(endDescription): \(stderrTail)" : nil }

    var endDescription: String { status.map(Spawn.describe) ?? "running" }

    var stderrTail: String { String(((try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "").suffix(1500)) }

    /// SIGKILL (unless it already ended), reap, and wait until its reports are all read. Returns
    /// the signal that ended it (nil for an exit).
    @discardableResult
    func kill() -> Int32? {
        if !hasEnded {
            Foundation.kill(pid, SIGKILL)
            var s: Int32 = 0
            waitpid(pid, &s, 0)
            status = s
        }
        readerDone.wait()
        return Spawn.signal(status!)
    }
}

/// What a worker reported: the model of its keys (state after each acknowledged change), the
/// change each writer has in flight, and when its flushes, refreshes and writes began and how
/// long the last ones took. Fed by the reader thread, read by the harness.
final class WorkerLog: Sendable {
    struct InFlight: Sendable {
        var ops: [(kind: String, id: String)]
    }

    private struct State {
        var model: [String: String]
        var inFlight: [Int: InFlight] = [:]
        var opStarted: [Int: Date] = [:]
        var acks = 0
        var begins: [String: Int] = [:]
        var began: [String: Date] = [:]
        var durations: [String: Double] = [:]
    }

    private let state: Mutex<State>

    init(acked: [String: String]) { state = Mutex(State(model: acked)) }

    func handle(_ line: String) {
        let parts = line.split(separator: " ", maxSplits: 3).map(String.init)
        guard parts.count >= 2 else { return }
        let now = Date()
        state.withLock { s in
            switch parts[0] {
            case "op" where parts.count == 4:
                guard let t = Int(parts[1]) else { return }
                s.inFlight[t] = InFlight(
                    ops: parts[3].split(separator: ",").compactMap { op in
                        let kv = op.split(separator: ":", maxSplits: 1)
                        return kv.count == 2 ? (String(kv[0]), String(kv[1])) : nil
                    })
                s.opStarted[t] = now
                s.begins["op", default: 0] += 1
            case "ack" where parts.count == 4:
                guard let t = Int(parts[1]) else { return }
                for item in parts[3].split(separator: ";") {
                    let kv = item.split(separator: "=", maxSplits: 1)
                    if kv.count == 2 { s.model[String(kv[0])] = String(kv[1]) }
                }
                s.inFlight[t] = nil
                if let at = s.opStarted[t] { s.durations["op"] = now.timeIntervalSince(at) }
                s.acks += 1
            case "begin":
                s.begins[parts[1], default: 0] += 1
                s.began[parts[1]] = now
            case "end":
                if let at = s.began[parts[1]] { s.durations[parts[1]] = now.timeIntervalSince(at) }
            default:
                break
            }
        }
    }

    /// A new process: nothing of it is in flight yet.
    func restarted() {
        state.withLock {
            $0.inFlight = [:]; $0.opStarted = [:]
        }
    }

    var acks: Int { state.withLock { $0.acks } }
    var model: [String: String] { state.withLock { $0.model } }
    func begins(_ activity: String) -> Int { state.withLock { $0.begins[activity] ?? 0 } }
    func duration(_ activity: String) -> Double? { state.withLock { $0.durations[activity] } }

    /// The model and the changes in flight, once the worker is dead and its reports read.
    func takeForCheck() -> (model: [String: String], inFlight: [InFlight]) {
        state.withLock { s in
            defer { s.inFlight = [:] }
            return (s.model, s.inFlight.keys.sorted().map { s.inFlight[$0]! })
        }
    }

    func setModel(_ model: [String: String]) { state.withLock { $0.model = model } }
}
