import ArgumentParser
import CommandSupport
import OfflineStore

struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Move a store to the service's new $metadata, keeping its data and its request queue.",
        discussion: """
            In one transaction: added properties are null until the next refresh; dropped ones leave the \
            stored entities, the pending requests' bodies (each such request named in a warning) and the \
            indexes that used them; retyped ones are converted, and a value that does not fit refuses the \
            migration; added sets can be defined; a changed key is refused. A refused migration changes \
            nothing, and a kill leaves the old store or the new one. Stop every process that has the store \
            open first. `refresh --check-metadata` says whether the service's $metadata changed. Progress \
            on stderr: rows rewritten of those of the changed sets, the rate, the time elapsed and left.
            Example: offline-store migrate --store s --metadata new-metadata.xml
            """)
    @OptionGroup var options: StoreOption
    @Option(help: "The service's new CSDL $metadata document (V2 EDMX or V4).") var metadata: String
    @Flag(help: "Print what would change and write nothing.") var dryRun = false

    func run() throws {
        try runReportingErrors {
            let progress = try ProgressReporter("migrate", unit: "rows")
            defer { progress.finish() }
            let report = try OfflineStore.migrate(at: options.store, metadata: try readFile(metadata), dryRun: dryRun) {
                progress.update(done: $0, total: $1)
            }
            progress.finish()
            for w in report.warnings {
                Output.note("offline-store: warning: " + Output.sanitized(w, limit: 2_000) + "\n")
            }
            try output(
                report.unchanged
                    ? "\(options.store): unchanged (it has this $metadata already)"
                    : "\(dryRun ? "would migrate" : "migrated") \(options.store) in \(progress.elapsedText)\n\(report)")
        }
    }
}
