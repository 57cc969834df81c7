import TestSupport
import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore
import Samples
import Storage

/// Issue 37, findings 3 and 14 (`ServiceURL`): a service root or token URL with a port past 65535
/// was taken by `init` (JSON and `.ini`) and by `--service`, and `refresh`, `flush` and a sidecar's
/// `POST /$sync` then died by SIGILL ("Not enough bits to represent the passed value"); a
/// `user:password@` in a service root was taken and its password kept in the stored
/// configuration. Each is now a one-line error naming where the URL came from, and nothing traps.
@Suite(.checksStores) struct ServiceURLTests {
    static let badPorts = ["http://127.0.0.1:99999/", "http://127.0.0.1:70000/", "http://127.0.0.1:0/"]

    /// A directory holding the sample `$metadata` as `metadata.xml`.
    static func directory() throws -> String {
        let dir = tempDir()
        try SampleData.metadata.write(toFile: dir + "/metadata.xml", atomically: true, encoding: .utf8)
        return dir
    }

    /// `init` with the configuration file `text` (named `name`): its result, and whether a store was made.
    static func initStore(_ text: String, name: String = "config.json") throws -> (CLI.Result, Bool) {
        let dir = try Self.directory()
        try write(text, to: dir + "/" + name)
        let r = try CLI.run([
            "init", "--store", dir + "/s", "--metadata", dir + "/metadata.xml", "--config", dir + "/" + name,
        ])
        return (r, FileManager.default.fileExists(atPath: dir + "/s/data.mdb"))
    }

    @Test(.runsOffThePool) func initRefusesAnOutOfRangePortInTheJSONConfiguration() throws {
        for url in Self.badPorts {
            let (r, made) = try Self.initStore(#"{"serviceRoot": "\#(url)"}"#)
            #expect(r.status == 1 && !r.signaled && !made, "\(url): \(r.status) \(r.stderr)")
            #expect(r.stderr.contains("serviceRoot") && r.stderr.contains("65535"), "\(url): \(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1, "one line: \(r.stderr)")
        }
        let token =
            #"{"serviceRoot": "http://127.0.0.1:8080/", "authentication": {"type": "oauth2ClientCredentials", "tokenURL": "http://127.0.0.1:123456/token", "clientID": "c", "secretEnv": "S"}}"#
        let (r, made) = try Self.initStore(token)
        #expect(r.status == 1 && !made && r.stderr.contains("tokenURL"), "\(r.stderr)")
    }

    @Test(.runsOffThePool) func initRefusesAnOutOfRangePortInAnINI() throws {
        for (lines, key, line) in [
            (["name=http://127.0.0.1:99999/sap/"], "name", 2),
            (["name=gw", "service_root=http://h:70000/"], "service_root", 3),
        ] {
            let (r, made) = try Self.initStore((["[endpoint]"] + lines).joined(separator: "\n"), name: "app.ini")
            #expect(r.status == 1 && !r.signaled && !made, "\(key): \(r.stderr)")
            #expect(r.stderr.contains("line \(line): \(key)") && r.stderr.contains("65535"), "\(key): \(r.stderr)")
        }
    }

    /// The password is refused, never stored, and never repeated in the error.
    @Test(.runsOffThePool) func aUserAndPasswordInTheServiceRootAreRefused() throws {
        let url = "http://alice:s3cr3t-pw@127.0.0.1:8080/sap/"
        for (text, name) in [(#"{"serviceRoot": "\#(url)"}"#, "config.json"), ("[endpoint]\nname=\(url)\n", "app.ini")]
        {
            let (r, made) = try Self.initStore(text, name: name)
            #expect(r.status == 1 && !made, "\(name): \(r.stderr)")
            #expect(r.stderr.contains("\"authentication\""), "\(name): \(r.stderr)")
            #expect(!r.stderr.contains("s3cr3t") && !r.stderr.contains("alice"), "\(name): \(r.stderr)")
        }
        #expect(throws: EntityError.self) { try StoreConfiguration(json: Array(#"{"serviceRoot": "\#(url)"}"#.utf8)) }
        #expect(throws: EntityError.self) {
            try OfflineStore.create(
                at: tempDir() + "/api", metadata: Array(SampleData.metadata.utf8),
                configuration: StoreConfiguration(serviceRoot: url))
        }
    }

    @Test(.runsOffThePool) func refreshAndFlushRefuseAnOutOfRangeService() throws {
        let dir = try Self.directory()
        let made = try CLI.run(["init", "--store", dir + "/s", "--metadata", dir + "/metadata.xml"])
        #expect(made.status == 0, "\(made.stderr)")
        for verb in ["refresh", "flush"] {
            for url in Self.badPorts + ["http://u:p@127.0.0.1:8080/"] {
                let r = try CLI.run([verb, "--store", dir + "/s", "--service", url])
                #expect(r.status == 1 && !r.signaled, "\(verb) \(url): status \(r.status) \(r.stderr.suffix(300))")
                #expect(r.stderr.contains("--service"), "\(verb) \(url): \(r.stderr.suffix(300))")
            }
        }
    }

    /// A store made before URLs were checked keeps its bad service root: `refresh`, `flush` and a
    /// sidecar's `POST /$sync` fail with the error instead of a trap, and the sidecar goes on.
    @Test func aStoredOutOfRangeServiceRootFailsWithoutATrap() async throws {
        let path = tempDir() + "/old"
        var configuration = SampleData.configuration
        configuration.serviceRoot = "http://127.0.0.1:99999/"
        configuration.definingRequests = [DefiningRequest(name: "P", url: "Products")]
        _ = try EntityStore.create(
            path: path, metadata: Array(SampleData.metadata.utf8), configuration: configuration.stored,
            roles: OfflineStore.roles)
        for verb in ["refresh", "flush"] {
            let r = try await CLI.run([verb, "--store", path])
            #expect(r.status == 1 && !r.signaled, "\(verb): status \(r.status) \(r.stderr.suffix(300))")
            #expect(r.stderr.contains("99999"), "\(verb): \(r.stderr.suffix(300))")
        }
        try await withServer(path) { http, server in
            let sync = try await http.send(.POST, "$sync")
            #expect(sync.status == 503 && sync.text.contains("99999"), "\(sync.status) \(server.diagnosis())")
            #expect(try await http.get("$metadata").status == 200, "\(server.diagnosis())")
        }
    }
}
