import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore
import Storage

/// Issue 38, item 5: a create sends the properties the user set, not every declared property as
/// null — so a back end that dropped a property from its `$metadata` (an upgrade) still takes
/// the creates of an offline store made before it, which never set that property.
@Suite(.checksStores) struct ChangingBackEndTests {
    @Test func aCreateThatNeverSetADroppedPropertyStillGoes() async throws {
        let (served, _) = try await FlushFixture.pair(notes: true)
        // The offline copy's $metadata is the old one: notes had a Legacy property then.
        let old = FlushFixture.notesMetadata.replacingOccurrences(
            of: #"<Property Name="Title" Type="Edm.String" MaxLength="80"/>"#,
            with:
                #"<Property Name="Title" Type="Edm.String" MaxLength="80"/><Property Name="Legacy" Type="Edm.String"/>"#
        )
        #expect(old != FlushFixture.notesMetadata)
        let path = tempDir() + "/old-metadata"
        let store = try OfflineStore.create(at: path, metadata: Array(old.utf8), configuration: StoreConfiguration())
        StoreRegistry.current?.add(path)
        for (set, json) in FlushFixture.notesData { _ = try store.load(set: set, json: Array(json.utf8)) }
        try await store.create(set: "Notes", entity: ["Title": .string("made before the upgrade")])
        try await withServer(served) { http, server in
            // What the service says of a property it does not know, for the record.
            let refused = try await http.send(.POST, "Notes", body: #"{"Title":"x","Legacy":null}"#)
            #expect(refused.status == 400, "\(refused.text)")
            let report = try await store.flush(serviceRoot: server.url)
            #expect(report.succeeded == 1 && report.archived == 0, "\(report)")
        }
        let theirs = try OfflineStore.open(at: served, readOnly: true)
        #expect(try theirs.entities("Notes?$filter=Title eq 'made before the upgrade'").count == 1)
    }
}
