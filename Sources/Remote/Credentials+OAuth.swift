import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Queue
import Storage
package import Sync

/// OAuth 2.0 client credentials (RFC 6749 §4.4) as a `RequestAuthorizer`: a bearer token
/// (RFC 6750) on every request to the service root's origin.
///
/// - **Fetch**: `POST tokenURL` with the form `grant_type=client_credentials` (and `scope`), the
///   client id and secret as HTTP Basic (form-encoded first, RFC 6749 §2.3.1). The secret goes
///   there and nowhere else; the token goes to the service root's origin and nowhere else. No
///   redirect is followed.
/// - **Cache**: in memory, for this authorizer (one per flush or refresh); concurrent requests
///   share one fetch.
/// - **Expiry**: fetched again before `expires_in` runs out (less a tenth of it, at most 30 s,
///   counted from when the fetch was sent); without `expires_in`, when the service says.
/// - **401**: the service refused the token (expired early, revoked: `WWW-Authenticate: Bearer
///   error="invalid_token"`): the token is dropped and the request sent once more with a new one.
/// - **Bounds**: the configuration's `timeouts`, as for every request to the service: `connect`
///   to connect, `idle` between two reads, `request` for the whole exchange, its body included —
///   a token endpoint that answers a byte every few seconds held a refresh (and a sidecar's sync
///   loop behind it) for minutes.
package actor OAuth2ClientCredentials: RequestAuthorizer {
    package let tokenURL: String
    let clientID: String
    private let secret: String
    /// The forms in which `secret` is sent, scrubbed from every error's text.
    private let secretForms: SecretForms
    let scope: String?
    let timeouts: SyncSettings.Timeouts
    private let client: HTTPClient
    private var token: (value: String, renewAt: ContinuousClock.Instant?)?
    private var fetching: Task<(value: String, renewAt: ContinuousClock.Instant?), any Error>?
    /// Tokens fetched so far (tests read it).
    package private(set) var fetches = 0

    package init(
        tokenURL: String, clientID: String, secret: String, scope: String?,
        timeouts: SyncSettings.Timeouts = .init()
    ) {
        self.tokenURL = tokenURL
        self.clientID = clientID
        self.secret = secret
        secretForms = SecretForms(clientID: clientID, secret: secret)
        self.scope = scope
        self.timeouts = timeouts
        client = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: .init(
                redirectConfiguration: .disallow,
                timeout: .init(
                    connect: .seconds(Int64(timeouts.connectSeconds)), read: .seconds(Int64(timeouts.idleSeconds)))))
    }

    /// Closes the token client's connections; call once, when done (`HTTPTransport.shutdown`).
    package func shutdown() async { try? await client.shutdown() }

    package func authorize(_ request: inout AuthorizedRequest) async throws {
        request.setHeader("Authorization", "Bearer " + (try await current()))
    }

    package func didReject(status: Int, headers: [(String, String)]) async -> Bool {
        guard status == 401 else { return false }
        token = nil
        return true
    }

    /// The cached token while it is fresh, else a new one (one fetch at a time).
    private func current() async throws -> String {
        if let token, token.renewAt.map({ ContinuousClock.now < $0 }) ?? true { return token.value }
        if let fetching { return try await fetching.value.value }
        let task = Task { try await self.fetch() }
        fetching = task
        defer { fetching = nil }
        let fresh = try await task.value
        token = fresh
        return fresh.value
    }

    private func fetch() async throws -> (value: String, renewAt: ContinuousClock.Instant?) {
        fetches += 1
        let sent = ContinuousClock.now
        var request = HTTPClientRequest(url: tokenURL)
        request.method = .POST
        let basic = Credentials.formEncoded(clientID) + ":" + Credentials.formEncoded(secret)
        request.headers.add(name: "Authorization", value: "Basic " + Data(basic.utf8).base64EncodedString())
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        var form = "grant_type=client_credentials"
        if let scope { form += "&scope=" + Credentials.formEncoded(scope) }
        request.body = .bytes(ByteBuffer(string: form))
        let status: Int
        var body: [UInt8] = []
        let deadline = NIODeadline.now() + .seconds(Int64(timeouts.requestSeconds))
        do {
            let response = try await client.execute(request, deadline: deadline)
            status = Int(response.status.code)
            // AsyncHTTPClient's deadline ends with the head: the body is bounded here, by the same
            // deadline (the idle timeout bounds each wait for bytes), as `HTTPTransport` bounds it.
            for try await chunk in response.body {
                guard NIODeadline.now() < deadline else { throw unavailable(.deadlineExceeded) }
                guard body.count + chunk.readableBytes <= 1 << 20 else {
                    throw AuthenticationError.tokenUnavailable(tokenURL: tokenURL, reason: "an answer over 1 MiB")
                }
                body.append(contentsOf: chunk.readableBytesView)
            }
        } catch let e as AuthenticationError {
            throw e
        } catch is CancellationError {
            throw CancellationError()
        } catch let e as HTTPClientError {
            throw unavailable(e)
        } catch {
            throw AuthenticationError.tokenUnavailable(tokenURL: tokenURL, reason: scrub("\(error)"))
        }
        let json = try? JSON.parse(body)
        guard (200..<300).contains(status) else {
            // RFC 6749 §5.2: {"error": …, "error_description": …}; any other body is not repeated.
            var message = ""
            if case .string(let code)? = json?["error"] { message = code }
            if case .string(let text)? = json?["error_description"] { message += (message.isEmpty ? "" : ": ") + text }
            if message.isEmpty, status >= 300, status < 400 { message = "a redirect, which is not followed" }
            // Scrubbed whole, then cut: a cut first could leave a secret's start behind.
            throw AuthenticationError.tokenRefused(
                tokenURL: tokenURL, status: status, message: String(scrub(message).prefix(300)))
        }
        guard case .string(let value)? = json?["access_token"], !value.isEmpty,
            value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else {
            throw AuthenticationError.tokenUnavailable(
                tokenURL: tokenURL, reason: "the answer has no usable \"access_token\"")
        }
        if case .string(let type)? = json?["token_type"], type.lowercased() != "bearer" {
            throw AuthenticationError.tokenUnavailable(
                tokenURL: tokenURL, reason: "token_type '\(type.prefix(40))' is not Bearer")
        }
        var lifetime: Double?
        switch json?["expires_in"] {
        case .number(let n)?: lifetime = Double(n)
        case .string(let s)?: lifetime = Double(s)
        default: break
        }
        let renewAt = lifetime.flatMap { seconds -> ContinuousClock.Instant? in
            guard seconds.isFinite, seconds > 0 else { return nil }
            let margin = min(30, seconds / 10)
            return sent + .milliseconds(Int64((seconds - margin) * 1000))
        }
        return (value, renewAt)
    }

    /// The error of a fetch that `error` ended: a timeout names the configuration's member.
    private func unavailable(_ error: HTTPClientError) -> AuthenticationError {
        let reason =
            switch error {
            case .deadlineExceeded:
                "no whole answer within the request timeout (\(timeouts.requestSeconds) s, \"timeouts\": {\"request\"})"
            case .readTimeout:
                "nothing received for the idle timeout (\(timeouts.idleSeconds) s, \"timeouts\": {\"idle\"})"
            case .connectTimeout:
                "no connection within the connect timeout (\(timeouts.connectSeconds) s, \"timeouts\": {\"connect\"})"
            default: scrub("\(error)")
            }
        return .tokenUnavailable(tokenURL: tokenURL, reason: reason)
    }

    /// `text` without the secret in any form it was sent in (`SecretForms`), should an error
    /// repeat it: a token endpoint that echoes its request repeats the `Authorization` header.
    private func scrub(_ text: String) -> String { secretForms.scrub(text) }
}
