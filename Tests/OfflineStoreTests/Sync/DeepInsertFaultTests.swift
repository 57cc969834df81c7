import TestSupport
#if DEBUG  // the fault hook exists in debug builds only
import Foundation
import Testing
@testable import OfflineStore
@testable import Queue
@testable import Sync
@testable import Storage

/// A deep insert's two transactions as claims tested: every `mdb_*` call of the local create (the
/// note and its children, their requests marked as one deep insert) and of the settlement of its
/// answer (the note's local key replaced by the service's everywhere, its children moved and
/// acknowledged) is made to fail in turn with each error LMDB can give on a write path. After
/// each: `check` passes, and the store is exactly as before the transaction or exactly as after
/// it — and the transaction run again lands (`FlushFaultTests.inject`).
@Suite(.soak, .checksStores, .serialized, .runsOffThePool) struct DeepInsertFaultTests {
    @Test func everyCallOfADeepInsertsCreateFailsCleanly() throws {
        let (_, store) = try FlushFixture.pair(notes: true)
        let result = try FlushFaultTests.inject(template: store.path, name: "deep insert, create", state: Self.state) {
            s in
            let receipts = try s.create(set: "Notes", deep: DeepInsertTests.note)
            #expect(receipts.count == 4)
        }
        #expect(result.injected == result.trials)
    }

    /// Entities and the queue, without what a create takes fresh each time it runs (its ids, its
    /// time, the deep insert's transaction id).
    static func state(_ store: OfflineStore) throws -> [String] {
        var rows: [String] = []
        for set in FlushFixture.notesSets + ["RequestQueue"] {
            try store.scan(set: set) { e in
                var e = e
                for name in ["RepeatabilityID", "CreatedAt", "TransactionID"] { e[name] = nil }
                rows.append("\(set) \(e)")
                return true
            }
        }
        return rows.sorted()
    }

    @Test func everyCallOfSettlingADeepInsertFailsCleanly() throws {
        let (_, store) = try FlushFixture.pair(notes: true)
        try store.create(set: "Notes", deep: DeepInsertTests.note)
        let round = try FlushFaultTests.prepare(store)
        #expect(round.count == 4 && round.dropFirst().allSatisfy { $0.change.inside?.change == round[0].change.id })
        // The service's answer: the note 900, its comments 901 and 902, its line (900, 1).
        let work: [(RequestRecord, Flush.Verdict)] = round.enumerated().map { i, o in
            let image: Properties =
                switch i {
                case 0: ["NoteID": .int(900), "Title": .string("deep header")]
                case 1: ["CommentID": .int(901), "NoteID": .int(900), "Text": .string("first comment")]
                case 2: ["CommentID": .int(902), "NoteID": .int(900), "Text": .string("second comment")]
                default: ["NoteID": .int(900), "LineNo": .int(1), "Text": .string("deep line")]
                }
            return (o.record, .success(image: image, etag: "W/\"\(i)\"", reconciled: false))
        }
        let probe = try QueueFaultTests.copy(store.path)
        let settled = try FlushFaultTests.settle(probe, work)
        #expect(settled.succeeded.count == 4 && settled.stop == nil, "\(settled)")
        #expect(try probe.entities("Comments?$filter=NoteID eq 900").count == 2)
        #expect(try probe.get(set: "Lines", key: [.int(900), .int(1)]) != nil)
        #expect(try probe.pendingRequestCount() == 0)
        let result = try FlushFaultTests.inject(template: store.path, name: "deep insert, settle") { s in
            _ = try FlushFaultTests.settle(s, work)
        }
        #expect(result.injected == result.trials)
    }
}
#endif
