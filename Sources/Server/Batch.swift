import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OfflineStore
import Query
import Storage
import Synchronization

/// JSON `$batch` (OData 4.01 JSON Format §19): `{"requests":[{"id","method","url","headers",
/// "body","atomicityGroup","dependsOn"}]}` → `{"responses":[{"id","status","headers","body"}]}`.
///
/// - The write units between two reads share one durable commit (`writeRun`, `servedAll`): each
///   unit in a nested transaction of its own, one fsync for all.
/// - Requests run in the order given. The requests of an atomicity group (adjacent, as the format
///   requires) run in ONE LMDB write transaction: all applied, or — when one fails — none; then the
///   failing request gets its error and the others of the group 424 Failed Dependency.
/// - A request whose `dependsOn` names a failed request or group fails with 424 and is not run.
/// - `$<id>` at the start of a URL stands for the entity that request `<id>` created (`$1/Items`).
/// - With `Repeatability-Request-ID` on the `$batch`, each write unit (a group, or a write outside
///   any group) is recorded under `<id>#<group or request id>` in the transaction that applies it;
///   a repeated batch replays those units and runs its reads again.
/// - The multipart form (`multipart/mixed`, OData V4 §11.7 and V2 [MS-ODATA] §2.2.7.6) runs the
///   same loop (`MultipartBatch.swift`): a top-level `application/http` part is one request, a
///   change set one atomicity group whose `Content-ID`s `$<id>` may name within it; a change set
///   that fails answers one error part.
struct Batch {
    let service: ODataService
    var store: OfflineStore { service.store }

    struct Item: Sendable {
        var id: String
        var method: HTTPRequest.Method
        var url: String
        var headers: [(String, String)]
        var body: [UInt8]
        var group: String?
        var dependsOn: [String]

        func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
    }

    /// What one request of the batch answered.
    struct Answer: Sendable {
        var status: Int
        var headers: [(String, String)]
        var body: [UInt8]
        /// `Set(key)` of the entity a create made, for `$id` references.
        var entityURL: String?

        /// What it takes of the batch's answer, at most: its body, its headers, and `framing`.
        var size: Int { body.count + headers.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 6 } + Self.framing }

        /// What either form puts around one answer, at most, besides its headers and the request's
        /// id: a multipart part's delimiter, MIME headers, status line and `Content-Length`, a
        /// change set's own delimiters; the keys of a JSON answer.
        static let framing = 256
    }

    /// 413 for a batch of more than `max` writes.
    static func tooManyWrites(_ max: Int) -> ODataFailure {
        ODataFailure(
            .contentTooLarge,
            "this $batch holds more than \(max) writes (POST, PATCH, MERGE, PUT, DELETE), the most one $batch may (serve --max-batch-writes \(max)); send them in several batches. Nothing of this batch was run",
            code: "TooManyWrites")
    }

    /// 413 for a JSON batch of more reads than the multipart form's parts (`maxMultipartParts`,
    /// where every read is a part of its own): past the answers' bound each answers 507 without
    /// running, but a million of them took `serve` over ten minutes to answer.
    static func tooManyReads() -> ODataFailure {
        ODataFailure(
            .contentTooLarge,
            "this $batch holds more than \(maxMultipartParts) reads (GET, HEAD), the most one $batch may; send them in several batches. Nothing of this batch was run",
            code: "TooManyReads")
    }

    /// Whether `method` writes.
    static func writes(_ method: HTTPRequest.Method) -> Bool { method != .get && method != .head }

    struct Failed: Error {
        var index: Int
        var failure: ODataFailure
    }

    func respond(_ request: inout Request) async throws -> Response {
        let type = request.headers[.contentType]?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces)
            .lowercased()
        if type == "multipart/mixed" { return try await respondMultipart(&request) }
        try Negotiation.requireJSONBody(request)
        try Negotiation.requireJSON(request)
        let raw = Array(try await request.collectBody(upTo: service.options.maxRequestBytes).readableBytesView)
        let items = try Self.parse(try JSON.parse(raw), maxWrites: service.options.maxBatchWrites)
        let (answers, headers) = try await run(items, request, referencesAcrossUnits: true)
        return Response.json(Self.render(items, answers), headers: headers)
    }

    /// Runs `items` unit by unit (the loop the JSON and the multipart forms share): their answers,
    /// in order, and the batch response's headers. `referencesAcrossUnits`: whether `$<id>` may
    /// name a create of an earlier unit (JSON batch), or only of the same unit (a multipart
    /// change set, V4 §11.7.3.1).
    func run(
        _ items: [Item], _ request: Request, referencesAcrossUnits: Bool
    ) async throws -> (answers: [Answer], headers: HTTPFields) {
        let repeatability = try Repeatability(
            request.headers, window: Double(store.repeatabilityWindowSeconds))
        let root = service.serviceRoot(request)
        let prefer = Prefer(request.headers[.prefer])
        let transactions = store.isOffline ? try Self.groupTransactions(items) : [:]

        // What the answers take so far (`Answer.size`): a read or a write unit past
        // `maxBatchResponseBytes` answers 507 instead (a write unit is undone), and so does every
        // unit after it, without running (else each would build most of an answer only to drop
        // it, and 100,000 creates answered 69 MB past a 16M bound).
        let limit = service.options.maxBatchResponseBytes
        var spent = 0
        var exhausted = false
        var answers = [Answer?](repeating: nil, count: items.count)
        var failedNames = Set<String>()
        var replayedAny = false
        var i = 0
        while i < items.count {
            // A unit: one request, or the adjacent requests of one atomicity group.
            var j = i + 1
            if let g = items[i].group { while j < items.count, items[j].group == g { j += 1 } }
            let unit = Array(i..<j)
            let unitName = items[i].group ?? items[i].id
            if let blocked = unit.flatMap({ items[$0].dependsOn }).first(where: failedNames.contains) {
                for k in unit {
                    answers[k] = Self.answer(
                        ODataFailure(
                            .init(code: 424, reasonPhrase: "Failed Dependency"),
                            "request '\(items[k].id)' depends on '\(blocked)', which failed"), v2: service.v2)
                    failedNames.insert(items[k].id)
                }
                failedNames.insert(unitName)
                i = j
                continue
            }
            if unit.count == 1, items[i].method == .get || items[i].method == .head {
                do {
                    answers[i] = try await read(
                        items[i], root: root, resolving: referencesAcrossUnits ? Self.references(answers, items) : [:],
                        budget: exhausted ? 0 : max(0, limit - spent - Answer.framing - 128))
                } catch {
                    answers[i] = Self.answer(ODataFailure(error), v2: service.v2)
                    failedNames.insert(items[i].id)
                    if answers[i]!.status == 507 { exhausted = true }
                }
                spent += answers[i]!.size
                i = j
                continue
            }
            // A write unit, and the write units after it up to the next read: one group commit.
            var units: [Range<Int>] = []
            var k = i
            while k < items.count {
                var e = k + 1
                if let g = items[k].group { while e < items.count, items[e].group == g { e += 1 } }
                if e == k + 1, items[k].method == .get || items[k].method == .head { break }
                units.append(k..<e)
                k = e
            }
            let (outcomes, refused) = await writeRun(
                units, items, root: root, transactions: transactions, failedBefore: failedNames,
                references: referencesAcrossUnits ? Self.references(answers, items) : nil,
                repeatability: repeatability, representation: prefer.returnRepresentation,
                budget: exhausted ? 0 : max(0, limit - spent))
            exhausted = exhausted || refused
            for (unit, outcome) in zip(units, outcomes) {
                let unitName = items[unit.lowerBound].group ?? items[unit.lowerBound].id
                switch outcome {
                case .applied(var unitAnswers, let replayed, let perRequest):
                    if perRequest {
                        // Gateway's headers on the request are answered with Gateway's.
                        let gateway = items[unit.lowerBound].header("Repeatability-Request-ID") == nil
                        for a in unitAnswers.indices {
                            unitAnswers[a].headers.append(
                                gateway
                                    ? ("RepeatabilityResult", "accepted")
                                    : ("Repeatability-Result", replayed ? "replayed" : "accepted"))
                        }
                    } else {
                        replayedAny = replayedAny || replayed
                    }
                    for (index, a) in zip(unit, unitAnswers) {
                        answers[index] = a
                        spent += a.size
                    }
                case .blocked(let name):
                    for index in unit {
                        answers[index] = Self.answer(
                            ODataFailure(
                                .init(code: 424, reasonPhrase: "Failed Dependency"),
                                "request '\(items[index].id)' depends on '\(name)', which failed"), v2: service.v2)
                        failedNames.insert(items[index].id)
                    }
                    failedNames.insert(unitName)
                case .failed(let f):
                    for index in unit {
                        answers[index] =
                            index == f.index
                            ? Self.answer(f.failure, v2: service.v2)
                            : Self.answer(
                                ODataFailure(
                                    .init(code: 424, reasonPhrase: "Failed Dependency"),
                                    "atomicity group '\(unitName)' failed at request '\(items[f.index].id)'; nothing in it was applied"
                                ), v2: service.v2)
                        failedNames.insert(items[index].id)
                    }
                    failedNames.insert(unitName)
                }
                for index in unit where outcome.isFailure { spent += answers[index]!.size }
            }
            i = k
        }
        var headers = HTTPFields()
        if let (name, value) = repeatability?.result(replayed: replayedAny) { headers[name] = value }
        return (answers.map { $0! }, headers)
    }

    /// `$id` → `Set(key)` for every earlier request that created an entity.
    static func references(_ answers: [Answer?], _ items: [Item]) -> [String: String] {
        var out: [String: String] = [:]
        for (a, item) in zip(answers, items) { if let url = a?.entityURL { out[item.id] = url } }
        return out
    }

    /// `url` with a leading `$id` replaced by the entity request `id` created, and any leading `/`,
    /// service root, or `http(s)://authority` removed.
    static func resolve(_ url: String, _ references: [String: String], root: String) throws -> String {
        var u = url
        if u.hasPrefix(root) {
            u.removeFirst(root.count)
        } else if let scheme = ["http://", "https://"].first(where: { u.lowercased().hasPrefix($0) }) {
            // An absolute URL by the name the client reached this service by (its Host, which
            // links no longer echo): the path after its authority.
            let rest = u.dropFirst(scheme.count)
            u = String(rest.drop { $0 != "/" })
        }
        while u.hasPrefix("/") { u.removeFirst() }
        guard u.hasPrefix("$"), !u.hasPrefix("$batch"), !u.hasPrefix("$metadata") else { return u }
        let name = String(u.dropFirst().prefix { $0 != "/" && $0 != "?" })
        guard let target = references[name] else {
            throw ODataFailure(
                .badRequest,
                "'$\(QueryError.quoting(name))' names no earlier request of this batch that created an entity")
        }
        return target + u.dropFirst(1 + name.count)
    }

    /// A read of the batch, on the query threads, its answer at most `budget` bytes (else 507).
    private func read(
        _ item: Item, root: String, resolving references: [String: String], budget: Int
    ) async throws -> Answer {
        let url = try Self.resolve(item.url, references, root: root)
        let store = self.store
        let pageSize = Prefer(item.header("Prefer")).maxPageSize ?? service.options.defaultPageSize
        let tooLarge = ODataFailure(
            .init(code: 507, reasonPhrase: "Insufficient Storage"),
            "the answers of this $batch would pass \(service.options.maxBatchResponseBytes) bytes (the service's limit on a batch's answers); read '\(QueryError.quoting(url))' outside the batch, or in pages (Prefer: odata.maxpagesize)"
        )
        // The limit reached already: not even the query runs.
        guard budget > 0 else { throw tooLarge }
        var options = ResultOptions(serviceRoot: root, etags: true)
        options.verbose = service.v2
        let readOptions = options
        var body = try await service.offload {
            var body: [UInt8] = []
            try store.query(url, format: .json, pageSize: pageSize, options: readOptions) { chunk in
                guard body.count + chunk.count <= budget else { throw tooLarge }
                body.append(contentsOf: chunk)
            }
            return body
        }
        if url.split(separator: "?", omittingEmptySubsequences: false)[0].hasSuffix("/$count") {
            if body.last == UInt8(ascii: "\n") { body.removeLast() }
            return Answer(status: 200, headers: [("Content-Type", "text/plain")], body: body)
        }
        return Answer(status: 200, headers: [("Content-Type", V2Dialect.jsonContentType(store))], body: body)
    }

    /// What became of one write unit of a run.
    enum UnitOutcome {
        /// Applied (or replayed from its record): the answers of its requests.
        case applied([Answer], replayed: Bool, perRequest: Bool)
        /// Not run: it depends on `name`, which failed.
        case blocked(String)
        /// Nothing of it applied: the request at `Failed.index` failed.
        case failed(Failed)

        var isFailure: Bool {
            if case .applied = self { return false }
            return true
        }
    }

    /// A unit refused without running, for depending on `name`, which failed.
    struct Blocked: Error { var name: String }

    /// What the units of a run did so far, for the units after them: written on the writer thread
    /// as each unit settles, in order (a unit run again after the map grew writes its slot again,
    /// after the units before it did), and read there by later units.
    final class RunProgress: @unchecked Sendable {
        var failed: [Set<String>]
        var entityURLs: [[String: String]]
        /// What each unit's answers take (`Answer.size`), when it was applied or replayed.
        var bytes: [Int]
        /// Whether each unit was refused for the answers' bound (507, undone).
        var refused: [Bool]
        init(count: Int) {
            failed = Array(repeating: [], count: count)
            entityURLs = Array(repeating: [:], count: count)
            bytes = Array(repeating: 0, count: count)
            refused = Array(repeating: false, count: count)
        }
    }

    /// Runs `units` (ranges of `items`, each a write unit: one write, or an atomicity group) in
    /// order, each in one served transaction of its own — all in ONE group commit (`servedAll`):
    /// a batch of N write units costs one durable commit, not N. A unit's answers travel out of
    /// its transaction as its recorded response's body (so a repeated batch replays them whole).
    /// A unit whose `dependsOn` names a request or group that failed — before the run
    /// (`failedBefore`) or in it — is not run. `references`: the entities earlier requests
    /// created, for `$id` across units (JSON batch), or nil when a reference names only its own
    /// unit (a multipart change set). A unit whose answers would take the run past `budget`
    /// bytes is undone and answers 507, as does every unit after it, without running; the second
    /// value says whether that happened.
    private func writeRun(
        _ units: [Range<Int>], _ items: [Item], root: String, transactions: [String: String],
        failedBefore: Set<String>,
        references: [String: String]?, repeatability: Repeatability?, representation: Bool?, budget: Int
    ) async -> (outcomes: [UnitOutcome], refused: Bool) {
        let store = self.store
        let progress = RunProgress(count: units.count)
        let tooLarge = ODataFailure(
            .init(code: 507, reasonPhrase: "Insufficient Storage"),
            "the answers of this $batch would pass \(service.options.maxBatchResponseBytes) bytes (serve --max-batch-response): this change was not applied; send it in another batch"
        )
        var served: [OfflineStore.ServedUnit] = []
        var perRequest: [Bool] = []
        for (u, range) in units.enumerated() {
            let unit = Array(items[range])
            let startIndex = range.lowerBound
            let unitName = unit[0].group ?? unit[0].id
            let names = Set(unit.map(\.id) + [unitName])
            let fingerprint = Array(
                unit.map { "\($0.method.rawValue) \($0.url)\n" + String(decoding: $0.body, as: UTF8.self) }.joined(
                    separator: "\n"
                ).utf8)
            // An offline store flushes the requests of an atomicity group as one change set: they
            // share ONE transaction id, every member of it — the one a member gave with
            // OfflineOData.TransactionID (`groupTransactions`), else one made for the group.
            let groupTransaction =
                unit[0].group.flatMap { transactions[$0] } ?? (unit.count > 1 ? "batch-\(UUID().uuidString)" : nil)
            let settled: @Sendable (Result<(response: RecordedResponse, replayed: Bool), Error>) -> Void = { result in
                switch result {
                case .success(let (response, _)):
                    progress.failed[u] = []
                    progress.entityURLs[u] = [:]
                    progress.bytes[u] = 0
                    for (item, answer) in zip(unit, (try? Self.decodeAnswers(response.body)) ?? []) {
                        if let url = answer.entityURL { progress.entityURLs[u][item.id] = url }
                        progress.bytes[u] += answer.size
                    }
                case .failure:
                    progress.failed[u] = names
                    progress.entityURLs[u] = [:]
                    progress.bytes[u] = 0
                }
            }
            // A write unit is repeatable by the batch's Repeatability-Request-ID (recorded per
            // unit), or else by the one its first request carries (OData 4.01 allows the headers
            // on the requests of a batch): a client re-sending a request in another batch gets
            // the answer it missed instead of a second application.
            var unitRepeatability = repeatability.map { "\($0.id)#\(unitName)" }
            var headerFailure: Failed? = nil
            perRequest.append(
                unitRepeatability == nil
                    && (unit[0].header("Repeatability-Request-ID") != nil || unit[0].header("RequestID") != nil))
            if perRequest[u] {
                var fields = HTTPFields()
                for (n, v) in unit[0].headers {
                    if let name = HTTPField.Name(n) { fields.append(HTTPField(name: name, value: v)) }
                }
                do {
                    unitRepeatability = try Repeatability(
                        fields, window: Double(store.repeatabilityWindowSeconds))?.id
                } catch {
                    headerFailure = Failed(index: startIndex, failure: ODataFailure(error))
                    unitRepeatability = nil
                }
            }
            let dependsOn = unit.flatMap(\.dependsOn)
            let refusedHeader = headerFailure
            served.append(
                OfflineStore.ServedUnit(
                    repeatabilityID: unitRepeatability, fingerprint: fingerprint,
                    body: { tx in
                        // The bound met before: not run.
                        progress.refused[u] = budget <= 0 || progress.refused[..<u].contains(true)
                        if progress.refused[u] { throw Failed(index: startIndex, failure: tooLarge) }
                        if let refusedHeader { throw refusedHeader }
                        let earlier = progress.failed[..<u]
                        if let blocked = dependsOn.first(where: { name in
                            failedBefore.contains(name) || earlier.contains { $0.contains(name) }
                        }) {
                            throw Blocked(name: blocked)
                        }
                        var refs: [String: String] = [:]
                        if let references {
                            refs = references
                            for urls in progress.entityURLs[..<u] { refs.merge(urls) { _, new in new } }
                        }
                        var answers: [Answer] = []
                        for (offset, item) in unit.enumerated() {
                            do {
                                let (answer, entityURL) = try Self.apply(
                                    item, tx, store: store, root: root, references: refs,
                                    transaction: groupTransaction, representation: representation)
                                if let entityURL { refs[item.id] = entityURL }
                                answers.append(answer)
                            } catch {
                                throw Failed(index: startIndex + offset, failure: ODataFailure(error))
                            }
                        }
                        let spent = progress.bytes[..<u].reduce(0, +)
                        if spent + answers.reduce(0, { $0 + $1.size }) > budget {
                            progress.refused[u] = true
                            throw Failed(index: startIndex, failure: tooLarge)
                        }
                        return RecordedResponse(status: 200, headers: [], body: Self.encodeAnswers(answers))
                    }, settled: settled))
        }
        let results = await store.servedAll(served)
        let outcomes = zip(units, results).enumerated().map { u, pair -> UnitOutcome in
            let (range, result) = pair
            switch result {
            case .success(let (recorded, replayed)):
                do {
                    return .applied(
                        try Self.decodeAnswers(recorded.body), replayed: replayed, perRequest: perRequest[u])
                } catch {
                    return .failed(Failed(index: range.lowerBound, failure: ODataFailure(error)))
                }
            case .failure(let blocked as Blocked):
                return .blocked(blocked.name)
            case .failure(let f as Failed):
                return .failed(f)
            case .failure(let error):
                // The transaction itself failed (disk full, …): the whole unit failed at its first request.
                return .failed(Failed(index: range.lowerBound, failure: ODataFailure(error)))
            }
        }
        return (outcomes, progress.refused.contains(true))
    }

    /// One write of a unit, inside its served transaction: its answer, and the entity URL a
    /// create made (for `$id` references).
    static func apply(
        _ item: Item, _ tx: ServedTransaction, store: OfflineStore, root: String, references: [String: String],
        transaction: String?, representation: Bool?
    ) throws -> (Answer, String?) {
        if item.method == .get || item.method == .head {
            throw ODataFailure(
                .badRequest, "a read cannot be part of an atomicity group here; send it outside the group")
        }
        let url = try resolve(item.url, references, root: root)
        let (resource, query) =
            url.firstIndex(of: "?").map { (String(url[..<$0]), String(url[url.index(after: $0)...])) } ?? (url, "")
        var link = try Links.operation(store, method: item.method, resource: resource, query: query, body: item.body)
        if let call = try Operations.call(store, resource: resource, query: query) {
            let expected =
                store.schema.version == .v4 || call.operation.kind == .function ? "POST" : call.operation.httpMethod
            guard call.operation.kind == .action, item.method.rawValue == expected else {
                throw ODataFailure.methodNotAllowed(
                    item.method, "\(call.operation.kind.rawValue) \(call.operation.name) in a change set",
                    allow: call.operation.kind == .action ? expected : "none (a function is read outside a change set)")
            }
            link = try Operations.write(store, call, body: item.body)
        }
        if !query.isEmpty, link == nil {
            throw ODataFailure(
                .badRequest,
                "\(item.method.rawValue) takes no query options in a batch ('\(QueryError.quoting(query))')")
        }
        if item.method != .delete, let type = item.header("Content-Type"),
            type.split(separator: ";", omittingEmptySubsequences: false)[0].trimmingCharacters(in: .whitespaces)
                .lowercased() != "application/json"
        {
            throw ODataFailure(
                .unsupportedMediaType, "unsupported Content-Type '\(QueryError.quoting(type))' in request '\(item.id)'")
        }
        let op =
            try link
            ?? Writes.operation(
                store, method: item.method, resource: resource, body: item.body, ifMatch: item.header("If-Match"))
        var options = try Writes.changeOptions(item.header)
        // The group's id for every member (`groupTransactions` refused a group naming two).
        if let transaction { options.transactionID = transaction }
        let (response, entityURL) = try Writes.apply(
            op, tx, store: store, root: root,
            representation: Prefer(item.header("Prefer")).returnRepresentation ?? representation, options: options)
        return (
            Answer(status: response.status, headers: response.headers, body: response.body, entityURL: entityURL),
            entityURL
        )
    }

    /// A failure as a request's answer, in the store's dialect (V2's error envelope for a V2 store).
    static func answer(_ f: ODataFailure, v2: Bool = false) -> Answer {
        var headers = [("Content-Type", v2 ? "application/json" : "application/json;odata.metadata=minimal")]
        for field in f.headers { headers.append((field.name.rawName, field.value)) }
        return Answer(status: Int(f.status.code), headers: headers, body: v2 ? V2Dialect.errorJSON(f) : f.json)
    }

    /// The transaction id each atomicity group of `items` was given with
    /// `OfflineOData.TransactionID` by any of its members, by group name: an offline store queues
    /// every member of a group under that one id, so the back end gets the group as ONE change set
    /// (members queued under two ids reached it as two, one applied and one refused). A group
    /// whose members name different ids is refused whole (400) before anything of the batch runs.
    static func groupTransactions(_ items: [Item]) throws -> [String: String] {
        var given: [String: (id: String, request: String)] = [:]
        for item in items {
            guard let group = item.group, let id = item.header("OfflineOData.TransactionID") else { continue }
            if let first = given[group], first.id != id {
                throw ODataFailure(
                    .badRequest,
                    "atomicity group '\(QueryError.quoting(group))' names two transaction ids: '\(QueryError.quoting(first.id))' (request '\(QueryError.quoting(first.request))') and '\(QueryError.quoting(id))' (request '\(QueryError.quoting(item.id))'); a group is one change set, with one OfflineOData.TransactionID or none; nothing of this batch was run"
                )
            }
            given[group] = given[group] ?? (id, item.id)
        }
        return given.mapValues(\.id)
    }
}
