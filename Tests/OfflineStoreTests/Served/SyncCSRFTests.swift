import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore

/// Issue 37, finding 13: `POST /$sync` on a V2 `serve` with CSRF protection on was answered (200,
/// and a sync ran) without the token — to `Origin: http://evil.example` and `Content-Type:
/// text/plain`, what a web page the user opens can send. It now needs the token like every
/// modifying request, and a cross-origin `Origin` is refused even with it.
@Suite(.checksStores) struct SyncCSRFTests {
    @Test func syncNeedsTheTokenAndTheSameOrigin() async throws {
        try await withServer(try V2ServeTests.store()) { _, upstream in
            let path = tempDir() + "/offline"
            let configuration = try StoreConfiguration(
                json: Array(#"{"serviceRoot": "\#(upstream.url)", "timeouts": {"connect": 2}}"#.utf8))
            _ = try OfflineStore.create(
                at: path, metadata: Array(V2ServeTests.metadata.utf8), configuration: configuration)
            try await withServer(path) { http, server in
                let page = [("Origin", "http://evil.example"), ("Content-Type", "text/plain")]
                let forged = try await http.send(.POST, "$sync", body: "x", headers: page)
                #expect(forged.status == 403 && forged.header("X-CSRF-Token") == "Required", "\(forged.text)")
                let plain = try await http.send(.POST, "$sync")
                #expect(plain.status == 403, "no token: \(plain.status) \(plain.text)")

                let token = try #require(
                    try await http.get("", headers: [("X-CSRF-Token", "Fetch")]).header("X-CSRF-Token"))
                let crossOrigin = try await http.send(
                    .POST, "$sync", headers: [("X-CSRF-Token", token), ("Origin", "http://evil.example")])
                #expect(crossOrigin.status == 403 && crossOrigin.text.contains("Origin"), "\(crossOrigin.text)")

                let sameOrigin = String(server.url.dropLast(server.url.hasSuffix("/") ? 1 : 0))
                for headers in [[("X-CSRF-Token", token)], [("X-CSRF-Token", token), ("Origin", sameOrigin)]] {
                    let sync = try await http.send(.POST, "$sync", headers: headers)
                    #expect(sync.status == 200 && sync.object["succeeded"] as? Bool == true, "\(headers): \(sync.text)")
                }
                // Only the two allowed requests synced.
                #expect(
                    try await http.send(.POST, "$sync", headers: [("X-CSRF-Token", token)]).object["sync"] as? Int == 3)
            }
        }
    }
}
