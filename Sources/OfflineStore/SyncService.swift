public import Sync
public import Logging
public import ServiceLifecycle
import Synchronization

/// A swift-service-lifecycle `Service` that keeps a store in sync with its OData service: a refresh
/// then a flush every `interval`, a round at once on `syncNow()`, and a longer wait after a round
/// that failed.
///
/// ```swift
/// let sync = SyncService(store: store, interval: .seconds(30))
/// let group = ServiceGroup(services: [sync], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()          // SIGTERM: the round in progress stops cleanly, run returns
/// ```
///
/// - A round is `refresh` (the service's changes into the store), then `flush` (the queued local
///   changes to the service) — also after a refresh that failed, unless the service did not
///   answer (a store at its size cap uploads, and so frees room). A round fails when either throws (the service is away, refuses the
///   credentials, …) or the flush stops early (`FlushReport.stopped`); the next round then comes
///   after twice the wait before it — `interval` × 2, × 4, … up to `maxBackoff` — and a round that
///   succeeds brings the wait back to `interval`. A failure is logged and kept in `status`; the
///   loop goes on.
/// - A graceful shutdown (the `ServiceGroup`'s signals, `triggerGracefulShutdown()`) or the
///   cancellation of `run`'s task cancels the round in progress — a refresh stops between its
///   transactions, a flush once the round trip on its way is answered and settled — and `run`
///   returns. Every write is a whole transaction: none is cut in half, and the store stays
///   consistent (`check` passes).
public final class SyncService: Service, Sendable {
    /// What the loop has done.
    public struct Status: Sendable {
        /// Rounds done (succeeded or failed; a cancelled one not counted).
        public var rounds = 0
        /// Rounds that failed in a row (0 after one that succeeded).
        public var failures = 0
        public var lastRefresh: RefreshReport?
        public var lastFlush: FlushReport?
        /// Why the last round failed; nil once one succeeds.
        public var lastError: String?
        /// The wait before the next round.
        public var nextDelay: Duration
    }

    public let store: OfflineStore
    public let serviceRoot: String?
    public let interval: Duration
    public let maxBackoff: Duration
    let logger: Logger
    /// For tests: each request waits this long for a connection and is not retried (a service
    /// that refuses connections fails a round at once, not after AsyncHTTPClient's retries).
    package let connectTimeout: Double?
    private let state: Mutex<Status>
    /// `syncNow()` asked for a round; the loop waiting for it.
    private let wake = Mutex<(requested: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    /// The shortest wait between rounds: a shorter `interval` (zero, negative) is taken as this,
    /// so that a service that is away is never asked again in a busy loop.
    public static let shortestInterval: Duration = .milliseconds(10)

    /// - Parameters:
    ///   - serviceRoot: the service (nil: the configuration's `serviceRoot`).
    ///   - interval: the wait between rounds (at least `shortestInterval`); `maxBackoff` (at least
    ///     `interval`) the longest wait after failures.
    public convenience init(
        store: OfflineStore, serviceRoot: String? = nil, interval: Duration, maxBackoff: Duration = .seconds(300),
        logger: Logger = Logger(label: "OfflineStore.sync")
    ) {
        self.init(
            store: store, serviceRoot: serviceRoot, interval: interval, maxBackoff: maxBackoff, logger: logger,
            connectTimeout: nil)
    }

    package init(
        store: OfflineStore, serviceRoot: String?, interval: Duration, maxBackoff: Duration, logger: Logger,
        connectTimeout: Double?
    ) {
        (self.store, self.serviceRoot, self.logger, self.connectTimeout) = (store, serviceRoot, logger, connectTimeout)
        self.interval = max(interval, Self.shortestInterval)
        self.maxBackoff = max(maxBackoff, self.interval)
        state = Mutex(Status(nextDelay: self.interval))
    }

    public var status: Status { state.withLock { $0 } }

    /// Runs a round now (or as soon as the one in progress ends), without waiting for it.
    public func syncNow() {
        let waiter = wake.withLock { w -> CheckedContinuation<Void, Never>? in
            if let c = w.waiter {
                w.waiter = nil
                return c
            }
            w.requested = true
            return nil
        }
        waiter?.resume()
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                guard let delay = await self.round() else { break }
                await self.pause(delay)
            }
        }
        logger.info("sync stopped", metadata: ["rounds": "\(status.rounds)"])
    }

    /// One refresh and one flush; the wait before the next round, or nil when cancelled.
    func round() async -> Duration? {
        var failure: String?
        var refreshFailure: (any Error)?
        do {
            let refresh =
                if let connectTimeout, let serviceRoot {
                    try await store.quickRefresh(
                        serviceRoot: serviceRoot, pageSize: 1_000, connectTimeout: connectTimeout)
                } else {
                    try await store.refresh(serviceRoot: serviceRoot)
                }
            state.withLock { $0.lastRefresh = refresh }
            logger.info("refresh: \(refresh)")
        } catch is CancellationError {
            return nil
        } catch {
            if Task.isCancelled { return nil }
            (refreshFailure, failure) = (error, Self.redactedText(error))
        }
        // A refresh that failed for another reason than a service that is away (a store at its
        // size cap, say) does not keep the queue from going up: the upload is what frees room.
        if refreshFailure.map({ !OfflineStore.isNoAnswer($0) }) ?? true {
            do {
                let flush =
                    if let connectTimeout, let serviceRoot {
                        try await store.quickFlush(
                            serviceRoot: serviceRoot, batchSize: 50, connectTimeout: connectTimeout)
                    } else {
                        try await store.flush(serviceRoot: serviceRoot)
                    }
                state.withLock { $0.lastFlush = flush }
                logger.info("flush: \(flush)")
                failure = failure ?? flush.stopped.map { "the flush stopped: \($0)" }
            } catch is CancellationError {
                return nil
            } catch {
                if Task.isCancelled { return nil }
                failure = failure ?? Self.redactedText(error)
            }
        }
        if let failure { logger.error("sync round failed: \(failure)") }
        return state.withLock { s in
            s.rounds += 1
            s.failures = failure == nil ? 0 : s.failures + 1
            s.lastError = failure
            var delay = interval
            for _ in 0..<min(s.failures, 32) where delay < maxBackoff { delay *= 2 }
            s.nextDelay = min(delay, maxBackoff)
            return s.nextDelay
        }
    }

    /// Waits `delay`, or until `syncNow()` or a cancellation.
    func pause(_ delay: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: delay) }
            group.addTask { await self.woken() }
            await group.next()
            group.cancelAll()
        }
    }

    /// Returns when `syncNow()` was called (since the last round began) or the task is cancelled.
    private func woken() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = wake.withLock { w -> Bool in
                    if w.requested || Task.isCancelled {
                        w.requested = false
                        return true
                    }
                    w.waiter = c
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            let waiter = wake.withLock { w -> CheckedContinuation<Void, Never>? in
                defer { w.waiter = nil }
                return w.waiter
            }
            waiter?.resume()
        }
    }

    /// `error`'s text without the configured secrets, for the log and `status`.
    static func redactedText(_ error: any Error) -> String { OfflineStore.redacted("\(error)") }
}
