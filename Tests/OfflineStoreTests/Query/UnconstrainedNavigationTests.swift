import Foundation
import Testing
@testable import OfflineStore
import TestSupport

/// A navigation property without a referential constraint on either side (a many-to-many) is
/// not stored as links yet (issue 39, item 5): following or expanding it is an error that says
/// so — never an empty list or null, which would be silently wrong.
@Suite(.checksStores) struct UnconstrainedNavigationTests {
    static let metadata = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:DataServices>
            <Schema Namespace="T" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <EntityType Name="Doc">
                <Key><PropertyRef Name="Id"/></Key>
                <Property Name="Id" Type="Edm.Int32" Nullable="false"/>
                <NavigationProperty Name="Tags" Type="Collection(T.Tag)" Partner="Docs"/>
              </EntityType>
              <EntityType Name="Tag">
                <Key><PropertyRef Name="Id"/></Key>
                <Property Name="Id" Type="Edm.Int32" Nullable="false"/>
                <NavigationProperty Name="Docs" Type="Collection(T.Doc)" Partner="Tags"/>
              </EntityType>
              <EntityContainer Name="C">
                <EntitySet Name="Docs" EntityType="T.Doc"><NavigationPropertyBinding Path="Tags" Target="Tags"/></EntitySet>
                <EntitySet Name="Tags" EntityType="T.Tag"><NavigationPropertyBinding Path="Docs" Target="Docs"/></EntitySet>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    @Test func expandingOrFollowingItIsAnErrorNeverAnEmptyList() async throws {
        let store = try OfflineStore.create(at: tempDir() + "/m2m", metadata: Array(Self.metadata.utf8))
        try store.load(set: "Docs", entities: [["Id": .int(1)]])
        try store.load(set: "Tags", entities: [["Id": .int(1)]])
        for url in ["Docs?$expand=Tags", "Docs(1)?$expand=Tags", "Tags?$expand=*", "Docs(1)/Tags"] {
            #expect(throws: QueryError.self, "\(url)") { try store.entities(url) }
        }
        #expect(try store.entities("Docs").count == 1)
        let path = store.path
        try await withServer(path) { http, _ in
            let reply = try await http.get("Docs?$expand=Tags")
            #expect(reply.status == 400 && reply.text.contains("no referential constraint"), "\(reply.text)")
        }
    }
}
