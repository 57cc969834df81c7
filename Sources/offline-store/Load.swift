import ArgumentParser
import Foundation
import OfflineStore

struct Load: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Import server data into an entity set: OData JSON or JSON lines; all or nothing, nothing queued.",
        discussion: "Example: offline-store load --store s --set Products products.json")
    @OptionGroup var options: StoreOption
    @Option(help: "The entity set.") var set: String
    @Argument(help: "The file: {\"value\":[…]}, {\"d\":{\"results\":[…]}} or JSON lines.") var file: String

    /// `written/total` on one line of the terminal.
    @Sendable static func showProgress(_ written: Int, _ total: Int) {
        Output.note("\r\(written)/\(total) entities written")
    }

    func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store)
            let start = Date()
            let tty = isatty(2) == 1
            let progress: (@Sendable (Int, Int) -> Void)? = tty ? Self.showProgress : nil
            let n = try store.load(set: set, json: try readFile(file), progress: progress)
            if tty { Output.note("\n") }
            try output("loaded \(n) entities in \(String(format: "%.2f", Date().timeIntervalSince(start))) s")
        }
    }
}
