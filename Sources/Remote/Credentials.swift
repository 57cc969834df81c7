import AsyncHTTPClient
import Foundation
import NIOHTTP1
import Queue
import Storage
package import Sync

/// Sets the credentials of a request to the service before it is sent: the hook through which a
/// program authenticates flush and refresh its own way (a token it refreshes, SAML cookies, a
/// signature). Pass one to `flush(…, authorizer:)` or `refresh(…, authorizer:)`; the
/// configuration's `"authentication"` (HTTP Basic, OAuth 2.0 client credentials) is a built-in
/// one, used when none is passed.
///
/// ```swift
/// struct SAMLCookies: RequestAuthorizer {
///     let session: String
///     func authorize(_ request: inout AuthorizedRequest) async throws {
///         request.setHeader("Cookie", "MYSAPSSO2=\(session)")
///     }
/// }
/// let report = try await store.refresh(authorizer: SAMLCookies(session: "…"))
/// ```
///
/// Only requests to the service root's origin (scheme, host and port) reach it: a next link, a
/// delta link or a `Location` pointing elsewhere is refused before anything is sent, so whatever
/// it sets never leaves that origin. It is called before every attempt of every request (a retry
/// too), after the store's own headers are set: what it sets replaces them. It may be called
/// concurrently, and must not log what it sets.
public protocol RequestAuthorizer: Sendable {
    /// Sets `request`'s credentials (`setHeader`). Throwing stops the flush or refresh with that
    /// error; nothing is sent.
    func authorize(_ request: inout AuthorizedRequest) async throws

    /// The service answered a request `status` 401 (Unauthorized), with `headers` (its
    /// `WWW-Authenticate` says why). Return true to have the request sent once more — after
    /// `authorize` again, with new credentials (a 401 means the service applied nothing, so a
    /// resend is safe); false to let the 401 stand. The default returns false.
    func didReject(status: Int, headers: [(String, String)]) async -> Bool
}

extension RequestAuthorizer {
    /// A 401 stands: nothing to renew.
    public func didReject(status: Int, headers: [(String, String)]) async -> Bool { false }
}

/// A request about to go to the service, as a `RequestAuthorizer` sees it.
public struct AuthorizedRequest: Sendable {
    /// `GET`, `POST`, `MERGE`, …
    public let method: String
    /// The absolute URL, always on the service root's origin.
    public let url: String
    /// The headers it will carry (names as given; the session's cookies and CSRF token are added
    /// after): set yours with `setHeader`.
    public var headers: [(String, String)]

    package init(method: String, url: String, headers: [(String, String)]) {
        self.method = method
        self.url = url
        self.headers = headers
    }

    /// Sets header `name` (case-insensitive) to `value`, replacing any value it had.
    public mutating func setHeader(_ name: String, _ value: String) {
        headers.removeAll { $0.0.lowercased() == name.lowercased() }
        headers.append((name, value))
    }

    /// The value of header `name` (case-insensitive), or nil.
    public func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }
}

/// Why flush or refresh could not authenticate. No case ever carries a secret or a token: they
/// name the environment variable, the file or the URL.
public enum AuthenticationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The secret could not be read: `source` names the variable or the file.
    case secretUnavailable(source: String, reason: String)
    /// The token endpoint answered with an error status (its OAuth `error` and description).
    case tokenRefused(tokenURL: String, status: Int, message: String)
    /// The token endpoint's answer could not be used, or no answer came.
    case tokenUnavailable(tokenURL: String, reason: String)
    /// The configuration's credentials are for its `serviceRoot`'s origin, and the flush or
    /// refresh goes to another.
    case otherServiceOrigin(configured: String, given: String)
    /// An authorizer set a header that cannot be sent (a control character in it).
    case badHeader(name: String)

    public var description: String {
        switch self {
        case .secretUnavailable(let source, let reason): "authentication: the secret's \(source) \(reason)"
        case .tokenRefused(let url, let status, let message):
            "authentication: the token endpoint \(url) answered \(status)\(message.isEmpty ? "" : ": " + message)"
        case .tokenUnavailable(let url, let reason): "authentication: no token from \(url): \(reason)"
        case .otherServiceOrigin(let configured, let given):
            "authentication: the configuration's credentials go only to its serviceRoot's origin (\(configured)), not to \(given); change serviceRoot, or give the credentials through the API's authorizer"
        case .badHeader(let name): "authentication: the authorizer set header '\(name)' with a control character"
        }
    }
}

/// The built-in authorizers of the configuration's `"authentication"`.
package enum Credentials {
    /// The authorizer of `configuration.authentication` for a flush or refresh of `serviceRoot`,
    /// with its secret read now; nil when the configuration has none.
    ///
    /// Every flush and refresh without an authorizer of its own comes here before it makes its
    /// HTTP client: `serviceRoot` (a `--service`, or the stored configuration's, which a store made
    /// before URLs were checked may hold) and the token URL are checked here as URLs to send
    /// requests to (`ServiceURL.check`) — a port past 65535 would trap in the client.
    /// - Throws: `EntityError` for such a URL; `AuthenticationError` for a secret that cannot be
    ///   read, or a service root on another origin than the configuration's `serviceRoot`.
    package static func authorizer(
        for configuration: SyncSettings, serviceRoot: String
    ) throws -> (any RequestAuthorizer)? {
        try ServiceURL.check(serviceRoot, option: "the service root")
        guard let authentication = configuration.authentication else { return nil }
        let given = Origin.of(serviceRoot) ?? serviceRoot
        guard let root = configuration.serviceRoot, let configured = Origin.of(root), configured == given else {
            throw AuthenticationError.otherServiceOrigin(
                configured: configuration.serviceRoot.map { Origin.of($0) ?? $0 } ?? "none configured", given: given)
        }
        // The secret's forms join `SecretForms.known` as it is read, before anything is sent: what
        // the store records or prints of this flush or refresh is scrubbed of them.
        switch authentication {
        case .basic(let user, let password):
            let password = try read(password)
            SecretForms.register(SecretForms(user: user, password: password))
            return BasicAuthorizer(user: user, password: password)
        case .oauth2ClientCredentials(let url, let id, let secret, let scope):
            try ServiceURL.check(url, option: "configuration: authentication tokenURL")
            let secret = try read(secret)
            SecretForms.register(SecretForms(clientID: id, secret: secret))
            return OAuth2ClientCredentials(
                tokenURL: url, clientID: id, secret: secret, scope: scope, timeouts: configuration.timeouts)
        }
    }

    /// The largest secret file read.
    static let maxSecretBytes = 64 << 10

    /// The secret of `source`: the variable's value, or the file's contents without one trailing
    /// newline (`\n` or `\r\n`). It must be non-empty printable text (it goes in a header).
    package static func read(_ source: SyncSettings.SecretSource) throws(AuthenticationError) -> String {
        var secret: String
        switch source {
        case .environment(let name):
            guard let value = getenv(name) else {
                throw .secretUnavailable(source: source.description, reason: "is not set")
            }
            secret = String(cString: value)
        case .file(let path):
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw .secretUnavailable(
                    source: source.description,
                    reason: "cannot be read: \(String(cString: strerror(errno)))")
            }
            defer { try? handle.close() }
            let data: Data
            do { data = try handle.read(upToCount: maxSecretBytes + 1) ?? Data() } catch {
                throw .secretUnavailable(source: source.description, reason: "cannot be read: \(error)")
            }
            guard data.count <= maxSecretBytes else {
                throw .secretUnavailable(source: source.description, reason: "is larger than \(maxSecretBytes) bytes")
            }
            secret = String(decoding: data, as: UTF8.self)
            if secret.hasSuffix("\r\n") {
                secret.removeLast(1)  // "\r\n" is one Character
            } else if secret.hasSuffix("\n") {
                secret.removeLast()
            }
        }
        guard !secret.isEmpty else { throw .secretUnavailable(source: source.description, reason: "is empty") }
        guard !secret.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw .secretUnavailable(
                source: source.description, reason: "holds a control character (a line break inside it?)")
        }
        return secret
    }

    /// `value` as `application/x-www-form-urlencoded` writes it (RFC 6749 Appendix B).
    static func formEncoded(_ value: String) -> String {
        var out = ""
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "*"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: " "): out += "+"
            default: out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }
}

extension String {
    fileprivate func leftPadded(to n: Int) -> String {
        count >= n ? self : String(repeating: "0", count: n - count) + self
    }
}

/// HTTP Basic (RFC 7617): `Authorization: Basic base64(user:password)` on every request to the
/// service root's origin. A 401 stands: the password does not change by asking again.
package struct BasicAuthorizer: RequestAuthorizer {
    private let value: String

    package init(user: String, password: String) {
        value = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }

    package func authorize(_ request: inout AuthorizedRequest) async throws {
        request.setHeader("Authorization", value)
    }
}

extension HTTPTransport {
    /// `r`'s headers as `authorizer` sets them; `r.url` is on the service root's origin (`once`
    /// refused any other before). A header it sets with a control character is refused.
    func authorize(_ r: inout HTTPClientRequest, _ authorizer: any RequestAuthorizer, method: String) async throws {
        var request = AuthorizedRequest(method: method, url: r.url, headers: r.headers.map { ($0.name, $0.value) })
        try await authorizer.authorize(&request)
        var headers = HTTPHeaders()
        for (name, value) in request.headers {
            guard !name.isEmpty,
                !(name + value).unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F })
            else { throw AuthenticationError.badHeader(name: String(name.prefix(100))) }
            headers.add(name: name, value: value)
        }
        r.headers = headers
    }
}
