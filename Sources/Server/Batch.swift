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
    }

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
        let items = try Self.parse(try JSON.parse(raw))
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
            request.headers, window: Double(store.configuration.repeatabilityWindowSeconds))
        let root = service.serviceRoot(request)
        let prefer = Prefer(request.headers[.prefer])
        let transactions = store.isOffline ? try Self.groupTransactions(items) : [:]

        // What the answers take so far: a read past `maxBatchResponseBytes` answers 507 instead,
        // and so does every read after it, without running (else each would build most of an
        // answer only to drop it).
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
                        budget: exhausted ? 0 : max(0, service.options.maxBatchResponseBytes - spent))
                } catch {
                    answers[i] = Self.answer(ODataFailure(error), v2: service.v2)
                    failedNames.insert(items[i].id)
                    if answers[i]!.status == 507 { exhausted = true }
                }
                spent += answers[i]!.body.count
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
            let outcomes = await writeRun(
                units, items, root: root, transactions: transactions, failedBefore: failedNames,
                references: referencesAcrossUnits ? Self.references(answers, items) : nil,
                repeatability: repeatability, representation: prefer.returnRepresentation)
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
                        spent += a.body.count
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
    }

    /// A unit refused without running, for depending on `name`, which failed.
    struct Blocked: Error { var name: String }

    /// What the units of a run did so far, for the units after them: written on the writer thread
    /// as each unit settles, in order (a unit run again after the map grew writes its slot again,
    /// after the units before it did), and read there by later units.
    final class RunProgress: @unchecked Sendable {
        var failed: [Set<String>]
        var entityURLs: [[String: String]]
        init(count: Int) {
            failed = Array(repeating: [], count: count)
            entityURLs = Array(repeating: [:], count: count)
        }
    }

    /// Runs `units` (ranges of `items`, each a write unit: one write, or an atomicity group) in
    /// order, each in one served transaction of its own — all in ONE group commit (`servedAll`):
    /// a batch of N write units costs one durable commit, not N. A unit's answers travel out of
    /// its transaction as its recorded response's body (so a repeated batch replays them whole).
    /// A unit whose `dependsOn` names a request or group that failed — before the run
    /// (`failedBefore`) or in it — is not run. `references`: the entities earlier requests
    /// created, for `$id` across units (JSON batch), or nil when a reference names only its own
    /// unit (a multipart change set).
    private func writeRun(
        _ units: [Range<Int>], _ items: [Item], root: String, transactions: [String: String],
        failedBefore: Set<String>,
        references: [String: String]?, repeatability: Repeatability?, representation: Bool?
    ) async -> [UnitOutcome] {
        let store = self.store
        let progress = RunProgress(count: units.count)
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
                    for (item, answer) in zip(unit, (try? Self.decodeAnswers(response.body)) ?? []) {
                        if let url = answer.entityURL { progress.entityURLs[u][item.id] = url }
                    }
                case .failure:
                    progress.failed[u] = names
                    progress.entityURLs[u] = [:]
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
                        fields, window: Double(store.configuration.repeatabilityWindowSeconds))?.id
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
                        return RecordedResponse(status: 200, headers: [], body: Self.encodeAnswers(answers))
                    }, settled: settled))
        }
        let results = await store.servedAll(served)
        return zip(units, results).enumerated().map { u, pair in
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
        if !query.isEmpty {
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
        let op = try Writes.operation(
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

    // MARK: Encoding

    /// Parses and checks the request: ids unique, methods known, groups adjacent, `dependsOn`
    /// naming earlier requests or groups only.
    static func parse(_ json: JSON) throws -> [Item] {
        guard case .array(let requests)? = json["requests"] else {
            throw ODataFailure(.badRequest, "a JSON batch is an object with a \"requests\" array")
        }
        var items: [Item] = []
        var seen = Set<String>(), groups = Set<String>(), closedGroups = Set<String>()
        for (n, r) in requests.enumerated() {
            guard case .object = r else {
                throw ODataFailure(.badRequest, "request \(n + 1) of the batch is not an object")
            }
            guard case .string(let id)? = r["id"], !id.isEmpty else {
                throw ODataFailure(.badRequest, "request \(n + 1) of the batch has no \"id\"")
            }
            guard seen.insert(id).inserted else {
                throw ODataFailure(.badRequest, "request id '\(QueryError.quoting(id))' appears twice in the batch")
            }
            guard case .string(let m)? = r["method"], let method = HTTPRequest.Method(m.uppercased()),
                [.get, .head, .post, .patch, .put, .delete].contains(method)
            else {
                throw ODataFailure(
                    .badRequest, "request '\(QueryError.quoting(id))' has no method, or one this service does not take")
            }
            guard case .string(let url)? = r["url"] else {
                throw ODataFailure(.badRequest, "request '\(QueryError.quoting(id))' has no \"url\"")
            }
            var headers: [(String, String)] = []
            if let h = r["headers"] {
                guard case .object(let members) = h else {
                    throw ODataFailure(
                        .badRequest, "the headers of request '\(QueryError.quoting(id))' are not an object")
                }
                for (name, value) in members {
                    guard case .string(let v) = value else {
                        throw ODataFailure(
                            .badRequest,
                            "header '\(QueryError.quoting(name))' of request '\(QueryError.quoting(id))' is not a string"
                        )
                    }
                    headers.append((name, v))
                }
            }
            var body: [UInt8] = []
            switch r["body"] {
            case nil, .null?: break
            case .string(let s)?: body = Array(s.utf8)
            case let v?: var text = ""; JSONWriter.write(v, to: &text); body = Array(text.utf8)
            }
            var group: String? = nil
            if let g = r["atomicityGroup"] {
                guard case .string(let name) = g, !name.isEmpty else {
                    throw ODataFailure(
                        .badRequest, "the atomicityGroup of request '\(QueryError.quoting(id))' is not a string")
                }
                if closedGroups.contains(name) {
                    throw ODataFailure(
                        .badRequest, "the requests of atomicity group '\(QueryError.quoting(name))' are not adjacent")
                }
                if seen.contains(name) && !groups.contains(name) {
                    throw ODataFailure(
                        .badRequest, "atomicity group '\(QueryError.quoting(name))' has the name of a request")
                }
                group = name
            }
            if let last = items.last?.group, last != group { closedGroups.insert(last) }
            if let group { groups.insert(group) }
            var dependsOn: [String] = []
            if let d = r["dependsOn"] {
                guard case .array(let names) = d else {
                    throw ODataFailure(.badRequest, "dependsOn of request '\(QueryError.quoting(id))' is not an array")
                }
                for case .string(let name) in names {
                    guard (seen.contains(name) && name != id) || (groups.contains(name) && name != group) else {
                        throw ODataFailure(
                            .badRequest,
                            "request '\(QueryError.quoting(id))' depends on '\(QueryError.quoting(name))', which is not an earlier request or group"
                        )
                    }
                    dependsOn.append(name)
                }
            }
            items.append(
                Item(id: id, method: method, url: url, headers: headers, body: body, group: group, dependsOn: dependsOn)
            )
        }
        return items
    }

    static func render(_ items: [Item], _ answers: [Answer]) -> [UInt8] {
        var out = JSONBuffer()
        out.append("{\"responses\":[")
        for (n, (item, a)) in zip(items, answers).enumerated() {
            if n > 0 { out.append(UInt8(ascii: ",")) }
            out.append("{\"id\":")
            out.appendString(item.id)
            if let g = item.group { out.append(",\"atomicityGroup\":"); out.appendString(g) }
            out.append(",\"status\":")
            out.appendInt(Int64(a.status))
            out.append(",\"headers\":{")
            for (k, (name, value)) in a.headers.enumerated() {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                out.appendString(name.lowercased())
                out.append(UInt8(ascii: ":"))
                out.appendString(value)
            }
            out.append("}")
            if !a.body.isEmpty {
                out.append(",\"body\":")
                let isJSON = a.headers.contains {
                    $0.0.lowercased() == "content-type" && $0.1.hasPrefix("application/json")
                }
                if isJSON {
                    var body = a.body
                    while body.last == UInt8(ascii: "\n") { body.removeLast() }
                    out.bytes.append(contentsOf: body)
                } else {
                    out.appendString(String(decoding: a.body, as: UTF8.self))
                }
            }
            out.append("}")
        }
        out.append("]}\n")
        return out.bytes
    }

    /// A unit's answers as the body of its recorded response: a JSON array of
    /// `{"status","headers":[[name,value]…],"body":"<base64>","entity":url}`.
    static func encodeAnswers(_ answers: [Answer]) -> [UInt8] {
        var out = JSONBuffer()
        out.append("[")
        for (n, a) in answers.enumerated() {
            if n > 0 { out.append(UInt8(ascii: ",")) }
            out.append("{\"status\":")
            out.appendInt(Int64(a.status))
            out.append(",\"headers\":[")
            for (k, (name, value)) in a.headers.enumerated() {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                out.append("[")
                out.appendString(name)
                out.append(UInt8(ascii: ","))
                out.appendString(value)
                out.append("]")
            }
            out.append("],\"body\":")
            out.appendString(Data(a.body).base64EncodedString())
            if let url = a.entityURL { out.append(",\"entity\":"); out.appendString(url) }
            out.append("}")
        }
        out.append("]")
        return out.bytes
    }

    static func decodeAnswers(_ bytes: [UInt8]) throws -> [Answer] {
        guard case .array(let list) = try JSON.parse(bytes) else {
            throw ODataFailure(.internalServerError, "a recorded batch unit is not an array")
        }
        return try list.map { a in
            guard case .number(let s)? = a["status"], let status = Int(s), case .array(let hs)? = a["headers"],
                case .string(let b64)? = a["body"], let body = Data(base64Encoded: b64)
            else {
                throw ODataFailure(.internalServerError, "a recorded batch answer is malformed")
            }
            var headers: [(String, String)] = []
            for case .array(let pair) in hs {
                if pair.count == 2, case .string(let n) = pair[0], case .string(let v) = pair[1] {
                    headers.append((n, v))
                }
            }
            var url: String? = nil
            if case .string(let u)? = a["entity"] { url = u }
            return Answer(status: status, headers: headers, body: Array(body), entityURL: url)
        }
    }
}
