import TestSupport
import Foundation
import NIOCore
import Synchronization
import Testing
@testable import OfflineStore
@testable import Remote
import Storage
@testable import Sync

/// Credentials without a server (fast tier): the `"authentication"` member read and refused as
/// documented, secrets read from a variable or a file with clear errors that never carry them,
/// and a `RequestAuthorizer` that never sees a request to another origin.
@Suite struct SAPCredentialsUnitTests {
    /// Records what it was asked to authorize.
    final class Recorder: RequestAuthorizer {
        let seen = Mutex<[String]>([])
        func authorize(_ request: inout AuthorizedRequest) async throws {
            seen.withLock { $0.append(request.url) }
            request.setHeader("Authorization", "Bearer recorded")
        }
    }

    /// What `body` threw, as text; "no error" when it did not.
    static func failure(_ body: () throws -> Void) -> String {
        do {
            try body()
            return "no error"
        } catch { return "\(error)" }
    }

    static func configuration(_ json: String) throws -> StoreConfiguration {
        try StoreConfiguration(json: Array(json.utf8))
    }

    @Test(.runsOffThePool) func authenticationIsReadWrittenAndRefusedAsDocumented() throws {
        let basic = try Self.configuration(
            #"{"serviceRoot":"http://h:1/","authentication":{"type":"basic","user":"U","passwordEnv":"PW_VAR"}}"#)
        #expect(basic.authentication == .basic(user: "U", password: .environment("PW_VAR")))
        let oauth = try Self.configuration(
            #"{"authentication":{"type":"oauth2ClientCredentials","tokenURL":"https://a.example/t","clientID":"C","secretFile":"/run/s","scope":"API"}}"#
        )
        #expect(
            oauth.authentication
                == .oauth2ClientCredentials(
                    tokenURL: "https://a.example/t", clientID: "C", secret: .file("/run/s"), scope: "API"))
        // Written back and read again the same.
        #expect(try StoreConfiguration(json: Array(oauth.jsonText.utf8)) == oauth)
        #expect(try StoreConfiguration(json: Array(basic.jsonText.utf8)) == basic)

        let refused: [(String, String)] = [
            (#"{"type":"basic","user":"U","password":"secret"}"#, "unknown authentication member 'password'"),
            (#"{"type":"basic","user":"U"}"#, "passwordEnv"),
            (#"{"type":"basic","user":"U","passwordEnv":"A","passwordFile":"/f"}"#, "not both"),
            (#"{"type":"basic","user":"U:V","passwordEnv":"A"}"#, "':'"),
            (#"{"type":"basic","passwordEnv":"A"}"#, "needs \"user\""),
            (#"{"type":"basic","user":"U","passwordEnv":"NOT A NAME"}"#, "not an environment variable name"),
            (#"{"type":"digest","user":"U","passwordEnv":"A"}"#, "type 'digest'"),
            (#"{"user":"U","passwordEnv":"A"}"#, "needs a \"type\""),
            (#"{"type":"oauth2ClientCredentials","tokenURL":"ftp://x/","clientID":"C","secretEnv":"S"}"#, "tokenURL"),
            (#"{"type":"oauth2ClientCredentials","tokenURL":"https://x/","secretEnv":"S"}"#, "clientID"),
            (#"{"type":"oauth2ClientCredentials","tokenURL":"https://x/","clientID":"C","secret":"s3"}"#, "'secret'"),
            (#""basic""#, "must be an object"),
        ]
        for (member, expected) in refused {
            let text = Self.failure { _ = try Self.configuration(#"{"authentication":"# + member + "}") }
            #expect(text.contains(expected) && !text.contains("s3"), "\(member): \(text)")
        }
    }

    @Test(.runsOffThePool) func secretsAreReadFromTheVariableOrTheFileWithErrorsNamingThem() throws {
        let dir = tempDir()
        try write("pa55 word\n", to: dir + "/lf")
        try write("pa55 word\r\n", to: dir + "/crlf")
        try write("pa55 word", to: dir + "/bare")
        try write("", to: dir + "/empty")
        try write("two\nlines\n", to: dir + "/two")
        for name in ["lf", "crlf", "bare"] {
            #expect(try Credentials.read(.file(dir + "/" + name)) == "pa55 word")
        }
        setenv("OFFLINE_STORE_TEST_SECRET_SET", "from the environment", 1)
        #expect(try Credentials.read(.environment("OFFLINE_STORE_TEST_SECRET_SET")) == "from the environment")

        let failures: [(StoreConfiguration.SecretSource, String)] = [
            (
                .environment("OFFLINE_STORE_TEST_SECRET_NEVER_SET"),
                "environment variable OFFLINE_STORE_TEST_SECRET_NEVER_SET is not set"
            ),
            (.file(dir + "/missing"), "file \(dir)/missing cannot be read: No such file"),
            (.file(dir + "/empty"), "file \(dir)/empty is empty"),
            (.file(dir + "/two"), "control character"),
        ]
        for (source, expected) in failures {
            let text = Self.failure { _ = try Credentials.read(source) }
            #expect(text.contains(expected) && !text.contains("lines"), "\(source): \(text)")
        }
    }

    /// The configuration's credentials go only to its serviceRoot's origin: a flush or refresh
    /// given another root is refused before anything is read or sent.
    @Test(.runsOffThePool) func configuredCredentialsAreRefusedForAnotherServiceRoot() throws {
        let configuration = try Self.configuration(
            #"{"serviceRoot":"http://127.0.0.1:8080/sap/","authentication":{"type":"basic","user":"U","passwordEnv":"OFFLINE_STORE_TEST_SECRET_SET"}}"#
        )
        setenv("OFFLINE_STORE_TEST_SECRET_SET", "from the environment", 1)
        #expect(try Credentials.authorizer(for: configuration.sync, serviceRoot: "http://127.0.0.1:8080/other/") != nil)
        let text = Self.failure {
            _ = try Credentials.authorizer(for: configuration.sync, serviceRoot: "http://127.0.0.1:9090/sap/")
        }
        #expect(
            text.contains("only to its serviceRoot's origin (http://127.0.0.1:8080)")
                && text.contains("http://127.0.0.1:9090") && !text.contains("environment"), "\(text)")
        #expect(try Credentials.authorizer(for: SyncSettings(), serviceRoot: "http://x:1/") == nil)
    }

    /// A request to another origin (a next link, a delta link, a `Location`) is refused before
    /// the authorizer is asked; one to the service root's origin is authorized with its absolute URL.
    @Test func theAuthorizerIsNeverConsultedForAnotherOrigin() async throws {
        let recorder = Recorder()
        // Port 1 on loopback: nothing listens, so the request fails after the authorizer ran.
        let backend = HTTPTransport(
            serviceRoot: "http://127.0.0.1:1/svc/", retries: 0, connectTimeout: .milliseconds(200),
            authorizer: recorder)
        defer { Task { try? await backend.shutdown() } }
        for other in [
            "http://127.0.0.2:1/svc/Products", "https://127.0.0.1:1/svc/Products", "http://127.0.0.1:2/svc/Products",
            "http://evil.example/svc/Products", "http://user@127.0.0.1:1/svc/Products",
        ] {
            do {
                _ = try await backend.send(WireRequest(method: "GET", url: other))
                Issue.record("\(other) was sent")
            } catch {
                guard case BackendError.otherOrigin = error else {
                    Issue.record("\(other): \(error)")
                    continue
                }
            }
        }
        #expect(recorder.seen.withLock { $0 }.isEmpty, "\(recorder.seen.withLock { $0 })")
        _ = try? await backend.send(WireRequest(method: "GET", url: "Products?$top=1"))
        _ = try? await backend.send(WireRequest(method: "GET", url: "http://127.0.0.1:1/svc/Next"))
        #expect(
            recorder.seen.withLock { $0 } == ["http://127.0.0.1:1/svc/Products?$top=1", "http://127.0.0.1:1/svc/Next"])
    }
}
