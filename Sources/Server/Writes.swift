import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OfflineStore
import Query
import Storage

/// One write, as a request of its own or of a `$batch`.
enum WriteOp: Sendable {
    case create(set: String, entity: Properties)
    /// A create with related entities inline: a deep insert.
    case createDeep(set: String, entity: NewEntity)
    case update(set: String, key: [Value], changes: Properties, ifMatch: String?)
    case replace(set: String, key: [Value], entity: Properties, ifMatch: String?)
    case delete(set: String, key: [Value], ifMatch: String?)
    /// `DELETE ErrorArchive(id)` on an offline store: give up the refused request (`resolveError`).
    case resolveError(requestID: Int64)
    /// `POST ErrorArchive(id)/OfflineOData.Retry` on an offline store: send the refused request
    /// again at the next flush (`retryError`; for a conflict, against the service's version).
    case retryError(requestID: Int64)
    /// A link added or removed (`…/Nav/$ref`, V2 `…/$links/Nav`; `Links.operation`); `target`
    /// nil: a single-valued navigation's link removed.
    case link(set: String, key: [Value], navigation: String, target: [Value]?, adding: Bool)
    /// A create or an update whose body binds links (`Tags@odata.bind` over a navigation without
    /// a referential constraint): the write, then each link added to its entity.
    indirect case linked(WriteOp, links: [String: [[Value]]])
    /// An action called (`Operations`): queued by an offline store, answered 202.
    case call(ServiceOperation, set: String?, key: [Value]?, parameters: Properties)
}

/// POST, PATCH, PUT and DELETE, in the store's role (`OfflineStore.isOffline`): an authority
/// store applies them directly, with the change-log entry; an offline store queues them for flush
/// as the Swift API does (local keys for keys left out, `Location` naming the local key, ETags of
/// the local image), with SAP's request options from headers (`changeOptions`). Either way the
/// recorded response of a request with `Repeatability-Request-ID` commits in the same transaction.
struct Writes {
    let service: ODataService
    var store: OfflineStore { service.store }

    func respond(_ request: inout Request, resource: String, query: String) async throws -> Response {
        let method = request.method
        let isLink = Links.isLinkWrite(method, resource)
        if !query.isEmpty, !isLink,
            method != .post
                || !query.split(separator: "&").allSatisfy({ $0.hasPrefix("$select") || $0.hasPrefix("$expand") })
        {
            throw ODataFailure(
                .badRequest, "\(method.rawValue) takes no query options here ('\(QueryError.quoting(query))')")
        }
        if method == .post, query.isEmpty, let set = Media.mediaSet(store, resource), !Media.isJSON(request) {
            return try await Media(service: service).create(request, set: set)
        }
        let (op, rawBody) = try await operation(&request, resource: resource, query: query)
        return try await respond(request, op, fingerprint: Array("\(method.rawValue) \(resource)\n".utf8) + rawBody)
    }

    /// An action called (`Operations`), queued as any write is served: repeatable, with the
    /// request options of its headers.
    func call(_ request: inout Request, _ call: Operations.Call) async throws -> Response {
        var raw: [UInt8] = []
        if store.schema.version == .v4 {
            raw = Array(try await request.collectBody(upTo: service.options.maxRequestBytes).readableBytesView)
            if !raw.isEmpty { try Negotiation.requireJSONBody(request) }
        }
        let op = try Operations.write(store, call, body: raw)
        let target = request.uri.path + "?" + (request.uri.query ?? "")
        return try await respond(request, op, fingerprint: Array("\(request.method.rawValue) \(target)\n".utf8) + raw)
    }

    /// Serves `op`: in a served transaction, with its recorded response under the request's
    /// `Repeatability-Request-ID` (replayed when the same request comes again).
    private func respond(_ request: Request, _ op: WriteOp, fingerprint: [UInt8]) async throws -> Response {
        let prefer = Prefer(request.headers[.prefer])
        let root = service.serviceRoot(request)
        let repeatability = try Repeatability(
            request.headers, window: Double(store.repeatabilityWindowSeconds))
        let store = self.store
        let representation = prefer.returnRepresentation
        let options = try Self.changeOptions { name in HTTPField.Name(name).flatMap { request.headers[$0] } }
        let (recorded, replayed) = try await store.served(repeatabilityID: repeatability?.id, fingerprint: fingerprint)
        { tx in
            try Self.apply(op, tx, store: store, root: root, representation: representation, options: options)
                .response
        }
        var response = recorded.httpResponse
        if let (name, value) = repeatability?.result(replayed: replayed) { response.headers[name] = value }
        return response
    }

    /// The write a request asks for, and its body's bytes.
    private func operation(_ request: inout Request, resource: String, query: String) async throws -> (WriteOp, [UInt8])
    {
        // An action takes no body.
        if request.method == .post, store.isOffline, let id = try Self.retryTarget(resource) {
            return (.retryError(requestID: id), [])
        }
        var raw: [UInt8] = []
        if request.method != .delete {
            try Negotiation.requireJSONBody(request)
            raw = Array(try await request.collectBody(upTo: service.options.maxRequestBytes).readableBytesView)
        }
        if let link = try Links.operation(store, method: request.method, resource: resource, query: query, body: raw) {
            return (link, raw)
        }
        return (
            try Self.operation(
                store, method: request.method, resource: resource, body: raw, ifMatch: request.headers[.ifMatch]), raw
        )
    }

    /// The request id of `ErrorArchive(id)/OfflineOData.Retry` (percent-encoded or not), or nil
    /// for another path. Throws 400 for that path with a key that is not an Int64.
    static func retryTarget(_ resource: String) throws -> Int64? {
        let path = resource.removingPercentEncoding ?? resource
        let prefix = "ErrorArchive(", suffix = ")/OfflineOData.Retry"
        guard path.hasPrefix(prefix), path.hasSuffix(suffix), path.count >= prefix.count + suffix.count else {
            return nil
        }
        let key = path.dropFirst(prefix.count).dropLast(suffix.count)
        guard let id = Int64(key) else {
            throw ODataFailure(
                .badRequest,
                "ErrorArchive's key is a request id (Edm.Int64), not '\(QueryError.quoting(String(key.prefix(100))))'")
        }
        return id
    }

    /// The write that `method` on `resource` (`Set` or `Set(key)`, percent-encoded) with `body`
    /// asks for, its body checked against the schema.
    static func operation(
        _ store: OfflineStore, method: HTTPRequest.Method, resource: String, body: [UInt8],
        ifMatch: String?
    ) throws -> WriteOp {
        if method == .post, store.isOffline, let id = try retryTarget(resource) { return .retryError(requestID: id) }
        let set: String
        var key: [Value]? = nil
        if let s = store.schema.entitySet(resource.removingPercentEncoding ?? resource) {
            set = s.name
        } else {
            do {
                (set, key) = try store.parseEntityPath(resource)
            } catch let e as EntityError {
                throw e
            } catch {
                // `Set(key)/Navigation`: a create under an entity (the `$1/Items` of a change set).
                if method == .post, let create = try navigationCreate(store, resource: resource, body: body) {
                    return create
                }
                // Not an entity set, not one entity: a navigation path, or an error in the path.
                _ = try store.explain(resource)
                throw ODataFailure(
                    .notImplemented,
                    "\(method.rawValue) on a navigation path is not supported; address the entity set or the entity")
            }
        }
        if store.schema.isSystemSet(set) {
            if store.isOffline, set == "ErrorArchive", method == .delete, let key, key.count == 1,
                case .int(let id) = key[0]
            {
                return .resolveError(requestID: id)
            }
            throw ODataFailure.methodNotAllowed(
                method, "\(set), which the store keeps",
                allow: store.isOffline && set == "ErrorArchive" && key != nil ? "GET, DELETE" : "GET")
        }
        // A V2 client's body: __metadata and deferred links dropped, links as @odata.bind.
        let body =
            V2Dialect.applies(to: store) && !body.isEmpty ? try V2Dialect.body(body, set: set, store: store) : body
        switch (method, key) {
        case (.post, nil):
            let entity = try store.newEntity(set: set, json: body)
            if !entity.links.isEmpty {
                guard entity.related.isEmpty else {
                    throw ODataFailure(
                        .notImplemented, "a deep insert that also binds links is not taken; link after the create")
                }
                return .linked(.create(set: set, entity: entity.properties), links: entity.links)
            }
            return entity.related.isEmpty
                ? .create(set: set, entity: entity.properties) : .createDeep(set: set, entity: entity)
        case (.post, _?):
            throw ODataFailure.methodNotAllowed(
                method, "an entity (POST creates in an entity set)", allow: "GET, PATCH, PUT, DELETE")
        case (_, nil):
            throw ODataFailure.methodNotAllowed(method, "an entity set (address one entity)", allow: "GET, POST")
        case (.patch, let key?):
            let (changes, links) = try store.changes(set: set, json: body)
            let update = WriteOp.update(set: set, key: key, changes: changes, ifMatch: ifMatch)
            return links.isEmpty ? update : .linked(update, links: links)
        case (.put, let key?):
            return .replace(set: set, key: key, entity: try store.properties(set: set, json: body), ifMatch: ifMatch)
        case (.delete, let key?):
            return .delete(set: set, key: key, ifMatch: ifMatch)
        case (_, _?):
            throw ODataFailure.methodNotAllowed(method, "an entity", allow: "GET, PATCH, PUT, DELETE")
        }
    }

    /// `POST Set(key)/Navigation`: a create in the navigation's target set, related to the entity
    /// `Set(key)` — its foreign key to that entity (the navigation's referential constraint, or
    /// its partner's) set from the entity's key in the path, whatever the body says of it (OData
    /// 4.01 Part 1 §11.4.2.1, V2 the same). Nil when `resource` is not of that form; a failure for
    /// a navigation without a referential constraint on the entity's key (the relationship could
    /// not be kept). The entity is not looked up: an earlier request of the same change set may
    /// have made it.
    static func navigationCreate(_ store: OfflineStore, resource: String, body: [UInt8]) throws -> WriteOp? {
        let path = resource.removingPercentEncoding ?? resource
        guard let slash = path.lastIndex(of: "/"), path[..<slash].hasSuffix(")") else { return nil }
        let name = String(path[path.index(after: slash)...])
        guard let (parentSet, parentKey) = try? store.parseEntityPath(String(path[..<slash])),
            let parentType = store.schema.entityType(ofSet: parentSet),
            let nav = parentType.navigationProperties.first(where: { $0.name == name }),
            let target = store.schema.targetSet(of: nav, from: parentSet),
            let targetType = store.schema.entityType(ofSet: target)
        else { return nil }
        var constraints = nav.principalConstraints
        if constraints.isEmpty, let partner = nav.partner,
            let back = targetType.navigationProperties.first(where: { $0.name == partner })
        {
            constraints = back.dependentConstraints
        }
        // The foreign key is the entity's key, read from the path (the entity may have been made by
        // an earlier request of the same change set, not committed yet).
        let keyOf = Dictionary(uniqueKeysWithValues: zip(parentType.key, parentKey))
        guard !constraints.isEmpty, constraints.allSatisfy({ keyOf[$0.referencedProperty] != nil }) else {
            throw ODataFailure(
                .notImplemented,
                "POST to \(parentSet)(…)/\(name): the navigation has no referential constraint on \(parentSet)'s key, so the relationship could not be kept; create in \(target) and link it"
            )
        }
        let json =
            V2Dialect.applies(to: store) && !body.isEmpty ? try V2Dialect.body(body, set: target, store: store) : body
        var entity = try store.properties(set: target, json: json)
        for c in constraints { entity[c.property] = keyOf[c.referencedProperty] }
        return .create(set: target, entity: entity)
    }

    /// Applies one write inside a served transaction and builds its response: 201 with the entity
    /// and `Location` for a create, 204 (or 200 with the entity, on `Prefer:
    /// return=representation`) for an update, 204 for a delete; `ETag` whenever an entity remains.
    static func apply(
        _ op: WriteOp, _ tx: ServedTransaction, store: OfflineStore, root: String,
        representation: Bool?, options: ChangeOptions = .init()
    ) throws -> (response: RecordedResponse, entityURL: String?) {
        if options.removeAfterUpload, store.isOffline {
            guard case .create = op else {
                throw ODataFailure(
                    .badRequest, "OfflineOData.RemoveAfterUpload is for a create (POST), not this request")
            }
        }
        switch op {
        case .create(let set, let given):
            // An offline store's queue gives a key left out a local key instead.
            let entity = tx.queued ? given : try assigningComputedKey(store, tx, set: set, given)
            let (stored, etag) = try tx.create(set: set, entity: entity, options: options)
            let url = try entityURL(store, set: set, entity: stored)
            var headers = [("Location", root + url), ("ETag", etag)]
            if representation == false {
                headers += [("OData-EntityId", root + url), ("Preference-Applied", "return=minimal")]
                return (RecordedResponse(status: 204, headers: headers, body: []), url)
            }
            headers.append(("Content-Type", V2Dialect.jsonContentType(store)))
            return (
                RecordedResponse(
                    status: 201, headers: headers,
                    body: try entityJSON(store, set: set, entity: stored, etag: etag, root: root)), url
            )
        case .createDeep(let set, let entity):
            return try createDeep(
                set: set, entity, tx, store: store, root: root, representation: representation, options: options)
        case .update(let set, let key, let changes, let ifMatch):
            let (stored, etag) = try tx.update(
                set: set, key: key, changes: changes, ifMatch: ifMatch, options: options)
            return (
                try changed(store, set: set, stored: stored, etag: etag, root: root, representation: representation),
                nil
            )
        case .replace(let set, let key, let entity, let ifMatch):
            let (stored, etag) = try tx.replace(set: set, key: key, entity: entity, ifMatch: ifMatch, options: options)
            return (
                try changed(store, set: set, stored: stored, etag: etag, root: root, representation: representation),
                nil
            )
        case .delete(let set, let key, let ifMatch):
            try tx.delete(set: set, key: key, ifMatch: ifMatch, options: options)
            return (RecordedResponse(status: 204, headers: [], body: []), nil)
        case .resolveError(let id):
            try tx.resolveError(requestID: id)
            return (RecordedResponse(status: 204, headers: [], body: []), nil)
        case .retryError(let id):
            try tx.retryError(requestID: id)
            return (RecordedResponse(status: 204, headers: [], body: []), nil)
        case .call(let operation, let set, let key, let parameters):
            let id = try tx.call(operation, set: set, key: key, parameters: parameters, options: options)
            // Accepted, not executed: the next flush calls the service. A V2 import that returns
            // the entity it is bound to answers with that entity as this copy holds it (pyodata and
            // UI5 read a body for an import with a return type); otherwise no body.
            var headers = [("Location", root + "RequestQueue(\(id))")]
            var body: [UInt8] = []
            if V2Dialect.applies(to: store), let set, let key, let type = store.schema.entityType(ofSet: set),
                operation.returnType?.name == type.qualifiedName, operation.returnType?.isCollection == false,
                let (entity, etag) = try tx.get(set: set, key: key)
            {
                headers.append(("Content-Type", V2Dialect.jsonContentType(store)))
                body = try entityJSON(store, set: set, entity: entity, etag: etag, root: root)
            }
            return (RecordedResponse(status: 202, headers: headers, body: body), nil)
        case .link(let set, let key, let navigation, let target, let adding):
            try tx.changeLink(
                set: set, key: key, navigation: navigation, target: target, adding: adding, options: options)
            return (RecordedResponse(status: 204, headers: [], body: []), nil)
        case .linked(let write, let links):
            // A PATCH that only binds links changes no property: no update of its own is queued.
            var (response, url) = (RecordedResponse(status: 204, headers: [], body: []), String?.none)
            if case .update(_, _, let changes, _) = write, changes.isEmpty {
            } else {
                (response, url) = try apply(
                    write, tx, store: store, root: root, representation: representation, options: options)
            }
            // The entity the write made or changed: its key from the URL a create answered, or the update's.
            let (set, key): (String, [Value])
            switch write {
            case .update(let s, let k, _, _): (set, key) = (s, k)
            case .create where url != nil: (set, key) = try store.parseEntityPath(url!.removingPercentEncoding ?? url!)
            default: throw ODataFailure(.badRequest, "links are bound on a create or an update")
            }
            for (navigation, targets) in links.sorted(by: { $0.key < $1.key }) {
                for target in targets {
                    try tx.changeLink(
                        set: set, key: key, navigation: navigation, target: target, adding: true, options: options)
                }
            }
            return (response, url)
        }
    }

    /// The request options of SAP's offline store, from a write's headers (`header(name)`: its
    /// value or nil): `OfflineOData.TransactionID` (requests with one id are flushed as one change
    /// set), `OfflineOData.NonMergeable` (`true`: never collapsed with another request),
    /// `OfflineOData.CustomTag`, `OfflineOData.UploadCategory` (`flush --category`) and
    /// `OfflineOData.RemoveAfterUpload` (`true` on a create: the entity leaves the store once the
    /// flush has applied it). An authority store ignores them, as any unknown header.
    static func changeOptions(_ header: (String) -> String?) throws -> ChangeOptions {
        func flag(_ name: String) throws -> Bool {
            guard let text = header(name) else { return false }
            switch text.lowercased() {
            case "true": return true
            case "false": return false
            default: throw ODataFailure(.badRequest, "\(name) is true or false, not '\(QueryError.quoting(text))'")
            }
        }
        var options = ChangeOptions()
        options.removeAfterUpload = try flag("OfflineOData.RemoveAfterUpload")
        options.transactionID = header("OfflineOData.TransactionID")
        options.customTag = header("OfflineOData.CustomTag")
        options.uploadCategory = header("OfflineOData.UploadCategory")
        options.nonMergeable = try flag("OfflineOData.NonMergeable")
        return options
    }

    /// `entity` with the key properties the service computes (`Core.Computed`, V2
    /// `sap:creatable="false"`) that the client left out filled in: an integer gets a random
    /// positive value no entity of the set has, a GUID a random (version 4) UUID. A value the
    /// client gave is kept; other types of computed key are left to fail as a missing key.
    static func assigningComputedKey(
        _ store: OfflineStore, _ tx: ServedTransaction, set name: String, _ entity: Properties
    ) throws -> Properties {
        let type = try store.entities.set(name).type
        let missing = type.key.compactMap(type.property).filter { $0.computed && (entity[$0.name]?.isNull ?? true) }
        if missing.isEmpty { return entity }
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<64 {
            var out = entity
            for p in missing {
                switch p.type {
                case .primitive(let prim) where prim.isInteger:
                    guard let range = prim.integerRange, range.upperBound >= 1 else { return entity }
                    out[p.name] = .int(Int64.random(in: 1...min(range.upperBound, Int64(Int32.max)), using: &rng))
                case .primitive(.guid):
                    var high: UInt64 = rng.next(), low: UInt64 = rng.next()
                    high = (high & ~0xF000) | 0x4000
                    low = (low & ~(UInt64(0xC) << 60)) | (UInt64(0x8) << 60)
                    out[p.name] = .guid(EDMGuid(high: high, low: low))
                default:
                    return entity
                }
            }
            var key: [Value] = []
            for k in type.key {
                // another key property is missing: tx.create says so
                guard let v = out[k], !v.isNull else { return out }
                key.append(v)
            }
            if try tx.get(set: name, key: key) == nil { return out }
        }
        throw ODataFailure(.serviceUnavailable, "no free key was found for a new entity of \(name); try again")
    }

    private static func changed(
        _ store: OfflineStore, set: String, stored: Properties, etag: String, root: String,
        representation: Bool?
    ) throws -> RecordedResponse {
        if representation == true {
            return RecordedResponse(
                status: 200,
                headers: [
                    ("ETag", etag), ("Content-Type", V2Dialect.jsonContentType(store)),
                    ("Preference-Applied", "return=representation"),
                ],
                body: try entityJSON(store, set: set, entity: stored, etag: etag, root: root))
        }
        return RecordedResponse(status: 204, headers: [("ETag", etag)], body: [])
    }

    /// `Set(key)`, percent-encoded for a URL.
    static func entityURL(_ store: OfflineStore, set: String, entity: Properties) throws -> String {
        let h = try store.entities.set(set)
        let path = "\(set)(\(h.describeKey(try h.keyValues(entity))))"
        return path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? path
    }

    /// The entity as a response body: `{"@odata.context":"…$metadata#Set/$entity","@odata.etag":…,…}`.
    static func entityJSON(
        _ store: OfflineStore, set: String, entity: Properties, etag: String, root: String
    ) throws -> [UInt8] {
        if V2Dialect.applies(to: store) {
            return try V2Dialect.entityJSON(store, set: set, entity: entity, etag: etag, root: root)
        }
        let object = try store.json(set: set, entity: entity)
        var out = JSONBuffer()
        out.append("{\"@odata.context\":")
        out.appendString(root + "$metadata#" + set + "/$entity")
        out.append(",\"@odata.etag\":")
        out.appendString(etag)
        if object.count > 2 {
            out.append(UInt8(ascii: ",")); out.appendRaw(String(object.dropFirst()))
        } else {
            out.append("}")
        }
        return out.bytes
    }
}

extension RecordedResponse {
    var httpResponse: Response {
        var fields = HTTPFields()
        for (name, value) in headers {
            if let n = HTTPField.Name(name) { fields.append(HTTPField(name: n, value: value)) }
        }
        let status = HTTPResponse.Status(code: status)
        return body.isEmpty
            ? Response(status: status, headers: fields)
            : Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

/// The repeatability headers of a request (OASIS Repeatable Requests 1.0, OData 4.01 §8.2.8).
struct Repeatability {
    var id: String
    var firstSent: Date?
    /// Named by SAP Gateway's headers (`RequestID`, `RepeatabilityCreation`), answered with
    /// `RepeatabilityResult`; else by OASIS's (`Repeatability-Request-ID`, `-First-Sent`, `-Result`).
    var gateway = false

    /// nil without `Repeatability-Request-ID` (or Gateway's `RequestID`). Throws 400 for a
    /// malformed `Repeatability-First-Sent` (`RepeatabilityCreation`) and 412 when it is older
    /// than the window the store keeps records for: the service can no longer tell whether the
    /// request was applied, so it refuses to guess.
    init?(_ headers: HTTPFields, window: Double) throws {
        let first: String?
        if let id = headers[.repeatabilityRequestID] {
            (self.id, first) = (id, headers[.repeatabilityFirstSent])
        } else if let id = headers[.sapRequestID] {
            (self.id, first, gateway) = (id, headers[.sapRepeatabilityCreation], true)
        } else {
            return nil
        }
        let (named, result) =
            gateway
            ? ("RepeatabilityCreation", HTTPField.Name.sapRepeatabilityResult)
            : ("Repeatability-First-Sent", HTTPField.Name.repeatabilityResult)
        if let text = first {
            guard let date = Self.parseIMFDate(text) ?? (gateway ? Self.parseISODate(text) : nil) else {
                var f = ODataFailure(.badRequest, "\(named) is not an IMF-fixdate ('\(QueryError.quoting(text))')")
                f.headers[result] = "rejected"
                throw f
            }
            if Date().timeIntervalSince(date) > window {
                var f = ODataFailure(
                    .preconditionFailed,
                    "\(named) is older than the \(Int(window)) s for which this service keeps records of repeatable requests"
                )
                f.headers[result] = "rejected"
                throw f
            }
            firstSent = date
        }
    }

    /// The answer's header: OASIS `Repeatability-Result` (`accepted`, or `replayed` for an answer
    /// from the record), or Gateway's `RepeatabilityResult` (`accepted` either way: executed once).
    func result(replayed: Bool) -> (HTTPField.Name, String) {
        gateway ? (.sapRepeatabilityResult, "accepted") : (.repeatabilityResult, replayed ? "replayed" : "accepted")
    }

    /// An ISO 8601 date and time (`2026-11-27T21:00:00Z`), which a Gateway client may send as
    /// `RepeatabilityCreation`.
    static func parseISODate(_ text: String) -> Date? {
        ISO8601DateFormatter().date(from: text)
    }

    static func parseIMFDate(_ text: String) -> Date? {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return f.date(from: text)
    }
}
