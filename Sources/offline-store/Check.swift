import ArgumentParser
import CommandSupport
import OfflineStore

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Verify the store's integrity; exit 0 only if consistent.",
        discussion: """
            Progress on stderr once the structural audit is done: entities and index entries checked of \
            all, the rate, the time elapsed and left. The report ends with the time the check took.
            Example: offline-store check --store s
            """)
    @OptionGroup var options: StoreOption

    func run() throws {
        try runReportingErrors {
            let progress = try ProgressReporter("check", unit: "rows")
            defer { progress.finish() }
            let report = try OfflineStore.check(at: options.store) { p in
                progress.update(done: p.checked, total: p.total, detail: p.set)
            }
            progress.finish()
            try output(
                report.isConsistent
                    ? "\(report), in \(progress.elapsedText)"
                    : "\(report)\nchecked in \(progress.elapsedText)")
            if !report.isConsistent { throw ExitCode.failure }
        }
    }
}
