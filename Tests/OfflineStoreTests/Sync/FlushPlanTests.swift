import Foundation
import LMDB
import Testing
@testable import OfflineStore
@testable import Queue
@testable import Sync
import Storage
import TestSupport

/// Flush plans a round reading the queue only as far as the round needs (`Flush.plan`); this
/// checks it against planning from the whole queue (`Flush.planFully`) on random queues: local
/// keys and the changes that depend on them, change sets, upload categories, non-mergeable
/// changes, requests already sent, archived ones — for every batch size from 1 to 12, with and
/// without a category, round after round as the queue is settled.
/// `FLUSH_PLAN_TRIALS` (default 25) sets the number of random queues.
@Suite(.checksStores, .runsOffThePool) struct FlushPlanTests {
    @Test func planningAsFarAsNeededEqualsPlanningFromTheWholeQueue() throws {
        var random = SeededRandom(seed: testSeed("FlushPlanTests"))
        let trials = ProcessInfo.processInfo.environment["FLUSH_PLAN_TRIALS"].flatMap(Int.init) ?? 25
        var compared = 0, withChangeSets = 0, plannedAhead = 0
        for trial in 0..<trials {
            let (_, store) = try FlushFixture.pair(notes: true, optimize: random.next() % 2 == 0)
            var notes: [Value] = [.int(1), .int(2), .int(3)]
            for step in 0..<(10 + Int(random.next() % 40)) {
                var options = ChangeOptions()
                if random.next() % 5 == 0 { options.transactionID = ["a", "b"][Int(random.next() % 2)] }
                if random.next() % 4 == 0 { options.uploadCategory = "x" }
                if random.next() % 6 == 0 { options.nonMergeable = true }
                let note = notes[Int(random.next() % UInt64(notes.count))]
                let change: OfflineStore.Change
                switch random.next() % 7 {
                // may depend on a later create
                case 5: change = .update(set: "Tags", key: [.string("red")], changes: ["NoteID": note])
                case 0: change = .create(set: "Notes", entity: ["Title": .string("n\(step)")])
                case 1:
                    change = .create(
                        set: "Tags",
                        entity: ["TagID": .string("t\(trial)-\(step)"), "Label": .string("L"), "NoteID": note])
                case 2: change = .create(set: "Comments", entity: ["NoteID": note, "Text": .string("c\(step)")])
                case 3: change = .delete(set: "Notes", key: [note])
                default: change = .update(set: "Notes", key: [note], changes: ["Title": .string("u\(step)")])
                }
                guard let receipt = try? store.apply([change], options: options).first else { continue }
                if case .create(set: "Notes", _) = change, let id = receipt.entity?["NoteID"] { notes.append(id) }
                if case .delete = change { notes.removeAll { $0 == note }; if notes.isEmpty { notes = [.int(1)] } }
            }
            let queue = store.requestQueue
            // Rounds: compare, then send one (batch size at random) and settle some of it.
            for _ in 0..<4 {
                for batchSize in 1...12 {
                    for category in [nil, "x"] {
                        let options = Flush.Options(category: category, batchSize: batchSize)
                        let (fast, full) = try store.entities.read { t in
                            (
                                try Flush.plan(t, queue: queue, options: options),
                                try Flush.planFully(t, queue: queue, options: options)
                            )
                        }
                        #expect(
                            fast == full,
                            "trial \(trial), batch \(batchSize), category \(category ?? "-"): \(fast) vs \(full)")
                        compared += 1
                        // The round after `fast`, planned while it is on its way: none of it, and
                        // nothing that waits for it (a later change of one of its entities, what
                        // refers to one of its creates, a member of one of its change sets).
                        let onItsWay = Set(fast.map(\.id))
                        let (ahead, records) = try store.entities.read { t in
                            (
                                try Flush.plan(t, queue: queue, options: options, excluding: onItsWay),
                                try Self.records(t, queue)
                            )
                        }
                        let byID = Dictionary(uniqueKeysWithValues: records.map { ($0.id, $0) })
                        let away = onItsWay.compactMap { byID[$0] }
                        for p in ahead {
                            let r = try #require(byID[p.id])
                            let waits = away.contains { a in
                                (a.entitySet == r.entitySet && a.keyBytes == r.keyBytes && a.id < r.id)
                                    || r.dependencies.contains(a.id)
                                    || (a.transactionID != nil && a.transactionID == r.transactionID)
                            }
                            #expect(
                                !onItsWay.contains(p.id) && !waits, "trial \(trial), batch \(batchSize): \(p) waits")
                        }
                        if !ahead.isEmpty { plannedAhead += 1 }
                    }
                }
                let sendOptions = Flush.Options(batchSize: 1 + Int(random.next() % 6))
                let round = try store.entities.write { t in try Flush.prepare(t, queue: queue, options: sendOptions) }
                if round.isEmpty { break }
                if round.contains(where: { $0.record.transactionID != nil }) { withChangeSets += 1 }
                let work: [(RequestRecord, Flush.Verdict)] = round.compactMap { o in
                    switch random.next() % 3 {
                    case 0: return (o.record, .refused(ServiceError(httpStatus: 400, message: "no")))
                    case 1 where o.record.method != .create:
                        return (o.record, .success(image: nil, etag: nil, reconciled: false))
                    default: return nil  // left sent
                    }
                }
                _ = try store.entities.write { t in try Flush.settle(t, queue: queue, work) }
            }
        }
        #expect(withChangeSets > 0, "some rounds had change sets")
        #expect(plannedAhead > 0, "some rounds were planned while another was on its way")
        print(
            "flush planning: \(compared) plans compared over \(trials) random queues, \(withChangeSets) rounds with change sets, \(plannedAhead) planned ahead"
        )
    }

    static func records(_ t: ReadView, _ queue: RequestQueue) throws -> [RequestRecord] {
        var out: [RequestRecord] = []
        try queue.records.scan(t) { p in
            out.append(try RequestRecord(p)); return true
        }
        return out
    }
}
