import Foundation
import Testing
@testable import OfflineStore
@testable import Storage
import TestSupport

/// Operations in the schema (issue 40, item 1): V4 actions and functions, bound and unbound, with
/// their imports and overloads; V2 function imports with `m:HttpMethod` and `sap:action-for` —
/// parsed, typed, and listed by `stats`.
@Suite(.checksStores) struct OperationSchemaTests {
    static let v4 = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:DataServices>
            <Schema Namespace="Lib" Alias="L" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <EntityType Name="Book">
                <Key><PropertyRef Name="Id"/></Key>
                <Property Name="Id" Type="Edm.Int32" Nullable="false"/>
                <Property Name="Due" Type="Edm.Date"/>
              </EntityType>
              <Action Name="Renew" IsBound="true">
                <Parameter Name="book" Type="L.Book" Nullable="false"/>
                <Parameter Name="Days" Type="Edm.Int32" Nullable="false"/>
                <ReturnType Type="Lib.Book"/>
              </Action>
              <Action Name="Renew" IsBound="true">
                <Parameter Name="books" Type="Collection(Lib.Book)"/>
                <Parameter Name="Days" Type="Edm.Int32"/>
              </Action>
              <Action Name="ResetAll"/>
              <Function Name="Overdue">
                <Parameter Name="Since" Type="Edm.Date"/>
                <ReturnType Type="Collection(Lib.Book)"/>
              </Function>
              <Function Name="Odd"><ReturnType Type="Vocabulary.Unknown"/></Function>
              <EntityContainer Name="C">
                <EntitySet Name="Books" EntityType="Lib.Book"/>
                <ActionImport Name="ResetAll" Action="Lib.ResetAll"/>
                <FunctionImport Name="OverdueBooks" Function="L.Overdue" EntitySet="Books"/>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    static let v2 = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx"
          xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"
          xmlns:sap="http://www.sap.com/Protocols/SAPData">
          <edmx:DataServices m:DataServiceVersion="2.0">
            <Schema Namespace="GW" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
              <EntityType Name="SalesOrder">
                <Key><PropertyRef Name="SalesOrderID"/></Key>
                <Property Name="SalesOrderID" Type="Edm.String" Nullable="false" MaxLength="10"/>
              </EntityType>
              <EntityContainer Name="C" m:IsDefaultEntityContainer="true">
                <EntitySet Name="SalesOrderSet" EntityType="GW.SalesOrder"/>
                <FunctionImport Name="SalesOrder_Confirm" ReturnType="GW.SalesOrder" EntitySet="SalesOrderSet"
                  m:HttpMethod="POST" sap:action-for="GW.SalesOrder">
                  <Parameter Name="SalesOrderID" Type="Edm.String" Mode="In" MaxLength="10"/>
                </FunctionImport>
                <FunctionImport Name="LowStock" ReturnType="Collection(Edm.String)" m:HttpMethod="GET">
                  <Parameter Name="Below" Type="Edm.Int32" Mode="In" Nullable="false"/>
                </FunctionImport>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    @Test func v4ActionsAndFunctionsAreReadWithTheirOverloadsAndImports() throws {
        let schema = try CSDL.parse(Self.v4)
        #expect(schema.operations.count == 5)
        let renews = schema.operations(named: "Lib.Renew")
        #expect(renews.count == 2)
        let one = try #require(schema.operation(named: "Renew", boundTo: "Lib.Book"))
        #expect(one.kind == .action && !one.bindingIsCollection && one.httpMethod == "POST")
        #expect(one.parameters.map(\.name) == ["Days"] && one.parameters[0].type.primitive == .int32)
        #expect(!one.parameters[0].nullable && one.returnType?.name == "Lib.Book")
        #expect(renews.contains { $0.bindingIsCollection && $0.returnType == nil })
        let reset = try #require(schema.operations(named: "ResetAll").first)
        #expect(!reset.isBound && reset.importName == "ResetAll" && reset.parameters.isEmpty)
        let overdue = try #require(schema.operations(named: "OverdueBooks").first)
        #expect(overdue.kind == .function && overdue.httpMethod == "GET" && overdue.entitySet == "Books")
        #expect(overdue.returnType?.isCollection == true && overdue.returnType?.name == "Lib.Book")
        #expect(overdue.parameters.first?.type.primitive == .date)
        // A type the document does not declare is kept as named, not a reason to refuse the service.
        #expect(schema.operations(named: "Odd").first?.returnType?.name == "Vocabulary.Unknown")
        #expect(one.signature == "action Lib.Renew bound to Lib.Book(Days: Edm.Int32) -> Lib.Book")
    }

    @Test func v2FunctionImportsAreReadWithTheirMethodAndActionFor() throws {
        let schema = try CSDL.parse(Self.v2)
        let confirm = try #require(schema.operations(named: "SalesOrder_Confirm").first)
        #expect(confirm.kind == .action && confirm.httpMethod == "POST" && confirm.bindingType == "GW.SalesOrder")
        #expect(confirm.parameters.first?.maxLength == 10 && confirm.entitySet == "SalesOrderSet")
        let low = try #require(schema.operations(named: "LowStock").first)
        #expect(low.kind == .function && low.httpMethod == "GET" && !low.isBound)
        #expect(low.returnType == ServiceOperation.TypeName(name: "Edm.String", isCollection: true))
        #expect(low.parameters.first.map { !$0.nullable } == true)
    }

    @Test func statsListsTheOperations() async throws {
        let dir = tempDir() + "/ops"
        let path = dir + "/metadata.xml"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try Self.v4.write(toFile: path, atomically: true, encoding: .utf8)
        let made = try await CLI.run(["init", "--store", dir + "/s", "--metadata", path])
        #expect(made.status == 0, "\(made.stderr)")
        let stats = try await CLI.run(["stats", "--store", dir + "/s"])
        #expect(stats.status == 0, "\(stats.stderr)")
        #expect(
            stats.stdout.contains("operation action Lib.Renew bound to Lib.Book(Days: Edm.Int32) -> Lib.Book, POST"))
        #expect(
            stats.stdout.contains(
                "operation function Lib.Overdue(Since: Edm.Date) -> Collection(Lib.Book) as OverdueBooks, GET"))
    }
}
