package import ArgumentParser
import CommandSupport
import Foundation
import OfflineStore
import Samples

/// A hidden verb for kill tests: makes seeded random local changes (creates, updates, replaces,
/// deletes, batches) to `Products` as fast as it can, and reports each on standard output —
/// `op N kind:key,…` before the call and `ack N key=<entity JSON or absent>;…` after it returns —
/// so a parent that SIGKILLs it knows what was acknowledged and what was in flight.
package struct ChangeWorker: ParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(commandName: "_change-worker", shouldDisplay: false)

    @OptionGroup var options: StoreOption
    @Option var seed: UInt64 = 1
    @Option var count: Int = 1_000_000
    @Option var keys: Int = 20

    package func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store)
            var rng = _SplitMix(state: seed)
            let ids = (0..<keys).map { "K-\($0)" } + (1001...1005).map { "HT-\($0)" }
            for n in 0..<count {
                let batch = try RandomChanges.next(
                    store, ids: ids, size: rng.below(10) == 0 ? 3 : 1, n: n,
                    name: .string("w\(seed)-\(n)"), rng: &rng)
                try output("op \(n) \(batch.described.joined(separator: ","))")
                try store.apply(
                    batch.changes, options: ChangeOptions(customTag: "w\(seed)", nonMergeable: rng.below(8) == 0))
                var after: [String] = []
                for id in batch.touched.sorted() {
                    let e = try store.get(set: "Products", key: [.string(id)])
                    after.append("\(id)=" + (try e.map { try store.json(set: "Products", entity: $0) } ?? "absent"))
                }
                try output("ack \(n) \(after.joined(separator: ";"))")
            }
        }
    }
}
