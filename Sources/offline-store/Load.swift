import ArgumentParser
import CommandSupport
import OfflineStore

struct Load: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Import server data into an entity set: OData JSON or JSON lines, streamed; all or nothing unless --batch; nothing queued.",
        discussion: """
            The file is read as it is written: memory holds a chunk of it and a few thousand entities, \
            whatever its size. Without --batch the whole file is one transaction: none of it or all of it. \
            With --batch N every N entities commit; a failure keeps the batches before it (the error says \
            how many entities they hold), and loading the file again completes it (load upserts). \
            Progress on stderr: entities written, the share of the input read, the rate, the time elapsed and left.
            Example: offline-store load --store s --set Products products.json
            """)
    @OptionGroup var options: StoreOption
    @Option(help: "The entity set.") var set: String
    @Option(help: "Commit every N entities (an entity and its expanded children are never split).") var batch: Int?
    @Argument(
        help:
            "The file: {\"value\":[…]}, {\"d\":{\"results\":[…]}}, an array, an entity object or JSON lines; - for standard input."
    )
    var file: String

    func validate() throws {
        if let batch, batch < 1 { throw ValidationError("--batch needs a number ≥ 1") }
    }

    func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store)
            let progress = try ProgressReporter("load \(set)", unit: "entities")
            defer { progress.finish() }
            let n = try store.load(set: set, file: file, batchSize: batch) { p in
                let share = p.inputBytes.flatMap { $0 > 0 ? Double(p.bytesRead) / Double($0) : nil }
                progress.update(done: p.entities, fraction: share)
            }
            progress.finish()
            try output("loaded \(n) entities in \(progress.elapsedText)")
        }
    }
}
