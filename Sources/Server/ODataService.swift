import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import OfflineStore
import Query
import Storage

/// Answers one HTTP request: routes it by path and method, and turns every error into an OData
/// error response (`{"error":{"code","message","target","details"}}`).
struct ODataService: Sendable {
    let store: OfflineStore
    let options: ServeOptions
    let logger: Logger
    let stats = AccessStats()

    func respond(to request: Request) async -> Response {
        let start = ContinuousClock.now
        var response: Response
        do {
            response = try await route(request)
        } catch {
            response = ODataFailure(error).response
        }
        response.headers[.odataVersion] = "4.0"
        let elapsed = ContinuousClock.now - start
        let micros =
            UInt64(elapsed.components.seconds) * 1_000_000 + UInt64(elapsed.components.attoseconds / 1_000_000_000_000)
        stats.record(method: request.method.rawValue, status: response.status.code, microseconds: micros)
        logger.debug("\(request.method) \(request.uri) \(response.status.code) \(micros) µs")
        return response
    }

    /// The service root as the client addressed it: `http://<Host>/`.
    func serviceRoot(_ request: Request) -> String {
        let host = request.head.authority ?? "\(options.host):\(options.port)"
        return "http://\(host)/"
    }

    private func route(_ request: Request) async throws -> Response {
        let path = request.uri.path
        guard path.hasPrefix("/") else { throw ODataFailure(.badRequest, "request target must be an absolute path") }
        var resource = String(path.dropFirst())
        if resource.hasSuffix("/") { resource.removeLast() }
        let query = request.uri.query ?? ""
        let method = request.method
        switch resource {
        case "":
            guard method == .get || method == .head else {
                throw ODataFailure.methodNotAllowed(method, "the service document", allow: "GET")
            }
            try Negotiation.requireJSON(request)
            return Response.json(ServiceDocument.json(store.schema, root: serviceRoot(request)))
        case "$metadata":
            guard method == .get || method == .head else {
                throw ODataFailure.methodNotAllowed(method, "$metadata", allow: "GET")
            }
            try Negotiation.require(request, "application/xml")
            var headers = HTTPFields()
            headers[.contentType] = "application/xml"
            return Response(
                status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: store.entities.metadata)))
        case "$batch":
            guard method == .post else { throw ODataFailure.methodNotAllowed(method, "$batch", allow: "POST") }
            var request = request
            return try await Batch(service: self).respond(&request)
        default:
            break
        }
        let url = query.isEmpty ? resource : resource + "?" + query
        switch method {
        case .get, .head:
            return try await Reads(service: self).get(request, url: url, resource: resource)
        case .post, .patch, .put, .delete:
            var request = request
            return try await Writes(service: self).respond(&request, resource: resource, query: query)
        default:
            throw ODataFailure.methodNotAllowed(
                method, "'\(QueryError.quoting(resource))'", allow: "GET, POST, PATCH, PUT, DELETE")
        }
    }
}

extension HTTPField.Name {
    static let odataVersion = HTTPField.Name("OData-Version")!
    static let odataEntityID = HTTPField.Name("OData-EntityId")!
    static let prefer = HTTPField.Name("Prefer")!
    static let preferenceApplied = HTTPField.Name("Preference-Applied")!
    static let repeatabilityRequestID = HTTPField.Name("Repeatability-Request-ID")!
    static let repeatabilityFirstSent = HTTPField.Name("Repeatability-First-Sent")!
    static let repeatabilityResult = HTTPField.Name("Repeatability-Result")!
}

extension Response {
    /// A JSON response (`application/json;odata.metadata=minimal`).
    static func json(
        _ bytes: [UInt8], status: HTTPResponse.Status = .ok, headers extra: HTTPFields = HTTPFields()
    ) -> Response {
        var headers = extra
        headers[.contentType] = "application/json;odata.metadata=minimal"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static func json(_ text: String, status: HTTPResponse.Status = .ok, headers: HTTPFields = HTTPFields()) -> Response
    {
        json(Array(text.utf8), status: status, headers: headers)
    }
}

/// The service document: the entity sets of the container that `$metadata` describes.
///
/// The store's own sets (`RequestQueue`, `ErrorArchive`, `EventLog`) stay readable by URL but are
/// not listed: `$metadata` (the service's CSDL, as given to `init`) does not describe them, and
/// the service document names children of that container (OData 4.01 JSON Format §5), so a client
/// that reflects `$metadata` could not type them.
enum ServiceDocument {
    static func json(_ schema: Schema, root: String) -> String {
        var out = JSONBuffer()
        out.append("{\"@odata.context\":")
        out.appendString(root + "$metadata")
        out.append(",\"value\":[")
        for (i, name) in schema.serviceSetNames.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append("{\"name\":")
            out.appendString(name)
            out.append(",\"kind\":\"EntitySet\",\"url\":")
            out.appendString(name)
            out.append("}")
        }
        out.append("]}\n")
        return out.string
    }
}

/// Content negotiation: `Accept` must admit what the resource is.
enum Negotiation {
    static func requireJSON(_ request: Request) throws { try require(request, "application/json") }

    /// Throws 406 when the request's `Accept` admits neither `type` nor `*/*` nor `type`'s `major/*`.
    static func require(_ request: Request, _ type: String) throws {
        guard let accept = request.headers[.accept], !accept.isEmpty else { return }
        let major = type.split(separator: "/")[0]
        for part in accept.split(separator: ",") {
            let media = part.split(separator: ";", omittingEmptySubsequences: false)[0].trimmingCharacters(
                in: .whitespaces
            ).lowercased()
            if media == "*/*" || media == type || media == "\(major)/*" { return }
        }
        throw ODataFailure(
            .notAcceptable, "this resource is \(type); the request accepts only '\(QueryError.quoting(accept))'")
    }

    /// Throws 415 unless the request's body is JSON.
    static func requireJSONBody(_ request: Request) throws {
        let type = request.headers[.contentType]?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces)
            .lowercased()
        guard let type else {
            throw ODataFailure(.unsupportedMediaType, "a request body needs Content-Type: application/json")
        }
        guard type == "application/json" else {
            throw ODataFailure(
                .unsupportedMediaType,
                "unsupported Content-Type '\(QueryError.quoting(type))'; this service takes application/json")
        }
    }
}
