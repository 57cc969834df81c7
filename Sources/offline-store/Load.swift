import ArgumentParser
import Foundation
import OfflineStore

struct Load: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Import server data into an entity set: OData JSON or JSON lines; all or nothing, nothing queued.")
    @OptionGroup var options: StoreOption
    @Option(help: "The entity set.") var set: String
    @Argument(help: "The file: {\"value\":[…]}, {\"d\":{\"results\":[…]}} or JSON lines.") var file: String

    func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store)
            let start = Date()
            let n = try store.load(set: set, json: try readFile(file))
            output("loaded \(n) entities in \(String(format: "%.2f", Date().timeIntervalSince(start))) s")
        }
    }
}
