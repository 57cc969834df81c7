import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Queue
import Sync
import Storage

/// `Backend` over HTTP/1.1 with AsyncHTTPClient: an OData V4 JSON client.
///
/// ```swift
/// let backend = HTTPBackend(serviceRoot: "http://127.0.0.1:8080/", headers: [("Authorization", "Basic …")])
/// let page = try await backend.send(BackendRequest(method: "GET", url: "Products?$top=10"))
/// try await backend.shutdown()
/// ```
/// Every request carries `OData-Version: 4.0`, `Accept: application/json` and the configured
/// headers (an `Authorization`, say). Retries: a request that is safe to repeat — a GET, or any
/// request with a `Repeatability-Request-ID` — is sent again after a 5xx (but 501) or a transport
/// error, with exponential backoff, up to `retries` times; any other request is sent once, since
/// the service may have applied it. A `$batch` goes with `Prefer: odata.continue-on-error`, so
/// that one failed request does not leave the others unanswered.
package final class HTTPBackend: Backend, @unchecked Sendable {
    // @unchecked: all stored properties are immutable; HTTPClient is thread-safe.
    package let serviceRoot: String
    package let headers: [(String, String)]
    package let timeout: TimeAmount
    package let retries: Int
    package let backoff: Duration
    private let client: HTTPClient
    package let connectTimeout: TimeAmount

    /// No connection within the connect timeout: not retried.
    struct Unreachable: Error { let message: String }

    /// `connectTimeout` bounds how long a request waits for a connection: AsyncHTTPClient keeps
    /// retrying a refused connection until then, so it is also how long a service that is down
    /// takes to be reported.
    package init(
        serviceRoot: String, headers: [(String, String)] = [], timeout: TimeAmount = .seconds(60),
        retries: Int = 3, backoff: Duration = .milliseconds(200), connectTimeout: TimeAmount = .seconds(10)
    ) {
        self.serviceRoot = serviceRoot.hasSuffix("/") ? serviceRoot : serviceRoot + "/"
        self.headers = headers
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.connectTimeout = connectTimeout
        client = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: .init(redirectConfiguration: .disallow, timeout: .init(connect: connectTimeout)))
    }

    /// Closes the connection pool; call once, when done.
    package func shutdown() async throws { try await client.shutdown() }

    package func absolute(_ url: String) -> String {
        url.hasPrefix("http://") || url.hasPrefix("https://")
            ? url : serviceRoot + (url.hasPrefix("/") ? String(url.dropFirst()) : url)
    }

    package func send(_ request: BackendRequest) async throws -> BackendResponse {
        let repeatable = request.method == "GET" || request.header("Repeatability-Request-ID") != nil
        var attempt = 0
        while true {
            do {
                let response = try await once(request)
                if repeatable, attempt < retries, response.status >= 500, response.status != 501 {
                    attempt += 1
                    try await Task.sleep(for: backoff * (1 << (attempt - 1)))
                    continue
                }
                return response
            } catch let e as Unreachable {
                // AsyncHTTPClient already kept trying to connect for the whole connect timeout:
                // retrying would only multiply the wait for a service that is down.
                throw BackendError.transport(e.message)
            } catch let e as BackendError {
                guard repeatable, attempt < retries, case .transport = e else { throw e }
                attempt += 1
                try await Task.sleep(for: backoff * (1 << (attempt - 1)))
            }
        }
    }

    private func once(_ request: BackendRequest) async throws -> BackendResponse {
        var r = HTTPClientRequest(url: absolute(request.url))
        r.method = HTTPMethod(rawValue: request.method)
        r.headers.add(name: "OData-Version", value: "4.0")
        r.headers.add(name: "Accept", value: "application/json")
        for (k, v) in headers + request.headers { r.headers.replaceOrAdd(name: k, value: v) }
        if let body = request.body {
            if r.headers["Content-Type"].isEmpty { r.headers.add(name: "Content-Type", value: "application/json") }
            r.body = .bytes(ByteBuffer(bytes: body))
        }
        do {
            let response = try await client.execute(r, timeout: timeout)
            let body = try await response.body.collect(upTo: 1 << 30)
            return BackendResponse(
                status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
                body: Array(body.readableBytesView))
        } catch let e as IOError where e.errnoCode == ECONNREFUSED {
            // AsyncHTTPClient retried the refused connection until the connect timeout.
            throw Unreachable(
                message:
                    "\(request.method) \(request.url): \(serviceRoot) refused every connection for the connect timeout (\(connectTimeout.nanoseconds / 1_000_000_000) s): \(e)"
            )
        } catch let e as HTTPClientError where e == .connectTimeout {
            throw Unreachable(
                message:
                    "\(request.method) \(request.url): no connection to \(serviceRoot) within the connect timeout (\(connectTimeout.nanoseconds / 1_000_000_000) s)"
            )
        } catch let e as HTTPClientError {
            throw BackendError.transport("\(request.method) \(request.url): \(e)")
        } catch let e as ChannelError {
            throw BackendError.transport("\(request.method) \(request.url): \(e)")
        } catch let e as BackendError {
            throw e
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw BackendError.transport("\(request.method) \(request.url): \(error)")
        }
    }

    package func batch(
        _ requests: [BackendRequest], headers extra: [(String, String)] = []
    ) async throws -> [BackendResponse] {
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
            BackendRequest(method: "POST", url: "$batch", headers: batchHeaders, body: out.bytes))
        guard response.status == 200 else {
            // The batch itself was refused (401, 413, 5xx, …): no request of it ran, and none of
            // them is at fault.
            let text = String(decoding: response.body.prefix(300), as: UTF8.self)
            throw BackendError.badResponse(
                "the service answered the $batch itself with \(response.status)\(text.isEmpty ? "" : ": " + text)")
        }
        guard case .array(let items)? = try JSON.parse(response.body)["responses"] else {
            throw BackendError.badResponse("a $batch response without \"responses\"")
        }
        var byID: [String: BackendResponse] = [:]
        for item in items {
            guard case .string(let id)? = item["id"], case .number(let s)? = item["status"], let status = Int(s) else {
                continue
            }
            var hs: [(String, String)] = []
            if case .object(let members)? = item["headers"] {
                for case (let k, .string(let v)) in members { hs.append((k, v)) }
            }
            var body: [UInt8] = []
            switch item["body"] {
            case nil, .null?: break
            case .string(let text)?: body = Array(text.utf8)
            case let v?: var text = ""; JSONWriter.write(v, to: &text); body = Array(text.utf8)
            }
            byID[id] = BackendResponse(status: status, headers: hs, body: body)
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
            return BackendResponse(
                status: 424, headers: [("Content-Type", "application/json")], body: Array(message.utf8))
        }
    }
}
