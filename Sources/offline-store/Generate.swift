import ArgumentParser
import CommandSupport
import OfflineStore
import Samples

struct Generate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write synthetic entities into a set, shaped by the schema; foreign keys point at existing rows.",
        discussion: """
            Rows are made from the row number and the seed, so the same seed over the same parents writes \
            the same entities. Keys are unique; an entity with the same key is replaced. Generate parent \
            sets first: foreign keys are drawn from their rows. Entities are streamed in transactions of \
            --batch rows, so memory stays bounded at any --count. Progress on stderr: written of --count, \
            the rate, the time elapsed and left.
            Example: offline-store generate --store s --set BusinessPartners --count 100000 --seed 7
            """)
    @OptionGroup var options: StoreOption
    @Option(help: "The entity set.") var set: String
    @Option(help: "How many entities.") var count: Int
    @Option(help: "The seed: the same seed makes the same entities.") var seed: UInt64 = 1
    @Option(help: "Entities per transaction.") var batch: Int = 50_000

    func validate() throws {
        guard count >= 0 else { throw ValidationError("--count must not be negative") }
        guard batch > 0 else { throw ValidationError("--batch must be positive") }
    }

    func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store)
            let progress = try ProgressReporter("generate \(set)", unit: "entities")
            defer { progress.finish() }
            let n = try store.generate(set: set, count: count, seed: seed, batchSize: batch) { written, total in
                progress.update(done: written, total: total)
            }
            progress.finish()
            let seconds = progress.elapsed
            try output(
                "generated \(n) \(set) in \(progress.elapsedText) (\(Int(Double(n) / max(seconds, 0.001))) entities/s)"
            )
        }
    }
}
