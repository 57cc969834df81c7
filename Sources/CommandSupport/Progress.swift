import Foundation
import Synchronization

/// The progress of a long verb (`refresh`, `load`, `generate`, `check`, `flush`, `migrate`), on
/// standard error only, one way for all of them: what is done (of the total, when known), the
/// rate, the time elapsed, and the time left when the total is known.
///
/// On a terminal the line is redrawn in place (carriage return) at most five times a second;
/// otherwise a new line is written at most once a second. `OFFLINE_STORE_PROGRESS_INTERVAL_MS`
/// sets the interval in milliseconds for both (0: every report). `finish()` clears the line on
/// a terminal, so the summary that follows on standard output starts on a line of its own.
package final class ProgressReporter: Sendable {
    /// The environment variable that sets the interval between progress lines.
    package static let intervalVariable = "OFFLINE_STORE_PROGRESS_INTERVAL_MS"

    private let label: String
    private let unit: String
    private let fd: Int32
    private let terminal: Bool
    private let interval: Duration
    private let start = ContinuousClock.now
    private let state: Mutex<State>

    private struct State {
        var lastDraw: ContinuousClock.Instant
        var shown = false
        var finished = false
        /// What the last line said (done, total, detail): a report of the same is not drawn again.
        var last: (done: Int, total: Int?, detail: String)?
    }

    /// A reporter for the verb `label` counting `unit` (plural: "entities", "rows", "requests").
    /// Throws when `OFFLINE_STORE_PROGRESS_INTERVAL_MS` is set to something other than a whole
    /// number of milliseconds.
    package init(
        _ label: String, unit: String, fd: Int32 = 2,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        self.label = label
        self.unit = unit
        self.fd = fd
        let terminal = isatty(fd) == 1
        self.terminal = terminal
        self.interval = try Self.interval(environment[Self.intervalVariable], terminal: terminal)
        // The first line comes one interval after the start: a short run prints none.
        state = Mutex(State(lastDraw: start))
    }

    /// The interval `text` (the variable's value) sets, or the default: 200 ms on a terminal,
    /// 1 s otherwise.
    package static func interval(_ text: String?, terminal: Bool) throws -> Duration {
        guard let text else { return terminal ? .milliseconds(200) : .seconds(1) }
        guard let ms = Int(text.trimmingCharacters(in: .whitespaces)), ms >= 0, ms <= 3_600_000 else {
            throw CLIError(
                "\(intervalVariable) must be a whole number of milliseconds from 0 to 3600000, not '\(Output.sanitized(text, limit: 40))'"
            )
        }
        return .milliseconds(ms)
    }

    /// Seconds since the reporter was made.
    package var elapsed: Double {
        let d = ContinuousClock.now - start
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// The elapsed time for a summary: "1.23 s".
    package var elapsedText: String { String(format: "%.2f s", elapsed) }

    /// Reports `done` of `total` (nil: not known). `fraction` (0…1) stands for `done / total`
    /// when only a share of the work is known (the bytes of a file read); `detail` is added in
    /// parentheses. Drawn when the interval has passed since the last line; `force` draws now.
    package func update(done: Int, total: Int? = nil, fraction: Double? = nil, detail: String = "", force: Bool = false)
    {
        let now = ContinuousClock.now
        state.withLock { s in
            guard !s.finished, force || now - s.lastDraw >= interval else { return }
            if let last = s.last, last.done == done, last.total == total, last.detail == detail, !force { return }
            s.lastDraw = now
            s.last = (done, total, detail)
            let text = line(done: done, total: total, fraction: fraction, detail: detail)
            Output.note(terminal ? "\r\u{1B}[K" + text : text + "\n")
            s.shown = terminal
        }
    }

    /// Ends the progress: clears the line on a terminal; later reports draw nothing. Called
    /// before the summary is written (and again, harmlessly, on the way out of an error).
    package func finish() {
        state.withLock { s in
            if s.shown { Output.note("\r\u{1B}[K") }
            s.shown = false
            s.finished = true
        }
    }

    /// One progress line: `check: 1200/3400 rows (35%), 5400 rows/s, 0.2 s elapsed, 0.4 s left (SalesOrders)`.
    package func line(done: Int, total: Int?, fraction: Double?, detail: String) -> String {
        let seconds = elapsed
        let share = total.map { $0 > 0 ? min(1, Double(done) / Double($0)) : 1 } ?? fraction.map { min(1, max(0, $0)) }
        var text = "\(label): \(done)" + (total.map { "/\($0)" } ?? "") + " \(unit)"
        if let share { text += " (\(Int(share * 100))%)" }
        text += ", \(seconds > 0 ? Int(Double(done) / seconds) : 0) \(unit)/s, \(Self.duration(seconds)) elapsed"
        // The time left once there is something to go by: 1% done, or a second gone.
        if let share, share > 0, share < 1, share >= 0.01 || seconds >= 1 {
            text += ", \(Self.duration(seconds * (1 - share) / share)) left"
        }
        if !detail.isEmpty { text += " (\(detail))" }
        return text
    }

    /// `seconds` for a person: "0.4 s", "12 s", "3 min 05 s", "2 h 07 min".
    package static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "?" }
        if seconds < 10 { return String(format: "%.1f s", seconds) }
        let s = Int(seconds.rounded())
        if s < 60 { return "\(s) s" }
        if s < 3600 { return String(format: "%d min %02d s", s / 60, s % 60) }
        return String(format: "%d h %02d min", s / 3600, s % 3600 / 60)
    }
}
