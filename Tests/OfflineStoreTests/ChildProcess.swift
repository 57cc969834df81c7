import Foundation

/// Runs the built `offline-store` tool in a child process with a time limit, and says how it
/// ended: an exit status, a signal, or killed for taking too long.
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

    /// Runs `offline-store` with `args`; output goes to files, so a hanging child cannot block
    /// on a full pipe. Swift's crash backtracer is off: a signal should end the child at once.
    static func run(_ args: [String], timeout: Double) throws -> Outcome {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("os-child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out"), err = dir.appendingPathComponent("err")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: CLI.executable)
        p.arguments = args
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        p.environment = environment
        p.standardOutput = try FileHandle(forWritingTo: out)
        p.standardError = try FileHandle(forWritingTo: err)
        let done = DispatchSemaphore(value: 0)
        p.terminationHandler = { _ in done.signal() }
        let start = Date()
        try p.run()
        var outcome = Outcome()
        if done.wait(timeout: .now() + timeout) == .timedOut {
            outcome.hung = true
            kill(p.processIdentifier, SIGKILL)
            done.wait()
        }
        outcome.seconds = Date().timeIntervalSince(start)
        if p.terminationReason == .uncaughtSignal, !outcome.hung {
            outcome.signal = p.terminationStatus
        } else {
            outcome.status = p.terminationStatus
        }
        outcome.stdout = (try? String(contentsOf: out, encoding: .utf8)) ?? ""
        outcome.stderr = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
        return outcome
    }
}
