import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore

/// An atomicity group sent to a sidecar (an offline store's `serve`) is ONE change set on the back
/// end: every member is queued under one transaction id — the `OfflineOData.TransactionID` one
/// member gave, or one made for the group — and a group whose members name two ids is refused
/// whole (400) before anything of the batch is queued. Issue 37, F2: a member with the header and
/// one without were queued under two ids, so the back end got two change sets, refused one and
/// applied the other. Both forms: a V4 JSON `$batch`, and a multipart one to a V2 store.
@Suite(.checksStores) struct BatchTransactionTests {
    /// The rows of the sidecar's RequestQueue, in either dialect's JSON (`value`, V2's `d.results`).
    static func queue(_ http: HTTP) async throws -> [[String: Any]] {
        let reply = try await http.get("RequestQueue")
        #expect(reply.status == 200, "\(reply.text)")
        if let rows = reply.object["value"] as? [[String: Any]] { return rows }
        return (reply.object["d"] as? [String: Any])?["results"] as? [[String: Any]] ?? []
    }

    static func transactionIDs(_ rows: [[String: Any]]) -> [String?] { rows.map { $0["TransactionID"] as? String } }

    @Test func aJSONAtomicityGroupIsQueuedUnderTheOneIdAMemberGave() async throws {
        let upstreamPath = try await ServeTests.sampleStore()
        try await withServer(upstreamPath) { upstream, _ in
            let offline = try await OfflineServeTests.offlineStore(upstream: upstream.base)
            try await withServer(offline) { http, _ in
                func batch(_ first: String?, _ second: String?, _ suffix: String) -> String {
                    func headers(_ id: String?) -> String {
                        id.map { #","headers":{"OfflineOData.TransactionID":"\#($0)"}"# } ?? ""
                    }
                    return """
                        {"requests":[
                         {"id":"1","atomicityGroup":"g","method":"POST","url":"Products"\(headers(first)),
                          "body":{"ProductID":"TX-\(suffix)1","Name":"One"}},
                         {"id":"2","atomicityGroup":"g","method":"POST","url":"Products"\(headers(second)),
                          "body":{"ProductID":"TX-\(suffix)2","Name":"Two"}},
                         {"id":"3","method":"POST","url":"Products","body":{"ProductID":"TX-\(suffix)3"}}
                        ]}
                        """
                }
                // Two ids in one group: refused whole, nothing queued, not even the write after it.
                let refused = try await http.send(.POST, "$batch", body: batch("T-a", "T-b", "R"))
                #expect(refused.status == 400, "\(refused.text)")
                let message = (refused.object["error"] as? [String: Any])?["message"] as? String ?? ""
                #expect(message.contains("'T-a'") && message.contains("'T-b'") && message.contains("'g'"), "\(message)")
                #expect(try await Self.queue(http).isEmpty)
                #expect(try await http.get("Products('TX-R3')").status == 404)

                // The header on the first member, or on the second, or the same on both: one id.
                let cases: [(String?, String?, String)] = [
                    ("T-client", nil, "A"), (nil, "T-other", "B"), ("T-same", "T-same", "C"),
                ]
                for (first, second, suffix) in cases {
                    let before = try await Self.queue(http).count
                    let reply = try await http.send(.POST, "$batch", body: batch(first, second, suffix))
                    #expect(reply.status == 200, "\(reply.text)")
                    let statuses = (reply.object["responses"] as? [[String: Any]] ?? []).map { $0["status"] as? Int }
                    #expect(statuses == [201, 201, 201], "\(reply.text)")
                    let rows = Array(try await Self.queue(http).dropFirst(before))
                    let expected = first ?? second
                    #expect(Self.transactionIDs(Array(rows.prefix(2))) == [expected, expected], "\(rows)")
                    #expect(rows.count == 3 && Self.transactionIDs(Array(rows.suffix(1))) == [nil], "\(rows)")
                }

                let sync = try await http.send(.POST, "$sync")
                #expect(sync.object["succeeded"] as? Bool == true, "\(sync.text)")
                for suffix in ["A", "B", "C"] {
                    for n in 1...3 { #expect(try await upstream.get("Products('TX-\(suffix)\(n)')").status == 200) }
                }
                #expect(try await upstream.get("Products('TX-R1')").status == 404)
            }
        }
    }

    @Test func aMultipartChangeSetToAV2SidecarIsQueuedUnderOneId() async throws {
        let upstream = try V2ServeTests.store()
        try await withServer(upstream) { upstreamHTTP, server in
            let dir = tempDir() + "/v2-sidecar"
            let configuration = StoreConfiguration(
                serviceRoot: server.url, definingRequests: [DefiningRequest(name: "O", url: "Orders")])
            let store = try OfflineStore.create(
                at: dir, metadata: Array(V2ServeTests.metadata.utf8), configuration: configuration)
            try await store.refresh()
            try await withServer(dir) { http, _ in
                let token = try #require(
                    try await http.get("", headers: [("X-CSRF-Token", "Fetch")]).header("X-CSRF-Token"))
                func changeSet(_ first: String?, _ second: String?, _ suffix: String) -> String {
                    func order(_ n: Int, _ id: String?) -> [String] {
                        MultipartBatchServeTests.request(
                            "POST", "Orders", headers: id.map { ["OfflineOData.TransactionID: \($0)"] } ?? [],
                            body: #"{"OrderID":"\#(suffix)\#(n)","CustomerID":"C1","Quantity":"\#(n)"}"#)
                    }
                    return MultipartBatchServeTests.batch([.changeSet("cs_1", [order(1, first), order(2, second)])])
                }
                let refused = try await MultipartBatchServeTests.post(
                    http, changeSet("T-a", "T-b", "R"), headers: [("X-CSRF-Token", token)])
                #expect(refused.status == 400, "\(refused.text)")
                #expect(refused.text.contains("'T-a'") && refused.text.contains("'T-b'"), "\(refused.text)")
                #expect(try await Self.queue(http).isEmpty)

                for (first, second, suffix) in [("T-client", nil, "A"), (nil, "T-client2", "B")] {
                    let before = try await Self.queue(http).count
                    let reply = try await MultipartBatchServeTests.post(
                        http, changeSet(first, second, suffix), headers: [("X-CSRF-Token", token)])
                    #expect(reply.status == 202 || reply.status == 200, "\(reply.text)")
                    #expect(reply.text.components(separatedBy: "HTTP/1.1 201 Created").count == 3, "\(reply.text)")
                    let rows = Array(try await Self.queue(http).dropFirst(before))
                    let expected = first ?? second
                    #expect(Self.transactionIDs(rows) == [expected, expected], "\(rows)")
                }

                let sync = try await http.send(.POST, "$sync", headers: [("X-CSRF-Token", token)])
                #expect(sync.object["succeeded"] as? Bool == true, "\(sync.text)")
                for id in ["A1", "A2", "B1", "B2"] {
                    #expect(try await upstreamHTTP.get("Orders('\(id)')").status == 200, "\(id)")
                }
            }
        }
    }
}
