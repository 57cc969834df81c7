import Foundation
import TestSupport

/// Runs the built `offline-store` tool in a child process with a time limit, and says how it
/// ended: an exit status, a signal, or killed for taking too long.
///
/// It calls `posix_spawn` itself, the child's output going to files opened in the child, rather
/// than `Process`: over thousands of runs `Process` once failed to start a child with "Bad file
/// descriptor", its handles closed behind the test's back.
struct ChildProcess {
    struct Outcome {
        var status: Int32 = 0
        /// The signal that ended the child, if one did (SIGSEGV, SIGBUS, SIGABRT, …).
        var signal: Int32?
        /// True when the child outlived the time limit and was killed.
        var hung = false
        var stdout = ""
        var stderr = ""
        var seconds = 0.0
    }

    struct SpawnFailed: Error, CustomStringConvertible {
        var executable: String
        var code: Int32
        var description: String { "cannot start \(executable): \(String(cString: strerror(code)))" }
    }

    /// Starts `executable` with `args` without waiting: stdin /dev/null, stdout and stderr to the
    /// files named (created, then truncated or appended to), the test's environment with
    /// `environment` over it. Returns its PID.
    static func spawn(
        _ executable: String, _ args: [String], stdout: String, stderr: String, append: Bool = false,
        environment changes: [String: String] = [:]
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let mode = O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, mode, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, mode, 0o644)
        let environment = ProcessInfo.processInfo.environment.merging(changes) { $1 }
        let argv = ([executable] + args).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in argv + envp { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        guard rc == 0 else { throw SpawnFailed(executable: executable, code: rc) }
        return pid
    }

    /// No backtraces from Swift's crash handler: a signal should end the child at once.
    static let quiet = ["SWIFT_BACKTRACE": "enable=no"]

    /// Runs `offline-store` with `args`. Swift's crash backtracer is off: a signal should end
    /// the child at once.
    /// `environment` is set over the test's.
    static func run(_ args: [String], timeout: Double, environment: [String: String] = [:]) throws -> Outcome {
        try run(executable: CLI.executable, args, timeout: timeout, environment: environment)
    }

    /// Runs `executable` (a path) with `args` as `run(_:timeout:)` runs the tool.
    static func run(
        executable: String, _ args: [String], timeout: Double, environment: [String: String] = [:]
    ) throws -> Outcome {
        let dir = TestScratch.directory("os-child")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let out = dir + "/out", err = dir + "/err"

        let start = Date()
        let pid = try spawn(
            executable, args, stdout: out, stderr: err, environment: quiet.merging(environment) { $1 })
        var outcome = Outcome()
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) == 0 {
            if Date().timeIntervalSince(start) > timeout {
                outcome.hung = true
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                break
            }
            usleep(2_000)
        }
        outcome.seconds = Date().timeIntervalSince(start)
        // The <sys/wait.h> macros: the low 7 bits are the signal, or 0 for an exit with its code above.
        if status & 0x7F == 0 {
            outcome.status = (status >> 8) & 0xFF
        } else if !outcome.hung {
            outcome.signal = status & 0x7F
        }
        outcome.stdout = String(decoding: FileManager.default.contents(atPath: out) ?? Data(), as: UTF8.self)
        outcome.stderr = String(decoding: FileManager.default.contents(atPath: err) ?? Data(), as: UTF8.self)
        return outcome
    }

    /// The same as `run(_:timeout:)`, for an `async` caller (which the compiler picks): it waits
    /// for the child on a thread of its own (`offThePool`), so the test holds no thread of the
    /// concurrency pool while the tool runs, and the child's end is seen as promptly.
    static func run(_ args: [String], timeout: Double, environment: [String: String] = [:]) async throws -> Outcome {
        try await offThePool { try run(args, timeout: timeout, environment: environment) }
    }

    /// The same as `run(executable:_:timeout:)`, waiting on a thread of its own.
    static func run(executable: String, _ args: [String], timeout: Double) async throws -> Outcome {
        try await offThePool { try run(executable: executable, args, timeout: timeout) }
    }
}

extension ChildProcess {
    /// Starts `offline-store` with `args` without waiting (stdin /dev/null, stdout and stderr to
    /// the files named, created or truncated; no backtraces), for a test to kill; returns its PID.
    static func spawnDetached(_ args: [String], stdout: String, stderr: String) throws -> pid_t {
        try spawn(CLI.executable, args, stdout: stdout, stderr: stderr, environment: quiet)
    }
}
