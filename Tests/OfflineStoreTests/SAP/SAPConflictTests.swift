import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore
import Storage

/// Issue 38's conflict test against SAP Gateway's shape: mock-sap with `--require-if-match`
/// (Gateway refuses a change of a type with `ConcurrencyMode="Fixed"` that carries no `If-Match`:
/// 428), two offline copies of GWSAMPLE_BASIC change the same business partner's company name
/// (mock-sap's Product has no ETag; its BusinessPartner has, from `ChangedAt`). The second to flush
/// meets 412 and sees both values (the API, `errors --show`, its own `serve`); then each way out —
/// keep mine, take theirs, merge — leaves the service and both copies as the docs say
/// (`Flush.md`, Conflicts).
@Suite(.external, .checksStores, .serialized) struct SAPConflictTests {
    static let partner = "0100000000"
    static let path = "BusinessPartnerSet('\(partner)')"
    static let key: [Value] = [.string(partner)]

    /// Both copies refresh (current ETags), both rename the product, theirs flushes first; mine's
    /// flush is refused with 412. Returns my refused request.
    static func conflict(
        _ sap: MockSAP, _ mine: OfflineStore, _ theirs: OfflineStore, round: Int
    ) async throws -> Int64 {
        _ = try await mine.refresh()
        _ = try await theirs.refresh()
        try await theirs.update(
            set: "BusinessPartnerSet", key: Self.key, changes: ["CompanyName": .string("theirs \(round)")])
        let id = try #require(
            try await mine.update(
                set: "BusinessPartnerSet", key: Self.key, changes: ["CompanyName": .string("mine \(round)")]
            ).requestID)
        let first = try await theirs.flush()
        #expect(first.succeeded == 1 && first.archived == 0, "\(first)")
        let report = try await mine.flush()
        #expect(report.archived == 1 && report.refused.first?.contains("412") == true, "\(report)")
        return id
    }

    static func name(_ store: OfflineStore) throws -> String {
        SAPFlush.text(try store.get(set: "BusinessPartnerSet", key: Self.key)?["CompanyName"])
    }

    @Test func twoCopiesOfAGatewayServiceMeetAndEachWayOutWorks() async throws {
        let sap = try await MockSAP.start(["--require-if-match"])
        defer { Task { await sap.stop() } }
        // Gateway's rule, for the record: a change of a concurrency-controlled entity without
        // If-Match is refused (428), so a store that did not send the ETag could not change it.
        let bare = try await sap.http.send(
            .PATCH, SAPFlush.service + Self.path, body: #"{"CompanyName":"no etag"}"#,
            headers: [("Content-Type", "application/json"), ("X-CSRF-Token", "unsafe")])
        #expect(bare.status == 428 || bare.status == 403, "\(bare.status) \(bare.text.prefix(200))")
        let mine = try await SAPFlush.store(sap, at: tempDir() + "/mine")
        let theirs = try await SAPFlush.store(sap, at: tempDir() + "/theirs")
        let before = try Self.name(mine)

        // 1. The loser sees both values, everywhere; keep mine sends it against theirs.
        var id = try await Self.conflict(sap, mine, theirs, round: 1)
        let c = try #require(try mine.conflict(requestID: id))
        #expect(c.base?["CompanyName"] == .string(before), "\(String(describing: c.base))")
        #expect(c.local?["CompanyName"] == .string("mine 1") && c.server?["CompanyName"] == .string("theirs 1"))
        #expect(c.differences.contains("CompanyName"), "\(c.differences)")
        let shown = try await CLI.run(["errors", "--store", mine.path, "--show", String(id)])
        #expect(
            shown.status == 0 && shown.stdout.contains("mine 1") && shown.stdout.contains("theirs 1"), "\(shown.stdout)"
        )
        print(shown.stdout)
        try await withServer(mine.path) { local, _ in
            // The copy's serve speaks its store's dialect: V2, the entry under "d".
            let entry = try #require(try await local.get("ErrorArchive(\(id))").object["d"] as? [String: Any])
            #expect((entry["ServerEntity"] as? String)?.contains("theirs 1") == true, "\(entry)")
            #expect(entry["HTTPStatusCode"] as? Int == 412)
        }
        try mine.retryError(requestID: id)
        let kept = try await mine.flush()
        #expect(kept.succeeded == 1 && kept.archived == 0, "\(kept)")
        #expect(try await SAPFlush.entity(sap, Self.path)?["CompanyName"] as? String == "mine 1")
        _ = try await theirs.refresh()
        #expect(try Self.name(theirs) == "mine 1" && Self.name(mine) == "mine 1")

        // 2. Take theirs: my change is dropped and their version adopted, nothing sent.
        id = try await Self.conflict(sap, mine, theirs, round: 2)
        try mine.resolveError(requestID: id)
        #expect(try Self.name(mine) == "theirs 2" && mine.pendingRequestCount() == 0)
        #expect(try await SAPFlush.entity(sap, Self.path)?["CompanyName"] as? String == "theirs 2")

        // 3. Merge: change the entity again; the fix goes against their version.
        id = try await Self.conflict(sap, mine, theirs, round: 3)
        try await mine.update(
            set: "BusinessPartnerSet", key: Self.key, changes: ["CompanyName": .string("theirs 3 and mine 3")])
        #expect(try SAPFlush.errors(mine).isEmpty, "the change revived the refused request")
        let merged = try await mine.flush()
        #expect(merged.succeeded == 1 && merged.archived == 0, "\(merged)")
        #expect(try await SAPFlush.entity(sap, Self.path)?["CompanyName"] as? String == "theirs 3 and mine 3")
        _ = try await theirs.refresh()
        _ = try await mine.refresh()
        #expect(try Self.name(theirs) == "theirs 3 and mine 3" && Self.name(mine) == "theirs 3 and mine 3")
        #expect(try mine.pendingRequestCount() == 0 && theirs.pendingRequestCount() == 0)
    }
}
