import ArgumentParser
import Foundation
import OfflineStore
import Samples

/// A hidden verb for kill tests: makes seeded random local changes (creates, updates, replaces,
/// deletes, batches) to `Products` as fast as it can, and reports each on standard output —
/// `op N kind:key,…` before the call and `ack N key=<entity JSON or absent>;…` after it returns —
/// so a parent that SIGKILLs it knows what was acknowledged and what was in flight.
struct ChangeWorker: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "_change-worker", shouldDisplay: false)
    @OptionGroup var options: StoreOption
    @Option var seed: UInt64 = 1
    @Option var count: Int = 1_000_000
    @Option var keys: Int = 20

    func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store)
            var rng = _SplitMix(state: seed)
            let ids = (0..<keys).map { "K-\($0)" } + (1001...1005).map { "HT-\($0)" }
            for n in 0..<count {
                let batch = rng.below(10) == 0 ? 3 : 1
                var changes: [OfflineStore.Change] = []
                var described: [String] = []
                var touched: Set<String> = []
                for _ in 0..<batch {
                    let id = ids[rng.below(ids.count)]
                    guard touched.insert(id).inserted else { continue }
                    let key: [Value] = [.string(id)]
                    let exists = try store.get(set: "Products", key: key) != nil
                    let roll = rng.below(100)
                    let name = Value.string("w\(seed)-\(n)")
                    let change: OfflineStore.Change
                    let kind: String
                    if !exists {
                        (change, kind) = (.create(set: "Products", entity: ["ProductID": .string(id), "Name": name]), "create")
                    } else if roll < 55 {
                        var changes: Properties = ["Name": name]
                        if rng.below(2) == 0 { changes["Price"] = rng.below(3) == 0 ? .null : .decimal(EDMDecimal("\(n).\(rng.below(100))")!) }
                        (change, kind) = (.update(set: "Products", key: key, changes: changes), "update")
                    } else if roll < 70 {
                        (change, kind) = (.replace(set: "Products", key: key, entity: ["Name": name]), "replace")
                    } else {
                        (change, kind) = (.delete(set: "Products", key: key), "delete")
                    }
                    changes.append(change)
                    described.append("\(kind):\(id)")
                }
                try output("op \(n) \(described.joined(separator: ","))")
                try store.apply(changes, options: ChangeOptions(customTag: "w\(seed)", nonMergeable: rng.below(8) == 0))
                var after: [String] = []
                for id in touched.sorted() {
                    let e = try store.get(set: "Products", key: [.string(id)])
                    after.append("\(id)=" + (try e.map { try store.json(set: "Products", entity: $0) } ?? "absent"))
                }
                try output("ack \(n) \(after.joined(separator: ";"))")
            }
        }
    }
}
