import Foundation
import Logging
import OfflineStore
import ServiceLifecycle
import Synchronization

/// The background task: every `interval` seconds a refresh (the service's changes into the store)
/// then a flush (the queued local changes to the service), each logged. A service of the
/// application's group: a graceful shutdown (SIGTERM) cancels it — a refresh stops between pages,
/// a flush between round trips, the store staying consistent — and the loop ends.
final class SyncLoop: Service, Sendable {
    struct Status: Sendable {
        var rounds = 0
        var lastRefresh: String?
        var lastFlush: String?
        var lastError: String?
    }

    let store: OfflineStore
    let serviceRoot: String?
    let interval: Double
    let logger: Logger
    private let state = Mutex(Status())

    init(store: OfflineStore, serviceRoot: String?, interval: Double, logger: Logger) {
        (self.store, self.serviceRoot, self.interval, self.logger) = (store, serviceRoot, interval, logger)
    }

    var status: Status { state.withLock { $0 } }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await self.round()
                try? await Task.sleep(for: .seconds(self.interval))
            }
        }
        logger.info("sync loop stopped")
    }

    /// One refresh and one flush. A failure is logged and the loop goes on: the next round
    /// retries (a refresh converges, a flush resends what was not settled).
    func round() async {
        do {
            let refresh = try await store.refresh(serviceRoot: serviceRoot)
            logger.info("refresh: \(refresh)")
            state.withLock { $0.lastRefresh = "\(refresh)" }
            let flush = try await store.flush(serviceRoot: serviceRoot)
            logger.info("flush: \(flush)")
            state.withLock {
                $0.lastFlush = "\(flush)"; $0.lastError = nil
            }
        } catch is CancellationError {
            logger.info("round cancelled")
            return
        } catch {
            logger.error("round failed: \(error)")
            state.withLock { $0.lastError = "\(error)" }
        }
        state.withLock { $0.rounds += 1 }
    }
}
