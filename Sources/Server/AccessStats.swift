import Foundation
import Logging
import Metrics
import Synchronization

/// Counts of requests by status class and method, for the access summary logged at info level;
/// and each request's time through swift-metrics (`offline_store_served_request_duration`, a
/// timer with the dimensions `method` and `status`, `2xx` … `5xx`).
final class AccessStats: Sendable {
    private struct Counts {
        var byClass = [Int](repeating: 0, count: 6)
        var byMethod: [String: Int] = [:]
        var total = 0
        var totalAtLastSummary = 0
        var microseconds: UInt64 = 0
    }
    private let counts = Mutex(Counts())
    /// The timers made so far, by method and status class.
    private let timers = Mutex<[String: Metrics.Timer]>([:])

    func record(method: String, status: Int, microseconds: UInt64) {
        let statusClass = "\(min(5, max(1, status / 100)))xx"
        let timer = timers.withLock { t in
            let key = method + " " + statusClass
            if let timer = t[key] { return timer }
            let timer = Metrics.Timer(
                label: "offline_store_served_request_duration",
                dimensions: [("method", method), ("status", statusClass)])
            t[key] = timer
            return timer
        }
        timer.recordMicroseconds(Int64(clamping: microseconds))
        counts.withLock {
            $0.total += 1
            $0.byClass[min(5, max(0, status / 100))] += 1
            $0.byMethod[method, default: 0] += 1
            $0.microseconds &+= microseconds
        }
    }

    func logSummary(_ logger: Logger, onlyIfChanged: Bool) {
        let line: String? = counts.withLock { c in
            if onlyIfChanged && c.total == c.totalAtLastSummary { return nil }
            c.totalAtLastSummary = c.total
            let methods = c.byMethod.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            let mean = c.total == 0 ? 0 : Double(c.microseconds) / Double(c.total) / 1000
            return
                "\(c.total) requests (\(methods)); 2xx \(c.byClass[2]), 3xx \(c.byClass[3]), 4xx \(c.byClass[4]), 5xx \(c.byClass[5]); mean \(String(format: "%.2f", mean)) ms"
        }
        if let line { logger.info("\(line)") }
    }
}
