import Foundation
import Logging
import OfflineStore
import Storage

/// What one sync of a served offline store did: its refresh and its flush, each a report or the
/// error that stopped it. A failing back end is an outcome, never an error of the service.
struct SyncOutcome: Sendable {
    var number: Int
    var refreshed: RefreshReport?
    var refreshError: String?
    var flushed: FlushReport?
    var flushError: String?
    var seconds: Double

    /// Whether both halves ran to the end (a flush that stopped early, on a 5xx or a lost
    /// connection, did not) and the service refused nothing.
    var succeeded: Bool { ranToTheEnd && (flushed?.refused.isEmpty ?? true) }

    /// Whether both halves ran to the end (refusals or not): the answer's status is 200 then.
    var ranToTheEnd: Bool { refreshError == nil && flushError == nil && flushed?.stopped == nil }

    /// `{"sync":N,"succeeded":…,"seconds":…,"refresh":"…","flush":"…","refused":[…]}`: the
    /// reports' one-line summaries, or `{"error":"…"}` for a half that failed, and a line per
    /// request the service refused (in the ErrorArchive now).
    var json: [UInt8] {
        var out = JSONBuffer()
        out.append("{\"sync\":")
        out.appendInt(Int64(number))
        out.append(",\"succeeded\":")
        out.append(succeeded ? "true" : "false")
        out.append(",\"seconds\":")
        out.appendRaw(String(format: "%.3f", seconds))
        for (name, summary, error) in [
            ("refresh", refreshed?.description, refreshError), ("flush", flushed?.description, flushError),
        ] {
            out.append(",")
            out.appendString(name)
            out.append(":")
            if let error {
                out.append("{\"error\":")
                out.appendString(error)
                out.append("}")
            } else {
                out.appendString(summary ?? "")
            }
        }
        out.append(",\"refused\":[")
        for (i, line) in (flushed?.refused ?? []).enumerated() {
            if i > 0 { out.append(",") }
            out.appendString(line)
        }
        out.append("]}\n")
        return out.bytes
    }
}

/// Sync behind a served offline store (`serve --sync-interval S`, and `POST /$sync`): a refresh
/// of the defining requests, then a flush of the request queue, against the store's service
/// (its configured `serviceRoot` and credentials).
///
/// - Never two at once. A sync asked for while one runs waits for it and then runs one of its
///   own (so it includes every write acknowledged before it was asked); callers that ask while a
///   sync already waits to start share that one.
/// - Reads and writes go on being answered during a sync: readers never wait for LMDB's writer,
///   and refresh commits page by page, so served writes group-commit between its pages.
/// - A failing back end is logged (warning) and answered in the outcome, the configured secrets
///   scrubbed from its text (`OfflineStore.redacted`); the service goes on,
///   and the next sync tries again. Each refresh and flush also leaves its event in `EventLog`
///   and its states (`downloading`, `uploading`) in the store's `Lifecycle`.
actor SyncLoop {
    let store: OfflineStore
    let logger: Logger
    private var tail: Task<SyncOutcome, Never>?
    private var waiting: Task<SyncOutcome, Never>?
    private var count = 0

    init(store: OfflineStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// Runs a sync after the one running (if any) and returns its outcome; shares a sync that is
    /// waiting to start.
    func sync(reason: String) async -> SyncOutcome {
        if let waiting { return await waiting.value }
        let previous = tail
        count += 1
        let number = count
        let task = Task {
            _ = await previous?.value
            self.started()
            return await self.perform(number: number, reason: reason)
        }
        waiting = task
        tail = task
        // The server stopping cancels the loop, and with it the sync in flight: refresh and flush
        // stop at their next await (what they committed stays; the next sync goes on from there).
        return await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
    }

    private func started() { waiting = nil }

    /// Syncs every `interval` until the task is cancelled (the server stops), the first one
    /// `interval` after the start.
    func run(every interval: Duration) async {
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { return }
            _ = await sync(reason: "every \(interval)")
        }
    }

    private nonisolated func perform(number: Int, reason: String) async -> SyncOutcome {
        let start = ContinuousClock.now
        var outcome = SyncOutcome(number: number, seconds: 0)
        logger.info("sync \(number) (\(reason)): refresh, then flush")
        var refreshError: (any Error)?
        do {
            outcome.refreshed = try await store.refresh()
        } catch {
            refreshError = error
            outcome.refreshError = OfflineStore.redacted("\(error)")
        }
        if let error = refreshError, OfflineStore.isNoAnswer(error) {
            // The service is away: a flush would wait for it as long again, to no end.
            outcome.flushError = "not tried: the refresh had no answer from the service"
        } else {
            do {
                outcome.flushed = try await store.flush()
            } catch {
                outcome.flushError = OfflineStore.redacted("\(error)")
            }
        }
        let elapsed = ContinuousClock.now - start
        outcome.seconds =
            Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let line =
            "sync \(number) done in \(String(format: "%.2f", outcome.seconds)) s: refresh "
            + (outcome.refreshError.map { "failed: \($0)" } ?? outcome.refreshed?.description ?? "-") + "; flush "
            + (outcome.flushError.map { "failed: \($0)" } ?? outcome.flushed?.description ?? "-")
        if outcome.succeeded { logger.info("\(line)") } else { logger.warning("\(line)") }
        for refused in outcome.flushed?.refused ?? [] { logger.warning("sync \(number): refused: \(refused)") }
        return outcome
    }
}
