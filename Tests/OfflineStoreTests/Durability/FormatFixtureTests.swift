import Foundation
import Testing

@testable import OfflineStore

/// Stores made by an earlier build open in this one: the store format is a promise. The fixtures
/// (`Fixtures/format4/`, gzip'd `data.mdb`s) were made by `offline-store demo --size 40 --store DIR`
/// built at `d45459e` (format 4, before the modules were split by role), the offline copy then given
/// three pending changes with that build's CLI: a tagged PATCH of Products('0000000001'), a create
/// of Products('FIX-1') and a DELETE of Products('0000000002'). `server` is the authority store the
/// demo served (change log, repeatability records). Both must pass `check`, read as they were made,
/// and take writes.
@Suite(.checksStores) struct FormatFixtureTests {
    static func unpack(_ name: String) throws -> String {
        let dir = tempDir() + "/" + name
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let fixture = repositoryRoot + "/Tests/OfflineStoreTests/Fixtures/format4/\(name).data.mdb.gz"
        let status = Self.shell("gzip -dc '\(fixture)' > '\(dir)/data.mdb'")
        try #require(status == 0, "gzip -dc \(fixture) exited with status \(status)")
        return dir
    }

    /// Runs `command` with /bin/sh and returns its exit status (-1 if it could not start).
    static func shell(_ command: String) -> Int32 {
        let words: [String] = ["/bin/sh", "-c", command]
        var argv = words.map { strdup($0) }
        argv.append(nil)
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, "/bin/sh", nil, nil, argv, environ) == 0 else { return -1 }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        return status & 0x7F == 0 ? (status >> 8) & 0xFF : -1
    }

    @Test func anOfflineStoreOfFormatFourOpensChecksAndTakesWrites() async throws {
        let path = try Self.unpack("offline")
        let store = try OfflineStore.open(at: path)
        let report = try store.check()
        #expect(report.isConsistent, "\(report)")
        #expect(try store.count(set: "BusinessPartners") == 6)
        #expect(try store.count(set: "Products") == 20)
        #expect(try store.count(set: "SalesOrderItems") == 103)
        let queue = try store.entities("RequestQueue?$orderby=RequestID")
        #expect(queue.map { $0["Method"] } == [.string("PATCH"), .string("POST"), .string("DELETE")])
        #expect(queue.first?["CustomTag"] == .string("fixture"))
        let pending = try store.entities("Products?$filter=offline.hasPendingChanges()&$orderby=ProductID")
        #expect(pending.map { $0["ProductID"] } == [.string("0000000001"), .string("FIX-1")])
        #expect(try store.entities("Products?$filter=offline.isLocal()").map { $0["ProductID"] } == [.string("FIX-1")])
        #expect(try store.get(set: "Products", key: [.string("0000000002")]) == nil)
        // A new change collapses into the old pending PATCH (one request), and undo still finds its base image.
        _ = try await store.update(
            set: "Products", key: [.string("0000000001")], changes: ["Name": .string("renamed again")])
        #expect(try store.pendingRequestCount() == 3)
        _ = try store.undo(set: "Products", key: [.string("0000000001")])
        let restored = try store.get(set: "Products", key: [.string("0000000001")])?["Name"]
        #expect(restored != nil && restored != .string("renamed again") && restored != .string("pending rename"))
        #expect(try store.pendingRequestCount() == 2)
        #expect(try store.check().isConsistent)
    }

    @Test func aServedStoreOfFormatFourOpensChecksAndServesDeltas() async throws {
        let path = try Self.unpack("server")
        let store = try OfflineStore.open(at: path)
        let report = try store.check()
        #expect(report.isConsistent, "\(report)")
        #expect(try store.count(set: "SalesOrderItems") == 601)
        #expect(try store.count(set: "BusinessPartners") == 40)
        let before = try store.changeToken()
        #expect(before > 0)  // the demo's other client changed and deleted products on it
        let r = try await store.served(repeatabilityID: "after-the-house", fingerprint: []) { tx in
            _ = try tx.create(set: "Products", entity: ["ProductID": .string("FIX-S"), "Name": .string("served")])
            return ServedTests.ok
        }
        #expect(!r.replayed)
        #expect(try store.changeToken() == before + 1)
        #expect(try store.check().isConsistent)
    }
}
