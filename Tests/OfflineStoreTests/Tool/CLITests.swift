import Foundation
import TestSupport
import Testing
import OfflineStore
import Samples

/// Runs the built `offline-store` tool as a user would.
struct CLI {
    static let executable = built("offline-store")

    /// The path of a product built beside the test bundle (`offline-store`, `embedded-service`).
    static func built(_ name: String) -> String {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
            Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent(),
        ]
        for dir in candidates {
            let path = dir.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return name
    }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
        /// Killed by a signal (a trap is SIGILL or SIGTRAP); `status` is then the signal number.
        var signaled = false
    }

    /// Runs the tool through `ChildProcess` (`posix_spawn`), not Foundation's `Process`: a full
    /// CI run once died inside `Process.run()` (a bad pointer in its `memmove`) while many tests
    /// started children at once. Standard input is /dev/null; a child still running after 600 s is
    /// killed and counts as signaled.
    /// `environment` is set over the test's.
    @discardableResult
    static func run(_ args: [String], environment: [String: String] = [:]) throws -> Result {
        result(try ChildProcess.run(args, timeout: 600, environment: environment))
    }

    /// The same as `run(_:)`, for an `async` caller (which the compiler picks): the tool is waited
    /// for on a thread of its own, not on one of the concurrency pool's.
    @discardableResult
    static func run(_ args: [String], environment: [String: String] = [:]) async throws -> Result {
        result(try await ChildProcess.run(args, timeout: 600, environment: environment))
    }

    private static func result(_ o: ChildProcess.Outcome) -> Result {
        if o.hung { return Result(status: SIGKILL, stdout: o.stdout, stderr: o.stderr, signaled: true) }
        return Result(status: o.signal ?? o.status, stdout: o.stdout, stderr: o.stderr, signaled: o.signal != nil)
    }
}

/// A new temporary directory. Stores made anywhere under it are checked after the test when its
/// suite has the `.checksStores` trait.
func tempDir() -> String {
    let dir = TestScratch.directory("os-cli")
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    StoreRegistry.register(dir)
    return dir
}

func write(_ text: String, to path: String) throws {
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
}

@Suite(.checksStores, .runsOffThePool) struct CLITests {
    /// A store made by `init` from the sample metadata and configuration, loaded with the sample data.
    func sampleStore() throws -> String {
        let dir = tempDir()
        try write(SampleData.metadata, to: dir + "/metadata.xml")
        try write(SampleData.configuration.json.text, to: dir + "/config.json")
        let r = try CLI.run([
            "init", "--store", dir + "/store", "--metadata", dir + "/metadata.xml", "--config", dir + "/config.json",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        for set in SampleData.setsInLoadOrder {
            try write(SampleData.json(set), to: dir + "/\(set).json")
            let l = try CLI.run(["load", "--store", dir + "/store", "--set", set, dir + "/\(set).json"])
            #expect(l.status == 0, "\(l.stderr)")
        }
        return dir
    }

    /// The same as `sampleStore()`, for an `async` caller (which the compiler picks): the tool's
    /// runs are waited for off the concurrency pool.
    func sampleStore() async throws -> String {
        let dir = tempDir()
        try write(SampleData.metadata, to: dir + "/metadata.xml")
        try write(SampleData.configuration.json.text, to: dir + "/config.json")
        let r = try await CLI.run([
            "init", "--store", dir + "/store", "--metadata", dir + "/metadata.xml", "--config", dir + "/config.json",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        for set in SampleData.setsInLoadOrder {
            try write(SampleData.json(set), to: dir + "/\(set).json")
            let l = try await CLI.run(["load", "--store", dir + "/store", "--set", set, dir + "/\(set).json"])
            #expect(l.status == 0, "\(l.stderr)")
        }
        return dir
    }

    @Test func initLoadGetRoundTripsValuesExactly() throws {
        let dir = try sampleStore()
        let r = try CLI.run(["get", "--store", dir + "/store", "Products('HT-1001')"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains(#""Price":768.10"#), "\(r.stdout)")  // exact, with its scale
        let bp = try CLI.run(["get", "--store", dir + "/store", "BusinessPartners('0100000001')"])
        #expect(bp.stdout.contains(#""CreatedAt":"2021-02-11T01:30:00+01:00""#), "\(bp.stdout)")  // the offset is kept
        let item = try CLI.run([
            "get", "--store", dir + "/store", "SalesOrderItems(SalesOrderID='0500000003',ItemPosition=20)",
        ])
        #expect(item.status == 0 && item.stdout.contains(#""ItemPosition":20"#), "\(item.stdout)\(item.stderr)")
        let check = try CLI.run(["check", "--store", dir + "/store"])
        #expect(check.status == 0 && check.stdout.hasPrefix("ok:"), "\(check.stdout)")
        let stats = try CLI.run(["stats", "--store", dir + "/store"])
        #expect(stats.stdout.contains("SalesOrderItems: 100 entities"), "\(stats.stdout)")
        #expect(stats.stdout.contains("index CustomerID (foreign key): 40 entries"), "\(stats.stdout)")
    }

    @Test func badInputGetsOneClearLineAndChangesNothing() throws {
        let dir = try sampleStore()
        let store = dir + "/store"
        let before = try CLI.run(["stats", "--store", store]).stdout
        let cases: [(String, String)] = [
            (
                #"{"value":[{"ProductID":"HT-9"},{"ProductID":"HT-10","Price":"cheap"}]}"#,
                "property 'Price': expected Edm.Decimal"
            ),
            (#"{"value":[{"ProductID":"HT-9","Pric":1}]}"#, "unknown property 'Pric'"),
            (#"{"value":[{"Name":"no key"}]}"#, "key property 'ProductID'"),
            (#"{"value":[{"ProductID":null}]}"#, "key property 'ProductID'"),
            (#"{"value":[{"ProductID":"HT-9",}]}"#, "bad JSON at line 1"),
            ("{\"value\":[{\"ProductID\":\"HT-9\"}]}\n{", "bad JSON"),
            (#"{"value":[{"ProductID":"\#(String(repeating: "x", count: 600))"}]}"#, "MaxLength"),
        ]
        for (payload, message) in cases {
            try write(payload, to: dir + "/bad.json")
            let r = try CLI.run(["load", "--store", store, "--set", "Products", dir + "/bad.json"])
            #expect(r.status != 0)
            #expect(r.stderr.contains(message), "\(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1, "\(r.stderr)")
        }
        try Data([0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x3A, 0x31, 0x7D]).write(to: URL(fileURLWithPath: dir + "/bad.json"))
        let utf8 = try CLI.run(["load", "--store", store, "--set", "Products", dir + "/bad.json"])
        #expect(utf8.status != 0 && utf8.stderr.contains("invalid UTF-8"), "\(utf8.stderr)")
        #expect(try CLI.run(["stats", "--store", store]).stdout == before)
        #expect(try CLI.run(["get", "--store", store, "Products('nope')"]).status != 0)
        #expect(try CLI.run(["get", "--store", store, "Nope('x')"]).stderr.contains("Nope"))
        #expect(try CLI.run(["get", "--store", dir + "/missing", "Products('x')"]).stderr.contains("no store"))
        #expect(try CLI.run(["check", "--store", store]).status == 0)
    }

    @Test func initRefusesBadMetadataAndLeavesNothing() throws {
        let dir = tempDir()
        try write("<edmx:Edmx", to: dir + "/bad.xml")
        let r = try CLI.run(["init", "--store", dir + "/store", "--metadata", dir + "/bad.xml"])
        #expect(r.status != 0 && !r.stderr.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: dir + "/store"))
        try write(SampleData.metadata, to: dir + "/m.xml")
        try write(#"{"indexes":{"Products":["Nope DESC"]}}"#, to: dir + "/c.json")
        let bad = try CLI.run([
            "init", "--store", dir + "/store", "--metadata", dir + "/m.xml", "--config", dir + "/c.json",
        ])
        #expect(bad.status != 0 && bad.stderr.contains("Nope"), "\(bad.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/store"))
    }
}

@Suite(.checksStores, .runsOffThePool) struct V2LoadTests {
    static let edmx = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx" xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" xmlns:sap="http://www.sap.com/Protocols/SAPData">
         <edmx:DataServices m:DataServiceVersion="2.0">
          <Schema Namespace="SHOP" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
           <EntityType Name="Product" sap:content-version="1">
            <Key><PropertyRef Name="ProductID"/></Key>
            <Property Name="ProductID" Type="Edm.String" Nullable="false" MaxLength="10" sap:label="Product ID"/>
            <Property Name="Price" Type="Edm.Decimal" Precision="16" Scale="3"/>
            <Property Name="Stock" Type="Edm.Int64"/>
            <Property Name="CreatedAt" Type="Edm.DateTime" Precision="7"/>
            <Property Name="Changed" Type="Edm.DateTimeOffset"/>
            <Property Name="Opens" Type="Edm.Time"/>
            <Property Name="Id" Type="Edm.Guid"/>
           </EntityType>
           <EntityContainer Name="SHOP_Entities" m:IsDefaultEntityContainer="true">
            <EntitySet Name="Products" EntityType="SHOP.Product"/>
            <FunctionImport Name="Reorder" ReturnType="SHOP.Product" EntitySet="Products" m:HttpMethod="POST"/>
           </EntityContainer>
          </Schema>
         </edmx:DataServices>
        </edmx:Edmx>
        """

    @Test func v2PayloadRoundTripsExactly() throws {
        let dir = tempDir()
        try write(Self.edmx, to: dir + "/m.xml")
        #expect(try CLI.run(["init", "--store", dir + "/s", "--metadata", dir + "/m.xml"]).status == 0)
        try write(
            #"{"d":{"results":[{"__metadata":{"uri":"x","type":"SHOP.Product"},"ProductID":"HT-1001","Price":"1249.000","Stock":"9007199254740993","CreatedAt":"\/Date(1349222400000)\/","Changed":"\/Date(1349222400000+0120)\/","Opens":"PT8H30M","Id":"005056a2-0b4c-1ee2-8ea3-c5d5e4f6a7b8"}]}}"#,
            to: dir + "/p.json")
        let load = try CLI.run(["load", "--store", dir + "/s", "--set", "Products", dir + "/p.json"])
        #expect(load.status == 0, "\(load.stderr)")
        let r = try CLI.run(["get", "--store", dir + "/s", "Products('HT-1001')"])
        #expect(r.stdout.contains(#""Price":1249.000"#), "\(r.stdout)")
        #expect(r.stdout.contains(#""Stock":9007199254740993"#), "\(r.stdout)")  // beyond a Double's 2^53
        #expect(r.stdout.contains(#""CreatedAt":"2012-10-03T00:00:00Z""#), "\(r.stdout)")
        #expect(r.stdout.contains(#""Changed":"2012-10-03T02:00:00+02:00""#), "\(r.stdout)")
        #expect(r.stdout.contains(#""Opens":"08:30:00""#), "\(r.stdout)")
        let q = try CLI.run([
            "query", "--store", dir + "/s",
            "Products?$filter=Price eq 1249M and CreatedAt eq datetime'2012-10-03T00:00:00'&$select=ProductID",
        ])
        #expect(q.stdout.contains("HT-1001"), "\(q.stdout)\(q.stderr)")
        #expect(try CLI.run(["check", "--store", dir + "/s"]).status == 0)
    }
}
