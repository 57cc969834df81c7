import Queue
package import Storage
package import Sync

/// The `Backend` of a real service: each change rendered in the service's dialect (`V4Dialect`,
/// `V2Dialect`) and sent over a `Transport` (`HTTPTransport`), each answer unwrapped into what the
/// service meant.
///
/// ```swift
/// let transport = HTTPTransport(serviceRoot: "http://127.0.0.1:8080/", version: store.schema.version)
/// let backend = ODataBackend(transport: transport, store: store)
/// let answers = try await backend.send(changes, extra: [])
/// ```
package struct ODataBackend: Backend {
    package let transport: any Transport
    package let dialect: any Dialect
    let store: EntityStore
    let reader: PayloadReader
    /// Whether the service resolves `$n` references in a change set, when the configuration says.
    let contentIDReferences: Bool?

    /// The dialect of the store's `$metadata` (V4, else V2 with `updateMethod`);
    /// `contentIDReferences` the configuration's (`SyncSettings.contentIDReferences`).
    package init(
        transport: any Transport, store: EntityStore, updateMethod: String? = nil, contentIDReferences: Bool? = nil
    ) {
        let dialect: any Dialect = store.schema.version == .v4 ? V4Dialect() : V2Dialect(updateMethod: updateMethod)
        self.init(transport: transport, store: store, dialect: dialect, contentIDReferences: contentIDReferences)
    }

    package init(transport: any Transport, store: EntityStore, dialect: any Dialect, contentIDReferences: Bool? = nil) {
        self.transport = transport
        self.store = store
        self.dialect = dialect
        self.contentIDReferences = contentIDReferences
        reader = PayloadReader(schema: store.schema, shapes: store.entityShapes)
    }

    package var serviceRoot: String { transport.serviceRoot }

    /// The dialect's, with what the configuration says of Content-ID references.
    package var capabilities: BackendCapabilities {
        var c = dialect.capabilities
        if let contentIDReferences { c.contentIDReferences = contentIDReferences }
        return c
    }

    package func send(_ changes: [OutgoingChange], extra: [(String, String)]) async throws -> [ChangeAnswer] {
        // A stream's bytes go in a request of their own: a JSON `$batch` carries no binary body
        // (flush plans a stream replacement alone in its round).
        if changes.contains(where: { $0.stream != nil }) {
            var answers: [ChangeAnswer] = []
            for change in changes {
                guard change.stream != nil else {
                    answers += try await send([change], extra: extra)
                    continue
                }
                answers.append(try await sendStream(change, extra: extra))
            }
            return answers
        }
        // A change inside another (a deep insert) goes in that one's body, not as a request.
        let children = Self.inlineChildren(changes)
        let top = changes.filter { $0.inside == nil }
        let requests = try top.map { given in
            var change = given
            change.link?.serviceRoot = serviceRoot
            var request = try dialect.request(for: change, store: store)
            request.body = try deepBody(change, request.body, children: children)
            (request.group, request.id, request.dependsOn) = (change.group, change.id, change.dependsOn)
            return request
        }
        let responses = try await transport.batch(requests, headers: extra)
        if children.isEmpty {
            return zip(top, responses).map { change, response in
                answer(response, set: change.set, withEntity: change.kind != .delete, anyJSON: change.kind == .call)
            }
        }
        var answers: [String: ChangeAnswer] = [:]
        for (change, response) in zip(top, responses) {
            let a = answer(response, set: change.set, withEntity: change.kind != .delete, anyJSON: change.kind == .call)
            answers[change.id] = a
            try await answerInline(change, a, children: children, extra: extra, into: &answers)
        }
        return changes.map { answers[$0.id] ?? ChangeAnswer(status: 0) }
    }

    /// Stream replacement or media create `change`: a PUT or POST of its bytes, read from its
    /// source as they go.
    func sendStream(_ change: OutgoingChange, extra: [(String, String)]) async throws -> ChangeAnswer {
        guard let stream = change.stream else { throw BackendError.badResponse("a stream replacement without bytes") }
        var request = try dialect.request(for: change, store: store)
        request.headers = extra + request.headers.filter { $0.0.lowercased() != "content-type" }
        request.headers.append(("Content-Type", stream.contentType))
        request.source = stream.bytes
        let response = try await transport.send(request)
        return answer(response, set: change.set, withEntity: change.kind == .createMedia)
    }

    package func read(_ entity: EntityAddress, extra: [(String, String)]) async throws -> ChangeAnswer {
        let (url, set): (String, String)
        switch entity {
        case .key(let s, let key, let keyText):
            (url, set) = (try dialect.entityPath(set: s, key: key, keyText: keyText, store: store), s)
        case .address(let address, let s):
            (url, set) = (address, s)
        }
        let response = try await transport.send(WireRequest(method: "GET", url: url, headers: extra))
        return answer(response, set: set, withEntity: response.status == 200)
    }

    package func download(
        set: String, key: [Value], keyText: String, name: String, link: String?, into sink: any StreamSink,
        extra: [(String, String)]
    ) async throws -> StreamAnswer {
        let url: String
        if let link, !link.isEmpty {
            url = link
        } else {
            let entity = try dialect.entityPath(set: set, key: key, keyText: keyText, store: store)
            url = entity + (name.isEmpty ? "/$value" : "/" + Wire.percentEncoded(name))
        }
        var request = WireRequest(method: "GET", url: url, headers: [("Accept", "*/*")] + extra)
        request.sink = sink
        let response = try await transport.send(request)
        if response.isSuccess, !response.body.isEmpty {
            // A transport that kept the body (a test's): it goes to the sink all the same.
            try sink.restart()
            try response.body.withUnsafeBytes { try sink.append($0) }
        }
        return StreamAnswer(
            status: response.status, contentType: response.header("Content-Type"), etag: response.header("ETag"),
            message: String(decoding: response.head(300), as: UTF8.self))
    }

    /// The service's `$metadata` document as it answers it now; throws for any answer but 200
    /// (its status and the start of its body), and for a body larger than `limit` bytes.
    package func metadata(extra: [(String, String)] = [], limit: Int = 64 << 20) async throws -> [UInt8] {
        let response = try await transport.send(
            WireRequest(method: "GET", url: "$metadata", headers: [("Accept", "application/xml")] + extra))
        guard response.status == 200 else {
            throw EntityError.badInput(
                "GET $metadata answered \(response.status): \(String(decoding: response.body.prefix(300), as: UTF8.self))"
            )
        }
        guard response.body.count <= limit else {
            throw EntityError.badInput("the service's $metadata is \(response.body.count) bytes, more than \(limit)")
        }
        return response.body
    }

    package func read(_ page: PageRequest, extra: [(String, String)]) async throws -> PageAnswer {
        let url = page.count ? page.url + (page.url.contains("?") ? "&" : "?") + dialect.countOption : page.url
        var request = WireRequest(method: "GET", url: url, headers: extra + dialect.pageHeaders(page))
        request.largeAnswer = true
        let response = try await transport.send(request)
        return PageAnswer(
            status: response.status, body: response.body, spooled: response.spooled,
            deltaFollowsExpand: response.header(Refresher.deltaExpandHeader)?.lowercased() == "followed")
    }

    package func find(
        set: String, property: String, equals value: Value, limit: Int, extra: [(String, String)]
    ) async throws -> [ChangeAnswer] {
        let type = try store.set(set).type.property(property)?.type.primitive
        let filter = "\(property) eq \(dialect.literal(value, type: type))"
        let url = Wire.percentEncoded(set) + "?$filter=" + Wire.queryEncoded(filter) + "&$top=\(limit)"
        let response = try await transport.send(WireRequest(method: "GET", url: url, headers: extra))
        guard response.isSuccess else { return [answer(response, set: set, withEntity: false)] }
        // V4 `{"value":[…]}`, V2 `{"d":{"results":[…]}}` or `{"d":[…]}`.
        let rows: [JSON]
        do {
            let json = try JSON.parse(response.body)
            switch json["value"] ?? json["d"]?["results"] ?? json["d"] {
            case .array(let items)?: rows = items
            default: throw BackendError.badResponse("not a collection")
            }
        } catch {
            var out = ChangeAnswer(status: response.status)
            out.unreadable = "the answer to GET \(url) is not a collection of \(set): \(error)"
            return [out]
        }
        return rows.prefix(limit).map { row in
            var out = ChangeAnswer(status: 200, entity: row, entityETag: Wire.etag(in: row))
            out.foundByMarker = true
            return out
        }
    }

    /// What `response` means: for a success with a body, the entity of `set` it carries (V2's `d`
    /// taken off) and its ETag — with `anyJSON` (an operation's answer: an entity of any set, a
    /// collection, a value) whatever JSON it is —; the service's messages; for a failure, the
    /// service's error.
    func answer(_ response: WireResponse, set: String, withEntity: Bool, anyJSON: Bool = false) -> ChangeAnswer {
        var out = ChangeAnswer(
            status: response.status, etag: response.header("ETag"),
            location: response.header("Location") ?? response.header("OData-EntityId"),
            messages: Wire.sapMessages(response), error: response.isSuccess ? nil : Wire.serviceError(response))
        out.repeatability = Wire.repeatability(response)
        let blank = response.body.allSatisfy { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
        if withEntity, response.isSuccess, !blank {
            do {
                let json = Wire.entityJSON(
                    anyJSON ? try JSON.parse(response.body) : try reader.answer(response.body, set: set))
                out.entity = json
                out.entityETag = Wire.etag(in: json)
            } catch {
                out.unreadable = "\(error)"
            }
        }
        return out
    }
}
