import AsyncHTTPClient
import Foundation
import NIOHTTP1
import Storage
import Sync
import Synchronization

/// Gateway's session rules: the CSRF token and the session cookies it is bound to.
///
/// SAP Gateway refuses every modifying request (POST, PUT, PATCH, MERGE, DELETE, and the
/// `$batch` POST) without a valid `X-CSRF-Token`, and binds the token to the session cookies of
/// the answer that issued it. So, per backend (one flush or refresh):
///
/// - **V2**: before the first modifying request, a `GET` of the service root with
///   `X-CSRF-Token: Fetch`; its token goes with every modifying request after it.
/// - **V4**: no fetch up front (a V4 service such as `serve` or odatapy has no CSRF); a service that
///   answers a modifying request `403` with `x-csrf-token: Required` (S/4HANA RAP does) gets the
///   fetch then, and the token from then on.
/// - **Either**: a modifying request answered `403` with `x-csrf-token: Required` (the token
///   expired, or the session did) is sent once more, after a new fetch. That is safe: the service
///   refused it before applying anything. A second such answer is returned as it is.
/// - **Cookies**: every `Set-Cookie` of an answer goes into this backend's jar (name → value, in
///   memory, never written to disk and never in a message or log), and the jar's cookies go
///   with every request after it — only ever to the service root's origin, as every request does.
extension HTTPTransport {
    struct Session: Sendable {
        /// Whether a token was fetched (it may have come back empty: a service without CSRF).
        var fetched = false
        var token: String?
        var cookies: [(name: String, value: String)] = []
    }

    static func isModifying(_ method: String) -> Bool { method != "GET" && method != "HEAD" }

    /// `request` with the session's token (if it modifies) and cookies.
    func sendInSession(_ request: WireRequest) async throws -> WireResponse {
        let modifying = Self.isModifying(request.method)
        if modifying, version != .v4, !session.withLock({ $0.fetched }) { try await fetchToken() }
        let response = try await transmit(request)
        guard modifying, Self.csrfRequired(response) else { return response }
        try await fetchToken()
        return try await transmit(request)
    }

    static func csrfRequired(_ r: WireResponse) -> Bool {
        r.status == 403 && r.header("x-csrf-token")?.lowercased() == "required"
    }

    /// Fetches a CSRF token (`GET` of the service root with `X-CSRF-Token: Fetch`); the cookies of
    /// its answer go into the jar as every answer's do. A service that answers without a token
    /// gets none sent. Throws `BackendError.transport` when no answer came.
    func fetchToken() async throws {
        let answer = try await transmit(WireRequest(method: "GET", url: "", headers: [("X-CSRF-Token", "Fetch")]))
        let token = answer.header("x-csrf-token").flatMap { t -> String? in
            let t = t.trimmingCharacters(in: .whitespaces)
            return t.isEmpty || t.lowercased() == "required" || !t.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F })
                ? nil : t
        }
        session.withLock {
            $0.fetched = true
            $0.token = token
        }
    }

    /// Adds the session's token (to a modifying request) and cookies to `headers`.
    func sessionHeaders(for request: WireRequest, into headers: inout HTTPHeaders) {
        let (token, cookies) = session.withLock { ($0.token, $0.cookies) }
        if Self.isModifying(request.method), let token, request.header("X-CSRF-Token") == nil {
            headers.replaceOrAdd(name: "X-CSRF-Token", value: token)
        }
        guard !cookies.isEmpty else { return }
        let jar = cookies.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
        let given = headers["Cookie"].joined(separator: "; ")
        headers.replaceOrAdd(name: "Cookie", value: given.isEmpty ? jar : given + "; " + jar)
    }

    /// Keeps the cookies of `setCookie` (`Set-Cookie` values: `NAME=VALUE; Path=/; …`): a new
    /// value replaces the old, an empty one or `Max-Age=0` removes it.
    func keepCookies(_ setCookie: [String]) {
        guard !setCookie.isEmpty else { return }
        session.withLock { s in
            for header in setCookie {
                let fields = header.split(separator: ";")
                guard let first = fields.first, let eq = first.firstIndex(of: "=") else { continue }
                let name = first[..<eq].trimmingCharacters(in: .whitespaces)
                let value = first[first.index(after: eq)...].trimmingCharacters(in: .whitespaces)
                guard !name.isEmpty, Self.isCookieText(name), Self.isCookieText(value) else { continue }
                let expired = fields.dropFirst().contains {
                    $0.trimmingCharacters(in: .whitespaces).lowercased() == "max-age=0"
                }
                s.cookies.removeAll { $0.name == name }
                if !value.isEmpty && !expired { s.cookies.append((name, value)) }
            }
        }
    }

    /// Printable ASCII without `;`, `,` or spaces: what can go back in a `Cookie` header unchanged.
    static func isCookieText(_ s: String) -> Bool {
        s.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ";") && $0 != UInt8(ascii: ",") }
    }
}
