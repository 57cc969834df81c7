import Foundation
import Testing
@testable import OfflineStore
@testable import Remote
import Storage

/// Credentials against mock-sap (GWSAMPLE_BASIC, V2): HTTP Basic (`--auth`) and OAuth 2.0 client
/// credentials (`--oauth`, `--token-ttl`) from the configuration's `"authentication"`, the
/// secret read from a file or an environment variable; a token refetched before it expires and
/// once after a 401 `invalid_token`, the refused request sent again once and applied once; the
/// secret nowhere in the store's files, the EventLog or an error's text. The server is read back
/// with the test's own credentials.
@Suite(.external, .checksStores, .serialized) struct SAPCredentialsTests {
    static let service = MockSAP.gwsample
    static let tokenPath = "/sap/bc/sec/oauth2/token"

    /// What `body` threw, as text; "no error" when it did not.
    static func failure(_ body: () async throws -> Void) async -> String {
        do {
            try await body()
            return "no error"
        } catch { return "\(error)" }
    }

    static func base64(_ text: String) -> String { Data(text.utf8).base64EncodedString() }

    /// A store made from GWSAMPLE_BASIC's `$metadata` (read with `headers`), `SG_Product`
    /// (`ProductSet`) defined, with `authentication`.
    static func store(
        _ sap: MockSAP, _ authentication: StoreConfiguration.Authentication, headers: [(String, String)]
    ) async throws -> (OfflineStore, String) {
        let metadata = try await sap.metadata(service, headers: headers)
        let configuration = StoreConfiguration(
            serviceRoot: sap.root(service), definingRequests: [DefiningRequest(name: "SG_Product", url: "ProductSet")],
            authentication: authentication)
        let dir = tempDir() + "/sap-credentials"
        let store = try OfflineStore.create(at: dir, metadata: Array(metadata.utf8), configuration: configuration)
        return (store, dir)
    }

    /// The server's requests to `path`'s end (`ProductSet`, `$batch`, the token endpoint) since
    /// request id `after`, as "METHOD status".
    static func log(_ sap: MockSAP, after: Int, _ suffix: String) async throws -> [String] {
        try await sap.requests().filter {
            ($0["id"] as? Int ?? 0) > after && (($0["path"] as? String)?.hasSuffix(suffix) ?? false)
        }.map { "\($0["method"]!) \($0["status"]!)" }
    }

    static func lastID(_ sap: MockSAP) async throws -> Int { try await sap.requests().last?["id"] as? Int ?? 0 }

    /// None of `secrets` is in any file of the store's directory, in the EventLog, or in `texts`.
    static func expectNowhere(
        _ secrets: [String], store: OfflineStore, dir: String, texts: [String],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let files = FileManager.default.enumerator(atPath: dir)?.compactMap { $0 as? String } ?? []
        #expect(!files.isEmpty, sourceLocation: sourceLocation)
        for file in files {
            guard let data = FileManager.default.contents(atPath: dir + "/" + file) else { continue }
            for secret in secrets {
                #expect(
                    data.range(of: Data(secret.utf8)) == nil, "a secret is in \(file)", sourceLocation: sourceLocation)
            }
        }
        let events = "\(try store.entities("EventLog"))"
        #expect(!events.isEmpty, sourceLocation: sourceLocation)
        for secret in secrets {
            #expect(!events.contains(secret), "a secret is in the EventLog", sourceLocation: sourceLocation)
            for text in texts {
                #expect(!text.contains(secret), "a secret is in '\(text)'", sourceLocation: sourceLocation)
            }
        }
    }

    static func product(_ id: String) -> Properties {
        [
            "ProductID": .string(id), "TypeCode": .string("PR"), "Category": .string("Notebooks"),
            "Name": .string("Credentials"), "SupplierID": .string("0100000000"), "MeasureUnit": .string("EA"),
            "CurrencyCode": .string("EUR"), "Price": SAPFlush.decimalValue("12.50"),
            "WeightMeasure": SAPFlush.decimalValue("1.000"), "WeightUnit": .string("KG"),
        ]
    }

    @Test func basicAuthRefreshesAndAWrongPasswordIsAClear401() async throws {
        let password = "Pa55-\(UUID().uuidString.prefix(8))"
        let sap = try await MockSAP.start(["--auth", "sapuser:" + password])
        defer { Task { await sap.stop() } }
        let mine = ("Authorization", "Basic " + Self.base64("sapuser:" + password))
        let passwordFile = tempDir() + "/password"
        try write(password + "\n", to: passwordFile)  // the trailing newline is trimmed
        let (store, dir) = try await Self.store(
            sap, .basic(user: "sapuser", password: .file(passwordFile)), headers: [mine])

        let start = try await Self.lastID(sap)
        let report = try await store.refresh()
        let theirs = try await sap.entities(Self.service, "ProductSet", headers: [mine])
        #expect(!theirs.isEmpty && report.received == theirs.count, "\(report)")
        #expect(try store.entities("ProductSet").count == theirs.count)
        let sent = try await sap.requests(verbose: true).filter {
            ($0["id"] as? Int ?? 0) > start && (($0["path"] as? String)?.hasPrefix(Self.service) ?? false)
        }
        #expect(!sent.isEmpty)
        for request in sent {
            #expect((request["headers"] as? [String: Any])?["authorization"] != nil, "\(request)")
            #expect(request["status"] as? Int != 401, "\(request)")
        }

        // A wrong password (the file is read at each refresh): the 401, named; no secret.
        let wrong = "Wr0ng-\(UUID().uuidString.prefix(8))"
        try write(wrong + "\n", to: passwordFile)
        let error = await Self.failure { try await store.refresh() }
        #expect(error.contains("401") && error.contains("Authentication failed"), "\(error)")
        try write(password, to: passwordFile)

        // The CLI: the password from an environment variable the configuration names.
        let variable = "OFFLINE_STORE_TEST_SAP_PASSWORD"
        setenv(variable, password, 1)
        let cliDir = tempDir()
        try write(try await sap.metadata(Self.service, headers: [mine]), to: cliDir + "/metadata.xml")
        try write(
            #"{"serviceRoot":"\#(sap.root(Self.service))","definingRequests":[{"name":"SG_Product","url":"ProductSet"}],"authentication":{"type":"basic","user":"sapuser","passwordEnv":"\#(variable)"}}"#,
            to: cliDir + "/config.json")
        let made = try await CLI.run([
            "init", "--store", cliDir + "/store", "--metadata", cliDir + "/metadata.xml", "--config",
            cliDir + "/config.json",
        ])
        #expect(made.status == 0, "\(made.stderr)")
        let refreshed = try await CLI.run(["refresh", "--store", cliDir + "/store"])
        #expect(refreshed.status == 0, "\(refreshed.stderr)")
        #expect(
            try OfflineStore.open(at: cliDir + "/store", readOnly: true).entities("ProductSet").count == theirs.count)
        unsetenv(variable)
        let unset = try await CLI.run(["refresh", "--store", cliDir + "/store"])
        #expect(
            unset.status != 0 && unset.stderr.contains("environment variable \(variable) is not set"), "\(unset.stderr)"
        )

        let secrets = [password, wrong, Self.base64("sapuser:" + password), Self.base64("sapuser:" + wrong)]
        try Self.expectNowhere(
            secrets, store: store, dir: dir, texts: [error, refreshed.stdout, refreshed.stderr, unset.stderr])
        let cliStore = try OfflineStore.open(at: cliDir + "/store", readOnly: true)
        try Self.expectNowhere(secrets, store: cliStore, dir: cliDir + "/store", texts: [])
    }

    /// One backend (one authorizer, its token cached) across a refresh, a flush, the token's
    /// expiry (`--token-ttl 12`) and another flush: the token is fetched again before the service
    /// sees the old one expired; every change is on the server once. Then the public API and the
    /// CLI, each with its own token from the configuration.
    @Test func oauthRefreshAndFlushAcrossATokenExpiry() async throws {
        let secret = "S3cr3t-\(UUID().uuidString.prefix(8))"
        // 12 s: a fresh token must still be valid when the service checks it, so the time from
        // fetching it to the request arriving must stay under its lifetime. A CI run at 12d1f41
        // failed with 2 s, one at 897abbf with 6 s (the test took 45 s there against 7 s on a quiet
        // machine; the service answered the requests after the expiry 200, 401, 200, 202).
        let sap = try await MockSAP.start(["--oauth", "offline-client:" + secret, "--token-ttl", "12"])
        defer { Task { await sap.stop() } }
        let variable = "OFFLINE_STORE_TEST_OAUTH_SECRET"
        setenv(variable, secret, 1)
        defer { unsetenv(variable) }
        let authentication = StoreConfiguration.Authentication.oauth2ClientCredentials(
            tokenURL: sap.url + Self.tokenPath, clientID: "offline-client", secret: .environment(variable), scope: nil)
        // The test's own $metadata read takes a token of its own; a loaded machine can let it
        // expire before the read (a CI run saw 401 with a 2 s token): one more try, new token.
        let (store, dir): (OfflineStore, String)
        do {
            (store, dir) = try await Self.store(
                sap, authentication, headers: [try await sap.bearer(clientID: "offline-client", secret: secret)])
        } catch {
            (store, dir) = try await Self.store(
                sap, authentication, headers: [try await sap.bearer(clientID: "offline-client", secret: secret)])
        }
        let root = sap.root(Self.service)

        let start = try await Self.lastID(sap)
        let authorizer = try #require(
            try Credentials.authorizer(for: store.configuration.sync, serviceRoot: root) as? OAuth2ClientCredentials)
        let backend = HTTPTransport(serviceRoot: root, version: store.schema.version, authorizer: authorizer)
        let refreshed = try await store.refresh(backend: backend)
        #expect(refreshed.received > 0)
        try await store.create(set: "ProductSet", entity: Self.product("HT-9920"))
        let first = try await store.flush(backend: backend)
        #expect(first.stopped == nil && first.succeeded == 1, "\(first)")
        let fetchedBefore = await authorizer.fetches
        try await Task.sleep(for: .milliseconds(12_500))  // past the token's 12 s
        let expired = try await Self.lastID(sap)
        try await store.create(set: "ProductSet", entity: Self.product("HT-9921"))
        let second = try await store.flush(backend: backend)
        #expect(second.stopped == nil && second.succeeded == 1, "\(second)")
        #expect(await authorizer.fetches == fetchedBefore + 1)
        try await backend.shutdown()
        // Fetched again before the expired token was sent: the service never answered 401.
        let statuses = try await sap.requests().filter { ($0["id"] as? Int ?? 0) > expired }.map {
            $0["status"] as? Int
        }
        #expect(!statuses.contains(401), "\(statuses)")
        #expect(try await Self.log(sap, after: start, Self.tokenPath).count == fetchedBefore + 1)

        // The public API and the CLI: the configuration's authentication, a token each.
        let mark = try await Self.lastID(sap)
        let report = try await store.refresh()
        #expect(try store.entities("ProductSet").count == refreshed.received + 2, "\(report)")
        try await store.create(set: "ProductSet", entity: Self.product("HT-9922"))
        let cli = try await CLI.run(["flush", "--store", dir])
        #expect(cli.status == 0 && cli.stdout.contains("succeeded 1"), "\(cli.stdout) \(cli.stderr)")
        #expect(try await Self.log(sap, after: mark, Self.tokenPath) == ["POST 200", "POST 200"])

        let reader = try await sap.bearer(clientID: "offline-client", secret: secret)
        let products = try await sap.entities(Self.service, "ProductSet", headers: [reader])
        for id in ["HT-9920", "HT-9921", "HT-9922"] {
            #expect(products.filter { $0["ProductID"] as? String == id }.count == 1, "\(id)")
        }
        #expect(products.count == refreshed.received + 3)
        try Self.expectNowhere(
            [secret, Self.base64("offline-client:" + secret)], store: store, dir: dir,
            texts: ["\(first)", "\(second)", "\(report)", cli.stdout, cli.stderr])
    }

    /// A token the service refuses (`expired-token`: 401 `invalid_token`; revoked early): fetched
    /// again once and the request sent again once — a refresh's GET, a flush's `$batch` (applied
    /// once). A token endpoint refusing the client (a wrong secret): a clear error, no secret.
    @Test func aRefusedTokenIsFetchedAgainOnceAndTheRequestSentAgainOnce() async throws {
        let secret = "S3cr3t-\(UUID().uuidString.prefix(8))"
        let sap = try await MockSAP.start(["--oauth", "offline-client:" + secret])
        defer { Task { await sap.stop() } }
        let secretFile = tempDir() + "/client-secret"
        try write(secret + "\n", to: secretFile)
        let authentication = StoreConfiguration.Authentication.oauth2ClientCredentials(
            tokenURL: sap.url + Self.tokenPath, clientID: "offline-client", secret: .file(secretFile), scope: "API")
        let (store, dir) = try await Self.store(
            sap, authentication, headers: [try await sap.bearer(clientID: "offline-client", secret: secret)])

        // Refresh: the first read of ProductSet is answered 401 invalid_token.
        var start = try await Self.lastID(sap)
        try await sap.fault(["match": "ProductSet$", "method": "GET", "scenario": "expired-token", "count": 1])
        let report = try await store.refresh()
        #expect(report.received > 0, "\(report)")
        let reads = try await Self.log(sap, after: start, "ProductSet")
        #expect(
            reads.first == "GET 401" && reads.last == "GET 200" && reads.filter { $0 == "GET 401" }.count == 1,
            "\(reads)")
        #expect(try await Self.log(sap, after: start, Self.tokenPath) == ["POST 200", "POST 200"])

        // Flush: the $batch is answered 401 invalid_token once; sent again, applied once.
        try await store.create(set: "ProductSet", entity: Self.product("HT-9930"))
        start = try await Self.lastID(sap)
        try await sap.fault(["match": "\\$batch$", "method": "POST", "scenario": "expired-token", "count": 1])
        let flushed = try await store.flush()
        #expect(flushed.stopped == nil && flushed.succeeded == 1 && flushed.archived == 0, "\(flushed)")
        #expect(try await Self.log(sap, after: start, "$batch") == ["POST 401", "POST 202"])
        #expect(try await Self.log(sap, after: start, Self.tokenPath) == ["POST 200", "POST 200"])

        // Revoked between requests of one backend: the next request is refused, a token fetched
        // again, the request sent again.
        let root = sap.root(Self.service)
        let authorizer = try #require(
            try Credentials.authorizer(for: store.configuration.sync, serviceRoot: root) as? OAuth2ClientCredentials)
        let backend = HTTPTransport(serviceRoot: root, version: store.schema.version, authorizer: authorizer)
        _ = try await store.refresh(backend: backend)
        try await sap.revokeTokens()
        start = try await Self.lastID(sap)
        try await store.update(set: "ProductSet", key: [.string("HT-9930")], changes: ["Name": .string("Revoked")])
        let afterRevoke = try await store.flush(backend: backend)
        #expect(afterRevoke.stopped == nil && afterRevoke.succeeded == 1, "\(afterRevoke)")
        #expect(await authorizer.fetches == 2)
        try await backend.shutdown()
        let reader = try await sap.bearer(clientID: "offline-client", secret: secret)
        let products = try await sap.entities(Self.service, "ProductSet", headers: [reader])
        let created = products.filter { $0["ProductID"] as? String == "HT-9930" }
        #expect(created.count == 1 && created.first?["Name"] as? String == "Revoked", "\(created)")

        // A wrong client secret: the token endpoint's 401, named; nothing sent to the service.
        let wrong = "Wr0ng-\(UUID().uuidString.prefix(8))"
        try write(wrong, to: secretFile)
        start = try await Self.lastID(sap)
        let error = await Self.failure { try await store.refresh() }
        #expect(
            error.contains("token endpoint \(sap.url + Self.tokenPath) answered 401")
                && error.contains("invalid_client"), "\(error)")
        #expect(try await Self.log(sap, after: start, "ProductSet").isEmpty)
        try Self.expectNowhere(
            [secret, wrong, Self.base64("offline-client:" + secret), Self.base64("offline-client:" + wrong)],
            store: store, dir: dir, texts: [error, "\(report)", "\(flushed)", "\(afterRevoke)"])
    }
}
