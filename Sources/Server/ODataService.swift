import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import OfflineStore
import Query
import Storage
import Synchronization

/// Answers one HTTP request: routes it by path and method, and turns every error into an OData
/// error response (`{"error":{"code","message","target","details"}}`).
struct ODataService: Sendable {
    let store: OfflineStore
    let options: ServeOptions
    let logger: Logger
    let roots: ServiceRoot
    /// Where queries run: never on Swift's concurrency pool, which a few long scans would fill.
    let queries: NIOThreadPool
    /// Sync behind an offline store (`POST /$sync`, `--sync-interval`); nil for an authority store.
    let sync: SyncLoop?
    /// Gateway's CSRF protection, when on (`ServeOptions.csrfProtection`).
    let csrf: CSRF?
    let stats = AccessStats()
    /// `$metadata` as served: an authority's without the operations it cannot run (`Operations`).
    var servedMetadata: [UInt8] { Operations.servedMetadata(store) }
    /// The live-query streams each client address holds (`LiveStream`).
    let streams = StreamCounts()

    /// Whether the store is served in OData V2's dialect (`V2Dialect`): a store made from V2
    /// `$metadata`.
    var v2: Bool { V2Dialect.applies(to: store) }

    /// Runs `body` (a query, or anything else that may take long) on the query threads.
    func offload<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await queries.runIfActive(body)
    }

    func respond(to request: Request, peer: SocketAddress? = nil) async -> Response {
        let start = ContinuousClock.now
        var response: Response
        do {
            response = try await route(request, peer: peer)
        } catch {
            let failure = ODataFailure(error)
            response = v2 ? V2Dialect.response(failure) : failure.response
        }
        if v2 { response.headers[.dataServiceVersion] = "2.0" } else { response.headers[.odataVersion] = "4.0" }
        Cors.decorate(&response, request: request, origins: options.corsOrigins)
        if let csrf, CSRF.fetches(request) { response.headers[.xCSRFToken] = csrf.token }
        let elapsed = ContinuousClock.now - start
        let micros =
            UInt64(elapsed.components.seconds) * 1_000_000 + UInt64(elapsed.components.attoseconds / 1_000_000_000_000)
        stats.record(method: request.method.rawValue, status: response.status.code, microseconds: micros)
        logger.debug("\(request.method) \(request.uri) \(response.status.code) \(micros) µs")
        return response
    }

    /// The service root that links name: the configured public URL, else the bound address
    /// (`ServiceRoot`). The request's `Host` was validated by `route`.
    func serviceRoot(_ request: Request) -> String { roots.root(host: request.head.authority) }

    private func route(_ request: Request, peer: SocketAddress?) async throws -> Response {
        var request = request
        if v2 {
            // MERGE, and a POST's X-HTTP-Method, stand for the method they name.
            let method = try V2Dialect.method(request)
            if method != request.method {
                var head = request.head
                head.method = method
                request = Request(head: head, body: request.body)
            }
        }
        if let host = request.head.authority, !ServiceRoot.isValidHost(host) {
            throw ODataFailure(
                .badRequest,
                "invalid Host header '\(QueryError.quoting(host))': expected a host name or an IP address, and an optional port"
            )
        }
        let path = request.uri.path
        guard path.hasPrefix("/") else { throw ODataFailure(.badRequest, "request target must be an absolute path") }
        var resource = String(path.dropFirst())
        if resource.hasSuffix("/") { resource.removeLast() }
        let query = request.uri.query ?? ""
        let method = request.method
        if method == .options, let preflight = Cors.preflight(request, origins: options.corsOrigins) {
            return preflight
        }
        if let csrf { try csrf.check(request, method: method) }
        switch resource {
        case "":
            guard method == .get || method == .head else {
                throw ODataFailure.methodNotAllowed(method, "the service document", allow: "GET")
            }
            try Negotiation.requireJSON(request)
            if v2 { return Response.json(V2Dialect.serviceDocument(store.schema), contentType: "application/json") }
            return Response.json(ServiceDocument.json(store.schema, root: serviceRoot(request)))
        case "$metadata":
            guard method == .get || method == .head else {
                throw ODataFailure.methodNotAllowed(method, "$metadata", allow: "GET")
            }
            try Negotiation.require(request, "application/xml")
            var headers = HTTPFields()
            headers[.contentType] = "application/xml"
            return Response(
                status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: servedMetadata)))
        case "$batch":
            guard method == .post else { throw ODataFailure.methodNotAllowed(method, "$batch", allow: "POST") }
            return try await Batch(service: self).respond(&request)
        case "$sync":
            return try await syncNow(request, peer: peer)
        case "metrics" where options.metrics != nil:
            return try metrics(request, peer: peer)
        default:
            break
        }
        if v2, resource.contains("/$links/"), !Links.isLinkWrite(method, resource) {
            guard method == .get || method == .head else {
                throw ODataFailure(
                    .notImplemented, "\(method.rawValue) on $links is not supported; change the foreign key instead")
            }
            return try await Reads(service: self).links(request, resource: resource, query: query)
        }
        if let call = try Operations.call(store, resource: resource, query: query) {
            return try await operation(&request, call)
        }
        if store.isStreamAddress(resource) {
            return try await Media(service: self).respond(request, resource: resource, query: query)
        }
        let url = query.isEmpty ? resource : resource + "?" + query
        switch method {
        case .get where LiveStream.wanted(request):
            return try LiveStream(service: self).response(request, url: url, resource: resource, peer: peer)
        case .get, .head:
            return try await Reads(service: self).get(request, url: url, resource: resource)
        case .post, .patch, .put, .delete:
            return try await Writes(service: self).respond(&request, resource: resource, query: query)
        default:
            throw ODataFailure.methodNotAllowed(
                method, "'\(QueryError.quoting(resource))'", allow: "GET, POST, PATCH, PUT, DELETE")
        }
    }
}

extension ODataService {
    /// `POST /$sync`: a refresh then a flush of an offline store now (after the one running, if
    /// any), answered with the outcome — 200 when both ran to the end, 503 when the back end
    /// failed (the store and this service are unharmed; the body says what failed). Only from a
    /// loopback peer: an administrator's request, not a client's; with CSRF protection on, only
    /// with the token (`route` checks it, as for every modifying request); and never with an
    /// `Origin` other than this service's: a web page the user opens can send a POST to loopback
    /// (as `text/plain`, with no preflight), and must not make the sidecar sync.
    func syncNow(_ request: Request, peer: SocketAddress?) async throws -> Response {
        guard let sync else {
            throw ODataFailure(
                .notFound, "this store is the authority for its data: it has no service to sync with")
        }
        guard request.method == .post else {
            throw ODataFailure.methodNotAllowed(request.method, "$sync", allow: "POST")
        }
        guard let peer, Self.isLoopback(peer) else {
            throw ODataFailure(.forbidden, "$sync is answered only to a client on this machine (loopback)")
        }
        if let origin = request.headers[.origin], !isOwnOrigin(origin, request) {
            throw ODataFailure(
                .forbidden,
                "$sync is not answered to a page of another origin (Origin: \(QueryError.quoting(String(origin.prefix(200)))))"
            )
        }
        let outcome = await sync.sync(reason: "POST /$sync")
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(
            status: outcome.ranToTheEnd ? .ok : .serviceUnavailable, headers: headers,
            body: .init(byteBuffer: ByteBuffer(bytes: outcome.json)))
    }

    /// `GET /metrics` (with `ServeOptions.metrics`): the store's metrics in Prometheus' text
    /// format (0.0.4), to a loopback client only — an operator's scrape, not a client's.
    func metrics(_ request: Request, peer: SocketAddress?) throws -> Response {
        guard let emit = options.metrics else { throw ODataFailure(.notFound, "this service exposes no metrics") }
        guard request.method == .get || request.method == .head else {
            throw ODataFailure.methodNotAllowed(request.method, "/metrics", allow: "GET")
        }
        guard let peer, Self.isLoopback(peer) else {
            throw ODataFailure(.forbidden, "/metrics is answered only to a client on this machine (loopback)")
        }
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: emit())))
    }

    /// Whether `origin` (an `Origin` header) is this service's: the scheme and authority of the
    /// request's `Host` (validated by `route`), or of the configured public URL.
    func isOwnOrigin(_ origin: String, _ request: Request) -> Bool {
        let given = origin.lowercased()
        var own: [String] = []
        if let host = request.head.authority { own.append("http://" + host.lowercased()) }
        if let publicRoot = roots.publicRoot {
            let lower = publicRoot.lowercased()
            let scheme = lower.hasPrefix("https://") ? "https://" : "http://"
            own.append(scheme + lower.dropFirst(scheme.count).prefix { $0 != "/" })
        }
        return own.contains { $0 == given || Self.withDefaultPort($0) == Self.withDefaultPort(given) }
    }

    /// `scheme://host` with the scheme's default port made explicit (`:80`, `:443`).
    private static func withDefaultPort(_ origin: String) -> String {
        let scheme = origin.hasPrefix("https://") ? "https://" : "http://"
        let authority = origin.dropFirst(scheme.count)
        let hasPort = authority.lastIndex(of: ":").map { !authority[$0...].contains("]") } ?? false
        return hasPort ? origin : origin + (scheme == "https://" ? ":443" : ":80")
    }

    static func isLoopback(_ address: SocketAddress) -> Bool {
        guard let ip = address.ipAddress else { return false }
        return ip.hasPrefix("127.") || ip == "::1" || ip.hasPrefix("::ffff:127.")
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
    /// SAP Gateway's idempotency headers (its "idempotent services"): the request's id (a GUID of
    /// 32 hexadecimal digits), when it was first created, and how the service handled it.
    static let sapRequestID = HTTPField.Name("RequestID")!
    static let sapRepeatabilityCreation = HTTPField.Name("RepeatabilityCreation")!
    static let sapRepeatabilityResult = HTTPField.Name("RepeatabilityResult")!
    /// `followed` on a response that carries a delta link, or is a delta: its delta covers every
    /// entity set the request's `$expand` reaches, not only the request's own set. Refresh
    /// (`Refresher`, which spells the same name) keeps the delta link of a request with `$expand`
    /// only when it is there: a service whose delta reports the top set's changes alone (SAP
    /// Gateway's, mock-sap's) would leave changed children stale for good.
    static let deltaExpand = HTTPField.Name("OfflineStore-Delta-Expand")!
}

extension Response {
    /// A JSON response (`application/json;odata.metadata=minimal`).
    static func json(
        _ bytes: [UInt8], status: HTTPResponse.Status = .ok, headers extra: HTTPFields = HTTPFields(),
        contentType: String = "application/json;odata.metadata=minimal"
    ) -> Response {
        var headers = extra
        headers[.contentType] = contentType
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

/// The service root that links, `@odata.context` and `Location` name — never the client's `Host`
/// header as sent (any client can send `evil.example:666`, or one holding `"` or `/../`).
///
/// - with a public URL configured (`--public-url`): that, always;
/// - bound to one address: `http://HOST:PORT/` of the bind;
/// - bound to a wildcard (`0.0.0.0`, `::`): the host the request's (validated) `Host` names, with
///   the bound port — the client reached this machine by that name; without a `Host`, 127.0.0.1.
final class ServiceRoot: Sendable {
    let host: String
    let publicRoot: String?
    private let port = Atomic<Int>(0)

    init(host: String, publicRoot: String?) {
        self.host = host
        self.publicRoot = publicRoot
    }

    func bound(port: Int) { self.port.store(port, ordering: .releasing) }

    var isWildcard: Bool { ["0.0.0.0", "::", "", "*", "[::]"].contains(host) }

    func root(host requested: String?) -> String {
        if let publicRoot { return publicRoot }
        let port = self.port.load(ordering: .acquiring)
        var name = host
        if isWildcard {
            name = requested.flatMap { Self.isValidHost($0) ? Self.hostPart($0) : nil } ?? "127.0.0.1"
        }
        if name.contains(":") && !name.hasPrefix("[") { name = "[\(name)]" }
        return "http://\(name):\(port)/"
    }

    /// `host` of `host:port` or `[v6]:port`.
    static func hostPart(_ authority: String) -> String {
        if authority.hasPrefix("["), let end = authority.firstIndex(of: "]") {
            return String(authority[...end])
        }
        return String(authority.prefix { $0 != ":" })
    }

    /// Whether `value` is a Host header this service takes: a DNS name or IPv4 address (letters,
    /// digits, `-`, `.`, `_`), or an IPv6 literal in brackets, with an optional port 0…65535.
    static func isValidHost(_ value: String) -> Bool { ServiceURL.isValidAuthority(value) }

    /// A `--public-url` as the service root: `http` or `https`, a valid host and optional port, an
    /// optional path of plain segments; no query, fragment, user, quote or space. Ends with `/`.
    static func validatePublic(_ url: String) throws -> String {
        struct Invalid: Error, CustomStringConvertible { var description: String }
        let invalid = Invalid(
            description:
                "invalid public URL '\(url)': expected http(s)://HOST[:PORT]/[PATH/] with no query, fragment, user or quotes"
        )
        let lower = url.lowercased()
        guard let scheme = ["http://", "https://"].first(where: lower.hasPrefix) else { throw invalid }
        let rest = url.dropFirst(scheme.count)
        let authority = String(rest.prefix { $0 != "/" })
        let path = rest.dropFirst(authority.count)
        guard isValidHost(authority),
            path.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-._~/%!$&'()*+,;=:@".contains($0)) }),
            !path.contains("/../"), !path.hasSuffix("/.."), !path.contains("/./"), !path.contains("//")
        else { throw invalid }
        return url.hasSuffix("/") ? url : url + "/"
    }
}
