import Foundation
import OfflineStore
import Samples
import Testing

/// What the documentation's examples stand on: `offline-store sample` (the EPM sample as a store and
/// as files), and the README's "In Swift" example as a user runs it: `offline-store sample --store server`,
/// `offline-store serve`, the served `$metadata` saved as `metadata.xml`, then the Swift steps of the
/// README in order. Before `sample` existed no shipped service had `Products('HT-1000')`, and the
/// update failed with "entity Products('HT-1000') does not exist".
@Suite(.checksStores) struct DocExampleTests {
    @Test func readmeSwiftExampleRunsAgainstTheServedSample() async throws {
        // The steps below are the README's: a change there that this test does not follow fails here.
        let readme = try String(contentsOfFile: repositoryRoot + "/README.md", encoding: .utf8)
        for line in [
            "offline-store sample --store server", "offline-store serve  --store server --port 8080 &",
            "curl -fsS 'http://127.0.0.1:8080/$metadata' > metadata.xml",
            #""definingRequests": [{"name": "SG_Product", "url": "Products"}],"#,
            #"let cheap = try store.entities("Products?$filter=Price lt 1000&$orderby=Price&$top=5")"#,
            #"try await store.update(set: "Products", key: [.string("HT-1000")],"#,
            #"changes: ["Price": .decimal(EDMDecimal("899.00")!)])"#,
            "print(try await store.flush())                                    // sent 1, succeeded 1, archived 0",
        ] {
            #expect(readme.contains(line), "README.md no longer says: \(line)")
        }
        let dir = tempDir()
        let made = try await ChildProcess.run(["sample", "--store", dir + "/server"], timeout: 120)
        #expect(made.status == 0, "\(made.stderr)")
        #expect(
            made.stdout.contains("Products 24, ") && made.stdout.contains("(Products HT-1000 to HT-1023)"),
            "\(made.stdout)")
        try await withServer(dir + "/server") { http, server in
            let served = try await http.get("$metadata")  // curl -fsS 'http://127.0.0.1:8080/$metadata' > metadata.xml
            #expect(served.status == 200)
            try Data(served.body).write(to: URL(fileURLWithPath: dir + "/metadata.xml"))

            // The README's snippet, with the served root for http://127.0.0.1:8080/ and dir/s for /tmp/s.
            let metadata = Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/metadata.xml")))
            let config = try StoreConfiguration(
                json: Array(
                    """
                    {"serviceRoot": "\(server.url)",
                     "definingRequests": [{"name": "SG_Product", "url": "Products"}],
                     "indexes": {"Products": ["Category"]}}
                    """.utf8))
            let store = try OfflineStore.create(at: dir + "/s", metadata: metadata, configuration: config)
            let refreshed = try await store.refresh()
            #expect(refreshed.received == 24, "\(refreshed)")  // the sample's products, as the README says
            let cheap = try store.entities("Products?$filter=Price lt 1000&$orderby=Price&$top=5")
            #expect(cheap.count == 5)
            try await store.update(
                set: "Products", key: [.string("HT-1000")], changes: ["Price": .decimal(EDMDecimal("899.00")!)])
            let queued = try store.entities("RequestQueue?$orderby=RequestID")
            #expect(queued.count == 1)
            let report = try await store.flush()
            #expect("\(report)" == "sent 1, succeeded 1, archived 0, left 0, round trips 1")

            // On the service: the new price.
            let after = try await http.get("Products('HT-1000')?$select=Price").object
            #expect((after["Price"] as? Double) == 899, "\(after)")
        }
    }

    /// `sample --files` writes the sample's `$metadata` and one JSON file per set, and they are what
    /// `init` and `load` take: a store made from them holds `Products('HT-1000')`.
    @Test func sampleFilesAreWhatInitAndLoadTake() async throws {
        let dir = tempDir()
        let wrote = try await ChildProcess.run(["sample", "--files", dir + "/files"], timeout: 60)
        #expect(wrote.status == 0, "\(wrote.stderr)")
        let metadata = try String(contentsOfFile: dir + "/files/metadata.xml", encoding: .utf8)
        #expect(metadata == SampleData.metadata)
        var r = try await ChildProcess.run(
            ["init", "--store", dir + "/s", "--metadata", dir + "/files/metadata.xml"], timeout: 60)
        #expect(r.status == 0, "\(r.stderr)")
        for set in SampleData.setsInLoadOrder {
            r = try await ChildProcess.run(
                ["load", "--store", dir + "/s", "--set", set, dir + "/files/\(set).json"], timeout: 60)
            #expect(r.status == 0, "\(set): \(r.stderr)")
        }
        r = try await ChildProcess.run(["get", "--store", dir + "/s", "Products('HT-1000')"], timeout: 60)
        #expect(r.status == 0 && r.stdout.contains(#""ProductID":"HT-1000""#), "\(r.stderr)\(r.stdout)")
    }

    /// Bad input gets one clear line and writes nothing: neither option, a file that is there already
    /// (nothing replaced, no file of the sample written), a directory that cannot be made (the
    /// system's reason), a store that exists.
    @Test func sampleRefusesWhatItWouldOverwrite() async throws {
        let dir = tempDir()
        var r = try await ChildProcess.run(["sample"], timeout: 60)
        #expect(r.status != 0 && r.stderr.contains("give --store DIR, --files DIR, or both"), "\(r.stderr)")
        try FileManager.default.createDirectory(atPath: dir + "/files", withIntermediateDirectories: true)
        try Data("mine".utf8).write(to: URL(fileURLWithPath: dir + "/files/Products.json"))
        r = try await ChildProcess.run(["sample", "--files", dir + "/files"], timeout: 60)
        #expect(r.status != 0 && r.stderr.contains("Products.json' exists"), "\(r.stderr)")
        #expect(try String(contentsOfFile: dir + "/files/Products.json", encoding: .utf8) == "mine")
        #expect(!FileManager.default.fileExists(atPath: dir + "/files/metadata.xml"))
        r = try await ChildProcess.run(["sample", "--files", "/proc/nope/files"], timeout: 60)
        #expect(
            r.stderr == "offline-store: cannot create '/proc/nope': No such file or directory\n", "\(r.stderr)")
        r = try await ChildProcess.run(["sample", "--store", dir + "/server"], timeout: 60)
        #expect(r.status == 0, "\(r.stderr)")
        r = try await ChildProcess.run(["sample", "--store", dir + "/server"], timeout: 60)
        #expect(
            r.status != 0 && r.stderr.hasPrefix("offline-store: ") && !r.stderr.dropLast().contains("\n"), "\(r.stderr)"
        )
    }
}
