import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore
import Queue
import Storage
import Sync

/// Issue 36, item 4: deep insert. A note created with its comments and lines inline is stored
/// with local keys in one transaction, readable and queryable at once; it is one queued POST; a
/// change of any of its entities before the flush merges into its create; the flush sends it as
/// one POST with the children inline, and maps the service's keys back onto every entity. `serve`
/// takes deep inserts in both roles and both dialects. Every store passes `check`.
@Suite(.checksStores) struct DeepInsertTests {
    /// A note with two comments and one line, inline.
    static let note = NewEntity(
        ["Title": .string("deep header")],
        related: [
            "Comments": [
                NewEntity(["Text": .string("first comment")]), NewEntity(["Text": .string("second comment")]),
            ],
            "Lines": [NewEntity(["LineNo": .int(1), "Text": .string("deep line")])],
        ])

    @Test func aDeepInsertIsStoredAtOnceAndQueuedAsOneTransaction() async throws {
        let (_, store) = try await FlushFixture.pair(notes: true)
        let receipts = try await store.create(set: "Notes", deep: Self.note)
        #expect(receipts.count == 4)
        let header = try #require(
            try store.entities("Notes?$filter=Title eq 'deep header'&$expand=Comments,Lines").first)
        let noteID = try #require(header["NoteID"])
        #expect(noteID.isLocalKey, "a key the service assigns: local until the flush")
        #expect(try store.entities("Comments?$filter=NoteID eq \(noteID.literal)").count == 2)
        #expect(try store.entities("Lines?$filter=NoteID eq \(noteID.literal)").first?["Text"] == .string("deep line"))
        var text = ""
        try store.query("Notes?$filter=Title eq 'deep header'&$expand=Comments,Lines") { text += $0 }
        #expect(text.contains("first comment") && text.contains("deep line"), "expanded: \(text)")
        let queued = try store.entities("RequestQueue")
        #expect(queued.count == 4 && queued.allSatisfy { $0["DeepInsert"] == .bool(true) })
        #expect(Set(queued.map { $0["TransactionID"] }).count == 1, "one transaction")

        // Later changes of its entities, outside any transaction, merge into their creates.
        let comment = try #require(receipts[1].entity?["CommentID"])
        try await store.update(set: "Comments", key: [comment], changes: ["Text": .string("changed comment")])
        #expect(try store.pendingRequestCount() == 4, "merged, not queued")
        let second = try #require(receipts[2].entity?["CommentID"])
        try await store.delete(set: "Comments", key: [second])
        #expect(try store.pendingRequestCount() == 3, "a create then its delete: both gone")
        #expect(try store.check().problems.isEmpty)
    }

    /// Read back, changed, flushed once as one POST, the service's keys mapped onto every entity,
    /// and a refresh of the store's defining requests brings back what it holds.
    @Test func aDeepInsertGoesAsOnePOSTAndTheServicesKeysMapBack() async throws {
        let (served, _) = try await FlushFixture.pair(notes: true)
        let store = try FlushFixture.notesCopy(
            StoreConfiguration(
                definingRequests: FlushFixture.notesSets.map { DefiningRequest(name: $0, url: $0) }),
            name: "offline-refreshed")
        let receipts = try await store.create(set: "Notes", deep: Self.note)
        try await store.update(
            set: "Lines", key: try #require(receipts[3].entity.map { [$0["NoteID"]!, $0["LineNo"]!] }),
            changes: ["Text": .string("changed line")])
        let server = try await ServerProcess.start(store: served)
        let probe = ProbeBackend(server.url)
        let report = try await store.flush(backend: probe, batchSize: 10)
        await probe.shutdown()
        #expect(report.succeeded == 4 && report.archived == 0 && report.roundTrips == 1, "\(report)")
        let sent = probe.batches.flatMap { $0 }
        #expect(sent.count == 1 && sent.first?.url == "Notes", "one POST: \(sent.map(\.url))")
        let body = try JSONSerialization.jsonObject(with: Data(sent.first?.body ?? [])) as? [String: Any]
        #expect((body?["Comments"] as? [Any])?.count == 2 && (body?["Lines"] as? [Any])?.count == 1, "inline")
        let mine = try FlushFixture.contents(store)
        let refresh = try await store.refresh(serviceRoot: server.url)
        #expect(await server.stop() == 0)
        #expect(refresh.requests.count == 4, "\(refresh)")
        #expect(try FlushFixture.contents(store) == mine, "the refresh brought back what the store held")
        let theirs = try OfflineStore.open(at: served, readOnly: true)
        let note = try #require(try theirs.entities("Notes?$filter=Title eq 'deep header'").first?["NoteID"])
        #expect(try theirs.entities("Comments?$filter=NoteID eq \(note.literal)").count == 2)
        #expect(
            try theirs.entities("Lines?$filter=NoteID eq \(note.literal)").first?["Text"] == .string("changed line"))
        #expect(try store.entities("Comments?$filter=NoteID eq \(note.literal)").count == 2, "keys mapped")
        #expect(try store.requestHistory().filter { $0.outcome == "applied" }.count == 4)
        try FlushFixture.expectInSync(store, served)
    }

    /// The service refuses one of the entities (a line whose key it holds already): nothing of the
    /// deep insert is on the service, and all of it is in the ErrorArchive, the note with the
    /// service's reason and the others caused by it; giving it up removes it all here.
    @Test func oneRefusedEntityLeavesNothingOfTheDeepInsertOnTheService() async throws {
        let (served, store) = try await FlushFixture.pair(notes: true)
        try await store.create(
            set: "Notes",
            deep: NewEntity(
                ["NoteID": .int(77), "Title": .string("given key")],
                related: ["Lines": [NewEntity(["LineNo": .int(1)]), NewEntity(["LineNo": .int(2)])]]))
        // Meanwhile the service holds a line of note 77 (no note: its foreign key is not checked).
        _ = try await OfflineStore.open(at: served).create(
            set: "Lines", entity: ["NoteID": .int(77), "LineNo": .int(2), "Text": .string("theirs")])
        let before = try FlushFixture.served(served)
        let server = try await ServerProcess.start(store: served)
        let report = try await store.flush(serviceRoot: server.url, batchSize: 10)
        #expect(await server.stop() == 0)
        #expect(report.succeeded == 0 && report.archived == 3, "\(report)")
        #expect(try FlushFixture.served(served) == before, "nothing of it on the service")
        let errors = try FlushFixture.errors(store)
        let root = try #require(errors.first { $0["CausedBy"] == nil })
        #expect(errors.count == 3 && root["HTTPStatusCode"] == .int(409), "\(errors)")
        try store.resolveAllErrors()
        #expect(try store.entities("Notes?$filter=NoteID eq 77").isEmpty)
        #expect(try store.entities("Lines?$filter=NoteID eq 77").isEmpty)
    }

    /// A transaction of a note and a comment under it, made as separate creates, to a service that
    /// does not resolve Content-ID references but takes deep inserts (configured): it goes as one
    /// deep insert instead of being refused.
    @Test func aTransactionGoesAsADeepInsertWhereConfigured() async throws {
        let (served, _) = try await FlushFixture.pair(notes: true)
        var configuration = StoreConfiguration()
        configuration.contentIDReferences = false
        configuration.deepInsert = true
        let store = try FlushFixture.notesCopy(configuration, name: "offline-deep")
        try await AtomicTransactionTests.noteWithChildren(store)
        let server = try await ServerProcess.start(store: served)
        let probe = ProbeBackend(server.url)
        let report = try await store.flush(backend: probe, batchSize: 10)
        await probe.shutdown()
        #expect(await server.stop() == 0)
        #expect(report.succeeded == 3 && report.archived == 0 && report.roundTrips == 1, "\(report)")
        #expect(probe.batches.flatMap { $0 }.map(\.url) == ["Notes"])
        try FlushFixture.expectInSync(store, served)
    }

    /// Over V2 (multipart `$batch`, `{"results": [...]}` in the answer) to `serve` in its V2
    /// dialect: an order whose number the service assigns and two items whose numbers it assigns.
    @Test func aV2DeepInsertReachesServeAndItsKeysMapBack() async throws {
        let dir = tempDir()
        let metadata = Array(AtomicTransactionTests.v2Metadata.utf8)
        let served = dir + "/served-v2"
        _ = try OfflineStore.create(at: served, metadata: metadata, configuration: StoreConfiguration())
        let store = try OfflineStore.create(
            at: dir + "/offline-v2", metadata: metadata, configuration: StoreConfiguration())
        StoreRegistry.current?.add(served)
        StoreRegistry.current?.add(dir + "/offline-v2")
        let order = try store.newEntity(
            set: "Orders", json: Array(#"{"Note":"v2 deep","Items":{"results":[{"Text":"one"},{"Text":"two"}]}}"#.utf8))
        try await store.create(set: "Orders", deep: order)
        let server = try await ServerProcess.start(store: served)
        let report = try await store.flush(serviceRoot: server.url, batchSize: 10)
        #expect(await server.stop() == 0)
        #expect(report.succeeded == 3 && report.roundTrips == 1 && report.archived == 0, "\(report)")
        let theirs = try OfflineStore.open(at: served, readOnly: true)
        let orderID = try #require(try theirs.entities("Orders").first?["OrderID"])
        let items = try theirs.entities("Items?$orderby=Text")
        #expect(items.map { $0["Text"] } == [.string("one"), .string("two")])
        #expect(items.allSatisfy { $0["OrderID"] == orderID })
        #expect(try store.entities("Items?$orderby=Text").map { $0["ItemID"] } == items.map { $0["ItemID"] })
        #expect(try store.entities("Orders").first?["OrderID"] == orderID)
    }

    /// `serve` takes a deep insert directly (authority, V4): 201 with the children expanded, all
    /// or nothing; an offline store's `serve` queues it as one deep insert.
    @Test func serveTakesDeepInsertsInBothRoles() async throws {
        let (served, _) = try await FlushFixture.pair(notes: true)
        let offline = try FlushFixture.notesCopy(
            StoreConfiguration(serviceRoot: "http://127.0.0.1:9/"), name: "offline-served")
        let body = #"{"Title":"served deep","Comments":[{"Text":"c1"}],"Lines":[{"LineNo":5,"Text":"l5"}]}"#
        try await withServer(served) { http, _ in
            let made = try await http.send(.POST, "Notes", body: body)
            #expect(made.status == 201, "\(made.text)")
            let comments = made.object["Comments"] as? [[String: Any]]
            #expect(comments?.first?["Text"] as? String == "c1" && comments?.first?["NoteID"] != nil)
            let bad = try await http.send(
                .POST, "Notes", body: #"{"Title":"half","Lines":[{"LineNo":1},{"LineNo":1}]}"#)
            #expect(bad.status == 409, "\(bad.status) \(bad.text)")
        }
        let theirs = try OfflineStore.open(at: served, readOnly: true)
        #expect(try theirs.entities("Notes?$filter=Title eq 'half'").isEmpty, "all or nothing")
        #expect(try theirs.entities("Lines?$filter=Text eq 'l5'").count == 1)
        let path = offline.path
        #expect(offline.isOffline)
        try await withServer(path) { http, _ in
            let made = try await http.send(.POST, "Notes", body: body)
            #expect(made.status == 201, "\(made.text)")
        }
        let queued = try OfflineStore.open(at: path, readOnly: true).entities("RequestQueue")
        #expect(queued.count == 3 && queued.allSatisfy { $0["DeepInsert"] == .bool(true) })
    }
}

extension Value {
    /// Whether this is a key the store made locally (`~1`, or a negative integer).
    var isLocalKey: Bool {
        switch self {
        case .int(let i): i < 0
        case .string(let s): s.hasPrefix("~")
        default: false
        }
    }

    /// As a `$filter` literal.
    var literal: String {
        switch self {
        case .string(let s): "'\(s)'"
        case .int(let i): "\(i)"
        default: "\(self)"
        }
    }
}
