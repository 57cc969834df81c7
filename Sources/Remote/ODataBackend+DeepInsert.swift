import Queue
import Storage
import Sync

/// Deep inserts: a create sent with the creates `inside` it inline in its body, and their
/// answers taken from its answer.
///
/// The body nests each related entity's body (as the dialect writes a create: V2 only what it
/// sets) under its navigation property — an array for a collection, an object for a
/// single-valued one; both dialects (OData 4.01 Part 1 §11.4.2.2; SAP Gateway's deep insert
/// takes the same arrays in V2 JSON). Its foreign key to the parent is left out: the nesting
/// states it. OData V4 requires the answer to hold the related entities created, expanded;
/// OData V2 does not, and `$expand` on a POST is refused by SAP Gateway ("SystemQueryOptions that
/// are not allowed for this Request Type"). So when the answer lacks them, the entity is read
/// back with them (`GET` at its `Location` with `$expand`), and each related create is matched
/// to an entity there: the first not yet taken whose values equal every value the create sent
/// (but those the service assigns), else the one at its position.
extension ODataBackend {
    /// The changes `inside` each change, by the parent's id, in order.
    static func inlineChildren(_ changes: [OutgoingChange]) -> [String: [OutgoingChange]] {
        var out: [String: [OutgoingChange]] = [:]
        for c in changes { if let inside = c.inside { out[inside.change, default: []].append(c) } }
        return out
    }

    /// `request`'s body with the creates inside `change` (and theirs) inline.
    func deepBody(
        _ change: OutgoingChange, _ body: [UInt8]?, children: [String: [OutgoingChange]]
    ) throws -> [UInt8]? {
        guard let kids = children[change.id], !kids.isEmpty else { return body }
        guard case .object(var members) = try JSON.parse(body ?? Array("{}".utf8)) else {
            throw BackendError.badResponse("the body of a deep insert's create is not a JSON object")
        }
        let type = try store.set(change.set).type
        var order: [String] = []
        var byNavigation: [String: [JSON]] = [:]
        for kid in kids {
            let navigation = kid.inside?.navigation ?? ""
            let request = try dialect.request(for: kid, store: store)
            guard let kidBody = try deepBody(kid, request.body, children: children) else { continue }
            if byNavigation[navigation] == nil { order.append(navigation) }
            byNavigation[navigation, default: []].append(try JSON.parse(kidBody))
        }
        for navigation in order {
            let items = byNavigation[navigation] ?? []
            let collection = type.navigationProperties.first { $0.name == navigation }?.isCollection ?? true
            members.removeAll { $0.0 == navigation }
            members.append((navigation, collection || items.count != 1 ? .array(items) : items[0]))
        }
        var text = ""
        JSONWriter.write(.object(members), to: &text)
        return Array(text.utf8)
    }

    /// The answers of the creates inside `change` (and of theirs), from `answer`, its answer,
    /// into `answers` by change id. Reads the entity back with `$expand` when the answer does not
    /// hold them.
    func answerInline(
        _ change: OutgoingChange, _ answer: ChangeAnswer, children: [String: [OutgoingChange]],
        extra: [(String, String)], into answers: inout [String: ChangeAnswer]
    ) async throws {
        guard let kids = children[change.id], !kids.isEmpty else { return }
        guard answer.isSuccess, answer.unreadable == nil, let entity = answer.entity else {
            failInline(change, answer, children: children, into: &answers)
            return
        }
        var source = entity
        let navigations = Set(kids.compactMap { $0.inside?.navigation })
        if navigations.contains(where: { Self.related(source, $0) == nil }) {
            // The answer does not hold them (OData V2 need not): read the entity back with them.
            if let read = try await readBackExpanded(change, answer, children: children, extra: extra) {
                source = read
            }
        }
        try await matchInline(change, source, answer, children: children, extra: extra, into: &answers)
    }

    /// The entities `json` holds under `navigation`: V4's array, V2's `{"results": [...]}` or
    /// array, one object for a single-valued one; nil when it holds none (absent, or V2's
    /// `__deferred`).
    static func related(_ json: JSON, _ navigation: String) -> [JSON]? {
        switch json[navigation] {
        case .array(let items)?: return items
        case .object(let members)? where members.contains { $0.0 == "results" }:
            if case .array(let items)? = json[navigation]?["results"] { return items }
            return nil
        case .object(let members)? where members.contains { $0.0 == "__deferred" }: return nil
        case .object?: return [json[navigation]!]
        case .null?: return []
        default: return nil
        }
    }

    /// Answers every change inside `change`, recursively, with 424 and the create's error.
    func failInline(
        _ change: OutgoingChange, _ answer: ChangeAnswer, children: [String: [OutgoingChange]],
        into answers: inout [String: ChangeAnswer]
    ) {
        for kid in children[change.id] ?? [] {
            var e = answer.error
            e.message =
                "not applied: the deep insert it goes in (POST \(change.set), request \(change.id)) was not: \(e.message)"
            answers[kid.id] = ChangeAnswer(status: 424, error: e)
            failInline(kid, answer, children: children, into: &answers)
        }
    }

    /// `change`'s entity read back with `$expand` of every navigation path its inline creates go
    /// under; nil when it cannot be read.
    func readBackExpanded(
        _ change: OutgoingChange, _ answer: ChangeAnswer, children: [String: [OutgoingChange]],
        extra: [(String, String)]
    ) async throws -> JSON? {
        func paths(_ id: String, _ prefix: String) -> [String] {
            var out: [String] = []
            for kid in children[id] ?? [] {
                guard let n = kid.inside?.navigation else { continue }
                let path = prefix.isEmpty ? n : prefix + "/" + n
                if !out.contains(path) { out.append(path) }
                for p in paths(kid.id, path) where !out.contains(p) { out.append(p) }
            }
            return out
        }
        let expand = paths(change.id, "").joined(separator: ",")
        let address: String
        if let location = answer.location {
            address = location
        } else if let entity = answer.entity, let set = try? store.set(change.set),
            let keyImage = try? ValueJSON(schema: store.schema).properties(
                from: entity, properties: set.type.properties.filter { set.type.key.contains($0.name) },
                owner: change.set),
            let key = try? set.keyValues(keyImage)
        {
            address = try dialect.entityPath(set: change.set, key: key, keyText: set.describeKey(key), store: store)
        } else {
            return nil
        }
        let url = address + (address.contains("?") ? "&" : "?") + "$expand=" + Wire.queryEncoded(expand)
        let response: WireResponse
        do {
            response = try await transport.send(WireRequest(method: "GET", url: url, headers: extra))
        } catch BackendError.unreachable(let m) {
            // The deep insert itself was sent: its round may have reached the service.
            throw BackendError.transport(m)
        }
        let read = self.answer(response, set: change.set, withEntity: response.status == 200)
        guard read.status == 200, read.unreadable == nil else { return nil }
        return read.entity
    }

    /// Matches each create inside `change` to an entity `source` holds under its navigation
    /// property, and answers it with that entity (recursively for those inside it); a create
    /// matched to nothing is answered with the create's status and no entity.
    func matchInline(
        _ change: OutgoingChange, _ source: JSON, _ answer: ChangeAnswer, children: [String: [OutgoingChange]],
        extra: [(String, String)], into answers: inout [String: ChangeAnswer]
    ) async throws {
        let kids = children[change.id] ?? []
        var byNavigation: [String: [OutgoingChange]] = [:]
        for kid in kids { byNavigation[kid.inside?.navigation ?? "", default: []].append(kid) }
        for (navigation, group) in byNavigation {
            let items = Self.related(source, navigation) ?? []
            var taken = Set<Int>()
            for (position, kid) in group.enumerated() {
                let i = try match(kid, items, taken: taken) ?? (taken.contains(position) ? nil : position)
                var out = ChangeAnswer(status: answer.status, messages: [])
                if let i, i < items.count {
                    taken.insert(i)
                    out.entity = items[i]
                    out.entityETag = Wire.etag(in: items[i])
                }
                out.repeatability = answer.repeatability
                answers[kid.id] = out
                if let entity = out.entity {
                    try await matchInline(kid, entity, answer, children: children, extra: extra, into: &answers)
                } else {
                    for grandchild in children[kid.id] ?? [] {
                        answers[grandchild.id] = ChangeAnswer(status: answer.status)
                    }
                }
            }
        }
    }

    /// The first of `items` not `taken` whose values equal every value `kid` sent (those the
    /// service assigns and nulls aside); nil when none does.
    func match(_ kid: OutgoingChange, _ items: [JSON], taken: Set<Int>) throws -> Int? {
        let set = try store.set(kid.set)
        let sent = try Wire.properties(kid, store: store).filter { name, v in
            !v.isNull && !kid.serviceAssigned.contains(name) && set.type.property(name)?.computed != true
        }
        guard !sent.isEmpty else { return nil }
        let reader = ValueJSON(schema: store.schema)
        for (i, item) in items.enumerated() where !taken.contains(i) {
            var notes: ServerNotes? = ServerNotes()
            guard
                let there = try? reader.properties(
                    from: item, properties: set.type.properties,
                    navigation: Set(set.type.navigationProperties.map(\.name)), owner: kid.set, notes: &notes)
            else { continue }
            if sent.allSatisfy({ name, v in there[name] == v }) { return i }
        }
        return nil
    }
}
