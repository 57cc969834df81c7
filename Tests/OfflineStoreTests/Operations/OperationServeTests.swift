import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore
@testable import Queue
@testable import Storage
import TestSupport

/// Operations through `offline-store serve` (issue 40, item 4): an offline copy queues the
/// actions its clients call and answers 202 (accepted, not executed); a function is answered
/// from the local query the configuration maps it to, else 501 saying it needs the service; an
/// authority runs no business logic, so its `$metadata` advertises no operation and a call is
/// answered 501 saying why.
@Suite(.checksStores, .runsOffThePool) struct OperationServeTests {
    /// Every operation a served `$metadata` advertises, by name.
    static func advertised(_ metadata: String) -> [String] {
        let pattern = try! NSRegularExpression(
            pattern: "<(?:\\w+:)?(Action|Function|ActionImport|FunctionImport)\\b[^>]*\\bName=\"([^\"]+)\"")
        return pattern.matches(in: metadata, range: NSRange(metadata.startIndex..., in: metadata)).compactMap {
            Range($0.range(at: 2), in: metadata).map { String(metadata[$0]) }
        }
    }

    @Test func anAuthorityAdvertisesNoOperationAndRefusesACallSayingWhy() async throws {
        let authority = try OfflineStore.create(
            at: tempDir() + "/authority", metadata: Array(OperationCallTests.metadata.utf8))
        try authority.load(set: "Books", json: Array(OperationCallTests.books.utf8))
        #expect(Self.advertised(OperationCallTests.metadata).count == 6, "the fixture declares operations")
        try await withServer(authority.path) { http, _ in
            let metadata = try await http.get("$metadata")
            #expect(metadata.status == 200 && metadata.text.contains("EntityType Name=\"Book\""))
            // What it advertises, it answers: nothing.
            #expect(Self.advertised(metadata.text).isEmpty, "\(metadata.text)")
            let schema = try CSDL.parse(metadata.body)
            #expect(schema.operations.isEmpty && schema.entitySet("Books") != nil)
            let renew = try await http.send(.POST, "Books(1)/Lib.Renew", body: #"{"Days":3}"#)
            #expect(renew.status == 501 && renew.text.contains("runs no business logic"), "\(renew.text)")
            let overdue = try await http.get("Overdue(Days=3)")
            #expect(overdue.status == 501 && overdue.text.contains("needs the service"), "\(overdue.text)")
            #expect(try await http.get("Books(1)").status == 200)
        }
        #expect(try authority.get(set: "Books", key: [.int(1)])?["Days"] == .int(14))
    }

    @Test func anOfflineCopyQueuesTheActionsItsClientsCallAndAnswers202() async throws {
        let copy = try OperationCallTests.copy {
            $0.localFunctions = ["Overdue": "Books?$filter=Days gt @Days&$orderby=BookID&$select=BookID,Title"]
        }
        try await withServer(copy.path) { http, server in
            #expect(Self.advertised(try await http.get("$metadata").text).count == 6)
            let renew = try await http.send(
                .POST, "Books(1)/Lib.Renew", body: #"{"Days":9}"#,
                headers: [
                    ("Repeatability-Request-ID", "renew-1"),
                    ("Repeatability-First-Sent", "Sat, 28 Nov 2026 10:00:00 GMT"),
                ])
            #expect(renew.status == 202 && renew.body.isEmpty, "\(renew.text)")
            let location = try #require(renew.header("Location"))
            #expect(location.hasPrefix(server.url + "RequestQueue("), "\(location)")
            let queued = try await http.get(location)
            #expect(queued.object["Method"] as? String == "CALL", "\(queued.text)")
            // The same request again: answered as it was, not queued twice.
            let again = try await http.send(
                .POST, "Books(1)/Lib.Renew", body: #"{"Days":9}"#,
                headers: [
                    ("Repeatability-Request-ID", "renew-1"),
                    ("Repeatability-First-Sent", "Sat, 28 Nov 2026 10:00:00 GMT"),
                ])
            #expect(again.status == 202 && again.header("Location") == location)
            let recall = try await http.send(.POST, "Recall", body: #"{"Status":"all"}"#)
            #expect(recall.status == 202, "\(recall.text)")
            // Refused, and nothing queued: a wrong parameter, a method that is not the action's,
            // a missing entity.
            let wrong = try await http.send(.POST, "Books(1)/Lib.Renew", body: #"{"Weeks":1}"#)
            #expect(wrong.status == 400 && wrong.text.contains("Weeks"), "\(wrong.text)")
            #expect(try await http.get("Books(1)/Lib.Renew").status == 405)
            #expect(try await http.send(.POST, "Books(7)/Lib.Renew", body: #"{"Days":1}"#).status == 404)
            // A function: answered from its local query.
            let overdue = try await http.get("Overdue(Days=7)")
            #expect(overdue.status == 200, "\(overdue.text)")
            let ids = ((overdue.object["value"] as? [[String: Any]]) ?? []).compactMap { $0["BookID"] as? Int }
            #expect(ids == [1], "\(overdue.text)")
        }
        let records = try OperationCallTests.records(copy)
        #expect(records.map(\.method) == [.call, .call])
        #expect(records.map(\.resourcePath) == ["Books(1)/Lib.Renew", "Recall"])
        #expect(try copy.get(set: "Books", key: [.int(1)])?["Days"] == .int(14), "a call changes nothing here")
    }
}

/// pyodata (SAP's V2 client) calls the function imports of an offline V2 copy served by
/// `serve`: the POST import is queued and answered 202 with its order; the GET import mapped to
/// a local query is answered from it; an unmapped one is 501. The copy's flush then sends the
/// queue in order, in V2's dialect, to another offline V2 copy served by `serve` (which queues
/// it in turn: no V2 peer here runs function imports; mock-sap 0.22.0 has none).
@Suite(.external, .checksStores, .runsOffThePool) struct OperationPyODataTests {
    static let metadata = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx"
          xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"
          xmlns:sap="http://www.sap.com/Protocols/SAPData">
          <edmx:DataServices m:DataServiceVersion="2.0">
            <Schema Namespace="GW" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
              <EntityType Name="SalesOrder">
                <Key><PropertyRef Name="SalesOrderID"/></Key>
                <Property Name="SalesOrderID" Type="Edm.String" Nullable="false" MaxLength="10"/>
                <Property Name="Note" Type="Edm.String" MaxLength="255"/>
              </EntityType>
              <EntityContainer Name="C" m:IsDefaultEntityContainer="true">
                <EntitySet Name="SalesOrderSet" EntityType="GW.SalesOrder"/>
                <FunctionImport Name="SalesOrder_Confirm" ReturnType="GW.SalesOrder" EntitySet="SalesOrderSet"
                  m:HttpMethod="POST" sap:action-for="GW.SalesOrder">
                  <Parameter Name="SalesOrderID" Type="Edm.String" Mode="In" MaxLength="10"/>
                </FunctionImport>
                <FunctionImport Name="OpenOrders" ReturnType="Collection(GW.SalesOrder)" EntitySet="SalesOrderSet"
                  m:HttpMethod="GET">
                  <Parameter Name="MinID" Type="Edm.String" Mode="In" MaxLength="10"/>
                </FunctionImport>
                <FunctionImport Name="LowStock" ReturnType="Collection(Edm.String)" m:HttpMethod="GET"/>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    static let orders =
        #"{"d":{"results":[{"SalesOrderID":"0500000001","Note":"a"},{"SalesOrderID":"0500000002","Note":"b"},{"SalesOrderID":"0500000003","Note":"c"}]}}"#

    static func copy(_ name: String, root: String) throws -> OfflineStore {
        var config = StoreConfiguration()
        config.serviceRoot = root
        config.definingRequests = [.init(name: "orders", url: "SalesOrderSet")]
        config.localFunctions = ["OpenOrders": "SalesOrderSet?$filter=SalesOrderID ge @MinID"]
        let store = try OfflineStore.create(
            at: tempDir() + "/" + name, metadata: Array(metadata.utf8), configuration: config)
        try store.load(set: "SalesOrderSet", json: Array(orders.utf8))
        return store
    }

    @Test func pyodataCallsFunctionImportsAndAFlushSendsThemInOrder() async throws {
        // The service the copy flushes to: another offline copy, served.
        let upstream = try Self.copy("upstream", root: "http://127.0.0.1:9/")
        try await withServer(upstream.path) { _, upstreamServer in
            let copy = try Self.copy("copy", root: upstreamServer.url)
            try await copy.update(set: "SalesOrderSet", key: [.string("0500000001")], changes: ["Note": .string("x")])
            try await withServer(copy.path) { _, server in
                let run = try await ChildProcess.run(
                    executable: "/bin/sh",
                    [
                        repositoryRoot + "/scripts/pyodata-check.sh", "--operations", "--service", server.url,
                        "--order", "0500000001", "--min", "0500000002",
                    ], timeout: 400)
                #expect(run.status == 0, "pyodata:\n\(run.stdout)\n\(run.stderr.suffix(3_000))")
                let summary = run.stdout.split(separator: "\n").last.map(String.init) ?? ""
                #expect(summary == #"{"passed": 4, "failed": 0}"#, "\(run.stdout)")
                #expect(run.stdout.contains(#"{"openOrders": ["0500000002", "0500000003"]}"#), "\(run.stdout)")
            }
            try await copy.update(set: "SalesOrderSet", key: [.string("0500000002")], changes: ["Note": .string("y")])
            #expect(try OperationCallTests.records(copy).map(\.method) == [.update, .call, .update])
            let report = try await copy.flush()
            let errors = try FlushFixture.errors(copy)
            #expect(report.succeeded == 3 && report.archived == 0 && report.stopped == nil, "\(report): \(errors)")
            // Upstream got them in order: the MERGE, the import with its key, the MERGE.
            let upstreamQueue = try OperationCallTests.records(upstream)
            #expect(upstreamQueue.map(\.method) == [.update, .call, .update])
            #expect(
                upstreamQueue.map(\.resourcePath) == [
                    "SalesOrderSet('0500000001')", "SalesOrderSet('0500000001')/SalesOrder_Confirm",
                    "SalesOrderSet('0500000002')",
                ])
            #expect(try OperationCall.of(upstreamQueue[1]).parameters.map(\.value) == [#""0500000001""#])
        }
    }
}
