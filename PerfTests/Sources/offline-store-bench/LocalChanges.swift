/// The local-change workloads: a durable change with its queue record from 1, 8 and 64 concurrent
/// writers, and a batch of 10,000 changes in one transaction.
///
/// A change gives an item a new quantity (so its entry in the `Quantity DESC, ProductID` index
/// moves) and a later `ChangedAt`. Every change in a run touches a different item, so
/// OfflineStore's request-queue optimization (on, the default) never folds one into another:
/// every contestant writes one queue record per change, and each contestant's record count is
/// checked after every measured run.
struct LocalChangeWorkloads {
    /// Changes per writer and rounds (the median is reported).
    var oneWriter: Int, eightWriters: Int, sixtyFourWriters: Int, batch: Int, rounds: Int

    init(mode: String) {
        if mode == "tiny" {
            (oneWriter, eightWriters, sixtyFourWriters, batch, rounds) = (20, 4, 2, 500, 1)
        } else {
            (oneWriter, eightWriters, sixtyFourWriters, batch, rounds) = (200, 100, 25, 10_000, 3)
        }
    }

    /// Distinct items one round needs (the OfflineStore "threads" line takes its own).
    var itemsPerRound: Int { oneWriter + 2 * (8 * eightWriters + 64 * sixtyFourWriters) + batch }

    /// Fewer changes when the data set is too small for every change to touch its own item.
    mutating func fit(rows: Int) throws {
        while itemsPerRound * rounds > rows {
            if rounds > 1 { rounds -= 1; continue }
            guard oneWriter > 1 || eightWriters > 1 || sixtyFourWriters > 1 || batch > 1 else {
                throw BenchError(
                    "local-change workloads: \(rows) rows are too few (\(itemsPerRound) distinct items needed; use --count 200 or more)"
                )
            }
            (oneWriter, eightWriters, sixtyFourWriters, batch) = (
                max(1, oneWriter / 2), max(1, eightWriters / 2),
                max(1, sixtyFourWriters / 2), max(1, batch / 2)
            )
        }
    }

    var batchLabel: String { "batch of \(grouped(Double(batch))) changes + queue records, one transaction" }

    /// Under the table: what the local-change lines mean.
    static let notes = """
        local changes: a change is a PATCH of Quantity and ChangedAt (the item's quantity index entry moves) and its queue
        record, durable when the call returns; every change touches its own item (no request-queue folding), and each
        contestant's record count is checked after every run. OfflineStore: update(set:key:changes:) async, one task per
        writer, group-committed by its writer thread ("OfflineStore, threads": the blocking form, one OS thread per writer);
        the batch is one apply([...]). raw LMDB: the entity and index puts and a queue put under a big-endian counter, writers
        serialized on a mutex, one transaction and fsync per change (no group commit). SQLite: the row upsert and a
        RequestQueue insert in one write { } on the DatabasePool's single writer (WAL, synchronous=FULL), one thread per writer.

        """

    static func writersLabel(_ writers: Int) -> String {
        writers == 1 ? "durable change + queue record, 1 writer" : "durable changes + queue records, \(writers) writers"
    }
}

/// Hands out items no earlier change touched, in a seeded order.
struct DistinctItems {
    let items: [Item]
    var order: [Int]
    var next = 0
    var random: BenchRandom

    init(_ items: [Item], seed: UInt64) {
        self.items = items
        random = BenchRandom(seed: seed ^ 0x9E37_79B9)
        order = Array(items.indices)
        for i in stride(from: order.count - 1, to: 0, by: -1) { order.swapAt(i, random.below(i + 1)) }
    }

    /// `count` changes to items not changed before.
    mutating func take(_ count: Int) -> [Item] {
        defer { next += count }
        return order[next..<next + count].map { items[$0].changed(quantity: Int32(1 + random.below(1_000))) }
    }
}

/// Runs the local-change workloads; `record` gets each contestant's median ns per change.
func runLocalChanges(
    _ plan: LocalChangeWorkloads, contestants: [any Contestant], offline: OfflineStoreContestant,
    sqlite: SQLiteContestant?, items: [Item], seed: UInt64,
    record: (_ workload: String, _ c: any Contestant, _ nsPerChange: Double, _ changes: Int, _ name: String?) -> Void
) throws {
    if let sqlite {
        let mode = try sqlite.writerSynchronous()
        guard mode == 2 else { throw BenchError("SQLite's writer runs with synchronous=\(mode), not FULL (2)") }
        log("SQLite writer: journal_mode=WAL, synchronous=FULL (PRAGMA synchronous = 2)")
    }
    var expected: [ObjectIdentifier: Int] = [:]
    for c in contestants {
        let n = try c.queueCount()
        guard n == 0 else { throw BenchError("\(c.name) holds \(n) queue records before the local changes") }
        expected[ObjectIdentifier(c)] = 0
    }
    /// Checks that `c` wrote exactly one queue record per change.
    func verify(_ c: any Contestant, added: Int) throws {
        let want = expected[ObjectIdentifier(c)]! + added
        let have = try c.queueCount()
        guard have == want else {
            throw BenchError("\(c.name) holds \(have) queue records; \(want) expected (one per change)")
        }
        expected[ObjectIdentifier(c)] = want
    }
    var distinct = DistinctItems(items, seed: seed)
    var changedSample: [Item] = []

    for writers in [1, 8, 64] {
        let perWriter = writers == 1 ? plan.oneWriter : writers == 8 ? plan.eightWriters : plan.sixtyFourWriters
        let label = LocalChangeWorkloads.writersLabel(writers)
        log(label + " (\(perWriter) changes each, \(plan.rounds) rounds)")
        var samples: [String: [Double]] = [:]
        let total = writers * perWriter
        for _ in 0..<plan.rounds {
            let work = (0..<writers).map { _ in distinct.take(perWriter) }
            changedSample.append(work[0][0])
            for c in contestants {
                let ns = try c.changeConcurrently(work)
                try verify(c, added: total)
                samples[c.name, default: []].append(Double(ns) / Double(total))
                if c === offline && writers > 1 {
                    let own = (0..<writers).map { _ in distinct.take(perWriter) }
                    let ns = try offline.changeOnThreads(own)
                    try verify(c, added: total)
                    samples[c.name + ", threads", default: []].append(Double(ns) / Double(total))
                }
            }
        }
        for c in contestants {
            record(label, c, median(samples[c.name]!), total * plan.rounds, nil)
            if c === offline, let s = samples[c.name + ", threads"] {
                record(label, c, median(s), total * plan.rounds, c.name + ", threads")
            }
        }
    }

    log(plan.batchLabel + " (\(plan.rounds) rounds)")
    var samples: [String: [Double]] = [:]
    var last: Item? = nil
    for _ in 0..<plan.rounds {
        let batch = distinct.take(plan.batch)
        changedSample.append(batch[0])
        last = batch.last
        for c in contestants {
            let start = now()
            try c.changeBatch(batch)
            let ns = now() - start
            try verify(c, added: batch.count)
            samples[c.name, default: []].append(Double(ns) / Double(batch.count))
        }
    }
    for c in contestants { record(plan.batchLabel, c, median(samples[c.name]!), plan.batch * plan.rounds, nil) }

    // The same changes everywhere: the changed items, and the last record (the batch's last change).
    for i in changedSample {
        let key = ItemKey(salesOrderID: i.salesOrderID, itemPosition: i.itemPosition)
        let seen = try contestants.map { c in try c.item(key).map { "\($0)" } ?? "missing in \(c.name)" }
        guard Set(seen).count == 1, seen[0] == "\(i)" else {
            throw BenchError("contestants disagree on the changed item \(key): \(seen)")
        }
    }
    if let last {
        let want = String(decoding: QueueRecord.body(last), as: UTF8.self)
        for c in contestants {
            let body = try c.queueBody(id: Int64(expected[ObjectIdentifier(c)]!))
            guard body == want else {
                throw BenchError("\(c.name)'s last queue record has body \(body ?? "nil"), expected \(want)")
            }
        }
        log(
            "  queue records: "
                + contestants.map { "\($0.name) \(expected[ObjectIdentifier($0)]!)" }.joined(separator: ", ")
                + "; the last one's body everywhere: " + want)
    }
}

func median(_ samples: [Double]) -> Double {
    let s = samples.sorted()
    return s[s.count / 2]
}
