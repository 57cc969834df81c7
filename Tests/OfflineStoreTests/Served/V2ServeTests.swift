import AsyncHTTPClient
import Foundation
import NIOHTTP1
import Testing
@testable import OfflineStore

/// `serve` over a store made from V2 `$metadata` speaks V2 ([MS-ODATA]) as SAP Gateway does:
/// verbose JSON, `$inlinecount`, `__next`, `__deferred`, V2 value forms and literals, MERGE and
/// `X-HTTP-Method`, V2's error envelope, `DataServiceVersion`, and Gateway's CSRF token. Here an
/// authority store (the V2 upstream the project's own tests and `demo` can run without Python);
/// pyodata drives an offline one in `PyODataServeTests`.
@Suite(.checksStores) struct V2ServeTests {
    static let metadata = """
        <edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx" xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">
         <edmx:DataServices m:DataServiceVersion="2.0">
          <Schema Namespace="V2S" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
           <EntityType Name="Customer">
            <Key><PropertyRef Name="CustomerID"/></Key>
            <Property Name="CustomerID" Type="Edm.String" Nullable="false" MaxLength="10"/>
            <Property Name="Name" Type="Edm.String"/>
            <NavigationProperty Name="Orders" Relationship="V2S.CustomerOrders" FromRole="Customer" ToRole="Order"/>
           </EntityType>
           <EntityType Name="Order">
            <Key><PropertyRef Name="OrderID"/></Key>
            <Property Name="OrderID" Type="Edm.String" Nullable="false" MaxLength="10"/>
            <Property Name="CustomerID" Type="Edm.String"/>
            <Property Name="Amount" Type="Edm.Decimal" Precision="15" Scale="2"/>
            <Property Name="Quantity" Type="Edm.Int64"/>
            <Property Name="CreatedAt" Type="Edm.DateTime" Precision="7"/>
            <NavigationProperty Name="Customer" Relationship="V2S.CustomerOrders" FromRole="Order" ToRole="Customer"/>
           </EntityType>
           <Association Name="CustomerOrders">
            <End Type="V2S.Customer" Multiplicity="1" Role="Customer"/>
            <End Type="V2S.Order" Multiplicity="*" Role="Order"/>
            <ReferentialConstraint>
             <Principal Role="Customer"><PropertyRef Name="CustomerID"/></Principal>
             <Dependent Role="Order"><PropertyRef Name="CustomerID"/></Dependent>
            </ReferentialConstraint>
           </Association>
           <EntityContainer Name="C" m:IsDefaultEntityContainer="true">
            <EntitySet Name="Customers" EntityType="V2S.Customer"/>
            <EntitySet Name="Orders" EntityType="V2S.Order"/>
            <AssociationSet Name="CustomerOrdersSet" Association="V2S.CustomerOrders">
             <End EntitySet="Customers" Role="Customer"/><End EntitySet="Orders" Role="Order"/>
            </AssociationSet>
           </EntityContainer>
          </Schema>
         </edmx:DataServices>
        </edmx:Edmx>
        """

    /// An authority V2 store: two customers, three orders.
    static func store() throws -> String {
        let dir = tempDir() + "/v2"
        let store = try OfflineStore.create(at: dir, metadata: Array(metadata.utf8))
        _ = try store.load(
            set: "Customers",
            json: Array(#"{"value":[{"CustomerID":"C1","Name":"One"},{"CustomerID":"C2","Name":"Two"}]}"#.utf8))
        _ = try store.load(
            set: "Orders",
            json: Array(
                """
                {"value":[
                 {"OrderID":"O1","CustomerID":"C1","Amount":"10.50","Quantity":"7","CreatedAt":"/Date(1700000000000)/"},
                 {"OrderID":"O2","CustomerID":"C1","Amount":"99.00","Quantity":"1","CreatedAt":"/Date(1600000000000)/"},
                 {"OrderID":"O3","CustomerID":"C2","Amount":"5.25","Quantity":"3","CreatedAt":"/Date(1710000000000)/"}]}
                """.utf8))
        return dir
    }

    static func d(_ reply: HTTP.Reply) -> [String: Any] { reply.object["d"] as? [String: Any] ?? [:] }
    static func results(_ reply: HTTP.Reply) -> [[String: Any]] { d(reply)["results"] as? [[String: Any]] ?? [] }

    @Test func readsAnswerInVerboseJSON() async throws {
        try await withServer(try Self.store()) { http, server in
            let root = try await http.get("")
            #expect(
                root.status == 200 && root.header("DataServiceVersion") == "2.0" && root.header("OData-Version") == nil)
            #expect(Self.d(root)["EntitySets"] as? [String] == ["Customers", "Orders"])

            let page = try await http.get("Orders?$inlinecount=allpages&$orderby=OrderID&$top=1")
            #expect(page.header("Content-Type") == "application/json")
            #expect(Self.d(page)["__count"] as? String == "3", "V2's count is a string: \(page.text)")
            let o1 = try #require(Self.results(page).first)
            let meta = try #require(o1["__metadata"] as? [String: Any])
            #expect(meta["uri"] as? String == server.url + "Orders('O1')" && meta["type"] as? String == "V2S.Order")
            #expect((meta["etag"] as? String)?.hasPrefix("W/\"") == true)
            #expect(o1["Amount"] as? String == "10.50" && o1["Quantity"] as? String == "7")
            #expect(o1["CreatedAt"] as? String == "/Date(1700000000000)/")
            let deferred = (o1["Customer"] as? [String: Any])?["__deferred"] as? [String: Any]
            #expect(deferred?["uri"] as? String == server.url + "Orders('O1')/Customer")

            // Server-driven paging: __next, followed to the end.
            let first = try await http.get("Orders?$orderby=OrderID", headers: [("Prefer", "odata.maxpagesize=2")])
            let next = try #require(Self.d(first)["__next"] as? String, "\(first.text)")
            let rest = try await http.get(next)
            #expect(Self.results(first).count + Self.results(rest).count == 3 && Self.d(rest)["__next"] == nil)

            let expanded = try await http.get("Customers('C1')?$expand=Orders")
            let orders = (Self.d(expanded)["Orders"] as? [String: Any])?["results"] as? [[String: Any]]
            #expect(orders?.count == 2, "\(expanded.text)")
            let single = try await http.get("Orders('O3')?$expand=Customer&$select=OrderID,Customer")
            #expect((Self.d(single)["Customer"] as? [String: Any])?["Name"] as? String == "Two", "\(single.text)")

            // V2 literals in $filter.
            let recent = try await http.get(
                "Orders?$filter=CreatedAt gt datetime'2023-11-01T00:00:00' and Amount gt 10M&$select=OrderID")
            #expect(Self.results(recent).compactMap { $0["OrderID"] as? String } == ["O1"], "\(recent.text)")
            let count = try await http.get("Orders/$count")
            #expect(count.text == "3")

            // $links: the URIs of the related entities.
            let links = try await http.get("Customers('C1')/$links/Orders?$orderby=OrderID desc")
            let uris = (Self.results(links)).compactMap { $0["uri"] as? String }
            #expect(uris == [server.url + "Orders('O2')", server.url + "Orders('O1')"], "\(links.text)")
            let one = try await http.get("Orders('O3')/$links/Customer")
            #expect(Self.d(one)["uri"] as? String == server.url + "Customers('C2')", "\(one.text)")
            #expect(try await http.get("Orders('O3')/$links/Nope").status == 404)
            #expect(try await http.get("Customers('C1')/$links/Orders?$expand=Customer").status == 400)
            let token = try await http.get("", headers: [("X-CSRF-Token", "Fetch")]).header("X-CSRF-Token") ?? ""
            let unlink = try await http.send(
                .DELETE, "Orders('O3')/$links/Customer", headers: [("X-CSRF-Token", token)])
            // A navigation with a referential constraint is changed through its foreign key.
            #expect(unlink.status == 400 && unlink.text.contains("foreign key"), "\(unlink.text)")

            let missing = try await http.get("Orders('NOPE')")
            let error = missing.object["error"] as? [String: Any]
            #expect(missing.status == 404 && (error?["message"] as? [String: Any])?["lang"] as? String == "en")
            #expect(((error?["message"] as? [String: Any])?["value"] as? String)?.isEmpty == false, "\(missing.text)")
        }
    }

    @Test func writesNeedTheCSRFTokenAndTakeV2Bodies() async throws {
        let path = try Self.store()
        try await withServer(path) { http, server in
            let body = #"{"OrderID":"O9","CustomerID":"C2","Amount":"1.25","CreatedAt":"/Date(1700000000000)/"}"#
            let refused = try await http.send(.POST, "Orders", body: body)
            #expect(refused.status == 403 && refused.header("X-CSRF-Token") == "Required")
            let fetched = try await http.get("", headers: [("X-CSRF-Token", "Fetch")])
            let token = try #require(fetched.header("X-CSRF-Token"))
            let wrong = try await http.send(.POST, "Orders", body: body, headers: [("X-CSRF-Token", token + "x")])
            #expect(wrong.status == 403)
            let auth = [("X-CSRF-Token", token)]

            let made = try await http.send(
                .POST, "Orders",
                body: #"{"__metadata":{"type":"V2S.Order"},"OrderID":"O9","Amount":"1.25","Quantity":"4","#
                    + #""CreatedAt":"/Date(1700000000000)/","Customer":{"__metadata":{"uri":"Customers('C2')"}}}"#,
                headers: auth)
            #expect(made.status == 201, "\(made.text)")
            #expect(made.header("Location") == server.url + "Orders('O9')")
            #expect(Self.d(made)["CustomerID"] as? String == "C2", "a V2 link binds the foreign key: \(made.text)")
            #expect(Self.d(made)["Quantity"] as? String == "4")

            let merged = try await http.send(
                HTTPMethod(rawValue: "MERGE"), "Orders('O9')", body: #"{"Amount":"2.50"}"#, headers: auth)
            #expect(merged.status == 204, "\(merged.text)")
            let tunneled = try await http.send(
                .POST, "Orders('O9')", body: #"{"Quantity":"5"}"#, headers: auth + [("X-HTTP-Method", "MERGE")])
            #expect(tunneled.status == 204, "\(tunneled.text)")
            let after = Self.d(try await http.get("Orders('O9')"))
            #expect(after["Amount"] as? String == "2.50" && after["Quantity"] as? String == "5")
            let badTunnel = try await http.send(
                .POST, "Orders('O9')", body: "{}", headers: auth + [("X-HTTP-Method", "GET")])
            #expect(badTunnel.status == 400)
            let badValue = try await http.send(
                .POST, "Orders", body: #"{"OrderID":"O8","Quantity":"x"}"#, headers: auth)
            #expect(badValue.status == 400 && (badValue.object["error"] as? [String: Any])?["message"] is [String: Any])

            #expect(try await http.send(.DELETE, "Orders('O9')", headers: auth).status == 204)
            #expect(try await http.get("Orders('O9')").status == 404)
        }
        // The authority applied them (no queue): O9 was made and deleted; the others stay.
        #expect(try OfflineStore.open(at: path, readOnly: true).count(set: "Orders") == 3)
        try await withServer(path, extra: ["--csrf", "off"]) { http, _ in
            let made = try await http.send(.POST, "Orders", body: #"{"OrderID":"O7"}"#)
            #expect(made.status == 201, "--csrf off: \(made.text)")
        }
        let bad = try await CLI.run(["serve", "--store", path, "--port", "0", "--csrf", "maybe"])
        #expect(bad.status != 0 && bad.stderr.contains("--csrf"))
    }
}
