import HTTPTypes
import Hummingbird

/// Cross-origin resource sharing (the Fetch standard's CORS protocol) for the origins
/// `ServeOptions.corsOrigins` names: a browser page of such an origin (a UI5 app on
/// `http://localhost:8081`) may read this service's answers and send it writes.
///
/// - A request with an `Origin` among them is answered with `Access-Control-Allow-Origin` (that
///   origin), `Vary: Origin`, and `Access-Control-Expose-Headers` naming what an OData client
///   reads (`ETag`, `Location`, `OData-EntityId`, `Preference-Applied`, `X-CSRF-Token`, SAP's
///   `sap-message`, the repeatability results).
/// - A preflight (`OPTIONS` with `Access-Control-Request-Method`) from such an origin is answered
///   204 with the methods this service takes, the request headers asked for, and `Max-Age`.
/// - Any other origin gets no CORS header: its browser withholds the answer, and a preflight is
///   answered 403. No credentials are allowed (`Access-Control-Allow-Credentials` is never sent).
/// - `POST /$sync` stays refused to a page of another origin, listed or not (`syncNow`).
enum Cors {
    static let methods = "GET, HEAD, POST, PATCH, PUT, DELETE, MERGE"
    static let exposed =
        "ETag, Location, OData-EntityId, OData-Version, DataServiceVersion, Preference-Applied, X-CSRF-Token, sap-message, Repeatability-Result, RepeatabilityResult, OfflineStore-Delta-Expand"

    /// `origin` as `--cors-origin` takes it: `scheme://host[:port]` (http or https), no path,
    /// query or user; or an error saying why not.
    static func validated(_ origin: String) throws -> String {
        let lower = origin.lowercased()
        guard let scheme = ["http://", "https://"].first(where: lower.hasPrefix) else {
            throw ServeError("a CORS origin is http://host[:port] or https://host[:port], not '\(origin)'")
        }
        let authority = origin.dropFirst(scheme.count)
        guard !authority.isEmpty, !authority.contains(where: { "/?#@ ".contains($0) }),
            ServiceRoot.isValidHost(String(authority))
        else {
            throw ServeError("a CORS origin is a scheme, a host and an optional port, nothing else: '\(origin)'")
        }
        return origin
    }

    /// The listed origin `request` comes from, if any (compared without case).
    static func allowedOrigin(_ request: Request, origins: [String]) -> String? {
        guard !origins.isEmpty, let origin = request.headers[.origin] else { return nil }
        let lower = origin.lowercased()
        return origins.contains { $0.lowercased() == lower } ? origin : nil
    }

    /// Adds the CORS headers to `response` for a request of a listed origin.
    static func decorate(_ response: inout Response, request: Request, origins: [String]) {
        guard !origins.isEmpty else { return }
        response.headers[values: .vary] = response.headers[values: .vary] + ["Origin"]
        guard let origin = allowedOrigin(request, origins: origins) else { return }
        response.headers[.accessControlAllowOrigin] = origin
        response.headers[.accessControlExposeHeaders] = exposed
    }

    /// The answer to a CORS preflight (`OPTIONS` with `Origin` and
    /// `Access-Control-Request-Method`); nil for another `OPTIONS`, which is routed as usual.
    static func preflight(_ request: Request, origins: [String]) -> Response? {
        guard request.headers[.origin] != nil, request.headers[.accessControlRequestMethod] != nil else {
            return nil
        }
        guard let origin = allowedOrigin(request, origins: origins) else {
            return Response(status: .forbidden)
        }
        var headers = HTTPFields()
        headers[.accessControlAllowOrigin] = origin
        headers[.accessControlAllowMethods] = methods
        if let wanted = request.headers[.accessControlRequestHeaders] {
            headers[.accessControlAllowHeaders] = wanted
        }
        headers[.accessControlMaxAge] = "600"
        return Response(status: .noContent, headers: headers)
    }
}
