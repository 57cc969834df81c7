import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore
import Samples
import Storage

/// Issue 37, findings 7 and 8: a service or token endpoint that repeats the request in its error
/// text (`scripts/hostile-upstream.sh`'s `echo` and `token-echo` roots: the request line, every
/// header, the body, and the Basic credentials decoded) put the configured secret — the OAuth
/// client secret, the basic-auth password — into refresh's and flush's output, the `$sync`
/// answer, the EventLog, ErrorArchive, the serve log and `data.mdb`. Under HTTP Basic and OAuth
/// client credentials, with a secret that form-encoding and base64 change, refresh and flush run
/// through the CLI and through a sidecar's `POST /$sync`; then every output is searched for
/// every form in which the secret was sent. None may hold one; the same search for the user name
/// (the client id), which is not secret, finds it — so the search can fail.
@Suite(.external, .checksStores, .serialized) struct SecretEchoTests {
    static let secret = "s3cr+t/=&pä"
    static let variable = "OFFLINE_STORE_TEST_ECHOED_SECRET"

    /// `value` as `application/x-www-form-urlencoded` writes it, written here again as an oracle.
    static func formEncoded(_ value: String) -> String {
        value.utf8.map { b -> String in
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "*"):
                String(UnicodeScalar(b))
            case UInt8(ascii: " "): "+"
            default: String(format: "%%%02X", b)
            }
        }.joined()
    }

    static func base64(_ text: String) -> String { Data(text.utf8).base64EncodedString() }

    /// Every form in which `secret` went out with `user` (or client id): raw, form-encoded, the
    /// Basic header's base64 of `user:secret` (raw, and form-encoded as OAuth sends it), the
    /// secret alone in base64; each also as JSON may escape it (`\/`, `\u00e4`).
    static func forms(user: String) -> [String] {
        let plain = [
            secret, formEncoded(secret), base64("\(user):\(secret)"),
            base64("\(formEncoded(user)):\(formEncoded(secret))"), base64(secret), base64(formEncoded(secret)),
        ]
        var out = plain
        for f in plain {
            out.append(f.replacingOccurrences(of: "/", with: "\\/"))
            out.append(f.replacingOccurrences(of: "ä", with: "\\u00e4"))
            out.append(f.replacingOccurrences(of: "/", with: "\\/").replacingOccurrences(of: "ä", with: "\\u00e4"))
        }
        return Array(Set(out)).sorted()
    }

    static func store(_ up: HostileUpstream, _ authentication: StoreConfiguration.Authentication) throws -> String {
        var configuration = SampleData.configuration
        configuration.serviceRoot = up.root("echo")
        configuration.definingRequests = [DefiningRequest(name: "P", url: "Products")]
        configuration.timeouts = .init(requestSeconds: 10, idleSeconds: 10, connectSeconds: 5)
        configuration.authentication = authentication
        let path = tempDir() + "/echo"
        _ = try OfflineStore.create(at: path, metadata: Array(SampleData.metadata.utf8), configuration: configuration)
        return path
    }

    /// Runs refresh and flush through the CLI and a sidecar's `POST /$sync`: every output, by name.
    static func outputs(_ path: String) async throws -> [(String, String)] {
        var out: [(String, String)] = []
        let store = try OfflineStore.open(at: path)
        try await store.create(
            set: "Products", entity: ["ProductID": .string("E-1"), "Name": .string("e"), "Category": .string("c")])
        for verb in ["refresh", "flush"] {
            let r = try await CLI.run([verb, "--store", path])
            #expect(r.status == 1 && !r.signaled, "\(verb): \(r.status) \(r.stderr)")
            out += [("\(verb) stdout", r.stdout), ("\(verb) stderr", r.stderr)]
        }
        try await store.create(
            set: "Products", entity: ["ProductID": .string("E-2"), "Name": .string("e"), "Category": .string("c")])
        try await withServer(path) { http, server in
            let sync = try await http.send(.POST, "$sync")
            #expect(sync.status == 503, "\(sync.text)")
            out.append(("$sync answer", sync.text))
            for set in ["EventLog", "ErrorArchive"] {
                let served = try await http.get(set)
                #expect(served.status == 200, "\(set): \(served.text)")
                out.append(("served \(set)", served.text))
            }
            out.append(("serve stdout", (try? String(contentsOfFile: server.logDir + "/out", encoding: .utf8)) ?? ""))
            out.append(("serve stderr", server.stderr))
        }
        let mdb = try Data(contentsOf: URL(fileURLWithPath: path + "/data.mdb"))
        out.append(("data.mdb", String(decoding: mdb, as: UTF8.self)))
        return out
    }

    /// No form of the secret in any output; `user` in each of `named`.
    static func expectScrubbed(_ outputs: [(String, String)], user: String, named: [String]) {
        let forms = Self.forms(user: user)
        for (name, text) in outputs {
            for form in forms {
                let around = text.range(of: form).map { found in
                    let start = text.index(found.lowerBound, offsetBy: -60, limitedBy: text.startIndex)
                    return text[(start ?? text.startIndex)..<found.upperBound]
                }
                #expect(around == nil, "\(name) holds the secret as \(form): …\(around ?? "")")
            }
        }
        for name in named {
            let text = outputs.first { $0.0 == name }?.1 ?? ""
            #expect(text.contains(user), "\(name) does not name \(user), so the search proves nothing: \(text)")
        }
    }

    @Test func basicAuthPasswordIsNowhere() async throws {
        setenv(Self.variable, Self.secret, 1)
        let up = try await HostileUpstream.start()
        defer { Task { await up.stop() } }
        let path = try Self.store(up, .basic(user: "echo-user", password: .environment(Self.variable)))
        let outputs = try await Self.outputs(path)
        Self.expectScrubbed(
            outputs, user: "echo-user",
            named: [
                "refresh stderr", "$sync answer", "served EventLog", "served ErrorArchive", "serve stderr", "data.mdb",
            ])
    }

    @Test func oauthClientSecretIsNowhere() async throws {
        setenv(Self.variable, Self.secret, 1)
        let up = try await HostileUpstream.start()
        defer { Task { await up.stop() } }
        let path = try Self.store(
            up,
            .oauth2ClientCredentials(
                tokenURL: up.server.url + "/token-echo", clientID: "echo-client",
                secret: .environment(Self.variable), scope: "API"))
        let outputs = try await Self.outputs(path)
        Self.expectScrubbed(
            outputs, user: "echo-client",
            named: ["refresh stderr", "flush stderr", "$sync answer", "served EventLog", "serve stderr", "data.mdb"])
    }
}
