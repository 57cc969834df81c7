import Foundation
import LMDB
import Metrics
import Storage
import Synchronization
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
/// | `offline_store_queue_length` | gauge | records in the request queue, after a commit that changed it |
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
    /// A count of the request queue is on its way (one at a time, off the writer thread).
    private let counting = Atomic<Bool>(false)

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

    /// Listens to `entities`' commits until `stop`.
    func listen(to entities: EntityStore) -> Int {
        let queue = try? entities.set(SystemSets.requestQueue).entities
        return entities.environment.addCommitListener { [weak self, weak entities] notice in
            guard let self else { return }
            self.commits.increment()
            self.commitDuration.recordNanoseconds(Int64(clamping: notice.nanoseconds))
            self.commitJobs.record(notice.jobs)
            if let queue, let entities, notice.touched.contains(queue.dbi) { self.countQueue(entities, queue) }
        }
    }

    /// Records the queue's length, read in a task of its own (the writer thread does not wait for
    /// a read); a commit while one is on its way is seen by that one or the next.
    private func countQueue(_ entities: EntityStore, _ queue: Database) {
        guard counting.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        Task.detached { [self] in
            counting.store(false, ordering: .releasing)
            if let n = try? entities.read({ t in try t.count(queue) }) { queueLength.record(n) }
        }
    }

    /// Times `body` (a refresh) and counts what it moved, or its failure.
    func refresh(_ body: () async throws -> RefreshReport) async throws -> RefreshReport {
        let started = DispatchTime.now().uptimeNanoseconds
        defer { refreshDuration.recordNanoseconds(Int64(clamping: DispatchTime.now().uptimeNanoseconds - started)) }
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

    /// Times `body` (a flush) and counts its requests, or its failure.
    func flush(_ body: () async throws -> FlushReport) async throws -> FlushReport {
        let started = DispatchTime.now().uptimeNanoseconds
        defer { flushDuration.recordNanoseconds(Int64(clamping: DispatchTime.now().uptimeNanoseconds - started)) }
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
