import TestSupport
import Foundation
import Testing
import OfflineStore
import Samples

/// The nastiest requests of the hostile-input probe through the built `offline-store` binary: each
/// must end with exit status 1 and one clear line on stderr (or answer, exit 0) — never a signal,
/// which is how Swift's overflow trap ends a process.
@Suite(.soak, .checksStores, .runsOffThePool) struct HostileCLITests {
    @Test func nastyRequestsExitCleanly() throws {
        let dir = try CLITests().sampleStore()
        let store = dir + "/store"
        let cyclic =
            "SalesOrders?$expand="
            + Array(repeating: "BusinessPartner($expand=SalesOrders($expand=", count: 12).joined() + "Items"
            + String(repeating: ")", count: 24)
        let cases: [(args: [String], status: Int32, stderr: String)] = [
            (["Products?$skip=9223372036854775800&$top=100&$orderby=Price"], 0, ""),
            (["Products?$skiptoken=-5"], 1, "invalid skip token '-5'"),
            (["Products?$skiptoken=abc"], 1, "invalid skip token"),
            (["Products?$search=blue"], 1, "$search is not supported"),
            (["Products?$format=xml"], 1, "$format 'xml' is not supported"),
            (["--page-size", "0", "Products"], 1, "page size must be a positive integer"),
            (["--page-size=-5", "Products"], 1, "page size must be a positive integer, not -5"),
            (["--page-size", "9223372036854775807", "Products?$orderby=Price&$top=1"], 0, ""),
            (["Products?$filter=substring(Name,1,9223372036854775807) eq 'x'"], 0, ""),
            (["Products?$filter=Price mul 1e-9223372036854775808M eq 1"], 1, "invalid Decimal literal"),
            (["Products?$filter=duration'PT922337203685.9999999S' eq duration'PT1S'"], 1, "invalid duration literal"),
            (["Products?$filter=cast('/Date(-9223372036854775808)/',Edm.DateTimeOffset) eq null"], 0, ""),
            (
                [
                    "SalesOrderItems?$filter=DeliveryDate add duration'P10675199D' eq null&$orderby=Quantity mul 9223372036854775807"
                ], 0, ""
            ),
            (["SalesOrderItems?$filter=Quantity div 0 eq 1"], 1, "division by zero"),
            ([cyclic], 1, "limits.maxExpansionDepth"),
            (
                ["Products?$filter=Price eq 1" + String(repeating: "0", count: 100_000) + "x"], 1,
                "invalid number literal"
            ),
            (["Products?$filter=Nam\u{1B}[31me eq 'x'"], 1, "unexpected '\\u001B'"),
        ]
        for c in cases {
            let r = try CLI.run(["query", "--store", store] + c.args)
            let what = c.args.joined(separator: " ").prefix(100)
            #expect(!r.signaled, "\(what): killed by signal \(r.status)\n\(r.stderr.prefix(300))")
            #expect(r.status == c.status, "\(what): status \(r.status)\n\(r.stderr.prefix(300))")
            if c.status == 0 {
                #expect(r.stdout.hasPrefix("{") && r.stderr.isEmpty, "\(what): \(r.stderr.prefix(300))")
            } else {
                #expect(
                    r.stderr.hasPrefix("offline-store: ") && r.stderr.contains(c.stderr),
                    "\(what): \(r.stderr.prefix(300))")
                #expect(
                    r.stderr.split(separator: "\n").count == 1 && r.stderr.count < 300,
                    "\(what): \(r.stderr.prefix(300))")
                #expect(!r.stderr.unicodeScalars.contains("\u{1B}"))
            }
        }
        // Flags past Int64 are refused by the argument parser (a usage error), not a trap.
        let huge = try CLI.run(["query", "--store", store, "--page-size", "99999999999999999999", "Products"])
        #expect(!huge.signaled && huge.status != 0 && huge.stderr.contains("page-size"), "\(huge.stderr)")
        #expect(try CLI.run(["check", "--store", store]).status == 0)
    }

    /// Every numeric flag of the tool at its extremes — zero, negative, Int64's and Double's
    /// limits, infinity, NaN, past Int64 — exits with a clear error (1) or a usage error (64), never
    /// a signal (`crashtest --seconds inf` once died by SIGILL converting it to a Duration). Flags
    /// whose extreme value is valid (a huge page or batch size) are run against a store too.
    @Test func numericFlagsTakeExtremeValues() throws {
        let dir = try CLITests().sampleStore()
        let store = dir + "/store"
        let metadata = dir + "/metadata.xml"
        let unreachable = "http://127.0.0.1:1/"
        let cases: [(args: [String], status: Int32, stderr: String)] = [
            (
                ["init", "--store", dir + "/a", "--metadata", metadata, "--max-size", "0"], 1,
                "--max-size must be a size from 256K"
            ),
            (["init", "--store", dir + "/a", "--metadata", metadata, "--max-size=-1"], 1, "--max-size must be a size"),
            (
                ["init", "--store", dir + "/a", "--metadata", metadata, "--max-size", "9223372036854775807"], 1,
                "--max-size must be a size"
            ),
            (
                ["init", "--store", dir + "/a", "--metadata", metadata, "--max-size", "99999999999999999999"], 1,
                "--max-size must be a size"
            ),
            (
                ["init", "--store", dir + "/a", "--metadata", metadata, "--max-size", "8388607G"], 1,
                "--max-size must be a size"
            ),
            (
                ["init", "--store", dir + "/a", "--metadata", metadata, "--max-size", "1.5G"], 1,
                "--max-size must be a size"
            ),
            (["init", "--store", dir + "/a", "--metadata", metadata, "--max-size", "65536G"], 0, ""),
            (
                ["init", "--store", dir + "/b", "--metadata", metadata, "--max-size", "65537G"], 1,
                "from 256K to 65536G"
            ),
            (["serve", "--store", store, "--max-size", "-5G"], 64, "max-size"),
            (["serve", "--store", store, "--lifetime", "nan"], 1, "--lifetime must be a positive number"),
            (["serve", "--store", store, "--lifetime=-1"], 1, "--lifetime must be a positive number"),
            (["serve", "--store", store, "--lifetime", "0"], 1, "--lifetime must be a positive number"),
            (["serve", "--store", store, "--port", "65536"], 1, "--port must be 0…65535"),
            (["serve", "--store", store, "--port=-1"], 1, "--port must be 0…65535"),
            (["serve", "--store", store, "--page-size", "0"], 1, "--page-size must be at least 1"),
            (["serve", "--store", store, "--sync-interval", "0"], 1, "--sync-interval must be a number of seconds"),
            (["serve", "--store", store, "--sync-interval=-1"], 1, "--sync-interval must be a number of seconds"),
            (["serve", "--store", store, "--sync-interval", "nan"], 1, "--sync-interval must be a number of seconds"),
            (["serve", "--store", store, "--sync-interval", "inf"], 1, "--sync-interval must be a number of seconds"),
            (
                ["serve", "--store", store, "--sync-interval", "1e300"], 1,
                "--sync-interval must be a number of seconds from 0.1 to 86400"
            ),
            (
                ["serve", "--store", store, "--sync-interval", "5", "--port", "0", "--lifetime", "0.5"], 1,
                "--sync-interval is for an offline store"
            ),
            (
                ["serve", "--store", store, "--page-size", "9223372036854775807", "--port", "0", "--lifetime", "0.5"],
                0, ""
            ),
            (["demo", "--size", "0"], 1, "--size must be 10…200000, not 0"),
            (["demo", "--size=-1"], 1, "--size must be 10…200000, not -1"),
            (["demo", "--size", "9223372036854775807"], 1, "--size must be 10…200000"),
            (["demo", "--size", "99999999999999999999"], 64, "size"),
            (["crashtest", "--kills", "0"], 1, "--kills must be at least 1"),
            (["crashtest", "--kills=-9223372036854775808"], 1, "--kills must be at least 1"),
            (["crashtest", "--kills", "99999999999999999999"], 64, "kills"),
            (["crashtest", "--seconds", "0"], 1, "--seconds must be a positive number"),
            (["crashtest", "--seconds", "nan"], 1, "--seconds must be a positive number"),
            (["crashtest", "--seconds", "inf"], 1, "--seconds must be a positive number up to 2592000"),
            (["crashtest", "--seconds", "1e308"], 1, "--seconds must be a positive number up to 2592000"),
            (["crashtest", "--seconds=-1e-300"], 1, "--seconds must be a positive number"),
            (["crashtest", "--workers", "0"], 1, "--workers must be 1…16"),
            (["crashtest", "--workers", "9223372036854775807"], 1, "--workers must be 1…16"),
            (["crashtest", "--keys", "9223372036854775807"], 1, "--keys from --writers to 1000"),
            (["crashtest", "--writers", "0"], 1, "--writers must be 1…8"),
            (["flush", "--store", store, "--batch-size", "0"], 1, "--batch-size must be at least 1"),
            (["flush", "--store", store, "--batch-size=-9223372036854775808"], 1, "--batch-size must be at least 1"),
            (["flush", "--store", store, "--batch-size", "9223372036854775807", "--service", unreachable], 0, ""),
            (["refresh", "--store", store, "--page-size", "0"], 1, "--page-size must be at least 1"),
            (
                ["errors", "--store", store, "--show", "9223372036854775807"], 1,
                "no entry for request 9223372036854775807"
            ),
            (
                ["errors", "--store", store, "--show=-9223372036854775808"], 1,
                "no entry for request -9223372036854775808"
            ),
            (["errors", "--store", store, "--show", "0"], 1, "no entry for request 0"),
            (["errors", "--store", store, "--show", "99999999999999999999"], 64, "show"),
            (["generate", "--store", store, "--set", "Products", "--count", "0"], 0, ""),
            (["generate", "--store", store, "--set", "Products", "--count=-5"], 64, "count"),
            (["generate", "--store", store, "--set", "Products", "--count", "1", "--batch", "0"], 64, "batch"),
            (
                ["load", "--store", store, "--set", "Products", "--batch", "0", dir + "/Products.json"], 64,
                "--batch needs a number ≥ 1"
            ),
            (
                ["load", "--store", store, "--set", "Products", "--batch=-1", dir + "/Products.json"], 64,
                "--batch needs a number ≥ 1"
            ),
            (
                [
                    "load", "--store", store, "--set", "Products", "--batch=-9223372036854775808",
                    dir + "/Products.json",
                ], 64, "--batch"
            ),
            (
                [
                    "load", "--store", store, "--set", "Products", "--batch", "99999999999999999999",
                    dir + "/Products.json",
                ], 64, "batch"
            ),
            (["load", "--store", store, "--set", "Products", "--batch", "1", dir + "/Products.json"], 0, ""),
            (
                [
                    "load", "--store", store, "--set", "Products", "--batch", "9223372036854775807",
                    dir + "/Products.json",
                ], 0, ""
            ),
        ]
        for c in cases {
            let r = try CLI.run(c.args)
            let what = c.args.joined(separator: " ")
            #expect(!r.signaled, "\(what): killed by signal \(r.status)\n\(r.stderr.prefix(300))")
            #expect(r.status == c.status, "\(what): status \(r.status)\n\(r.stderr.prefix(300))")
            #expect(c.stderr.isEmpty || r.stderr.contains(c.stderr), "\(what): \(r.stderr.prefix(300))")
            if c.status == 1 {
                #expect(
                    r.stderr.hasPrefix("offline-store: ") && r.stderr.split(separator: "\n").count == 1,
                    "\(what): \(r.stderr.prefix(300))")
            }
        }
        #expect(try CLI.run(["check", "--store", store]).status == 0)
        #expect(try CLI.run(["check", "--store", dir + "/a"]).status == 0)
    }

    @Test func limitsInTheConfigurationFileApply() throws {
        let dir = tempDir()
        try write(SampleData.metadata, to: dir + "/m.xml")
        try write(#"{"limits": {"maxExpansionDepth": 1, "maxExpandedEntities": 3}}"#, to: dir + "/c.json")
        #expect(
            try CLI.run(["init", "--store", dir + "/s", "--metadata", dir + "/m.xml", "--config", dir + "/c.json"])
                .status == 0)
        for set in SampleData.setsInLoadOrder {
            try write(SampleData.json(set), to: dir + "/\(set).json")
            #expect(try CLI.run(["load", "--store", dir + "/s", "--set", set, dir + "/\(set).json"]).status == 0)
        }
        let deep = try CLI.run(["query", "--store", dir + "/s", "SalesOrders?$expand=Items($expand=Product)"])
        #expect(deep.status == 1 && deep.stderr.contains("the limit is 1 (limits.maxExpansionDepth)"), "\(deep.stderr)")
        let many = try CLI.run(["query", "--store", dir + "/s", "SalesOrders?$expand=Items"])
        #expect(many.status == 1 && many.stderr.contains("more than 3 related entities"), "\(many.stderr)")
        let few = try CLI.run(["query", "--store", dir + "/s", "SalesOrders?$top=1&$expand=Items($top=3)"])
        #expect(few.status == 0, "\(few.stderr)")
        try write(#"{"limits": {"maxExpansionDepht": 1}}"#, to: dir + "/typo.json")
        let typo = try CLI.run([
            "init", "--store", dir + "/t", "--metadata", dir + "/m.xml", "--config", dir + "/typo.json",
        ])
        #expect(typo.status != 0 && typo.stderr.contains("maxExpansionDepht"), "\(typo.stderr)")
        #expect(try CLI.run(["check", "--store", dir + "/s"]).status == 0)
    }
}
