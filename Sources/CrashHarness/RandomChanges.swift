import OfflineStore
import Samples

/// The one seeded random-change generator of the kill tests (`_change-worker`) and the crash test's
/// writers (`_crash-worker`): a batch of local changes to `Products` on keys from `ids` — a create
/// where the entity is absent (with a price half the time), else an update (55%, its price changed
/// or nulled half the time), a replace (15%) or a delete (30%); each key at most once a batch.
enum RandomChanges {
    struct Batch {
        var changes: [OfflineStore.Change] = []
        /// `kind:id` of each change, in order: what a worker reports before the call.
        var described: [String] = []
        /// The keys changed, in order.
        var touched: [String] = []
    }

    /// Up to `size` changes (fewer when a key comes up twice). `n` numbers the batch: it goes into
    /// prices (`n % 1000` units, so every price fits the sample's `Price` facets).
    static func next(
        _ store: OfflineStore, ids: [String], size: Int, n: Int, name: Value, rng: inout _SplitMix
    ) throws -> Batch {
        var batch = Batch()
        for _ in 0..<size {
            let id = ids[rng.below(ids.count)]
            guard !batch.touched.contains(id) else { continue }
            batch.touched.append(id)
            let key: [Value] = [.string(id)]
            let exists = try store.get(set: "Products", key: key) != nil
            let roll = rng.below(100)
            let change: OfflineStore.Change
            let kind: String
            if !exists {
                var entity: Properties = ["ProductID": .string(id), "Name": name]
                if rng.below(2) == 0 { entity["Price"] = price(n, &rng) }
                (change, kind) = (.create(set: "Products", entity: entity), "create")
            } else if roll < 55 {
                var changes: Properties = ["Name": name]
                if rng.below(2) == 0 { changes["Price"] = rng.below(3) == 0 ? .null : price(n, &rng) }
                (change, kind) = (.update(set: "Products", key: key, changes: changes), "update")
            } else if roll < 70 {
                (change, kind) = (.replace(set: "Products", key: key, entity: ["Name": name]), "replace")
            } else {
                (change, kind) = (.delete(set: "Products", key: key), "delete")
            }
            batch.changes.append(change)
            batch.described.append("\(kind):\(id)")
        }
        return batch
    }

    static func price(_ n: Int, _ rng: inout _SplitMix) -> Value {
        .decimal(EDMDecimal("\(n % 1000).\(rng.below(100))")!)
    }
}
