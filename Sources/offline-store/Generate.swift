import ArgumentParser
import CommandSupport
import Foundation
import OfflineStore
import Samples

struct Generate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write synthetic entities into a set, shaped by the schema; foreign keys point at existing rows.",
        discussion: """
            Rows are made from the row number and the seed, so the same seed over the same parents writes \
            the same entities. Keys are unique; an entity with the same key is replaced. Generate parent \
            sets first: foreign keys are drawn from their rows. Entities are streamed in transactions of \
            --batch rows, so memory stays bounded at any --count.
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
            let start = Date()
            let tty = isatty(2) == 1
            var lastPrint = Date.distantPast
            let n = try store.generate(set: set, count: count, seed: seed, batchSize: batch) { written, total in
                guard tty else { return }
                let now = Date()
                if written < total && now.timeIntervalSince(lastPrint) < 0.2 { return }
                lastPrint = now
                let elapsed = max(now.timeIntervalSince(start), 0.001)
                let percent = total == 0 ? 100 : written * 100 / total
                let line = "\r\(set): \(written)/\(total) (\(percent)%), \(Int(Double(written) / elapsed)) entities/s"
                Output.note(line)
            }
            if tty { Output.note("\n") }
            let seconds = Date().timeIntervalSince(start)
            try output(
                "generated \(n) \(set) in \(String(format: "%.2f", seconds)) s (\(Int(Double(n) / max(seconds, 0.001))) entities/s)"
            )
        }
    }
}
