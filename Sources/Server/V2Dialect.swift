import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OfflineStore
import Query
import Storage

/// The OData V2 dialect of `serve`, for a store made from V2 `$metadata` (an SAP Gateway
/// service's): what a V2 client — pyodata, SAPUI5's `ODataModel` — sends and expects.
///
/// - Answers in verbose JSON (`ResultOptions.verbose`): `{"d":{"results":[…]}}`, `__metadata`,
///   `__count` for `$inlinecount=allpages`, `__next`, `__deferred`, V2 value forms.
/// - `DataServiceVersion: 2.0` on every answer instead of `OData-Version`.
/// - `MERGE` is PATCH; `X-HTTP-Method` on a POST tunnels MERGE, PUT, PATCH and DELETE.
/// - A request body may carry `__metadata` (dropped), `__deferred` navigation properties
///   (dropped) and links `{"__metadata":{"uri":"Set(key)"}}` (bound as `Nav@odata.bind`).
/// - Errors in V2's envelope: `{"error":{"code":…,"message":{"lang":"en","value":…}}}`.
/// - CSRF tokens as Gateway does them (`CSRF`).
enum V2Dialect {
    static func applies(to store: OfflineStore) -> Bool { store.schema.version != .v4 }

    /// The JSON content type of an answer in the store's dialect.
    static func jsonContentType(_ store: OfflineStore) -> String {
        applies(to: store) ? "application/json" : "application/json;odata.metadata=minimal"
    }

    /// The method a request stands for: `MERGE` as PATCH, and a POST's `X-HTTP-Method`.
    static func method(_ request: Request) throws -> HTTPRequest.Method {
        var method = request.method
        if method == .post, let tunnel = request.headers[.xHTTPMethod] {
            guard let m = HTTPRequest.Method(tunnel.uppercased()),
                ["MERGE", "PUT", "PATCH", "DELETE"].contains(m.rawValue)
            else {
                throw ODataFailure(
                    .badRequest,
                    "X-HTTP-Method '\(QueryError.quoting(tunnel))' is not one a POST may stand for (MERGE, PUT, PATCH, DELETE)"
                )
            }
            method = m
        }
        return method.rawValue == "MERGE" ? .patch : method
    }

    /// A V2 request body as the store's body reader takes it: `__metadata` dropped, deferred
    /// navigation properties dropped, a navigation property holding only `__metadata.uri` (a
    /// link to an existing entity) as `Nav@odata.bind`, inline entities (a deep insert) each the
    /// same way. Anything else goes through unchanged, to be checked there.
    static func body(_ raw: [UInt8], set: String, store: OfflineStore) throws -> [UInt8] {
        var text = ""
        JSONWriter.write(try body(try JSON.parse(raw), set: set, store: store), to: &text)
        return Array(text.utf8)
    }

    /// `body(_:set:store:)` on a parsed body, and on each entity inline in it (a deep insert:
    /// `{"results": [...]}` or an array, or one object), with its own set's navigation properties.
    private static func body(_ json: JSON, set: String, store: OfflineStore, depth: Int = 0) throws -> JSON {
        guard case .object(let members) = json else { return json }
        let type = try store.entities.set(set).type
        var out: [(String, JSON)] = []
        for (name, value) in members {
            if name == "__metadata" { continue }
            if let nav = type.navigationProperties.first(where: { $0.name == name }) {
                if case .object(let inner) = value {
                    if inner.contains(where: { $0.0 == "__deferred" }) { continue }
                    if inner.count == 1, case .string(let uri)? = value["__metadata"]?["uri"] {
                        out.append((name + "@odata.bind", .string(uri)))
                        continue
                    }
                }
                // Inline entities (a deep insert): each read as an entity of the navigation's target.
                if depth < 8, let target = store.schema.targetSet(of: nav, from: set) {
                    switch value {
                    case .array(let items):
                        out.append(
                            (name, .array(try items.map { try body($0, set: target, store: store, depth: depth + 1) })))
                        continue
                    case .object where value["results"] != nil:
                        if case .array(let items)? = value["results"] {
                            out.append(
                                (
                                    name,
                                    .array(try items.map { try body($0, set: target, store: store, depth: depth + 1) })
                                ))
                            continue
                        }
                    case .object:
                        out.append((name, try body(value, set: target, store: store, depth: depth + 1)))
                        continue
                    default: break
                    }
                }
            }
            out.append((name, value))
        }
        return .object(out)
    }

    /// `{"d":{"__metadata":{…},…properties…,…deferred navigation…}}`: an entity in a write's answer.
    static func entityJSON(
        _ store: OfflineStore, set name: String, entity: Properties, etag: String, root: String
    ) throws -> [UInt8] {
        let set = try store.entities.set(name)
        let url = root + (try Writes.entityURL(store, set: name, entity: entity))
        var out = JSONBuffer()
        out.append("{\"d\":{\"__metadata\":{\"id\":")
        out.appendString(url)
        out.append(",\"uri\":")
        out.appendString(url)
        out.append(",\"type\":")
        out.appendString(set.type.qualifiedName)
        out.append(",\"etag\":")
        out.appendString(etag)
        out.append("}")
        let values = ValueJSON(schema: store.schema)
        for p in set.type.properties {
            out.append(UInt8(ascii: ","))
            out.appendString(p.name)
            out.append(UInt8(ascii: ":"))
            values.writeV2(entity[p.name] ?? .null, type: p.type, to: &out)
        }
        for nav in set.type.navigationProperties {
            out.append(UInt8(ascii: ","))
            out.appendString(nav.name)
            out.append(":{\"__deferred\":{\"uri\":")
            out.appendString(url + "/" + nav.name)
            out.append("}}")
        }
        out.append("}}\n")
        return out.bytes
    }

    /// The service document: `{"d":{"EntitySets":["Products",…]}}`.
    static func serviceDocument(_ schema: Schema) -> [UInt8] {
        var out = JSONBuffer()
        out.append("{\"d\":{\"EntitySets\":[")
        for (i, name) in schema.serviceSetNames.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.appendString(name)
        }
        out.append("]}}\n")
        return out.bytes
    }

    /// V2's error envelope ([MS-ODATA] §2.2.8.1.2 in JSON).
    static func errorJSON(_ f: ODataFailure) -> [UInt8] {
        var out = JSONBuffer()
        out.append("{\"error\":{\"code\":")
        out.appendString(f.code)
        out.append(",\"message\":{\"lang\":\"en\",\"value\":")
        out.appendString(f.message)
        out.append("}}}\n")
        return out.bytes
    }

    /// An error response in V2's envelope.
    static func response(_ f: ODataFailure) -> Response {
        var headers = f.headers
        headers[.contentType] = "application/json"
        return Response(status: f.status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: errorJSON(f))))
    }
}

/// Cross-site request forgery protection as SAP Gateway does it: a client asks for a token with
/// `X-CSRF-Token: Fetch` on any request and gets it in the answer's `X-CSRF-Token`; a modifying
/// request (POST, PUT, PATCH, MERGE, DELETE, and `$batch`) without that token is refused with
/// 403 and `X-CSRF-Token: Required`. The token is random, made when the server starts: a restart
/// makes clients fetch a new one, as a Gateway session's expiry does. On by default for a V2
/// store (`serve --csrf on|off` sets it for either version).
struct CSRF: Sendable {
    let token: String

    init() {
        var rng = SystemRandomNumberGenerator()
        let bytes = (0..<18).map { _ in UInt8.random(in: 0...255, using: &rng) }
        token = Data(bytes).base64EncodedString().replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "+", with: "-")
    }

    /// Whether the request asks for a token.
    static func fetches(_ request: Request) -> Bool {
        request.headers[.xCSRFToken]?.lowercased() == "fetch"
    }

    /// Refuses a modifying request without the token.
    func check(_ request: Request, method: HTTPRequest.Method) throws {
        guard [.post, .put, .patch, .delete].contains(method) || method.rawValue == "MERGE" else { return }
        guard request.headers[.xCSRFToken] == token else {
            var f = ODataFailure(.forbidden, "CSRF token validation failed", code: "CSRFTokenRequired")
            f.headers[.xCSRFToken] = "Required"
            throw f
        }
    }
}

extension HTTPField.Name {
    static let xCSRFToken = HTTPField.Name("X-CSRF-Token")!
    static let xHTTPMethod = HTTPField.Name("X-HTTP-Method")!
    static let dataServiceVersion = HTTPField.Name("DataServiceVersion")!
}

extension Reads {
    /// V2's `$links` read ([MS-ODATA] §2.2.3.5.2): `Set(key)/$links/Nav` answers the URIs of the
    /// related entities — `{"d":{"results":[{"uri":…}]}}` for a collection, `{"d":{"uri":…}}` for a
    /// single one (204 when there is none) — with `$filter`, `$orderby`, `$top` and `$skip`
    /// applied as to `Set(key)/Nav`. Only reads: a `$links` write answers 501.
    func links(_ request: Request, resource: String, query: String) async throws -> Response {
        try Negotiation.requireJSON(request)
        let parts = resource.components(separatedBy: "/$links/")
        guard parts.count == 2, !parts[1].isEmpty, !parts[1].contains("/") else {
            throw ODataFailure(.badRequest, "a $links path is Set(key)/$links/Navigation")
        }
        let (set, _) = try store.parseEntityPath(parts[0])
        let name = parts[1].removingPercentEncoding ?? parts[1]
        guard let nav = try store.entities.set(set).type.navigationProperties.first(where: { $0.name == name }) else {
            throw ODataFailure(.notFound, "\(set) has no navigation property '\(QueryError.quoting(name))'")
        }
        guard let target = store.schema.targetSet(of: nav, from: set) else {
            throw ODataFailure(.notImplemented, "the entity set \(name) of \(set) leads to is not known")
        }
        for option in query.split(separator: "&") {
            let key = option.split(separator: "=", maxSplits: 1).first.map(String.init)?.removingPercentEncoding ?? ""
            guard ["$filter", "$orderby", "$top", "$skip", "$format"].contains(key) else {
                throw ODataFailure(
                    .badRequest,
                    "'\(QueryError.quoting(key))' is not taken with $links ($filter, $orderby, $top, $skip)")
            }
        }
        let url = parts[0] + "/" + parts[1] + (query.isEmpty ? "" : "?" + query)
        let store = self.store
        let related = try await service.offload { try store.entities(url) }
        let root = service.serviceRoot(request)
        var out = JSONBuffer()
        func uri(_ entity: Properties) throws {
            out.append("{\"uri\":")
            out.appendString(root + (try Writes.entityURL(store, set: target, entity: entity)))
            out.append("}")
        }
        if nav.isCollection {
            out.append("{\"d\":{\"results\":[")
            for (i, entity) in related.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                try uri(entity)
            }
            out.append("]}}\n")
        } else {
            guard let entity = related.first else { return Response(status: .noContent) }
            out.append("{\"d\":")
            try uri(entity)
            out.append("}\n")
        }
        return Response.json(out.bytes, contentType: "application/json")
    }
}
