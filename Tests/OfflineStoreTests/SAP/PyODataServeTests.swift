import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore

/// SAP's own OData V2 client, pyodata (PyPI, written independently of this project), drives
/// `offline-store serve` over an offline store made from GWSAMPLE_BASIC's `$metadata` and
/// refreshed from mock-sap — the migration of issue 23: a Python service that used SAP's offline
/// store through OData keeps doing so. `scripts/pyodata-check.sh` does the client's part (CSRF
/// fetch, metadata into pyodata's model, queries with filter/orderby/top/skip/select/expand/
/// inlinecount, `$count`, a datetime literal, read by key, create, MERGE, PATCH, PUT, delete, ETags,
/// a multipart change set that applies and one that fails); then a `POST /$sync` flushes the
/// queue to mock-sap, and every change is there exactly once.
@Suite(.external, .checksStores) struct PyODataServeTests {
    @Test func pyodataReadsAndWritesOfflineAndAFlushPutsEachChangeOnGatewayOnce() async throws {
        let sap = try await MockSAP.start()
        defer { Task { await sap.stop() } }
        let store = try await SAPFlush.store(sap)
        let path = store.path
        let productsBefore = try await sap.entities(SAPFlush.service, "ProductSet").count
        try await withServer(path) { http, server in
            let run = try await ChildProcess.run(
                executable: "/bin/sh", [repositoryRoot + "/scripts/pyodata-check.sh", "--service", server.url],
                timeout: 400)
            let lines = run.stdout.split(separator: "\n")
            #expect(run.status == 0, "pyodata-check:\n\(run.stdout)\n\(run.stderr.suffix(3_000))")
            let summary = try #require(
                lines.last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] },
                "no summary line:\n\(run.stdout)\n\(run.stderr.suffix(3_000))")
            #expect(summary["failed"] as? Int == 0 && (summary["passed"] as? Int ?? 0) >= 19, "\(run.stdout)")
            let changes = try #require(summary["changes"] as? [String: Any])
            let deleted = try #require(changes["deleted"] as? [String: String])

            // Queued, not yet on the back end.
            #expect(try await SAPFlush.entity(sap, "ProductSet('PY-1')") == nil)
            // The store's own sets read in the store's dialect: {"d":{"results":[…]}}.
            let queue = try await http.get("RequestQueue?$select=Method,EntitySet")
            let pending = ((queue.object["d"] as? [String: Any])?["results"] as? [[String: Any]]) ?? []
            #expect(
                pending.count == 6,
                "create (MERGE and PUT collapsed into it), 2 updates, a delete, 2 creates: \(pending)")

            // CSRF protection is on (a V2 store): $sync needs the token like every modifying request.
            let token = try #require(
                try await http.get("", headers: [("X-CSRF-Token", "Fetch")]).header("X-CSRF-Token"))
            let sync = try await http.send(.POST, "$sync", headers: [("X-CSRF-Token", token)])
            #expect(sync.status == 200 && sync.object["succeeded"] as? Bool == true, "\(sync.text)")
            #expect(
                (sync.object["flush"] as? String)?.hasPrefix("sent 6, succeeded 6, archived 0") == true, "\(sync.text)")

            let one = try #require(try await SAPFlush.entity(sap, "ProductSet('PY-1')"))
            #expect(one["Name"] as? String == "pyodata put" && SAPFlush.decimal(one["Price"]) == Decimal(13))
            for (key, name) in [("PY-2", "pyodata batch two"), ("PY-3", "pyodata batch three")] {
                #expect(try await SAPFlush.entity(sap, "ProductSet('\(key)')")?["Name"] as? String == name)
            }
            #expect(
                try await SAPFlush.entity(sap, "ProductSet('HT-1000')")?["Description"] as? String
                    == "patched by pyodata")
            #expect(try await SAPFlush.entity(sap, "ProductSet('HT-1001')")?["Name"] as? String == "matched")
            #expect(try await SAPFlush.entity(sap, "ProductSet('PY-4')") == nil, "the failed change set")
            let item =
                "SalesOrderLineItemSet(SalesOrderID='\(deleted["SalesOrderID"] ?? "")',ItemPosition='\(deleted["ItemPosition"] ?? "")')"
            #expect(try await SAPFlush.entity(sap, item) == nil, "deleted on the back end")
            #expect(
                try await sap.entities(SAPFlush.service, "ProductSet").count == productsBefore + 3, "each create once")

            let again = try await http.send(.POST, "$sync", headers: [("X-CSRF-Token", token)])
            #expect((again.object["flush"] as? String)?.hasPrefix("sent 0") == true, "\(again.text)")
        }
        #expect(try OfflineStore.check(at: path).isConsistent)
    }
}
