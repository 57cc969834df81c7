import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// mock-sap 0.22.0 (PyPI: an independent SAP Gateway V2 and S/4HANA V4 RAP endpoint, MIT) as the
/// SAP back end of a test: `scripts/mock-sap-server.sh` on 127.0.0.1, a free port, a bounded
/// lifetime, stopped by its PID. Its data is in memory unless `db` names a SQLite file (a server
/// started again on the same file has the same data: a kill test's count). Python comes from the
/// venv `.venv-sap/`, made and given mock-sap from PyPI on first use.
///
/// The services (paths under the server's URL):
/// - `MockSAP.gwsample`: GWSAMPLE_BASIC, the classic Gateway demo service (V2);
/// - `MockSAP.salesOrderV2`: S/4's API_SALES_ORDER_SRV (V2);
/// - `MockSAP.salesOrderV4`: S/4's api_salesorder RAP service (V4).
struct MockSAP {
    static let gwsample = "/sap/opu/odata/IWBEP/GWSAMPLE_BASIC/"
    static let salesOrderV2 = "/sap/opu/odata/sap/API_SALES_ORDER_SRV/"
    static let salesOrderV4 = "/sap/opu/odata4/sap/api_salesorder/srvd_a2x/sap/api_salesorder/0001/"

    let server: ServerProcess
    let http: HTTP
    private let client: HTTPClient
    /// `http://127.0.0.1:PORT` (no trailing slash).
    var url: String { server.url }

    /// Starts a server; `options` are `scripts/mock-sap-server.sh`'s (`--require-if-match`,
    /// `--db FILE`, `--oauth ID:SECRET`, …).
    static func start(_ options: [String] = [], lifetime: Double = 600) async throws -> MockSAP {
        let dir = tempDir() + "/mock-sap"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let args =
            [
                repositoryRoot + "/scripts/mock-sap-server.sh", "--lifetime", String(lifetime), "--pid-file",
                dir + "/pid",
            ]
            + options
        // The first start may make the venv and install mock-sap from PyPI.
        let server = try await ServerProcess.launch("/bin/sh", args, store: dir, startTimeout: 600)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        return MockSAP(server: server, http: HTTP(client: client, base: server.url), client: client)
    }

    /// Stops the server and the client.
    func stop() async {
        try? await client.shutdown()
        await server.stop()
    }

    /// The service root of `service` (one of the paths above).
    func root(_ service: String) -> String { url + service }

    /// `$metadata` of `service`, as the server answers it; `headers` carry the test's own
    /// credentials when the server runs with `--auth` or `--oauth`.
    func metadata(_ service: String, headers: [(String, String)] = []) async throws -> String {
        let reply = try await http.get(service + "$metadata", headers: headers)
        guard reply.status == 200 else { throw Failed(description: "GET \(service)$metadata: \(reply.status)") }
        return reply.text
    }

    /// The entities of `path` (a collection: `SalesOrderSet`, `SalesOrder?$expand=to_Item`) as the
    /// server answers them, V2 (`d.results`) or V4 (`value`), JSON objects as Foundation reads them.
    func entities(_ service: String, _ path: String, headers: [(String, String)] = []) async throws -> [[String: Any]] {
        let reply = try await http.get(service + path, headers: [("Accept", "application/json")] + headers)
        guard reply.status == 200 else {
            throw Failed(description: "GET \(service)\(path): \(reply.status) \(reply.text.prefix(300))")
        }
        let doc = reply.object
        if let d = doc["d"] as? [String: Any], let rows = d["results"] as? [[String: Any]] { return rows }
        if let rows = doc["value"] as? [[String: Any]] { return rows }
        throw Failed(description: "GET \(service)\(path): not a collection: \(reply.text.prefix(300))")
    }

    /// Adds a fault rule (`/_mock/faults`: `match` a path regex, `method`, `status`, `message`,
    /// `count`, …).
    func fault(_ rule: [String: Any]) async throws {
        let body = String(decoding: try JSONSerialization.data(withJSONObject: rule), as: UTF8.self)
        let reply = try await http.send(.POST, "/_mock/faults", body: body)
        guard (200..<300).contains(reply.status) else {
            throw Failed(description: "POST /_mock/faults \(body): \(reply.status) \(reply.text.prefix(300))")
        }
    }

    /// Clears every fault rule.
    func clearFaults() async throws { _ = try await http.send(.DELETE, "/_mock/faults") }

    /// The requests the server recorded, oldest first (`id`, `method`, `path`, `query`, `status`,
    /// …; with `verbose`, the `headers` (lowercased names) and `body` a client sent, credentials
    /// redacted).
    func requests(limit: Int = 500, verbose: Bool = false) async throws -> [[String: Any]] {
        let reply = try await http.get("/_mock/requests?limit=\(limit)\(verbose ? "&verbose=1" : "")")
        let json = try reply.json()
        // {"results": […]}, newest first.
        let rows = ((json as? [String: Any])?["results"] as? [[String: Any]]) ?? []
        return rows.reversed()
    }

    /// A CSRF token and the session cookies it belongs to, fetched as a client must before writing.
    func csrf(_ service: String) async throws -> (token: String, cookies: String) {
        let reply = try await http.get(service, headers: [("X-CSRF-Token", "Fetch")])
        let token = reply.header("x-csrf-token") ?? ""
        let cookies = reply.headers["set-cookie"].map { $0.split(separator: ";")[0] }.joined(separator: "; ")
        return (token, cookies)
    }

    /// A write to the server as another client would make it (a change on the service side).
    func write(_ method: HTTPMethod, _ service: String, _ path: String, body: String? = nil) async throws -> HTTP.Reply
    {
        let (token, cookies) = try await csrf(service)
        var headers = [("X-CSRF-Token", token), ("Accept", "application/json"), ("If-Match", "*")]
        if !cookies.isEmpty { headers.append(("Cookie", cookies)) }
        return try await http.send(method, service + path, body: body, headers: headers)
    }

    /// `Authorization: Bearer …` for the test's own reads of a server started with `--oauth
    /// ID:SECRET`: a client-credentials token from `/sap/bc/sec/oauth2/token`.
    func bearer(clientID: String, secret: String) async throws -> (String, String) {
        let basic = Data("\(clientID):\(secret)".utf8).base64EncodedString()
        let reply = try await http.send(
            .POST, "/sap/bc/sec/oauth2/token", body: "grant_type=client_credentials",
            headers: [("Authorization", "Basic " + basic), ("Content-Type", "application/x-www-form-urlencoded")])
        guard reply.status == 200, let token = reply.object["access_token"] as? String else {
            throw Failed(description: "POST /sap/bc/sec/oauth2/token: \(reply.status) \(reply.text.prefix(300))")
        }
        return ("Authorization", "Bearer " + token)
    }

    /// Ends every outstanding OAuth token at once (`DELETE /_mock/tokens`), as a revocation
    /// would: the next request with one is answered 401 `invalid_token`.
    func revokeTokens() async throws {
        let reply = try await http.send(.DELETE, "/_mock/tokens")
        guard reply.status == 200 else { throw Failed(description: "DELETE /_mock/tokens: \(reply.status)") }
    }

    struct Failed: Error, CustomStringConvertible { var description: String }
}
