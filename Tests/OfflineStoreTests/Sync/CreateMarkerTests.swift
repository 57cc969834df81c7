import TestSupport
import Foundation
import Testing
@testable import OfflineStore
import Queue
import Remote
import Storage
import Sync

/// Issue 36, item 2: a create whose key the service assigns carries its identity in the set's
/// marker property (`createMarkers`); sent again after its answer was lost, it is first looked up
/// by that marker, and found, settled with the entity the service holds — not sent a second time.
/// Every store passes `check` after each test.
@Suite(.checksStores) struct CreateMarkerTests {
    /// An offline copy of the notes fixture whose `Notes` carry their marker in `Title`.
    static func markedStore(_ markers: [String: String] = ["Notes": "Title"]) throws -> OfflineStore {
        var configuration = StoreConfiguration()
        configuration.createMarkers = markers
        return try FlushFixture.notesCopy(configuration, name: "marked")
    }

    @Test func aCreateWhoseAnswerWasLostIsFoundByItsMarkerAndNotSentAgain() async throws {
        let (served, _) = try await FlushFixture.pair(notes: true)
        let store = try Self.markedStore()
        let created = try await store.create(
            set: "Notes", entity: ["Title": .string("mine"), "Amount": .decimal(EDMDecimal("1")!)])
        let id = try #require(created.requestID)
        let server = try await ServerProcess.start(store: served)
        let probe = ProbeBackend(server.url)
        probe.loseAnswer(of: 1)
        let lost = try await store.flush(backend: probe, batchSize: 10, reconcile: false)
        #expect(lost.stopped != nil && lost.succeeded == 0, "\(lost)")
        // The service made the note, with the request's identity in its Title.
        let queue = store.requestQueue
        let marker = try #require(try store.entities.read { t in try queue.record(t, id: id) })
        let hex = String(marker.repeatabilityID.description.filter { $0 != "-" }.uppercased())
        let sentBody = try #require(probe.batches.first?.first?.body)
        #expect(String(decoding: sentBody, as: UTF8.self).contains(hex), "the marker went with the create")
        let again = try await store.flush(backend: probe, batchSize: 10, reconcile: false)
        #expect(again.stopped == nil && again.succeeded == 1 && again.reconciled == 1, "\(again)")
        #expect(again.inDoubt.isEmpty, "found, not in doubt: \(again.inDoubt)")
        #expect(probe.batches.count == 1, "the create was not sent a second time")
        await probe.shutdown()
        #expect(await server.stop() == 0)
        let theirs = try FlushFixture.served(served)["Notes"] ?? []
        #expect(theirs.filter { $0["Title"] == .string(hex) }.count == 1, "one note on the service")
        let outcome = try #require(try store.outcome(ofRequest: id))
        #expect(outcome.outcome == "found applied" && outcome.serverKey != nil, "\(outcome)")
        let mine = try store.entities("Notes?$filter=Title eq '\(hex)'")
        #expect(mine.count == 1 && mine.first?["NoteID"] != Value.int(-1), "\(mine)")
    }

    /// A create sent once, answered: its marker is set on the service and locally; no look-up.
    @Test func aCreateAnsweredTheFirstTimeIsNotLookedUp() async throws {
        let (served, _) = try await FlushFixture.pair(notes: true)
        let store = try Self.markedStore()
        let created = try await store.create(set: "Notes", entity: ["Title": .string("mine")])
        let server = try await ServerProcess.start(store: served)
        let report = try await store.flush(serviceRoot: server.url, batchSize: 10)
        #expect(await server.stop() == 0)
        #expect(report.succeeded == 1 && report.reconciled == 0, "\(report)")
        let id = try #require(created.requestID)
        let outcome = try #require(try store.outcome(ofRequest: id))
        #expect(outcome.outcome == "applied")
        let key = try #require(outcome.serverKey.flatMap { Int64($0) })
        let note = try #require(try store.get(set: "Notes", key: [.int(key)]))
        guard case .string(let title)? = note["Title"] else { Issue.record("no Title: \(note)"); return }
        #expect(title.count == 32 && title.allSatisfy(\.isHexDigit), "the marker replaced the Title: \(title)")
    }

    @Test(.runsOffThePool) func markersThatCannotCarryAnIdentityAreRefusedAtInit() throws {
        let cases: [([String: String], String)] = [
            (["Nope": "Title"], "not an entity set"),
            (["Notes": "Nope"], "has no property"),
            (["Notes": "NoteID"], "key property"),
            (["Notes": "Amount"], "not an Edm.String or an Edm.Guid"),
        ]
        for (markers, why) in cases {
            var configuration = StoreConfiguration()
            configuration.createMarkers = markers
            let path = tempDir() + "/bad-marker"
            #expect {
                try OfflineStore.create(
                    at: path, metadata: Array(FlushFixture.notesMetadata.utf8), configuration: configuration)
            } throws: { "\($0)".contains(why) }
            #expect(!FileManager.default.fileExists(atPath: path + "/data.mdb"), "nothing left behind")
        }
        #expect(throws: EntityError.self) {
            try StoreConfiguration(json: Array(#"{"createMarkers":{"Notes":1}}"#.utf8))
        }
        #expect(throws: EntityError.self) { try StoreConfiguration(json: Array(#"{"createMarkers":["Notes"]}"#.utf8)) }
    }

    /// The sets whose creates may be applied twice are named (`init` and `define` warn with them).
    @Test(.runsOffThePool) func setsWhoseKeyTheServiceAssignsWithoutAMarkerAreNamed() throws {
        var configuration = StoreConfiguration(serviceRoot: "http://127.0.0.1:9/")
        let path = tempDir() + "/unmarked"
        let plain = try OfflineStore.create(
            at: path, metadata: Array(FlushFixture.notesMetadata.utf8), configuration: configuration)
        StoreRegistry.current?.add(path)
        #expect(plain.setsWithoutCreateMarker == ["Notes", "Comments"])
        configuration.createMarkers = ["Notes": "Title"]
        let marked = try OfflineStore.create(
            at: path + "2", metadata: Array(FlushFixture.notesMetadata.utf8), configuration: configuration)
        StoreRegistry.current?.add(path + "2")
        #expect(marked.setsWithoutCreateMarker == ["Comments"])
        let warning = try #require(OfflineStore.createMarkerWarning(marked.setsWithoutCreateMarker))
        #expect(warning.contains("Comments") && warning.contains("createMarkers"))
    }
}
