import AsyncHTTPClient
import Foundation
import TestSupport
import NIOCore
import NIOHTTP1
import Testing

/// `offline-store serve` as a real process for a test: loopback, a free port (`--port 0`, the
/// bound one read from its first line of output), a bounded lifetime (`--lifetime`, so it ends
/// even if the test process dies), stopped by its PID. `launch` starts another server the same
/// way (odatapy, `ODataPyServer`): any command whose first line of output ends " at URL".
final class ServerProcess: @unchecked Sendable {
    // @unchecked: the fields are set once in init but `reaped`, which `lock` guards.
    let pid: pid_t
    let url: String
    let store: String
    let logDir: String
    /// Whether the PID was reaped (by `stop` or `kill`): it is never signalled again, since the
    /// system may have given it to another process.
    private var reaped = false
    private let lock = NSLock()

    /// Starts the server on `store` and waits (at most `startTimeout` seconds) until it listens.
    /// Waits with `Task.sleep`, never blocking a thread of the concurrency pool (tests run in
    /// parallel on it).
    static func start(
        store: String, lifetime: Double = 1_200, extra: [String] = [], startTimeout: Double = 60
    ) async throws -> ServerProcess {
        let args =
            ["serve", "--store", store, "--host", "127.0.0.1", "--port", "0", "--lifetime", String(lifetime)] + extra
        return try await launch(CLI.executable, args, store: store, startTimeout: startTimeout)
    }

    /// Starts `executable` with `args` (a server for `store`: its data) and waits, as `start` does,
    /// until its first line of output names its URL.
    static func launch(
        _ executable: String, _ args: [String], store: String, startTimeout: Double
    ) async throws -> ServerProcess {
        let (pid, logDir) = try spawn(executable, args)
        Running.shared.insert(pid)
        let out = logDir + "/out", err = logDir + "/err"
        let start = Date()
        while true {
            if let text = try? String(contentsOfFile: out, encoding: .utf8),
                let line = text.split(separator: "\n").first,
                let at = line.range(of: " at ")
            {
                return ServerProcess(pid: pid, url: String(line[at.upperBound...]), store: store, logDir: logDir)
            }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                Running.shared.remove(pid)
                let text = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
                throw ServerFailed(
                    description: "\(args.first ?? executable) exited (status \(status)) before listening: \(text)")
            }
            if Date().timeIntervalSince(start) > startTimeout {
                Foundation.kill(pid, SIGKILL)
                waitpid(pid, nil, 0)
                Running.shared.remove(pid)
                throw ServerFailed(description: "\(args.first ?? executable) did not listen within \(startTimeout) s")
            }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
    }

    private init(pid: pid_t, url: String, store: String, logDir: String) {
        self.pid = pid
        self.url = url
        self.store = store
        self.logDir = logDir
    }

    private static func spawn(_ executable: String, _ args: [String]) throws -> (pid_t, String) {
        let logDir = TestScratch.directory("os-serve")
        try FileManager.default.createDirectory(atPath: logDir, withIntermediateDirectories: true)
        let pid = try ChildProcess.spawn(
            executable, args, stdout: logDir + "/out", stderr: logDir + "/err", environment: ChildProcess.quiet)
        return (pid, logDir)
    }

    struct ServerFailed: Error, CustomStringConvertible { var description: String }

    var stderr: String { (try? String(contentsOfFile: logDir + "/err", encoding: .utf8)) ?? "" }

    /// SIGTERM, then waits up to `timeout` seconds for a clean exit; SIGKILL after. Returns the
    /// exit status (nil when it had to be killed).
    @discardableResult
    func stop(timeout: Double = 20) async -> Int32? {
        guard lock.withLock({ !reaped }) else { return nil }
        defer {
            lock.withLock { reaped = true }
            Running.shared.remove(pid)
        }
        Foundation.kill(pid, SIGTERM)
        let start = Date()
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) == 0 {
            if Date().timeIntervalSince(start) > timeout {
                Foundation.kill(pid, SIGKILL)
                waitpid(pid, nil, 0)
                return nil
            }
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
        return status & 0x7F == 0 ? (status >> 8) & 0xFF : nil
    }

    /// For a failure's message: whether the server still runs or how it ended (reaping it then, so
    /// its PID is never signalled again), and the end of its standard error.
    func diagnosis() -> String {
        let state: String = lock.withLock {
            if reaped { return "reaped already" }
            var status: Int32 = 0
            guard waitpid(pid, &status, WNOHANG) == pid else { return "running" }
            reaped = true
            Running.shared.remove(pid)
            return status & 0x7F == 0
                ? "exited with status \((status >> 8) & 0xFF)" : "ended by signal \(status & 0x7F)"
        }
        let err = (try? String(contentsOfFile: logDir + "/err", encoding: .utf8)) ?? ""
        return "server \(pid) \(state); its stderr ends: \(err.suffix(2_000))"
    }

    /// SIGKILL, and reaps it (nothing when it was reaped already).
    func kill() {
        lock.withLock {
            guard !reaped else { return }
            reaped = true
            Foundation.kill(pid, SIGKILL)
            waitpid(pid, nil, 0)
            Running.shared.remove(pid)
        }
    }

    /// The servers started and not reaped yet, killed by PID when the test process exits: a test
    /// that stops its server from a `defer`'s `Task` may end the run before that task runs, and
    /// the server would live on to its `--lifetime`.
    final class Running: @unchecked Sendable {
        // @unchecked: `pids` is guarded by `lock`.
        static let shared: Running = {
            let running = Running()
            atexit { ServerProcess.Running.shared.killAll() }
            return running
        }()
        private var pids = Set<pid_t>()
        private let lock = NSLock()

        func insert(_ pid: pid_t) { _ = lock.withLock { pids.insert(pid) } }
        func remove(_ pid: pid_t) { _ = lock.withLock { pids.remove(pid) } }

        /// SIGKILL to each (its own process, never a reaped PID), and reaps it.
        func killAll() {
            let left = lock.withLock { pids }
            for pid in left {
                Foundation.kill(pid, SIGKILL)
                waitpid(pid, nil, 0)
            }
        }
    }
}

/// A small HTTP client over AsyncHTTPClient for the server tests.
struct HTTP {
    struct Reply {
        var status: Int
        var headers: HTTPHeaders
        var body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }
        func header(_ name: String) -> String? { headers.first(name: name) }
        func json() throws -> Any { try JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed]) }
        var object: [String: Any] { ((try? json()) as? [String: Any]) ?? [:] }
    }

    let client: HTTPClient
    let base: String
    var timeout: TimeAmount = .seconds(60)

    func send(
        _ method: HTTPMethod, _ path: String, body: String? = nil, headers: [(String, String)] = []
    ) async throws -> Reply {
        let url = path.hasPrefix("http") ? path : base + path
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (k, v) in headers { request.headers.add(name: k, value: v) }
        if let body {
            if !headers.contains(where: { $0.0.lowercased() == "content-type" }) {
                request.headers.add(name: "Content-Type", value: "application/json")
            }
            request.body = .bytes(ByteBuffer(string: body))
        }
        let response = try await client.execute(request, timeout: timeout)
        let bytes = try await response.body.collect(upTo: 1 << 28)
        return Reply(status: Int(response.status.code), headers: response.headers, body: Array(bytes.readableBytesView))
    }

    func get(_ path: String, headers: [(String, String)] = []) async throws -> Reply {
        try await send(.GET, path, headers: headers)
    }
}

/// Runs `body` with a started server on `store` and an HTTP client; stops both after.
func withServer(_ store: String, extra: [String] = [], _ body: (HTTP, ServerProcess) async throws -> Void) async throws
{
    let server = try await ServerProcess.start(store: store, extra: extra)
    let client = HTTPClient(eventLoopGroupProvider: .singleton)
    do {
        try await body(HTTP(client: client, base: server.url), server)
    } catch {
        try? await client.shutdown()
        await server.stop()
        throw error
    }
    try await client.shutdown()
    let status = await server.stop()
    #expect(status == 0, "serve did not stop cleanly on SIGTERM: \(server.stderr.suffix(2000))")
}
