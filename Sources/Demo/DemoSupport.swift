import CommandSupport
import Foundation
import Logging
import OfflineStore
import Server
import Storage
import Synchronization

/// How `demo` prints: numbered steps with their time, indented lines, state changes, and on a
/// terminal a progress line that overwrites itself. Not on a terminal, the output is plain lines —
/// no escapes, no carriage returns — so a test can read it step by step.
final class DemoOutput: Sendable {
    let tty: Bool
    let steps: Int
    /// A progress line is on the screen (terminal only): the next line clears it first.
    private let progressShown = Mutex(false)

    init(tty: Bool, steps: Int) {
        self.tty = tty
        self.steps = steps
    }

    /// Runs step `n`: its header, then `body`, then the time it took.
    func step<T>(_ n: Int, _ title: String, _ body: () async throws -> T) async throws -> T {
        try write(tty ? "\u{1B}[1m== \(n)/\(steps) \(title)\u{1B}[0m" : "== \(n)/\(steps) \(title)")
        let start = ContinuousClock.now
        let result = try await body()
        try line("time: \(Self.seconds(ContinuousClock.now - start))")
        return result
    }

    /// An indented line of a step.
    func line(_ text: String) throws { try write("   " + text) }

    /// A lifecycle state, as the store goes through it.
    func state(_ text: String) throws { try line("state: " + text) }

    /// A line that overwrites itself on a terminal, and is left out otherwise. Best effort: a
    /// failure to show progress is no reason to stop.
    func progress(_ text: String) {
        guard tty else { return }
        progressShown.withLock { shown in
            try? Output.write("\r\u{1B}[K   " + text, to: 1)
            shown = true
        }
    }

    func write(_ text: String) throws {
        try progressShown.withLock { shown in
            if shown { try Output.write("\r\u{1B}[K", to: 1) }
            shown = false
            try Output.write(text + "\n", to: 1)
        }
    }

    /// `1.23 s`, or `45 ms` below a second.
    static func seconds(_ d: Duration) -> String {
        let s = Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
        return s < 1 ? "\(Int((s * 1000).rounded())) ms" : String(format: "%.2f s", s)
    }
}

/// `offline-store serve` inside this process: the same server, on a free loopback port, stopped
/// gracefully by `stop()`.
struct InProcessServer {
    let url: String
    private let task: Task<Void, any Error>
    private let stopper: ServerStop

    static func start(store: OfflineStore) async throws -> InProcessServer {
        var options = ServeOptions()
        options.host = "127.0.0.1"
        options.port = 0
        options.stopOnSignals = false
        // Warnings and errors only, on stderr: stdout is the story.
        let logger = Logger(label: "offline-store.demo.serve") { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .warning
            return handler
        }
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let stopper = ServerStop()
        let task = Task {
            defer { continuation.finish() }
            try await ODataServer.run(store: store, options: options, logger: logger, stop: stopper) { port in
                continuation.yield(port)
            }
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else {
            try await task.value  // it ended before listening: its error
            throw CLIError("the demo's server stopped before it listened")
        }
        return InProcessServer(url: "http://127.0.0.1:\(port)/", task: task, stopper: stopper)
    }

    /// Stops the server and waits for it; its error if it failed.
    func stop() async throws {
        stopper()
        try await task.value
    }
}

/// Values as the demo prints them: strings quoted, decimals exact, null as `null`.
func demoText(_ value: Value?) -> String {
    switch value {
    case nil, .null?: "null"
    case .string(let s)?: "'\(s)'"
    case .int(let i)?: String(i)
    case .decimal(let d)?: d.description
    case .double(let d)?: String(d)
    case .bool(let b)?: String(b)
    case .collection(let items)?: "[" + items.map { demoText($0) }.joined(separator: ",") + "]"
    case let other?: "\(other)"
    }
}

/// A JSON value as the demo prints it (numbers exact, strings quoted).
func demoText(_ json: JSON?) -> String {
    switch json {
    case nil, .null?: "null"
    case .string(let s)?: "'\(s)'"
    case .number(let n)?: n
    case let other?: other.text
    }
}

/// Prints a store's lifecycle (`OfflineStore.lifecycle`) as it goes: one `state:` line per phase —
/// a state, or the defining request a download is on — with its last figures, and on a terminal
/// the phase's progress as it moves. `open` is printed as it comes.
final class LifecycleWatcher: Sendable {
    private struct Seen {
        /// The phase being reported: printed when the next one starts.
        var pending: LifecycleEvent?
        /// `open` events printed so far.
        var opens = 0
    }
    private let seen = Mutex(Seen())
    private let out: DemoOutput
    private let failure = Mutex<(any Error)?>(nil)

    /// Watches `lifecycle` until its stream ends (the store closed).
    init(_ lifecycle: Lifecycle, out: DemoOutput) {
        self.out = out
        let events = lifecycle.events()
        Task { [self] in for await e in events { take(e) } }
    }

    /// `open` events printed so far: pass it to `settle(past:)` after the next piece of work.
    var opens: Int { seen.withLock { $0.opens } }

    /// Waits (at most 10 s) until the watcher has printed the store's return to `open` after
    /// `mark` `open`s, so the lines of a step stay in order; throws what printing threw.
    func settle(past mark: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while opens <= mark, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(2)) }
        if let error = failure.withLock({ $0 }) { throw error }
        guard opens > mark else { throw DemoFailure("the store's lifecycle did not come back to open") }
    }

    private func take(_ e: LifecycleEvent) {
        let (printNow, commit) = seen.withLock { s -> ([LifecycleEvent], LifecycleEvent?) in
            var commit: LifecycleEvent? = nil
            if let p = s.pending, p.state != e.state || (p.detail != nil && p.detail != e.detail) { commit = p }
            if e.state == .open || e.state == .closed {
                s.pending = nil
                if e.state == .open { s.opens += 1 }
                return ([e], commit)
            }
            s.pending = e
            return ([], commit)
        }
        do {
            if let commit { try out.state(Self.text(commit)) }
            for e in printNow where e.state == .open { try out.state(Self.text(e)) }
        } catch {
            failure.withLock { $0 = $0 ?? error }
        }
        if printNow.isEmpty { out.progress("state: " + Self.text(e)) }
    }

    /// `downloading SG_Sales: 4275 entities, 1.2 MiB`: the state, what it is about, the figures that apply.
    static func text(_ e: LifecycleEvent) -> String {
        var figures: [String] = []
        if e.entities > 0 { figures.append("\(e.entities) entities") }
        if e.bytes > 0 {
            figures.append(
                e.bytes >= 1 << 20
                    ? String(format: "%.1f MiB", Double(e.bytes) / 1_048_576)
                    : e.bytes >= 1_024 ? "\(e.bytes / 1_024) KiB" : "\(e.bytes) bytes")
        }
        if e.requests > 0 { figures.append("\(e.requests) requests sent") }
        return e.state.rawValue + (e.detail.map { " " + $0 } ?? "")
            + (figures.isEmpty ? "" : ": " + figures.joined(separator: ", "))
    }
}
