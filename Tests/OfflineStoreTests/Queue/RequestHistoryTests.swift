import TestSupport
import Foundation
import Testing
@testable import OfflineStore
import Queue
import Storage
import Sync

/// Issue 36, item 5: the outcome record. Every request that leaves the queue (or is refused) has a
/// row in `RequestHistory`, written in the transaction that decided it: applied (with the key the
/// service gave), refused, given up, undone, cancelled; the record keeps at most the configured
/// number of rows; `check` finds a row that contradicts the queue. Every store passes `check`
/// after each test.
@Suite(.checksStores) struct RequestHistoryTests {
    @Test func everyRequestThatLeavesTheQueueSaysWhatBecameOfIt() async throws {
        let (served, store) = try await FlushFixture.pair(notes: true, optimize: true)
        // Another copy deleted note 3 on the service: an update of it is refused (404).
        _ = try await OfflineStore.open(at: served).delete(set: "Notes", key: [.int(3)])
        let create = try await store.create(
            set: "Notes", entity: ["Title": .string("history")], options: .init(customTag: "made here"))
        let update = try await store.update(set: "Notes", key: [.int(1)], changes: ["Title": .string("renamed")])
        let refused = try await store.update(set: "Notes", key: [.int(3)], changes: ["Title": .string("gone")])
        let cancelled = try await store.create(set: "Tags", entity: ["TagID": .string("tmp"), "Label": .string("t")])
        _ = try await store.delete(set: "Tags", key: [.string("tmp")])
        let undone = try await store.update(set: "Notes", key: [.int(2)], changes: ["Title": .string("undo me")])
        try store.undo(set: "Notes", key: [.int(2)])
        let ids = try [create, update, refused, cancelled, undone].map { try #require($0.requestID) }

        let server = try await ServerProcess.start(store: served)
        let report = try await store.flush(serviceRoot: server.url, batchSize: 10)
        #expect(await server.stop() == 0)
        #expect(report.succeeded == 2 && report.archived == 1, "\(report)")

        let made = try #require(try store.outcome(ofRequest: ids[0]))
        guard case .int(let noteID)? = try store.entities("Notes?$filter=Title eq 'history'").first?["NoteID"] else {
            Issue.record("the created note is not there")
            return
        }
        #expect(made.outcome == "applied" && made.method == "POST" && made.entitySet == "Notes")
        #expect(made.serverKey == "\(noteID)" && made.entityKey != made.serverKey, "\(made)")
        #expect(made.httpStatus == 201 && made.customTag == "made here" && made.attempts == 1, "\(made)")
        #expect(made.etag != nil, "the service's ETag of the created note")
        #expect(try store.outcome(ofRequest: ids[1])?.outcome == "applied")
        let refusal = try #require(try store.outcome(ofRequest: ids[2]))
        #expect(refusal.outcome == "refused" && refusal.httpStatus == 404 && refusal.message != nil, "\(refusal)")
        #expect(try store.outcome(ofRequest: ids[3])?.outcome == "cancelled")
        #expect(try store.outcome(ofRequest: ids[4])?.outcome == "undone")
        // Giving the refused change up is its final outcome.
        try store.resolveError(requestID: ids[2])
        #expect(try store.outcome(ofRequest: ids[2])?.outcome == "given up")
        // The record is a set like the queue: queried, filtered, ordered.
        let applied = try store.entities("RequestHistory?$filter=Outcome eq 'applied'&$orderby=RequestID")
        #expect(applied.map { $0["RequestID"] } == [.int(ids[0]), .int(ids[1])])
        #expect(try store.requestHistory().map(\.requestID) == ids.sorted())
    }

    /// The record keeps the newest `requestHistory` rows; the oldest go.
    @Test func theRecordKeepsOnlyTheConfiguredNumberOfRequests() async throws {
        let (served, _) = try await FlushFixture.pair(notes: true)
        var configuration = StoreConfiguration()
        configuration.requestHistory = 5
        let path = tempDir() + "/bounded"
        let store = try OfflineStore.create(
            at: path, metadata: Array(FlushFixture.notesMetadata.utf8), configuration: configuration)
        StoreRegistry.current?.add(path)
        var ids: [Int64] = []
        for i in 0..<12 {
            let r = try await store.create(
                set: "Tags", entity: ["TagID": .string("t\(i)"), "Label": .string("\(i)")])
            ids.append(try #require(r.requestID))
        }
        let server = try await ServerProcess.start(store: served)
        let report = try await store.flush(serviceRoot: server.url, batchSize: 4)
        #expect(await server.stop() == 0)
        #expect(report.succeeded == 12, "\(report)")
        #expect(try store.requestHistory().map(\.requestID) == Array(ids.suffix(5)))
        #expect(try store.outcome(ofRequest: ids[0]) == nil, "the oldest went")
    }

    /// `check` finds a row that says a request is done while it is still queued, and one that
    /// says refused while it is not.
    @Test func checkFindsARecordThatContradictsTheQueue() async throws {
        let (_, store) = try await FlushFixture.pair(notes: true)
        let pending = try #require(
            try await store.create(set: "Tags", entity: ["TagID": .string("x"), "Label": .string("x")]).requestID)
        let history = try store.entities.set(SystemSets.requestHistory)
        let queue = store.requestQueue
        try await store.entities.write { t in
            let r = try #require(try queue.record(t.reader, id: pending))
            try queue.recordOutcome(t, r, .applied)
            var gone = r
            gone.id = 0
            try queue.recordOutcome(t, gone, .refused)
            _ = history
        }
        let problems = try store.check().problems
        #expect(problems.contains { $0.contains("request \(pending) is recorded applied but is still in the queue") })
        #expect(problems.contains { $0.contains("request 0 is recorded refused but is no longer in the queue") })
        // Put right, so the suite's own check passes.
        try await store.entities.write { t in
            _ = try history.delete(t, key: [.int(pending)])
            _ = try history.delete(t, key: [.int(0)])
        }
        #expect(try store.check().problems.isEmpty)
    }

    /// A request history that is not a whole number, or out of range, is refused at `init`.
    @Test(.runsOffThePool) func badBoundsAreRefused() throws {
        for bad in [#"{"requestHistory":-1}"#, #"{"requestHistory":"10"}"#, #"{"requestHistory":20000000}"#] {
            #expect(throws: EntityError.self) { try StoreConfiguration(json: Array(bad.utf8)) }
        }
        #expect(try StoreConfiguration(json: Array(#"{"requestHistory":0}"#.utf8)).requestHistory == 0)
    }
}
