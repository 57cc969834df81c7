import Foundation
import LMDB
import Metrics
import Storage
import Sync

/// What a store reports through swift-metrics, to whatever backend the program bootstrapped
/// (`MetricsSystem.bootstrap`: Prometheus, StatsD, …; none: nothing is kept). Every metric has
/// the dimension `store` (the store's directory).
///
/// | label | kind | what |
/// |---|---|---|
/// | `offline_store_commits` | counter | write transactions committed (a group commit counts once) |
/// | `offline_store_commit_duration` | timer | from a transaction's start to its durable commit |
/// | `offline_store_commit_jobs` | recorder | write calls a group commit took together |
/// | `offline_store_queue_length` | gauge | records in the request queue, after each local change, flush and refresh |
/// | `offline_store_refresh_duration` | timer | a refresh, start to end (succeeded or not) |
/// | `offline_store_refresh_entities` | counter, `kind` `received`/`written`/`removed` | entities a refresh moved |
/// | `offline_store_flush_duration` | timer | a flush, start to end |
/// | `offline_store_flush_requests` | counter, `kind` `sent`/`succeeded` | requests a flush sent and settled |
/// | `offline_store_errors_archived` | counter | requests a flush moved to ErrorArchive |
/// | `offline_store_sync_failures` | counter, `kind` `refresh`/`flush` | refreshes and flushes that threw or stopped early |
final class StoreMetrics: Sendable {
    let commits: Counter
    let commitDuration: Metrics.Timer
    let commitJobs: Recorder
    let queueLength: Gauge
    let refreshDuration: Metrics.Timer
    let refreshReceived, refreshWritten, refreshRemoved: Counter
    let flushDuration: Metrics.Timer
    let flushSent, flushSucceeded, errorsArchived: Counter
    let refreshFailures, flushFailures: Counter

    init(path: String) {
        let store = [("store", path)]
        commits = Counter(label: "offline_store_commits", dimensions: store)
        commitDuration = Metrics.Timer(label: "offline_store_commit_duration", dimensions: store)
        commitJobs = Recorder(label: "offline_store_commit_jobs", dimensions: store)
        queueLength = Gauge(label: "offline_store_queue_length", dimensions: store)
        refreshDuration = Metrics.Timer(label: "offline_store_refresh_duration", dimensions: store)
        refreshReceived = Counter(label: "offline_store_refresh_entities", dimensions: store + [("kind", "received")])
        refreshWritten = Counter(label: "offline_store_refresh_entities", dimensions: store + [("kind", "written")])
        refreshRemoved = Counter(label: "offline_store_refresh_entities", dimensions: store + [("kind", "removed")])
        flushDuration = Metrics.Timer(label: "offline_store_flush_duration", dimensions: store)
        flushSent = Counter(label: "offline_store_flush_requests", dimensions: store + [("kind", "sent")])
        flushSucceeded = Counter(label: "offline_store_flush_requests", dimensions: store + [("kind", "succeeded")])
        errorsArchived = Counter(label: "offline_store_errors_archived", dimensions: store)
        refreshFailures = Counter(label: "offline_store_sync_failures", dimensions: store + [("kind", "refresh")])
        flushFailures = Counter(label: "offline_store_sync_failures", dimensions: store + [("kind", "flush")])
    }

    /// Listens to `entities`' commits (the listener holds nothing of the store: it reads nothing).
    func listen(to entities: EntityStore) -> Int {
        entities.environment.addCommitListener { [weak self] notice in
            guard let self else { return }
            self.commits.increment()
            self.commitDuration.recordNanoseconds(Int64(clamping: notice.nanoseconds))
            self.commitJobs.record(notice.jobs)
        }
    }

    /// Records the queue's length (`count`, read by the caller after a flush or refresh, or a
    /// local change).
    func queue(_ count: Int?) {
        if let count { queueLength.record(count) }
    }

    /// Times `body` (a refresh) and counts what it moved, or its failure; then the queue's length
    /// (`length`, nil when it cannot be read).
    func refresh(_ body: () async throws -> RefreshReport, length: () -> Int?) async throws -> RefreshReport {
        let started = DispatchTime.now().uptimeNanoseconds
        defer {
            refreshDuration.recordNanoseconds(Int64(clamping: DispatchTime.now().uptimeNanoseconds - started))
            queue(length())
        }
        do {
            let report = try await body()
            refreshReceived.increment(by: report.received)
            refreshWritten.increment(by: report.written)
            refreshRemoved.increment(by: report.removed)
            return report
        } catch {
            refreshFailures.increment()
            throw error
        }
    }

    /// Times `body` (a flush) and counts its requests, or its failure; then the queue's length.
    func flush(_ body: () async throws -> FlushReport, length: () -> Int?) async throws -> FlushReport {
        let started = DispatchTime.now().uptimeNanoseconds
        defer {
            flushDuration.recordNanoseconds(Int64(clamping: DispatchTime.now().uptimeNanoseconds - started))
            queue(length())
        }
        do {
            let report = try await body()
            flushSent.increment(by: report.sent)
            flushSucceeded.increment(by: report.succeeded)
            errorsArchived.increment(by: report.archived)
            if report.stopped != nil { flushFailures.increment() }
            return report
        } catch {
            flushFailures.increment()
            throw error
        }
    }
}
