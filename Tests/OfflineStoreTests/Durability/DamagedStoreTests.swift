import Foundation
import Testing
import OfflineStore
import TestSupport

/// The tool on stores damaged in ways that killed it by a signal before the structural audit:
/// each test ran into SIGBUS, SIGABRT or SIGFPE on the old code and must now get a report or a
/// clear error. Every command runs in a child process with a time limit.
@Suite(.runsOffThePool) struct DamagedStoreTests {
    /// One healthy store for all the tests here (built once), and its file's layout.
    static let pristine: Result<(dir: String, map: DataFileMap), any Error> = Result {
        let dir = try FileCorruptionTests.buildStore(seed: 1)
        return (dir, DataFileMap(Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/data.mdb")))))
    }

    /// A store directory whose data.mdb is `bytes`.
    func store(_ bytes: [UInt8]) throws -> String {
        let dir = tempDir() + "/s"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: dir + "/data.mdb"))
        return dir
    }

    func run(_ args: [String]) throws -> ChildProcess.Outcome {
        let o = try ChildProcess.run(args, timeout: 60)
        #expect(o.signal == nil && !o.hung, "\(args[0]) died by signal \(o.signal ?? 0) or hung")
        return o
    }

    /// Regression: SIGBUS in check, get and query (LMDB maps the file at the map size).
    @Test func aTruncatedStoreIsReportedByCheckAndRefusedByReaders() throws {
        let (_, map) = try Self.pristine.get()
        let cut = map.liveEnd / 2
        let dir = try store(Array(map.bytes.prefix(cut)))
        let check = try run(["check", "--store", dir])
        #expect(check.status == 1 && check.stdout.contains("data.mdb is truncated"), "\(check.stdout)")
        let expected =
            "offline-store: data.mdb is truncated: its meta page says \(map.pages) pages of \(map.pageSize) bytes, the file has \(cut) bytes; the store is damaged (run offline-store check)\n"
        for args in [
            ["get", "--store", dir, "Products('HT-1000')"], ["query", "--store", dir, "Products?$top=1"],
            ["stats", "--store", dir],
        ] {
            let o = try run(args)
            #expect(o.status == 1 && o.stderr == expected, "\(args[0]): \(o.stderr)")
        }
    }

    /// A file may end before the last page its meta page counts where only free pages are
    /// missing (LMDB never writes a page it freed in the transaction that allocated it): that is
    /// a healthy store.
    @Test func aStoreEndingInFreePagesIsHealthy() throws {
        let (_, map) = try Self.pristine.get()
        try #require(map.liveEnd < map.pages * map.pageSize, "the sample store ends in live pages")
        let dir = try store(Array(map.bytes.prefix(map.liveEnd)))
        let check = try run(["check", "--store", dir])
        #expect(check.status == 0 && check.stdout.hasPrefix("ok:"), "\(check.stdout)\(check.stderr)")
        let get = try run(["get", "--store", dir, "Products('HT-1000')"])
        #expect(get.status == 0 && get.stdout.contains("HT-1000"), "\(get.stderr)")
    }

    /// Regression: LMDB asserts that a branch page has two keys (SIGABRT in check).
    @Test func aBranchPageWithOneKeyIsReported() throws {
        let (_, map) = try Self.pristine.get()
        let branch = try #require(map.live.first { $0.value.kind == .branch && $0.value.tree == .named }).key
        var bytes = map.bytes
        bytes[branch * map.pageSize + 12] = 18  // mp_lower: one node
        bytes[branch * map.pageSize + 13] = 0
        let check = try run(["check", "--store", try store(bytes)])
        #expect(
            check.status == 1 && check.stdout.contains("page \(branch)") && check.stdout.contains("holds 1 node(s)"),
            "\(check.stdout)")
    }

    /// Regression: a branch node pointing at a meta page made LMDB assert that the page it
    /// reached is a branch (SIGABRT in check).
    @Test func aChildPointingAtAMetaPageIsReported() throws {
        let (_, map) = try Self.pristine.get()
        let (branch, page) = try #require(
            map.live.first { $0.value.kind == .branch && $0.value.tree == .named && $0.value.nodes.count > 1 })
        var bytes = map.bytes
        let node = branch * map.pageSize + page.nodes[1].offset
        for k in 0..<6 { bytes[node + k] = k == 0 ? 1 : 0 }  // page 1
        let check = try run(["check", "--store", try store(bytes)])
        #expect(check.status == 1 && check.stdout.contains("points to page 1"), "\(check.stdout)")
    }

    /// A transaction id past Int64.max in a meta page (LMDB hands it to every reader) is reported
    /// (check trapped on it once, converting `mdb_txn_id`'s size_t).
    @Test func aHugeTransactionIdIsReported() throws {
        let (_, map) = try Self.pristine.get()
        var bytes = map.bytes
        for k in 0..<8 { bytes[map.newerMeta * map.pageSize + 144 + k] = k == 7 ? 0x80 : UInt8(map.newerMeta) }
        let check = try run(["check", "--store", try store(bytes)])
        #expect(check.status == 1 && check.stdout.contains("not consecutive"), "\(check.stdout)\(check.stderr)")
    }

    /// Regression: a page size of 0 in the meta page LMDB uses made every command divide by
    /// zero in mdb_env_open (SIGFPE).
    @Test func aZeroPageSizeIsRefusedByEveryCommand() throws {
        let (_, map) = try Self.pristine.get()
        var bytes = map.bytes
        for k in 0..<4 { bytes[map.newerMeta * map.pageSize + 40 + k] = 0 }
        let dir = try store(bytes)
        let check = try run(["check", "--store", dir])
        #expect(check.status == 1 && check.stdout.contains("page size of 0 bytes"), "\(check.stdout)")
        for args in [
            ["get", "--store", dir, "Products('HT-1000')"], ["query", "--store", dir, "Products?$top=1"],
            ["stats", "--store", dir],
        ] {
            let o = try run(args)
            #expect(o.status == 1 && o.stderr.contains("page size of 0 bytes"), "\(args[0]): \(o.stderr)")
        }
    }
}
