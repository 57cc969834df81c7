import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore
import Queue
import Storage

/// Issue 36, item 3: SAP's `OfflineOData.RemoveAfterUpload`. A create made with it is sent like any
/// other; once the service has applied it (and nothing else is queued for the entity), the entity
/// leaves the local store; a defining request that covers it brings the service's copy back on the
/// next refresh. Every store passes `check` after each test.
@Suite(.checksStores) struct RemoveAfterUploadTests {
    @Test func anEntityCreatedWithItLeavesTheStoreOnceApplied() async throws {
        let (served, store) = try await FlushFixture.pair(notes: true)
        let gone = ChangeOptions(removeAfterUpload: true)
        let tag = try await store.create(
            set: "Tags", entity: ["TagID": .string("log"), "Label": .string("sent, not kept")], options: gone)
        // A note whose key the service assigns, changed before the flush: the change merges into it.
        let note = try await store.create(set: "Notes", entity: ["Title": .string("reading")], options: gone)
        let local = try #require(note.entity?["NoteID"])
        _ = try await store.update(set: "Notes", key: [local], changes: ["Title": .string("reading 2")])
        let kept = try await store.create(set: "Tags", entity: ["TagID": .string("kept"), "Label": .string("k")])
        #expect(try store.get(set: "Tags", key: [.string("log")]) != nil, "readable until it is uploaded")
        let tagRequest = try #require(tag.requestID)
        let row = try #require(try store.entities("RequestQueue?$filter=RequestID eq \(tagRequest)").first)
        #expect(row["RemoveAfterUpload"] == .bool(true))

        let server = try await ServerProcess.start(store: served)
        let report = try await store.flush(serviceRoot: server.url, batchSize: 10)
        #expect(report.succeeded == 3 && report.archived == 0, "\(report)")
        #expect(try store.get(set: "Tags", key: [.string("log")]) == nil, "removed once applied")
        #expect(try store.entities("Notes?$filter=startswith(Title,'reading')").isEmpty)
        #expect(try store.get(set: "Tags", key: [.string("kept")]) != nil, "a plain create stays")
        let theirs = try FlushFixture.served(served)
        #expect(theirs["Tags"]?.contains { $0["TagID"] == .string("log") } == true, "on the service")
        #expect(theirs["Notes"]?.contains { $0["Title"] == .string("reading 2") } == true, "with the change merged")
        let outcome = try #require(try store.outcome(ofRequest: tagRequest))
        #expect(outcome.outcome == "applied" && outcome.message?.contains("RemoveAfterUpload") == true)
        _ = kept
        // A defining request that covers it brings the service's copy back.
        try store.define(name: "tags", url: "Tags")
        _ = try await store.refresh(serviceRoot: server.url)
        #expect(await server.stop() == 0)
        #expect(try store.get(set: "Tags", key: [.string("log")])?["Label"] == .string("sent, not kept"))
    }

    /// Over `serve` (the sidecar), the header sets it on a create and is refused on anything else.
    @Test func theSidecarTakesTheHeaderOnACreate() async throws {
        let (_, store) = try await FlushFixture.pair(notes: true)
        try store.define(name: "tags", url: "Tags")  // an offline store: serve queues its writes
        let path = store.path
        _ = consume store
        try await withServer(path) { http, _ in
            let made = try await http.send(
                .POST, "Tags", body: #"{"TagID":"t1","Label":"x"}"#,
                headers: [("OfflineOData.RemoveAfterUpload", "true")])
            #expect(made.status == 201, "\(made.text)")
            let queued = try await http.get("RequestQueue?$filter=EntitySet eq 'Tags'")
            let rows = queued.object["value"] as? [[String: Any]] ?? []
            #expect(rows.first?["RemoveAfterUpload"] as? Bool == true, "\(queued.text)")
            let patch = try await http.send(
                .PATCH, "Tags('t1')", body: #"{"Label":"y"}"#, headers: [("OfflineOData.RemoveAfterUpload", "true")])
            #expect(patch.status == 400)
        }
    }
}
