import NIOHTTP1
import AsyncHTTPClient
import Foundation
import Testing
@testable import OfflineStore
import Queue
import Remote
import Storage
import Sync

/// Issue 37, F1: a create whose key the service assigns is applied, its answer lost; a refresh
/// brings the created entity under the service's key; the create sent again is answered from the
/// service's repeatability record. Settling it must make the two copies one — the local entity
/// becomes the service's, what is still queued laid on it — and no answer this store cannot take
/// in may stop the requests behind it. Every store passes `check` after each test.
@Suite(.checksStores) struct LostAnswerTests {
    static func amount(_ text: String) -> Value { .decimal(EDMDecimal(text)!) }

    @Test func aCreateARefreshBroughtMeanwhileSettlesOntoTheServicesCopy() async throws {
        // No collapse: the change on top of the create stays a request of its own.
        let (served, store) = try await FlushFixture.pair(notes: true, optimize: false)
        try store.define(name: "notes", url: "Notes")
        try await store.create(set: "Notes", entity: ["Title": .string("lost answer")])
        let local = try #require(try store.entities("Notes?$filter=Title eq 'lost answer'").first?["NoteID"])
        try await store.update(set: "Notes", key: [local], changes: ["Amount": Self.amount("5.25")])
        try await store.create(set: "Tags", entity: ["TagID": .string("blue"), "Label": .string("B")])
        let server = try await ServerProcess.start(store: served)
        let probe = ProbeBackend(server.url)
        probe.loseAnswer(of: 1)
        let lost = try await store.flush(backend: probe, batchSize: 10, reconcile: false)
        #expect(lost.stopped != nil && lost.succeeded == 0, "\(lost)")
        // The refresh brings the note the service made; the local copy waits for its create's answer.
        _ = try await store.refresh(backend: probe)
        #expect(try store.entities("Notes?$filter=Title eq 'lost answer'").count == 2)
        let again = try await store.flush(backend: probe, batchSize: 10, reconcile: false)
        #expect(again.stopped == nil && again.succeeded == 3 && again.archived == 0, "\(again)")
        let notes = try store.entities("Notes?$filter=Title eq 'lost answer'")
        #expect(notes.count == 1, "one note, not two: \(notes)")
        #expect(notes.first?["Amount"] == Self.amount("5.25"), "the change queued on top of the create")
        await probe.shutdown()
        #expect(await server.stop() == 0)
        try FlushFixture.expectInSync(store, served)
        #expect(try FlushFixture.served(served)["Notes"]?.count == 4, "the note was created once")
    }

    /// An update whose answer was lost, sent again and answered from the service's repeatability
    /// record after another client changed the entity: the replayed answer describes the entity
    /// as it was then, so the store reads it back and keeps it as it is now. Before, the copy kept
    /// its own value for good (no later delta names the entity) — found by the serve fleet test.
    @Test func aReplayedAnswerDoesNotHideALaterChangeByAnotherClient() async throws {
        let (served, store) = try await FlushFixture.pair(notes: true)
        try store.define(name: "notes", url: "Notes")
        let server = try await ServerProcess.start(store: served)
        let probe = ProbeBackend(server.url)
        _ = try await store.refresh(backend: probe)
        try await store.update(set: "Notes", key: [.int(1)], changes: ["Title": .string("mine")])
        probe.loseAnswer(of: 1)
        let lost = try await store.flush(backend: probe, batchSize: 10, reconcile: false)
        #expect(lost.stopped != nil, "\(lost)")
        // Another client renames it after the lost answer; this copy refreshes meanwhile.
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let http = HTTP(client: client, base: server.url)
        let etag = try await http.get("Notes(1)").header("ETag") ?? "*"
        let theirs = try await http.send(
            .PATCH, "Notes(1)", body: #"{"Title":"theirs"}"#, headers: [("If-Match", etag)])
        try await client.shutdown()
        #expect(theirs.status == 204, "\(theirs.text)")
        _ = try await store.refresh(backend: probe)
        let again = try await store.flush(backend: probe, batchSize: 10, reconcile: false)
        #expect(again.stopped == nil && again.succeeded == 1, "\(again)")
        #expect(try store.get(set: "Notes", key: [.int(1)])?["Title"] == .string("theirs"), "the entity as it is now")
        _ = try await store.refresh(backend: probe)
        await probe.shutdown()
        #expect(await server.stop() == 0)
        try FlushFixture.expectInSync(store, served)
    }

    /// The same for a create: the replayed 201 carries the entity as it was created; another
    /// client renamed it since, and the store keeps it as it is now.
    @Test func aReplayedCreateIsReadBackToo() async throws {
        let (served, store) = try await FlushFixture.pair(notes: true)
        try store.define(name: "tags", url: "Tags")
        let server = try await ServerProcess.start(store: served)
        let probe = ProbeBackend(server.url)
        _ = try await store.refresh(backend: probe)
        try await store.create(set: "Tags", entity: ["TagID": .string("mine"), "Label": .string("mine")])
        probe.loseAnswer(of: 1)
        _ = try await store.flush(backend: probe, batchSize: 10, reconcile: false)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let renamed = try await HTTP(client: client, base: server.url).send(
            .PATCH, "Tags('mine')", body: #"{"Label":"theirs"}"#)
        try await client.shutdown()
        #expect(renamed.status == 204, "\(renamed.text)")
        let again = try await store.flush(backend: probe, batchSize: 10, reconcile: false)
        #expect(again.stopped == nil && again.succeeded == 1, "\(again)")
        #expect(try store.get(set: "Tags", key: [.string("mine")])?["Label"] == .string("theirs"))
        await probe.shutdown()
        #expect(await server.stop() == 0)
        try FlushFixture.expectInSync(store, served)
    }

    /// The same with a child: a line whose key holds the note's local key moves onto the
    /// service's note, and a comment that refers to it follows.
    @Test func childrenOfTheLocalCopyFollowItOntoTheServicesCopy() async throws {
        let (served, store) = try await FlushFixture.pair(notes: true, optimize: false)
        try store.define(name: "notes", url: "Notes")
        try await store.create(set: "Notes", entity: ["Title": .string("parent")])
        let local = try #require(try store.entities("Notes?$filter=Title eq 'parent'").first?["NoteID"])
        try await store.create(set: "Comments", entity: ["NoteID": local, "Text": .string("child")])
        let server = try await ServerProcess.start(store: served)
        let probe = ProbeBackend(server.url)
        probe.loseAnswer(of: 1)
        _ = try await store.flush(backend: probe, batchSize: 10, reconcile: false)
        _ = try await store.refresh(backend: probe)
        let again = try await store.flush(backend: probe, batchSize: 10, reconcile: false)
        #expect(again.stopped == nil && again.archived == 0, "\(again)")
        let note = try #require(try store.entities("Notes?$filter=Title eq 'parent'").first)
        let comment = try #require(try store.entities("Comments?$filter=Text eq 'child'").first)
        #expect(comment["NoteID"] == note["NoteID"], "the comment refers to the service's note")
        await probe.shutdown()
        #expect(await server.stop() == 0)
        try FlushFixture.expectInSync(store, served)
    }

    /// An answer the store cannot take in (here: a create answered with another key than it
    /// sent, which `acknowledge` refuses) goes to ErrorArchive alone; the request after it in the
    /// same settlement is settled all the same. Before, the settlement threw and the flush stopped
    /// there on every attempt.
    @Test func anAnswerThatCannotBeTakenInIsArchivedAndTheRestSettles() async throws {
        let (_, store) = try await FlushFixture.pair(notes: true, optimize: false)
        try await store.create(set: "Tags", entity: ["TagID": .string("one"), "Label": .string("1")])
        try await store.create(set: "Tags", entity: ["TagID": .string("two"), "Label": .string("2")])
        let queue = store.requestQueue
        let round = try await store.entities.write { t in try Flush.prepare(t, queue: queue, options: .init()) }
        #expect(round.count == 2)
        let work: [(RequestRecord, Flush.Verdict)] = [
            (
                round[0].record,
                .success(image: ["TagID": .string("other"), "Label": .string("1")], etag: nil, reconciled: false)
            ),
            (round[1].record, .success(image: nil, etag: #"W/"t2""#, reconciled: false)),
        ]
        let settled = try await store.entities.write { t in try Flush.settle(t, queue: queue, work) }
        #expect(settled.succeeded == [round[1].record.id] && settled.archived == [round[0].record.id], "\(settled)")
        let errors = try FlushFixture.errors(store)
        #expect(errors.count == 1 && errors.first?["Code"] == .string("OfflineStore.AnswerNotApplied"), "\(errors)")
        #expect(try FlushFixture.queue(store).map(\.status) == [.error], "only the archived request is left")
        #expect(try store.entities("Tags('one')").count == 1, "the local entity is as it was")
        #expect(try store.entities("Tags('other')").isEmpty, "nothing of the answer that was not taken in")
    }
}
