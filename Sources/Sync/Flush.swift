import Foundation
import LMDB
package import Queue
package import Storage

/// What one flush did.
public struct FlushReport: Sendable, Hashable, CustomStringConvertible {
    /// Requests sent (a request sent again in a later round trip counts again).
    public var sent = 0
    /// Requests the service applied: they left the queue with the service's answer applied.
    public var succeeded = 0
    /// Of `succeeded`: requests sent again after an answer was lost that the service, not
    /// deduplicating repeated requests, refused — and that were found already applied by
    /// reading the entity back (see `Flush`).
    public var reconciled = 0
    /// Requests moved to ErrorArchive: refused by the service (a 4xx), and those depending on them.
    public var archived = 0
    /// `$batch` round trips.
    public var roundTrips = 0
    /// Why the flush stopped before the queue was done (a 5xx, no answer, an answer it could not
    /// read); nil when it ran to the end. What was not settled stays queued for the next flush.
    public var stopped: String?
    /// Requests (of the flushed category) still in the queue and not in error afterwards: those
    /// not settled when it stopped, and those waiting on a request outside the category.
    public var left = 0
    /// Creates whose key the service assigns that were sent again after their answer was lost, to
    /// a service that did not say it executed them once: each may have been applied twice. One
    /// line each — `request 7 (POST SalesOrderSet → SalesOrderSet('500001')): may have been applied
    /// twice: check SalesOrderSet for another entity like it` — also in the EventLog (type
    /// `InDoubt`), written in the transaction that settles the request, so a flush killed after
    /// it leaves the flag.
    public var inDoubt: [String] = []
    /// Conflicts resolved by a `server-wins` policy: the changes given up, the service's
    /// versions kept (the outcome record says so for each).
    public var resolvedByPolicy = 0
    /// The requests the service refused, one line each — `request 7 (PATCH Products('HT-1000')):
    /// 412 …: the service's message` — also in the ErrorArchive (`offline-store errors --show 7`).
    public var refused: [String] = []
    /// Messages the service sent with successful answers (SAP's `sap-message` header: warnings,
    /// information), one line each — `request 7 (POST A_SalesOrder('~1')): warning V1/302: …`.
    /// Each is also in the EventLog (type `Message`).
    public var messages: [String] = []

    public init() {}

    public var description: String {
        var s = "sent \(sent), succeeded \(succeeded)"
        if reconciled > 0 { s += " (\(reconciled) reconciled)" }
        if !inDoubt.isEmpty { s += " (\(inDoubt.count) in doubt: may have been applied twice)" }
        s += ", archived \(archived)"
        if resolvedByPolicy > 0 { s += " (\(resolvedByPolicy) conflicts resolved by policy)" }
        s += ", left \(left), round trips \(roundTrips)"
        if !messages.isEmpty { s += ", \(messages.count) message\(messages.count == 1 ? "" : "s") from the service" }
        if let stopped { s += "; stopped: \(stopped)" }
        return s
    }
}

/// The upload: the request queue sent to the service, in request-id order, in JSON `$batch`
/// round trips, against a `Backend`.
///
/// Each round:
/// 1. **plan and mark** (one write transaction): the next requests in id order whose
///    predecessors — earlier requests of the same entity, and the creates they refer to — are
///    done or in this round; never a request after a create with a local key (its URL or body
///    gets the service's key only from that create's answer); requests sharing a transaction id
///    as one atomicity group (a group once sent goes again as exactly the same group). They are
///    marked `sent` (attempts + 1, `firstSentAt` on the first attempt) and read back in the same
///    transaction, so a local change can never merge into a request on its way.
/// 2. **send** as one round trip (`Backend.send`: a `$batch` in the service's dialect): each
///    change with its repeatability identity (id and first-sent time, the same on every attempt),
///    the ETag to match from `etags`, its custom headers, and the predecessors in the same round
///    it depends on. How each goes over the wire is `Remote`'s business (`docs/design.md`, "Flush,
///    step by step").
/// 3. **judge** each answer: 2xx success; 424 dependent of a failure; 5xx, 401, 403, 407, 408, 429
///    or no answer: stop (nothing is the request's fault); any other 4xx: refused — unless the
///    request was sent before (its answer lost) and the service does not honour repeatability:
///    then a create meeting 409 whose entity on the service equals what it sent, a delete meeting
///    404, and a PATCH or PUT meeting 412 whose values are already there are successes
///    (**reconciliation**, by reading the entity back). A 428 (Precondition Required) for a
///    change sent without an ETag to match because an earlier change of its entity went in the same
///    round (a create, whose ETag only its answer brings) is not the request's fault either: it
///    was not applied and goes again in the next round, with the ETag (a service may require
///    one on every change; odatapy does). So is a 424 for a request whose predecessor in
///    the round the service took as failed but the client found applied (reconciliation).
///    A delete meeting 404 outside a change set is done (another copy deleted the entity first).
///    A change meeting 412 is a **conflict**: the service's entity is read back and kept with
///    the refusal (`RequestQueue.recordConflict`), and becomes the one a retry goes against.
/// 4. **settle** (one write transaction): a success leaves the queue with the service's answer
///    applied (`acknowledge`: its key — a local key is rewritten everywhere —, its properties)
///    and its new ETag recorded; a refusal goes to ErrorArchive with its dependents; a request
///    not settled stays `sent` and goes again, with the same repeatability id, next time.
///
/// A stop ends the flush after settling what was answered. An `EventLog` entry records each flush.
package struct Flush: Sendable {
    package struct Options: Sendable {
        /// Only requests of this upload category (nil: all).
        package var category: String?
        /// Requests per `$batch` round trip (an atomicity group larger than this goes alone).
        package var batchSize: Int
        /// Sent with every round trip and every read (an `Authorization`, say).
        package var headers: [(String, String)]
        /// Whether a re-sent request refused as already applied is checked and taken as success.
        package var reconcile: Bool
        /// Called after each round trip with the report so far.
        package var progress: (@Sendable (FlushReport) -> Void)?
        /// What the service offers (`Backend.capabilities`; `Flush.init` takes the backend's).
        package var capabilities: BackendCapabilities
        /// The sync role's settings (`Flush.init` reads the store's, once for this flush).
        package var settings = SyncSettings()

        package init(
            category: String? = nil, batchSize: Int = 50, headers: [(String, String)] = [], reconcile: Bool = true,
            capabilities: BackendCapabilities = .v4, progress: (@Sendable (FlushReport) -> Void)? = nil
        ) {
            self.category = category
            self.batchSize = batchSize
            self.headers = headers
            self.reconcile = reconcile
            self.capabilities = capabilities
            self.progress = progress
        }
    }

    package let queue: RequestQueue
    package let backend: any Backend
    package let options: Options

    package init(queue: RequestQueue, backend: any Backend, options: Options) throws {
        self.queue = queue
        self.backend = backend
        var options = options
        options.capabilities = backend.capabilities
        options.settings = try queue.store.syncSettings()
        self.options = options
    }

    var store: EntityStore { queue.store }

    /// One request on its way: the record as marked sent, and the change it sends.
    package struct Outgoing: Sendable {
        package var record: RequestRecord
        package var change: OutgoingChange
        /// The record as it was before this marking: put back if the request does not go after all.
        package var before: RequestRecord?

        package init(record: RequestRecord, change: OutgoingChange, before: RequestRecord? = nil) {
            (self.record, self.change, self.before) = (record, change, before)
        }
    }

    /// What an answer means for its request.
    package enum Verdict: Sendable {
        /// Applied: acknowledge with the service's image (nil: none came back) and ETag.
        /// `inDoubt`: a create whose key the service assigns, sent again after its answer was lost,
        /// to a service that did not say it executed it once (`RepeatabilityResult.accepted`): it
        /// may have been applied twice.
        /// `status`: the answer's (nil: none, a 404 to a delete taken as done, say).
        /// `mediaETag`: of a stream replacement, the stream's new media ETag (nil: none given).
        case success(
            image: Properties?, etag: String?, reconciled: Bool, inDoubt: Bool = false, status: Int? = nil,
            mediaETag: String? = nil)
        /// Refused (a 4xx): archive it and its dependents.
        case refused(ServiceError)
        /// Refused for a stale ETag (412): archived as `refused`, with the service's entity as it
        /// is now (nil: gone there) and its ETag, read back when the refusal came — the conflict's
        /// third version (`RequestQueue.recordConflict`).
        /// `mediaETag`: of a stream replacement, the stream's media ETag on the service now.
        case conflict(ServiceError, server: Properties?, etag: String?, mediaETag: String? = nil)
        /// Not applied because request `cause` of its atomicity group was refused: archive it as a
        /// dependent of that one.
        case refusedWith(cause: Int64, ServiceError)
        /// 424: not run, a request it depends on failed. Archived already if that one was refused;
        /// otherwise left queued.
        case dependent(ServiceError)
        /// Not applied, for a reason the next round removes (a 428 for want of an ETag that the
        /// answer to an earlier request of the same round brought): left queued; the flush goes on.
        case again(String)
        /// Not settled (a 5xx, an answer that cannot be read, a member of a group that stopped):
        /// stays queued and `sent`; the flush stops.
        case stop(String)
    }

    /// What settling a round did.
    package struct Settled: Sendable, Hashable {
        package var succeeded: [Int64] = []
        package var reconciled: [Int64] = []
        /// Of `succeeded`: the creates that may have been applied twice (`Verdict.success`'s
        /// `inDoubt`), each with the line that says so (`FlushReport.inDoubt`).
        package var inDoubt: [Int64: String] = [:]
        package var archived: [Int64] = []
        /// Of `archived`: the requests the service refused, each with the line that says so
        /// (`FlushReport.refused`).
        package var refusals: [Int64: String] = [:]
        /// Conflicts a `server-wins` policy resolved (the change given up, the service's version kept).
        package var resolved: [Int64] = []
        /// Conflicts a `client-wins` policy sent again (pending, against the service's version).
        package var retried: [Int64] = []
        /// Requests answered but left queued (their reason, the first one).
        package var left: [Int64] = []
        package var stop: String?
    }

    // MARK: The whole flush

    package func run() async throws -> FlushReport {
        guard options.batchSize >= 1 else {
            throw EntityError.badInput("the batch size must be at least 1, not \(options.batchSize)")
        }
        var report = FlushReport()
        let started = EDMDateTimeOffset.now
        do {
            // Each round goes as soon as the answer to the one before it has been judged all
            // successful: it was planned and marked sent (durably) while that one was on its way,
            // in the transaction that settled the round before that — one durable commit a round
            // trip, made while the service works. Planned without the round on its way, it holds
            // nothing that waits for that round's answers (see `plan`'s `excluding`). When that
            // round is not all successful, the one marked after it does not go: the settlement
            // takes back its marking and plans again. A crash or a cancellation after a marking
            // leaves requests marked sent and not sent, as a crash there always could: the next
            // flush sends them, as it sends any request marked sent. A cancellation lets the round
            // on its way come back and be settled, and throws `CancellationError` then.
            report.archived += try await refuseChangeSetsThatCannotGoWhole().count
            var round = try await prepare()
            // The round before `round`: answered, judged all successful, not yet settled.
            var answered: (round: [Outgoing], verdicts: [Verdict])? = nil
            while !round.isEmpty {
                let sending = Task { [self, round] in try await send(round) }
                report.roundTrips += 1
                report.sent += round.count
                // While `round` is on its way: settle the round before it, and mark the round after it.
                var following: [Outgoing] = []
                var stop: String? = nil
                do {
                    let excluded = Set(round.map(\.record.id))
                    if let a = answered {
                        let (settled, next) = try await settleAndPrepare(a.round, a.verdicts, excluding: excluded)
                        answered = nil
                        stop = account(settled, of: a.round, into: &report)
                        following = next ?? []
                    } else if !Task.isCancelled {
                        following = try await prepare(excluding: excluded)
                    }
                } catch {
                    sending.cancel()
                    _ = await sending.result
                    throw error
                }
                let answers: [ChangeAnswer]
                let verdicts: [Verdict]
                var unsent = false
                do {
                    do { answers = try await sending.value } catch BackendError.unreachable(let m) {
                        unsent = true
                        throw BackendError.unreachable(m)
                    }
                    verdicts = try await judge(round, answers)
                } catch let e as BackendError {
                    report.stopped = stop ?? e.description
                    // No connection: `round` was not sent either, and is taken back with the
                    // round marked after it (not sent, no attempt counted: `undo` works on it).
                    var marked = following
                    if unsent {
                        marked += round
                        report.sent -= round.count
                        report.roundTrips -= 1
                    }
                    if !marked.isEmpty {
                        let (queue, marked) = (self.queue, marked)
                        try await store.write(usingReserve: true) { t in try Self.takeBack(t, queue: queue, marked) }
                    }
                    break
                }
                for (o, answer) in zip(round, answers) where answer.isSuccess {
                    for m in answer.messages {
                        let r = o.record
                        report.messages.append(
                            "request \(r.id) (\(r.method.rawValue) \(r.entitySet)(\(r.entityKey))): \(m)")
                    }
                }
                let allApplied = verdicts.allSatisfy { if case .success = $0 { true } else { false } }
                if stop == nil, allApplied, !following.isEmpty, !Task.isCancelled {
                    answered = (round, verdicts)
                    round = following
                    continue
                }
                // Not all applied (or stopped, or cancelled): the round marked after it stays here.
                let (settled, next) = try await settleAndPrepare(
                    round, verdicts, takingBack: following, goOn: stop == nil && !Task.isCancelled)
                if let why = stop ?? account(settled, of: round, into: &report) {
                    report.stopped = why
                    break
                }
                round = next ?? []
            }
            // Cancelled: what was on its way was answered and settled; the rest stays queued.
            try Task.checkCancellation()
            report.left = try left()
            try await log(report, started: started, outcome: report.stopped == nil ? "succeeded" : "failed")
        } catch {
            if let left = try? self.left() { report.left = left }
            let outcome = error is CancellationError ? "cancelled" : "failed"
            if report.stopped == nil { report.stopped = "\(error)" }
            try? await log(report, started: started, outcome: outcome)
            throw error
        }
        return report
    }

    /// Requests of the flushed category still queued and not in error.
    package func left() throws -> Int {
        let (queue, category) = (self.queue, options.category)
        return try store.read { t in
            var n = 0
            try queue.records.scan(t) { p in
                if let r = try? RequestRecord(p), r.status != .error, category == nil || r.uploadCategory == category {
                    n += 1
                }
                return true
            }
            return n
        }
    }

    func log(_ report: FlushReport, started: EDMDateTimeOffset, outcome: String) async throws {
        let queue = self.queue
        var details = report.description
        if let c = options.category { details = "category \(c): " + details }
        let (sent, text, messages) = (report.sent, details, report.messages)
        try await store.write(usingReserve: true) { t in
            // The service's messages first (the EventLog keeps the newest 100: at most 20 of them).
            for m in messages.prefix(20) {
                // `request N (METHOD Set(key)): severity …`
                let severity =
                    m.range(of: "): ").map { String(m[$0.upperBound...].prefix { $0 != ":" && $0 != " " }) } ?? "info"
                try queue.logEvent(
                    t, type: "Message", startedAt: started, finishedAt: .now, outcome: severity, requests: 1,
                    details: String(m.prefix(1_000)))
            }
            try queue.logEvent(
                t, type: "Upload", startedAt: started, finishedAt: .now, outcome: outcome, requests: sent, details: text
            )
        }
    }
}
