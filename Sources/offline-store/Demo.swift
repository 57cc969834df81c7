import ArgumentParser
import Foundation
import OfflineStore
import Samples

struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The whole story on the built-in EPM sample data.")
    @Option(help: "Keep the demo store in this directory (default: a temporary one, removed at the end).") var store: String?

    func run() throws {
        try runReportingErrors {
            // A fresh private directory (mkdtemp: unpredictable name, mode 0700), never a fixed
            // name that a planted symlink could redirect.
            let scratch = store == nil ? try makeTemporaryDirectory(prefix: "offline-store-demo-") : nil
            defer { if let scratch { try? FileManager.default.removeItem(atPath: scratch) } }
            let dir = store ?? scratch! + "/store"
            try output("== init: \(dir) from the built-in EPM $metadata (V4), with indexes \(SampleData.configuration.indexes.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: "; "))")
            let s = try OfflineStore.create(at: dir, metadata: Array(SampleData.metadata.utf8), configuration: SampleData.configuration)
            try output("== load: server data, one transaction per set, nothing queued")
            for set in SampleData.setsInLoadOrder {
                let n = try s.load(set: set, json: Array(SampleData.json(set).utf8))
                try output("   \(set): \(n) entities")
            }
            try output("== get Products('HT-1001'): the Decimal price stays exact")
            try output("   " + (try s.json(set: "Products", entity: s.get(set: "Products", key: [.string("HT-1001")])!)))
            try output("== get SalesOrderItems(SalesOrderID='0500000003',ItemPosition=20): composite key")
            try output("   " + (try s.json(set: "SalesOrderItems", entity: s.get(set: "SalesOrderItems", key: [.string("0500000003"), .int(20)])!)))
            for url in ["BusinessPartners?$filter=Country eq 'US'&$orderby=CompanyName&$top=3&$select=CompanyName,Country&$count=true",
                        "SalesOrders('0500000003')/Items?$select=ItemPosition,ProductID,Quantity,NetAmount",
                        "SalesOrders?$filter=Items/any(i:i/Quantity ge 8) and GrossAmount gt 50000&$expand=Items($select=ItemPosition,Quantity;$orderby=Quantity desc)&$select=SalesOrderID,GrossAmount&$top=2"] {
                try output("== query \(url)")
                try output("   plan: " + (try s.explain(url)).replacingOccurrences(of: "\n", with: "\n         "))
                var text = ""
                try s.query(url) { text += $0 }
                try output("   " + text.trimmingCharacters(in: .whitespacesAndNewlines))
            }
            try output("== bad input is refused with a clear error and changes nothing")
            do {
                try s.load(set: "Products", json: Array(#"{"value":[{"ProductID":"HT-9","Price":"cheap"}]}"#.utf8))
            } catch {
                try output("   load: \(error)")
            }
            do {
                _ = try s.entities("BusinessPartners?$filter=Countr eq 'US'")
            } catch {
                try output("   query: \(error)")
            }
            try output("== stats")
            let stats = try s.stats()
            for set in stats.sets {
                try output("   \(set.name): \(set.entities) entities; indexes: " + set.indexes.map { "\($0.name)\($0.automatic ? " (fk)" : "")=\($0.entries)" }.joined(separator: ", "))
            }
            try output("== check")
            let report = try s.check()
            try output("   \(report)")
            if !report.isConsistent { throw ExitCode.failure }
        }
    }
}
