import Foundation
import Testing
import OfflineStore
import Samples

/// The nastiest requests of the hostile-input probe through the built `offline-store` binary: each
/// must end with exit status 1 and one clear line on stderr (or answer, exit 0) — never a signal,
/// which is how Swift's overflow trap ends a process.
@Suite(.checksStores) struct HostileCLITests {
    @Test func nastyRequestsExitCleanly() throws {
        let dir = try CLITests().sampleStore()
        let store = dir + "/store"
        let cyclic = "SalesOrders?$expand=" + Array(repeating: "BusinessPartner($expand=SalesOrders($expand=", count: 12).joined() + "Items"
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
            (["SalesOrderItems?$filter=DeliveryDate add duration'P10675199D' eq null&$orderby=Quantity mul 9223372036854775807"], 0, ""),
            (["SalesOrderItems?$filter=Quantity div 0 eq 1"], 1, "division by zero"),
            ([cyclic], 1, "limits.maxExpansionDepth"),
            (["Products?$filter=Price eq 1" + String(repeating: "0", count: 100_000) + "x"], 1, "invalid number literal"),
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
                #expect(r.stderr.hasPrefix("offline-store: ") && r.stderr.contains(c.stderr), "\(what): \(r.stderr.prefix(300))")
                #expect(r.stderr.split(separator: "\n").count == 1 && r.stderr.count < 300, "\(what): \(r.stderr.prefix(300))")
                #expect(!r.stderr.unicodeScalars.contains("\u{1B}"))
            }
        }
        // Flags past Int64 are refused by the argument parser (a usage error), not a trap.
        let huge = try CLI.run(["query", "--store", store, "--page-size", "99999999999999999999", "Products"])
        #expect(!huge.signaled && huge.status != 0 && huge.stderr.contains("page-size"), "\(huge.stderr)")
        #expect(try CLI.run(["check", "--store", store]).status == 0)
    }

    @Test func limitsInTheConfigurationFileApply() throws {
        let dir = tempDir()
        try write(SampleData.metadata, to: dir + "/m.xml")
        try write(#"{"limits": {"maxExpansionDepth": 1, "maxExpandedEntities": 3}}"#, to: dir + "/c.json")
        #expect(try CLI.run(["init", "--store", dir + "/s", "--metadata", dir + "/m.xml", "--config", dir + "/c.json"]).status == 0)
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
        let typo = try CLI.run(["init", "--store", dir + "/t", "--metadata", dir + "/m.xml", "--config", dir + "/typo.json"])
        #expect(typo.status != 0 && typo.stderr.contains("maxExpansionDepht"), "\(typo.stderr)")
        #expect(try CLI.run(["check", "--store", dir + "/s"]).status == 0)
    }
}
