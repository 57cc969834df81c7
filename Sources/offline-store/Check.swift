import ArgumentParser
import CommandSupport
import OfflineStore

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Verify the store's integrity; exit 0 only if consistent.",
        discussion: "Example: offline-store check --store s")
    @OptionGroup var options: StoreOption

    func run() throws {
        try runReportingErrors {
            let report = try OfflineStore.check(at: options.store)
            try output("\(report)")
            if !report.isConsistent { throw ExitCode.failure }
        }
    }
}
