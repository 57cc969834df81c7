import LMDB
import Foundation
import Queue
import Storage

/// What one flush did.
public struct FlushReport: Sendable, Hashable, CustomStringConvertible {
    /// Requests sent (a request sent again in a later round trip counts again).
    public var sent = 0
    /// Requests the service applied: they left the queue with the service's answer applied.
    public var succeeded = 0
    /// Of `succeeded`: requests sent again after an answer was lost that the service, not
    /// honouring `Repeatability-Request-ID`, refused — and that were found already applied by
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
    /// Messages the service sent with successful answers (SAP's `sap-message` header: warnings,
    /// information), one line each — `request 7 (POST A_SalesOrder('~1')): warning V1/302: …`.
    /// Each is also in the EventLog (type `Message`).
    public var messages: [String] = []

    public init() {}

    public var description: String {
        var s = "sent \(sent), succeeded \(succeeded)"
        if reconciled > 0 { s += " (\(reconciled) reconciled)" }
        s += ", archived \(archived), left \(left), round trips \(roundTrips)"
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
/// 2. **send** as one `$batch`: each request with `Repeatability-Request-ID` (its repeatability
///    id, the same on every attempt), `Repeatability-First-Sent`, `If-Match` with the ETag in
///    `etags`, its custom headers, and `dependsOn` naming the predecessors in the same batch.
/// 3. **judge** each answer: 2xx success; 424 dependent of a failure; 5xx, 401, 403, 407, 408, 429
///    or no answer: stop (nothing is the request's fault); any other 4xx: refused — unless the
///    request was sent before (its answer lost) and the service does not honour repeatability:
///    then a create meeting 409 whose entity on the service equals what it sent, a delete meeting
///    404, and a PATCH or PUT meeting 412 whose values are already there are successes
///    (**reconciliation**, by reading the entity back). A 428 (Precondition Required) for a
///    change sent without `If-Match` because an earlier change of its entity went in the same
///    round (a create, whose ETag only its answer brings) is not the request's fault either: it
///    was not applied and goes again in the next round, with the ETag (a service may require
///    `If-Match` on every change; odatapy does). So is a 424 for a request whose predecessor in
///    the round the service took as failed but the client found applied (reconciliation).
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
        /// The method of a partial update: nil for the service's own (`PATCH` for V4, `MERGE` for
        /// V2, which SAP Gateway takes inside and outside `$batch`), or `PATCH` for a V2 service
        /// configured to take it.
        package var updateMethod: String?

        package init(
            category: String? = nil, batchSize: Int = 50, headers: [(String, String)] = [], reconcile: Bool = true,
            updateMethod: String? = nil, progress: (@Sendable (FlushReport) -> Void)? = nil
        ) {
            self.category = category
            self.batchSize = batchSize
            self.headers = headers
            self.reconcile = reconcile
            self.updateMethod = updateMethod
            self.progress = progress
        }
    }

    package let queue: RequestQueue
    package let backend: any Backend
    package let options: Options

    package init(queue: RequestQueue, backend: any Backend, options: Options) {
        self.queue = queue
        self.backend = backend
        self.options = options
    }

    var store: EntityStore { queue.store }
    var reader: PayloadReader { PayloadReader(schema: store.schema, shapes: store.entityShapes) }

    /// One request on its way: the record as marked sent, and what goes over the wire.
    package struct Outgoing: Sendable {
        package var record: RequestRecord
        package var request: BackendRequest
        /// The record as it was before this marking: put back if the request does not go after all.
        package var before: RequestRecord?

        package init(record: RequestRecord, request: BackendRequest, before: RequestRecord? = nil) {
            (self.record, self.request, self.before) = (record, request, before)
        }
    }

    /// What an answer means for its request.
    package enum Verdict: Sendable {
        /// Applied: acknowledge with the service's image (nil: none came back) and ETag.
        case success(image: Properties?, etag: String?, reconciled: Bool)
        /// Refused (a 4xx): archive it and its dependents.
        case refused(ServiceError)
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
        package var archived: [Int64] = []
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
            var round = try await prepare()
            // The round before `round`: answered, judged all successful, not yet settled.
            var answered: (round: [Outgoing], verdicts: [Verdict])? = nil
            while !round.isEmpty {
                let (backend, requests, headers) = (self.backend, round.map(\.request), options.headers)
                let sending = Task { try await backend.batch(requests, headers: headers) }
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
                let responses: [BackendResponse]
                let verdicts: [Verdict]
                do {
                    responses = try await sending.value
                    verdicts = try await judge(round, responses)
                } catch let e as BackendError {
                    report.stopped = stop ?? e.description
                    if !following.isEmpty {
                        let (queue, marked) = (self.queue, following)
                        try await store.write { t in try Self.takeBack(t, queue: queue, marked) }
                    }
                    break
                }
                for (o, response) in zip(round, responses) where response.isSuccess {
                    for m in Self.sapMessages(response) {
                        let r = o.record
                        report.messages.append(
                            "request \(r.id) (\(o.request.method) \(r.entitySet)(\(r.entityKey))): \(m)")
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
        try await store.write { t in
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

    /// SAP's `sap-message` header (a JSON object: `code`, `message`, `severity`, `target`,
    /// `details` with more of the same), one line per message: `warning V1/302: text (target X)`.
    /// A header that is not such JSON is kept as its text.
    static func sapMessages(_ response: BackendResponse) -> [String] {
        guard let header = response.header("sap-message"), !header.isEmpty else { return [] }
        guard let json = try? JSON.parse(Array(header.utf8)), case .object = json else {
            return ["info: " + String(header.prefix(500))]
        }
        func line(_ j: JSON) -> String? {
            guard case .string(let text)? = j["message"] else { return nil }
            var severity = "info"
            if case .string(let s)? = j["severity"], !s.isEmpty { severity = s.lowercased() }
            var out = severity
            if case .string(let c)? = j["code"], !c.isEmpty { out += " " + c }
            out += ": " + text
            if case .string(let target)? = j["target"], !target.isEmpty { out += " (target \(target))" }
            return out
        }
        var out: [String] = []
        if let first = line(json) { out.append(first) }
        if case .array(let details)? = json["details"] { out += details.compactMap(line) }
        return out
    }

    // MARK: 1. Plan and mark

    /// Plans the next round (without the requests `excluding` names: a round on its way) and
    /// marks its requests sent, in one write transaction.
    package func prepare(excluding: Set<Int64> = []) async throws -> [Outgoing] {
        let (queue, options) = (self.queue, self.options)
        return try await store.write { t in try Self.prepare(t, queue: queue, options: options, excluding: excluding) }
    }

    /// The next round's requests (see `Flush`), marked sent in `t`, with what goes over the wire.
    package static func prepare(
        _ t: WriteView, queue: RequestQueue, options: Options, now: EDMDateTimeOffset = .now,
        excluding: Set<Int64> = []
    ) throws -> [Outgoing] {
        let planned = try plan(t.reader, queue: queue, options: options, excluding: excluding)  // FlushPlan.swift
        if planned.isEmpty { return [] }
        let etags = ServerETags(store: queue.store)
        var out: [Outgoing] = []
        var position: [Int64: Int] = [:]  // where each request of the round stands in `out`
        for p in planned {
            // Planned from this transaction's reading of the queue: the record is there.
            let (before, r) = try queue.markSentKeepingBefore(t, id: p.id, at: now)
            let etag = p.ifMatch ? try etags.get(t.reader, set: r.entitySet, keyBytes: r.keyBytes) : nil
            var request =
                queue.store.schema.version == .v4
                ? try Self.request(r, queue: queue, etag: etag)
                : try Self.requestV2(r, queue: queue, etag: etag, updateMethod: options.updateMethod)
            request.group = p.group
            request.id = String(p.id)
            request.dependsOn = dependsOn(p, earlier: out, position: position)
            position[p.id] = out.count
            out.append(Outgoing(record: r, request: request, before: before))
        }
        return out
    }

    /// The `$batch` ids `planned` names in `dependsOn`: its predecessors, which the planner put
    /// earlier in the round (`position` finds them in `earlier`), except those of its own change
    /// set (members of one atomicity group are not linked by `dependsOn`).
    static func dependsOn(_ planned: PlannedRequest, earlier: [Outgoing], position: [Int64: Int]) -> [String] {
        planned.predecessors.filter { pred in
            guard let i = position[pred] else { return false }
            return earlier[i].request.group.map { $0 != planned.group } ?? true
        }.map(String.init)
    }

    /// What goes over the wire for `r`.
    static func request(_ r: RequestRecord, queue: RequestQueue, etag: String?) throws -> BackendRequest {
        let set = try queue.store.set(r.entitySet)
        let url: String
        var body: [UInt8]? = nil
        switch r.method {
        case .create:
            url = Self.percentEncoded(r.entitySet)
            var props = try queue.body(of: r)
            var left: Set<String> = []
            if r.localKey {
                // The service assigns the key: leave out the local values (not even as null, which
                // a service may refuse for a key property that is not nullable).
                for name in set.type.key {
                    guard let v = props[name], let p = set.type.property(name) else { continue }
                    if p.computed || Self.isLocalKeyValue(v) { props[name] = nil; left.insert(name) }
                }
            }
            let select = left.isEmpty ? nil : Set(set.type.properties.map(\.name)).subtracting(left)
            body = Array(queue.json(set, props, select: select).utf8)
        case .update, .replace:
            url = Self.percentEncoded("\(r.entitySet)(\(r.entityKey))")
            body = r.body.map { Array($0.utf8) } ?? Array("{}".utf8)
        case .delete:
            url = Self.percentEncoded("\(r.entitySet)(\(r.entityKey))")
        }
        var headers: [(String, String)] = []
        let ours: Set<String> = ["repeatability-request-id", "repeatability-first-sent", "if-match", "content-type"]
        for (k, v) in r.customHeaders.sorted(by: { $0.key < $1.key }) where !ours.contains(k.lowercased()) {
            headers.append((k, v))
        }
        headers.append(("Repeatability-Request-ID", r.repeatabilityID.description))
        headers.append(("Repeatability-First-Sent", Self.imfDate(r.firstSentAt ?? .now)))
        if r.method != .create, let etag { headers.append(("If-Match", etag)) }
        if r.method == .create, !headers.contains(where: { $0.0.lowercased() == "prefer" }) {
            headers.append(("Prefer", "return=representation"))
        }
        return BackendRequest(method: r.method.rawValue, url: url, headers: headers, body: body)
    }

    /// Negative integers and strings starting with `~` are local keys (`fillLocalKey`).
    static func isLocalKeyValue(_ v: Value) -> Bool {
        switch v {
        case .int(let i): i < 0
        case .string(let s): s.hasPrefix("~")
        default: false
        }
    }

    static func percentEncoded(_ path: String) -> String {
        // Most paths (`Products('HT-1000')`) need nothing: return them without Foundation's pass.
        if path.utf8.allSatisfy({ pathAllowed[Int($0)] }) { return path }
        return path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? path
    }

    /// The bytes `CharacterSet.urlPathAllowed` leaves as they are (RFC 3986 pchar and `/`, no `%`).
    private static let pathAllowed: [Bool] = (0..<256).map { b in
        guard b < 0x80, let scalar = Unicode.Scalar(b) else { return false }
        return CharacterSet.urlPathAllowed.contains(scalar)
    }

    /// An IMF-fixdate (RFC 9110 §5.6.7): `Sun, 06 Nov 1994 08:49:37 GMT`.
    package static func imfDate(_ at: EDMDateTimeOffset) -> String {
        var seconds = time_t(at.ticks / ticksPerSecond)
        var tm = tm()
        gmtime_r(&seconds, &tm)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return
            "\(days[Int(tm.tm_wday)]), \(two(tm.tm_mday)) \(months[Int(tm.tm_mon)]) \(tm.tm_year + 1900) \(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec)) GMT"
    }

    // MARK: 3. Judge

    /// What each answer means; reads entities back for reconciliation. Throws `BackendError`
    /// when such a read gets no answer.
    package func judge(_ round: [Outgoing], _ responses: [BackendResponse]) async throws -> [Verdict] {
        guard responses.count == round.count else {
            return round.map { _ in .stop("the service answered \(responses.count) requests of \(round.count)") }
        }
        var verdicts: [Verdict] = []
        var position: [String: Int] = [:]
        for (i, (o, response)) in zip(round, responses).enumerated() {
            var verdict = try await judge(o, response)
            // A 424 whose predecessors in the round are all settled by the client after all (a
            // re-sent create the service refused as existing, found applied by reconciliation) or
            // go again: not run, and nothing against it; it goes again in the next round.
            if case .dependent = verdict, o.request.group == nil, !o.request.dependsOn.isEmpty,
                o.request.dependsOn.allSatisfy({ id in
                    position[id].map { p in
                        switch verdicts[p] {
                        case .success, .again: true;
                        default: false
                        }
                    } ?? false
                })
            {
                verdict = .again(
                    "request \(o.record.id) was not run: the service took request \(o.request.dependsOn.joined(separator: ", ")) as failed"
                )
            }
            if let id = o.request.id { position[id] = i }
            verdicts.append(verdict)
        }
        // Members of an atomicity group that failed: 424 for all but the one that failed.
        var groups: [String: [Int]] = [:]
        for (i, o) in round.enumerated() { if let g = o.request.group { groups[g, default: []].append(i) } }
        for (_, members) in groups {
            guard
                let failing = members.first(where: {
                    if case .dependent = verdicts[$0] {
                        false
                    } else if case .success = verdicts[$0] {
                        false
                    } else {
                        true
                    }
                })
            else { continue }
            for m in members where m != failing {
                guard case .dependent(let e) = verdicts[m] else { continue }
                switch verdicts[failing] {
                case .refused, .refusedWith:
                    verdicts[m] = .refusedWith(
                        cause: round[failing].record.id,
                        ServiceError(
                            httpStatus: e.httpStatus, code: e.code,
                            message:
                                "not applied: request \(round[failing].record.id) of the same change set (transaction \(round[m].record.transactionID ?? "")) was refused"
                        ))
                default:
                    verdicts[m] = .stop(
                        "request \(round[m].record.id) was not applied: its change set stopped at request \(round[failing].record.id)"
                    )
                }
            }
        }
        return verdicts
    }

    func judge(_ o: Outgoing, _ response: BackendResponse) async throws -> Verdict {
        let r = o.record
        let what = "request \(r.id) (\(r.method.rawValue) \(r.entitySet)(\(r.entityKey)))"
        switch response.status {
        case 200..<300:
            return try await success(o, response)
        case 424:
            return .dependent(Self.serviceError(response))
        case 428 where o.request.header("If-Match") == nil && r.method != .create && !o.request.dependsOn.isEmpty:
            return .again(
                "\(what): the service requires If-Match; the ETag comes with the answer to request \(o.request.dependsOn.joined(separator: ", "))"
            )
        case 423:
            // Locked (SAP: "locked by user …"): not applied, and not the change's fault. It stays
            // queued, not archived; the flush goes on with the rest and the next one sends it.
            return .again("\(what): the service answered 423 (locked); it stays queued for the next flush")
        case 401, 403, 407, 408, 429, 500...:
            let e = Self.serviceError(response)
            return .stop("\(what): the service answered \(response.status): \(e.message)")
        case 400..<500:
            let e = Self.serviceError(response)
            if options.reconcile, r.attempts > 1, o.request.group == nil, let v = try await reconcile(o, response) {
                return v
            }
            return .refused(e)
        default:
            return .stop("\(what): the service answered \(response.status), which flush does not expect")
        }
    }

    /// A success: the service's image (from the body, or for a create without one from its
    /// `Location`) and the new ETag.
    func success(_ o: Outgoing, _ response: BackendResponse, reconciled: Bool = false) async throws -> Verdict {
        let r = o.record
        guard r.method != .delete else { return .success(image: nil, etag: nil, reconciled: reconciled) }
        var body = response.body
        var etag = response.header("ETag")
        if body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }), r.method == .create, r.localKey {
            // The key the service gave is needed: read the entity it created.
            guard let location = response.header("Location") ?? response.header("OData-EntityId") else {
                return .stop(
                    "request \(r.id) (POST \(r.entitySet)): the service answered \(response.status) without the entity or its Location; its key is unknown"
                )
            }
            let read = try await backend.send(BackendRequest(method: "GET", url: location, headers: options.headers))
            guard read.status == 200 else {
                return .stop("request \(r.id) (POST \(r.entitySet)): reading \(location) back answered \(read.status)")
            }
            body = read.body
            etag = read.header("ETag") ?? etag
        }
        var image: Properties? = nil
        if body.contains(where: { !($0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09) }) {
            do {
                let json = Self.entityJSON(try reader.answer(body, set: r.entitySet))
                if etag == nil { etag = Self.etag(in: json) }
                let set = try store.set(r.entitySet)
                // Properties the store's $metadata lacks are skipped: a service may add some.
                var notes: ServerNotes? = ServerNotes()
                image = try ValueJSON(schema: store.schema).properties(
                    from: json, properties: set.type.properties,
                    navigation: Set(set.type.navigationProperties.map(\.name)), owner: r.entitySet,
                    notes: &notes)
                // The answer is the whole entity only for a create or a PUT, or a PATCH answered with
                // a representation; its key must be the request's unless the key was local.
                let key = try set.keyValues(image!)
                if try set.encodeKey(key) != r.keyBytes && !(r.method == .create && r.localKey) {
                    return .stop(
                        "request \(r.id): the service answered with the entity \(r.entitySet)(\(set.describeKey(key))), not \(r.entitySet)(\(r.entityKey))"
                    )
                }
            } catch {
                return .stop("request \(r.id): the service's answer (\(response.status)) cannot be read: \(error)")
            }
        } else if r.method == .create && r.localKey {
            return .stop(
                "request \(r.id) (POST \(r.entitySet)): the service's answer has no entity; its key is unknown")
        }
        return .success(image: image, etag: etag, reconciled: reconciled)
    }

    /// A re-sent request refused as if already applied, checked against the service: nil when it
    /// is a true refusal.
    func reconcile(_ o: Outgoing, _ response: BackendResponse) async throws -> Verdict? {
        let r = o.record
        switch (r.method, response.status) {
        case (.delete, 404):
            return .success(image: nil, etag: nil, reconciled: true)
        case (.create, 409) where !r.localKey, (.update, 412), (.replace, 412):
            let url = try Self.entityURL(r, store: store)
            let read = try await backend.send(BackendRequest(method: "GET", url: url, headers: options.headers))
            guard read.status == 200 else { return nil }
            let set = try store.set(r.entitySet)
            guard let json = try? Self.entityJSON(reader.answer(read.body, set: r.entitySet)),
                let there = try? ValueJSON(schema: store.schema).properties(
                    from: json, properties: set.type.properties,
                    navigation: Set(set.type.navigationProperties.map(\.name)), owner: r.entitySet)
            else { return nil }
            var sent = try queue.body(of: r)
            let v2 = store.schema.version != .v4
            if v2, r.method == .create {
                // What went over the wire (`requestV2`): no nulls, no computed properties — V2
                // leaves what a create does not send at its default, which need not be null.
                sent = Properties(sent.filter { k, v in !v.isNull && !(set.type.property(k)?.computed ?? false) })
            }
            for (k, v) in sent where (there[k] ?? .null) != v {
                if v.isNull && (there[k] ?? .null).isNull { continue }
                return nil
            }
            if r.method != .update && !(v2 && r.method == .create) {
                // A create or PUT sent the whole entity: what it left out is null there (but what
                // the service computes).
                for (k, v) in there where sent[k] == nil && !v.isNull && !set.type.key.contains(k) {
                    if v2, set.type.property(k)?.computed == true { continue }
                    return nil
                }
            }
            var answer = read
            if answer.header("ETag") == nil, let tag = Self.etag(in: json) { answer.headers.append(("ETag", tag)) }
            return try await success(o, answer, reconciled: true)
        default:
            return nil
        }
    }

    /// The service's error as ErrorArchive keeps it (`{"error":{"code","message","innererror"}}`).
    static func serviceError(_ response: BackendResponse) -> ServiceError {
        var e = ServiceError(httpStatus: response.status, message: "HTTP \(response.status)")
        guard response.body.count <= ServiceMessage.maxBytes, let json = try? JSON.parse(response.body),
            let error = json["error"]
        else {
            if !response.body.isEmpty { e.message = String(decoding: response.body.prefix(2000), as: UTF8.self) }
            return e
        }
        if case .string(let c)? = error["code"] { e.code = c }
        // V4 `error.message`, V2 (SAP Gateway) `error.message.value`.
        if let m = ServiceMessage.parse(response.body)?.message { e.message = m }
        if let inner = error["innererror"] ?? error["details"], inner != .null, inner != .array([]) {
            e.innerError = inner.text
        }
        return e
    }

    // MARK: 4. Settle

    /// In one write transaction: takes back the marking of `takingBack` (a round marked that
    /// does not go), applies the verdicts of `round` and, when the flush goes on (`goOn`, and the
    /// settlement neither stopped it nor settled nothing), marks the next round sent, planned
    /// without `excluding` (the round on its way); nil for the next round when it was not prepared.
    func settleAndPrepare(
        _ round: [Outgoing], _ verdicts: [Verdict], takingBack: [Outgoing] = [], excluding: Set<Int64> = [],
        goOn: Bool = true
    ) async throws -> (Settled, [Outgoing]?) {
        let (queue, options) = (self.queue, self.options)
        let work = Array(zip(round.map(\.record), verdicts))
        let goOn = goOn && !Task.isCancelled
        return try await store.write { t in
            try Self.takeBack(t, queue: queue, takingBack)
            return try Self.settleAndPrepare(t, queue: queue, work, options: options, goOn: goOn, excluding: excluding)
        }
    }

    /// Puts back, in `t`, the records of requests marked sent that did not go (`unmarkSent`).
    static func takeBack(_ t: WriteView, queue: RequestQueue, _ outgoing: [Outgoing]) throws {
        for o in outgoing {
            if let before = o.before { try queue.unmarkSent(t, marked: o.record, before: before) }
        }
    }

    /// Adds what a settlement of `round` did to `report` (and tells `progress`); returns why the
    /// flush stops there, if it does: the settlement stopped it, or it settled nothing.
    func account(_ settled: Settled, of round: [Outgoing], into report: inout FlushReport) -> String? {
        report.succeeded += settled.succeeded.count
        report.reconciled += settled.reconciled.count
        report.archived += settled.archived.count
        options.progress?(report)
        if let stop = settled.stop { return stop }
        if settled.succeeded.isEmpty && settled.archived.isEmpty {
            return "no request of the last round trip could be settled"
        }
        return nil
    }

    /// `settle`, then — when `goOn` and the settlement neither stopped the flush nor settled
    /// nothing — `prepare` (without `excluding`), in `t`.
    package static func settleAndPrepare(
        _ t: WriteView, queue: RequestQueue, _ work: [(RequestRecord, Verdict)], options: Options, goOn: Bool = true,
        now: EDMDateTimeOffset = .now, excluding: Set<Int64> = []
    ) throws -> (Settled, [Outgoing]?) {
        let settled = try settle(t, queue: queue, work)
        guard goOn, settled.stop == nil, !(settled.succeeded.isEmpty && settled.archived.isEmpty) else {
            return (settled, nil)
        }
        return (settled, try prepare(t, queue: queue, options: options, now: now, excluding: excluding))
    }

    /// Applies each verdict, in order, in `t`.
    package static func settle(
        _ t: WriteView, queue: RequestQueue, _ work: [(RequestRecord, Verdict)]
    ) throws -> Settled {
        var out = Settled()
        var archived: Set<Int64> = []
        let etags = ServerETags(store: queue.store)
        func leave(_ id: Int64, _ why: String) {
            out.left.append(id)
            if out.stop == nil { out.stop = why }
        }
        for (sent, verdict) in work {
            // The record as it is now: an earlier verdict may have archived it as a dependent.
            guard let r = try queue.record(t.reader, id: sent.id), r.status == .sent else { continue }
            switch verdict {
            case .success(let image, let etag, let reconciled):
                let chain = try queue.chain(t.reader, set: r.entitySet, keyBytes: r.keyBytes)
                guard chain.first?.id == r.id else {
                    leave(r.id, "request \(r.id) succeeded but an earlier request of its entity is not settled")
                    continue
                }
                try queue.acknowledge(t, id: r.id, serverImage: image)
                var keyBytes = r.keyBytes
                if r.localKey, let image {
                    let set = try queue.store.set(r.entitySet)
                    keyBytes = try set.encodeKey(try set.keyValues(image))
                }
                if r.method == .delete {
                    // Gone here and at the service: its ETag and its defining requests' entries go too.
                    try Membership(store: queue.store).entityDeleted(t, set: r.entitySet, keyBytes: keyBytes)
                } else if let etag, !etag.isEmpty, ServerETags.isHeaderValue(etag) {
                    try etags.put(t, set: r.entitySet, keyBytes: keyBytes, etag: etag)
                } else {
                    try etags.delete(t, set: r.entitySet, keyBytes: keyBytes)  // the one held is stale now
                }
                out.succeeded.append(r.id)
                if reconciled { out.reconciled.append(r.id) }
            case .refused(let error):
                for id in try queue.archive(t, id: r.id, error: error) { archived.insert(id) }
            case .refusedWith(let cause, let error):
                for id in try queue.archive(t, id: r.id, error: error, causedBy: cause) { archived.insert(id) }
            case .dependent(let error):
                leave(r.id, "request \(r.id) was not applied: \(error.message)")
            case .again:
                out.left.append(r.id)
            case .stop(let why):
                leave(r.id, why)
            }
        }
        out.archived = archived.sorted()
        return out
    }
}

extension ServerETags {
    static func isHeaderValue(_ s: String) -> Bool {
        var s = s
        return s.withUTF8 { isHeaderValue(UnsafeRawBufferPointer($0)) }
    }
}

// MARK: The V2 dialect (SAP Gateway)

extension Flush {
    /// What goes over the wire for `r` to an OData V2 service: V2 JSON bodies
    /// (`ValueJSON.writeV2`), key predicates in V2 literals, `MERGE` for a partial update (or
    /// `updateMethod`), `If-Match` from `etags`. No `Repeatability-*` headers (V2 has none; a
    /// request whose answer was lost is reconciled instead, see `Flush`) and no `Prefer` (a V2
    /// create answers with the entity). A create leaves out the properties the service computes
    /// (`sap:creatable="false"`), which Gateway refuses to be sent, and local key values.
    static func requestV2(
        _ r: RequestRecord, queue: RequestQueue, etag: String?, updateMethod: String?
    ) throws -> BackendRequest {
        let set = try queue.store.set(r.entitySet)
        let json = ValueJSON(schema: queue.store.schema)
        var method = r.method.rawValue
        var url = try entityURL(r, store: queue.store)
        var body: [UInt8]? = nil
        switch r.method {
        case .create:
            url = percentEncoded(r.entitySet)
            let props = try queue.body(of: r)
            var select: Set<String> = []
            for p in set.type.properties {
                // Absent, not null: V2 leaves a property a create does not send at its default.
                guard let v = props[p.name], !v.isNull else { continue }
                if set.type.key.contains(p.name) {
                    if r.localKey, p.computed || isLocalKeyValue(v) { continue }
                } else if p.computed {
                    continue
                }
                select.insert(p.name)
            }
            body = json.writeV2(props, properties: set.type.properties, select: select)
        case .update:
            method = updateMethod ?? "MERGE"
            let props = try queue.body(of: r)
            body = json.writeV2(props, properties: set.type.properties, select: Set(props.keys))
        case .replace:
            let props = try queue.body(of: r)
            let select = Set(set.type.properties.filter { !$0.computed || set.type.key.contains($0.name) }.map(\.name))
            body = json.writeV2(props, properties: set.type.properties, select: select)
        case .delete:
            break
        }
        var headers: [(String, String)] = []
        let ours: Set<String> = ["repeatability-request-id", "repeatability-first-sent", "if-match", "content-type"]
        for (k, v) in r.customHeaders.sorted(by: { $0.key < $1.key }) where !ours.contains(k.lowercased()) {
            headers.append((k, v))
        }
        if r.method != .create, let etag { headers.append(("If-Match", etag)) }
        return BackendRequest(method: method, url: url, headers: headers, body: body)
    }

    /// `Set(key)` for `r`'s entity, the key in the service's literals (V2: `123L` for Int64,
    /// `guid'…'`, `datetime'…'`, `1.5M`), percent-encoded.
    static func entityURL(_ r: RequestRecord, store: EntityStore) throws -> String {
        guard store.schema.version != .v4 else { return percentEncoded("\(r.entitySet)(\(r.entityKey))") }
        let set = try store.set(r.entitySet)
        let values = try r.keyBytes.withUnsafeBytes { try KeyCodec.decode($0, count: set.type.key.count).values }
        let literals = zip(set.type.key, values).map { name, v in
            v2Literal(v, type: set.type.property(name)?.type.primitive)
        }
        let predicate =
            literals.count == 1 ? literals[0] : zip(set.type.key, literals).map { "\($0)=\($1)" }.joined(separator: ",")
        return percentEncoded("\(r.entitySet)(\(predicate))")
    }

    /// A key value as a V2 URI literal ([MS-ODATA] §2.2.2).
    static func v2Literal(_ v: Value, type: EDMPrimitive?) -> String {
        switch v {
        case .int(let i) where type == .int64: "\(i)L"
        case .decimal(let d): "\(d)M"
        case .guid(let g): "guid'\(g)'"
        case .dateTimeOffset(let d) where type == .dateTimeOffset: "datetimeoffset'\(d)'"
        case .dateTimeOffset(let d):
            // Edm.DateTime: the instant in UTC, without an offset.
            "datetime'\(String(EDMDateTimeOffset(ticks: d.ticks).description.dropLast()))'"
        case .timeOfDay(let t): "time'\(ValueJSON.v2Time(ticks: t.ticks))'"
        default: EntitySetHandle.literal(v)
        }
    }

    /// The entity of an answer: V2 wraps it in `d` (`{"d":{…}}`), V4 does not.
    static func entityJSON(_ json: JSON) -> JSON {
        if case .object(let members) = json, members.count == 1, let d = json["d"], case .object = d { return d }
        return json
    }

    /// The ETag an entity carries: V4 `@odata.etag`, V2 `__metadata.etag`.
    static func etag(in json: JSON) -> String? {
        if case .string(let tag)? = json["@odata.etag"] { return tag }
        if case .string(let tag)? = json["__metadata"]?["etag"] { return tag }
        return nil
    }
}
