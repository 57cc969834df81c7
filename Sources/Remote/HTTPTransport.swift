import AsyncHTTPClient
import Foundation
import Multipart
package import NIOCore
import NIOHTTP1
import Queue
package import Sync
package import Storage
import Synchronization

/// `Backend` over HTTP/1.1 with AsyncHTTPClient: an OData JSON client, V4 or V2.
///
/// ```swift
/// let backend = HTTPTransport(serviceRoot: "http://127.0.0.1:8080/", headers: [("Authorization", "Basic …")])
/// let page = try await backend.send(WireRequest(method: "GET", url: "Products?$top=10"))
/// try await backend.shutdown()
/// ```
/// Every request carries the version headers of the service's protocol (`OData-Version: 4.0` and
/// `OData-MaxVersion: 4.0`, or V2's `DataServiceVersion: 2.0` and `MaxDataServiceVersion: 2.0`),
/// `Accept: application/json` and the configured headers (an `Authorization`, say).
///
/// **Origins.** A request goes only to the service root's origin (scheme, host and port): an
/// absolute URL elsewhere (a next link, a delta link, a `Location`) is refused with
/// `BackendError.otherOrigin` before anything is sent, so the configured credentials never leave it.
///
/// **Credentials.** An `authorizer` (`Credentials.swift`) sets each request's credentials before
/// it is sent — every attempt, only ever to the service root's origin. A request answered 401 is
/// sent once more when the authorizer says it renewed them (`didReject`).
///
/// **Bounds.** `timeout` bounds the whole exchange, the body included; `idleTimeout` the silence
/// between two reads; `maxBodyBytes` the body kept. Past any of them: `BackendError.transport`
/// (the request may have been applied), naming the bound and how to change it. Retries: a request that is safe to repeat — a GET, or any
/// request with a `Repeatability-Request-ID` — is sent again after a 5xx (but 501) or a transport
/// error, with exponential backoff, up to `retries` times; any other request is sent once, since
/// the service may have applied it. A `$batch` goes with `Prefer: odata.continue-on-error`, so
/// that one failed request does not leave the others unanswered.
package final class HTTPTransport: Transport, @unchecked Sendable {
    // @unchecked: all stored properties are immutable; HTTPClient is thread-safe.
    package let serviceRoot: String
    package let headers: [(String, String)]
    package let timeout: TimeAmount
    package let retries: Int
    package let backoff: Duration
    private let client: HTTPClient
    package let connectTimeout: TimeAmount
    /// The longest silence between two reads of an answer.
    package let idleTimeout: TimeAmount
    /// The longest wait a `Retry-After` of a 503 gets (SAP Gateway asks 30 s when no work process
    /// is free).
    package let maxRetryAfter: Duration
    /// URL parameters every request carries (`sap-client`), from the configuration.
    package let queryParameters: [String: String]
    /// False for a service without `$batch`: `batch` sends its requests one at a time.
    package let supportsBatch: Bool
    /// The largest answer body kept.
    package let maxBodyBytes: Int
    /// The largest body kept in memory of an answer that may be large (`largeAnswer`: a page
    /// of a read); a larger one goes to an unlinked temporary file, read from there as it is parsed.
    package let spoolBytes: Int
    /// The service's protocol version: which version headers go with every request.
    package let version: ODataVersion
    /// The origin (`http://host:port`) of `serviceRoot`, the only one requests go to.
    package let origin: String
    /// The CSRF token and session cookies of this backend (`HTTPTransport+Session.swift`): in
    /// memory only, never written or logged.
    let session = Mutex(Session())
    /// Sets each request's credentials (see the type's documentation), or nil.
    package let authorizer: (any RequestAuthorizer)?

    /// No connection within the connect timeout: not retried.
    struct Unreachable: Error {
        let message: String
        /// No answer to the connect for the whole connect timeout (not worth waiting for again).
        var timedOut = false
    }
    /// No answer within the whole or the idle timeout: not retried either — a service silent for
    /// that long is not helped by being asked again (three retries made a silent upstream take a
    /// refresh 241 s to give up).
    struct TimedOut: Error { let message: String }

    /// `connectTimeout` bounds how long a request waits for a connection. A refused connection
    /// fails at once (AsyncHTTPClient's own retrying of connection establishment is off): it is
    /// tried again `retries` times with the backoff, nothing having been sent, then reported —
    /// a service that is down is reported in about a second, not after the connect timeout.
    package init(
        serviceRoot: String, headers: [(String, String)] = [], timeout: TimeAmount = .seconds(60),
        retries: Int = 3, backoff: Duration = .milliseconds(200), connectTimeout: TimeAmount = .seconds(10),
        idleTimeout: TimeAmount = .seconds(30), maxBodyBytes: Int = 1 << 30, version: ODataVersion = .v4,
        authorizer: (any RequestAuthorizer)? = nil, maxRetryAfter: Duration = .seconds(30),
        queryParameters: [String: String] = [:], supportsBatch: Bool = true, spoolBytes: Int = 8 << 20
    ) {
        self.spoolBytes = spoolBytes
        self.supportsBatch = supportsBatch
        self.maxRetryAfter = maxRetryAfter
        self.queryParameters = queryParameters
        self.serviceRoot = serviceRoot.hasSuffix("/") ? serviceRoot : serviceRoot + "/"
        self.headers = headers
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.connectTimeout = connectTimeout
        self.idleTimeout = idleTimeout
        self.maxBodyBytes = maxBodyBytes
        self.version = version
        self.authorizer = authorizer
        origin = Origin.of(self.serviceRoot) ?? self.serviceRoot
        client = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: .init(
                redirectConfiguration: .disallow, timeout: .init(connect: connectTimeout, read: idleTimeout),
                connectionPool: Self.pool))
    }

    /// The connection pool's settings: a connection that cannot be made fails the request at
    /// once, so `send` decides what to try again (AsyncHTTPClient's default keeps trying to
    /// connect until the connect timeout: a service that was down took 10 s to be reported).
    static var pool: HTTPClient.Configuration.ConnectionPool {
        var pool = HTTPClient.Configuration.ConnectionPool()
        pool.retryConnectionEstablishment = false
        return pool
    }

    /// Closes the connection pool; call once, when done.
    package func shutdown() async throws {
        if let oauth = authorizer as? OAuth2ClientCredentials { await oauth.shutdown() }
        try await client.shutdown()
    }

    /// `url` made absolute against the service root, with the configured `queryParameters` (those
    /// it does not carry already); an absolute URL of another origin is refused.
    package func absolute(_ url: String) throws(BackendError) -> String {
        guard Origin.isAbsolute(url) else {
            return withParameters(serviceRoot + (url.hasPrefix("/") ? String(url.dropFirst()) : url))
        }
        guard Origin.of(url) == origin else { throw .otherOrigin(url: url, serviceRoot: serviceRoot) }
        return withParameters(url)
    }

    func withParameters(_ url: String) -> String {
        guard !queryParameters.isEmpty else { return url }
        let query = url.firstIndex(of: "?").map { url[url.index(after: $0)...] } ?? ""
        let present = Set(query.split(separator: "&").map { $0.split(separator: "=", maxSplits: 1)[0] })
        var out = url
        for (k, v) in queryParameters.sorted(by: { $0.key < $1.key }) where !present.contains(Substring(k)) {
            let value = v.addingPercentEncoding(withAllowedCharacters: Self.parameterCharacters) ?? v
            out += (out.contains("?") ? "&" : "?") + k + "=" + value
        }
        return out
    }

    static let parameterCharacters = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))

    /// Sends `request` with the session's CSRF token and cookies (`HTTPTransport+Session.swift`),
    /// retrying as the type's documentation says.
    package func send(_ request: WireRequest) async throws -> WireResponse {
        try await sendInSession(request)
    }

    /// One request, retried when it is safe to repeat (see the type's documentation); no CSRF
    /// handling of its own.
    func transmit(_ request: WireRequest) async throws -> WireResponse {
        let repeatable = request.method == "GET" || request.header("Repeatability-Request-ID") != nil
        var attempt = 0
        var reauthorized = false
        while true {
            do {
                let response = try await once(request)
                // A 401 was not applied: sent once more if the authorizer renewed its credentials.
                if response.status == 401, !reauthorized, let authorizer,
                    await authorizer.didReject(status: 401, headers: response.headers)
                {
                    reauthorized = true
                    continue
                }
                // 503 (SAP Gateway: "no dialog work process available") means the service did not
                // take the request: a `$batch` refused whole, or a repeatable request, is sent again
                // after the wait it asks (`Retry-After`, at most `maxRetryAfter`).
                if response.status == 503, attempt < retries, repeatable || request.url == "$batch",
                    let wait = Self.retryAfter(response.header("Retry-After"), max: maxRetryAfter)
                {
                    attempt += 1
                    try await Task.sleep(for: wait)
                    continue
                }
                if repeatable, attempt < retries, response.status >= 500, response.status != 501 {
                    attempt += 1
                    try await Task.sleep(for: backoff * (1 << (attempt - 1)))
                    continue
                }
                return response
            } catch let e as TimedOut {
                throw BackendError.transport(e.message)
            } catch let e as Unreachable {
                // No connection, so nothing was sent: any request may be tried again, a few
                // times with the backoff (a refused connection fails at once: `client`).
                guard attempt < retries, !e.timedOut else { throw BackendError.unreachable(e.message) }
                attempt += 1
                try await Task.sleep(for: backoff * (1 << (attempt - 1)))
            } catch let e as BackendError {
                guard repeatable, attempt < retries, case .transport = e else { throw e }
                attempt += 1
                try await Task.sleep(for: backoff * (1 << (attempt - 1)))
            }
        }
    }

    /// Throws when a header cannot go on the wire as given: a name that is not an HTTP token
    /// (RFC 9110 §5.1: empty, spaces, `:`), a value with a control character (CR, LF, NUL) —
    /// which would otherwise reach the transport and come back as "no answer from the service".
    package static func validate(headers: [(String, String)]) throws(EntityError) {
        let token = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".unicodeScalars)
        for (name, value) in headers {
            guard !name.isEmpty, name.unicodeScalars.allSatisfy(token.contains) else {
                throw .badInput(
                    "the header name '\(name.debugDescription.dropFirst().dropLast())' is not an HTTP token")
            }
            guard !value.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7F }) else {
                throw .badInput("the value of header '\(name)' has a control character (CR, LF, NUL…)")
            }
        }
    }

    /// The wait a `Retry-After` asks (delay-seconds; an HTTP date counts as 1 s), at most `max`;
    /// nil without one.
    static func retryAfter(_ value: String?, max: Duration) -> Duration? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        guard let seconds = Int(value) else { return Swift.min(.seconds(1), max) }
        return Swift.min(.seconds(Swift.max(0, seconds)), max)
    }

    private func once(_ request: WireRequest) async throws -> WireResponse {
        var r = HTTPClientRequest(url: try absolute(request.url))
        r.method = HTTPMethod(rawValue: request.method)
        switch version {
        case .v4:
            r.headers.add(name: "OData-Version", value: "4.0")
            r.headers.add(name: "OData-MaxVersion", value: "4.0")
        case .v2, .v3:
            r.headers.add(name: "DataServiceVersion", value: version.rawValue)
            r.headers.add(name: "MaxDataServiceVersion", value: version.rawValue)
        }
        r.headers.add(name: "Accept", value: "application/json")
        for (k, v) in headers + request.headers { r.headers.replaceOrAdd(name: k, value: v) }
        if let authorizer { try await authorize(&r, authorizer, method: request.method) }
        sessionHeaders(for: request, into: &r.headers)
        if let body = request.body {
            if r.headers["Content-Type"].isEmpty { r.headers.add(name: "Content-Type", value: "application/json") }
            r.body = .bytes(ByteBuffer(bytes: body))
        }
        var timeout = self.timeout
        if let source = request.source {
            r.body = .stream(SourceChunks(source: source), length: .known(Int64(source.size)))
            timeout = timeout + .seconds(Int64(source.size >> 20))
        }
        do {
            let deadline = NIODeadline.now() + timeout
            let response = try await client.execute(r, deadline: deadline)
            if let sink = request.sink, (200..<300).contains(Int(response.status.code)) {
                try await drain(response, into: sink, limit: request.sinkLimit, request)
                keepCookies(response.headers[canonicalForm: "Set-Cookie"].map(String.init))
                return WireResponse(
                    status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) })
            }
            // AsyncHTTPClient's deadline ends with the head: the body is bounded here, by the same
            // deadline and by size (the idle timeout bounds each wait for bytes).
            var body: [UInt8] = []
            var file: TemporaryFile? = nil
            var size = 0
            for try await chunk in response.body {
                guard NIODeadline.now() < deadline else {
                    throw TimedOut(
                        message:
                            "\(request.method) \(request.url): the answer took longer than the timeout (\(Self.seconds(timeout)) s) to arrive whole"
                    )
                }
                guard size + chunk.readableBytes <= maxBodyBytes else {
                    throw BackendError.transport(
                        "\(request.method) \(request.url): the answer is larger than the limit of \(maxBodyBytes) bytes"
                    )
                }
                size += chunk.readableBytes
                if let file {
                    try chunk.withUnsafeReadableBytes { try file.append($0) }
                    continue
                }
                body.append(contentsOf: chunk.readableBytesView)
                if request.largeAnswer, body.count > spoolBytes {
                    let spool = try TemporaryFile(holding: "the answer to \(request.method) \(request.url)")
                    try spool.append(body)
                    (file, body) = (spool, [])
                }
            }
            keepCookies(response.headers[canonicalForm: "Set-Cookie"].map(String.init))
            return WireResponse(
                status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) }, body: body,
                spooled: file?.finish())
        } catch let e as IOError where e.errnoCode == ECONNREFUSED {
            throw Unreachable(message: "\(request.method) \(request.url): \(serviceRoot) refused the connection")
        } catch let e as HTTPClientError where e == .connectTimeout {
            throw Unreachable(
                message:
                    "\(request.method) \(request.url): no connection to \(serviceRoot) within the connect timeout (\(connectTimeout.nanoseconds / 1_000_000_000) s)",
                timedOut: true)
        } catch let e as HTTPClientError where e == .readTimeout {
            throw TimedOut(
                message:
                    "\(request.method) \(request.url): the service sent nothing for the idle timeout (\(Self.seconds(idleTimeout)) s)"
            )
        } catch let e as HTTPClientError where e == .deadlineExceeded {
            throw TimedOut(
                message: "\(request.method) \(request.url): no answer within the timeout (\(Self.seconds(timeout)) s)")
        } catch let e as HTTPClientError {
            throw BackendError.transport("\(request.method) \(request.url): \(e)")
        } catch let e as ChannelError {
            throw BackendError.transport("\(request.method) \(request.url): \(e)")
        } catch let e as BackendError {
            throw e
        } catch let e as TimedOut {
            throw e
        } catch let e as EntityError {
            throw e  // a sink that could not write (a full disk): not the service's doing
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw BackendError.transport("\(request.method) \(request.url): \(error)")
        }
    }

    /// Writes a success's body into `sink` as it arrives, from its start, at most `limit` bytes.
    private func drain(
        _ response: HTTPClientResponse, into sink: any StreamSink, limit: Int, _ request: WireRequest
    ) async throws {
        try sink.restart()
        var size = 0
        for try await chunk in response.body {
            size += chunk.readableBytes
            guard size <= limit else {
                throw BackendError.badResponse(
                    "\(request.method) \(request.url): the stream is larger than the limit of \(limit) bytes")
            }
            try chunk.withUnsafeReadableBytes { try sink.append($0) }
        }
    }

    /// A JSON `$batch` answer (OData 4.01 JSON Format §19): each response's members built but its
    /// body, captured as bytes; anything else dropped.
    static let batchAnswerShape: JSONShape = {
        let document = JSONShape(owner: "$batch", otherwise: .drop)
        document.members["responses"] = .shaped(JSONShape.Link(batchResponseShape))
        return document
    }()
    /// One response of it; a static, so that the link above (unowned) stays good.
    static let batchResponseShape: JSONShape = {
        let response = JSONShape(owner: "$batch response", otherwise: .drop)
        for name in ["id", "status", "headers", "atomicityGroup"] { response.members[name] = .whole }
        response.members["body"] = .capture
        return response
    }()

    static func seconds(_ t: TimeAmount) -> String {
        let ms = t.nanoseconds / 1_000_000
        return ms % 1000 == 0 ? String(ms / 1000) : String(Double(ms) / 1000)
    }

    /// Sends `requests` as one `$batch`: a JSON batch to a V4 service, a `multipart/mixed` one
    /// (`Multipart`) to a V2 service.
    package func batch(
        _ requests: [WireRequest], headers extra: [(String, String)] = []
    ) async throws -> [WireResponse] {
        if !supportsBatch { return try await oneByOne(requests, headers: extra) }
        switch version {
        case .v4: return try await jsonBatch(requests, headers: extra)
        case .v2, .v3: return try await multipartBatch(requests, headers: extra)
        }
    }

    /// For a service without `$batch`: each request on its own, in order. A request whose
    /// atomicity group or whose `dependsOn` already failed is not sent (424, as a `$batch` answers
    /// it); what went before stays applied — without `$batch` there is no atomicity.
    func oneByOne(_ requests: [WireRequest], headers extra: [(String, String)]) async throws -> [WireResponse] {
        var out: [WireResponse] = []
        var failed: Set<String> = []
        let passed = extra.filter { $0.0.lowercased() != "prefer" }
        for (i, r) in requests.enumerated() {
            let id = r.id ?? String(i + 1)
            if (r.group.map(failed.contains) ?? false) || r.dependsOn.contains(where: failed.contains) {
                failed.insert(id)
                out.append(Self.notRun(id))
                continue
            }
            let response: WireResponse
            do {
                response = try await send(
                    WireRequest(method: r.method, url: r.url, headers: passed + r.headers, body: r.body))
            } catch BackendError.unreachable(let m) where !out.isEmpty {
                // The requests before it were sent: the round as a whole may have reached the service.
                throw BackendError.transport(m)
            }
            if !response.isSuccess {
                failed.insert(id)
                if let g = r.group { failed.insert(g) }
            }
            out.append(response)
        }
        return out
    }

    static func notRun(_ id: String) -> WireResponse {
        let message =
            #"{"error":{"code":"424","message":"not sent: a request it depends on, or of its transaction, failed"}}"#
        return WireResponse(status: 424, headers: [("Content-Type", "application/json")], body: Array(message.utf8))
    }

    /// A V2 `$batch`: `multipart/mixed`, a change set per atomicity group and per modifying
    /// request outside any (see `Multipart`). Throws `BackendError.badResponse` when the `$batch`
    /// itself is not answered 202 (or 200) or its answer cannot be read.
    func multipartBatch(
        _ requests: [WireRequest], headers extra: [(String, String)]
    ) async throws -> [WireResponse] {
        let boundary = "batch_" + UUID().uuidString.lowercased()
        let parts = requests.map {
            Multipart.Request(
                method: $0.method, url: $0.url, headers: $0.headers, body: $0.body, group: $0.group, id: $0.id)
        }
        let body = Multipart.encode(parts, boundary: boundary)
        let batchHeaders =
            extra.filter { !["prefer", "content-type", "accept"].contains($0.0.lowercased()) } + [
                ("Content-Type", "multipart/mixed; boundary=\(boundary)"), ("Accept", "multipart/mixed"),
            ]
        let response = try await send(WireRequest(method: "POST", url: "$batch", headers: batchHeaders, body: body))
        guard response.status == 202 || response.status == 200 else {
            // The batch itself was refused (401, 403, 413, 5xx, …): no request of it ran.
            let text =
                ServiceMessage.parse(response.body)?.message
                ?? String(decoding: response.body.prefix(300), as: UTF8.self)
            throw BackendError.badResponse(
                "the service answered the $batch itself with \(response.status)\(text.isEmpty ? "" : ": " + text)")
        }
        do {
            let answers = try Multipart.answers(response.body, contentType: response.header("Content-Type") ?? "")
            return try Multipart.responses(for: parts, answers).map {
                WireResponse(status: $0.status, headers: $0.headers, body: $0.body)
            }
        } catch {
            throw BackendError.badResponse(error.description)
        }
    }

    /// A V4 JSON `$batch` (OData 4.01 JSON Format §19).
    func jsonBatch(
        _ requests: [WireRequest], headers extra: [(String, String)]
    ) async throws -> [WireResponse] {
        var out = JSONBuffer()
        out.append("{\"requests\":[")
        for (i, r) in requests.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append("{\"id\":")
            out.appendString(r.id ?? String(i + 1))
            out.append(",\"method\":")
            out.appendString(r.method)
            out.append(",\"url\":")
            out.appendString(r.url)
            if let g = r.group { out.append(",\"atomicityGroup\":"); out.appendString(g) }
            if !r.dependsOn.isEmpty {
                out.append(",\"dependsOn\":[")
                for (k, d) in r.dependsOn.enumerated() {
                    if k > 0 { out.append(UInt8(ascii: ",")) }
                    out.appendString(d)
                }
                out.append("]")
            }
            var hs = r.headers
            if r.body != nil, r.header("Content-Type") == nil { hs.append(("Content-Type", "application/json")) }
            if !hs.isEmpty {
                out.append(",\"headers\":{")
                for (k, (name, value)) in hs.enumerated() {
                    if k > 0 { out.append(UInt8(ascii: ",")) }
                    out.appendString(name)
                    out.append(UInt8(ascii: ":"))
                    out.appendString(value)
                }
                out.append("}")
            }
            if let body = r.body {
                out.append(",\"body\":")
                out.bytes.append(contentsOf: body)
            }
            out.append("}")
        }
        out.append("]}")
        // Without odata.continue-on-error a service may stop at the first request that fails and
        // answer none after it (OData 4.01 JSON Format §19.1; odatapy does).
        var batchHeaders = extra.filter { $0.0.lowercased() != "prefer" }
        let prefer = extra.filter { $0.0.lowercased() == "prefer" }.map(\.1) + ["odata.continue-on-error"]
        batchHeaders += [("Prefer", prefer.joined(separator: ", ")), ("Content-Type", "application/json")]
        let response = try await send(
            WireRequest(method: "POST", url: "$batch", headers: batchHeaders, body: out.bytes))
        guard response.status == 200 else {
            // The batch itself was refused (401, 413, 5xx, …): no request of it ran, and none of
            // them is at fault.
            let text = String(decoding: response.body.prefix(300), as: UTF8.self)
            throw BackendError.badResponse(
                "the service answered the $batch itself with \(response.status)\(text.isEmpty ? "" : ": " + text)")
        }
        // Each answer's body is noted, not built: a service can put megabytes of small values there.
        var dropped = DroppedMembers()
        var captures: [Range<Int>] = []
        let document = try JSON.parse(
            response.body, shape: Self.batchAnswerShape, dropped: &dropped, captures: &captures)
        guard case .array(let items)? = document["responses"] else {
            throw BackendError.badResponse("a $batch response without \"responses\"")
        }
        var byID: [String: WireResponse] = [:]
        for item in items {
            guard case .string(let id)? = item["id"], case .number(let s)? = item["status"], let status = Int(s) else {
                continue
            }
            var hs: [(String, String)] = []
            if case .object(let members)? = item["headers"] {
                for case (let k, .string(let v)) in members { hs.append((k, v)) }
            }
            var body: [UInt8] = []
            if case .number(let n)? = item["body"], let k = Int(n), captures.indices.contains(k) {
                let raw = response.body[captures[k]]
                switch raw.first {
                case UInt8(ascii: "n"): break  // null
                case UInt8(ascii: "\""):  // a body that is not JSON (text/plain), as a JSON string
                    if case .string(let text) = try JSON.parse(Array(raw)) { body = Array(text.utf8) }
                default: body = Array(raw)
                }
            }
            byID[id] = WireResponse(status: status, headers: hs, body: body)
        }
        // A service that stopped at a failed request (not honouring continue-on-error) did not run
        // the requests it left unanswered: 424, as for a request whose dependency failed.
        let stoppedAtFailure = byID.values.contains { $0.status >= 400 }
        return try requests.enumerated().map { i, request in
            let id = request.id ?? String(i + 1)
            if let r = byID[id] { return r }
            guard stoppedAtFailure else {
                throw BackendError.badResponse("the $batch response has no answer for request \(id)")
            }
            let message =
                #"{"error":{"code":"424","message":"not run: the service stopped processing the $batch at a failed request"}}"#
            return WireResponse(
                status: 424, headers: [("Content-Type", "application/json")], body: Array(message.utf8))
        }
    }
}

/// A `StreamSource` as the pieces AsyncHTTPClient sends (64 KiB each), read as they go.
struct SourceChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let source: any StreamSource

    struct AsyncIterator: AsyncIteratorProtocol {
        let source: any StreamSource
        var offset = 0

        mutating func next() async throws -> ByteBuffer? {
            let size = source.size
            guard offset < size else { return nil }
            let count = Swift.min(1 << 16, size - offset)
            var buffer = ByteBufferAllocator().buffer(capacity: count)
            let at = offset
            let n = try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { b in
                try source.read(into: UnsafeMutableRawBufferPointer(rebasing: b[..<count]), at: at)
            }
            guard n > 0 else {
                throw BackendError.transport("the stream's file ended at \(offset) of its \(size) bytes")
            }
            offset += n
            return buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(source: source) }
}
