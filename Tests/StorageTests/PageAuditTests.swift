import LMDB
import Foundation
import Testing
@testable import Storage

/// The structural audit of `data.mdb` and the check at open, on a healthy store and on copies
/// damaged in known ways. Damaged files are never opened here: the audit reads them with
/// `pread`, and `EntityStore.check(path:)` must not hand them to LMDB.
@Suite(.runsOffThePool) struct PageAuditTests {
    /// A store with trees several levels deep, rows too long for a page (overflow runs), and
    /// free pages from rows replaced and deleted; closed before it is returned.
    static func healthyStore() throws -> String {
        let dir = temporaryDirectory()
        let store = try Fixtures.openStore(dir, indexes: ["BusinessPartners": ["Country"]])
        let set = try store.set("BusinessPartners")
        for round in 0..<2 {
            try store.write { t in
                for i in 0..<3_000 {
                    let emails: [Value] = i % 100 == 0 ? (0..<400).map { .string("partner\(i)-\($0)@example.com") } : []
                    try set.upsert(
                        t,
                        [
                            "PartnerID": .string("P\(i)"), "CompanyName": .string("Company \(i) round \(round)"),
                            "Country": .string(["DE", "US", "FR"][i % 3]), "Emails": .collection(emails),
                        ])
                }
            }
        }
        try store.write { t in for i in stride(from: 0, to: 3_000, by: 7) { try set.delete(t, key: [.string("P\(i)")]) }
        }
        _ = try expectConsistent(store)
        return dir
    }

    static func bytes(_ dir: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/data.mdb")))
    }

    /// A copy of `dir`'s store with `bytes` as its data.mdb.
    static func copy(with bytes: [UInt8]) throws -> String {
        let dir = temporaryDirectory()
        try Data(bytes).write(to: URL(fileURLWithPath: dir + "/data.mdb"))
        return dir
    }

    @Test func aHealthyStoreIsSoundAndEveryPageIsAccountedFor() throws {
        let dir = try Self.healthyStore()
        let map = DataFileMap(try Self.bytes(dir))
        #expect(map.live.values.contains { $0.kind == .branch && $0.database == "e/BusinessPartners" })
        #expect(map.live.values.contains { $0.kind == .overflowHead && $0.database == "e/BusinessPartners" })
        let report = try #require(try PageAudit.run(path: dir + "/data.mdb"))
        #expect(report.isSound, "\(report.problems)")
        #expect(UInt64(report.pagesAudited + report.freePages) == report.pages)
        #expect(report.pagesAudited == map.live.count + 2)
        #expect(report.databases.first { $0.name == "e/BusinessPartners" }?.entries == 3_000 - 429)
    }

    /// `putIfAbsent` stores under a new key and returns nil; under a key that is there it returns
    /// the stored value and leaves it.
    @Test func putIfAbsentStoresOnlyANewKey() throws {
        let env = try Environment(path: temporaryDirectory())
        let db = try #require(try env.database(named: "t", create: true))
        let first = try env.write { t in try t.view.putIfAbsent(db, [1], [10]).map { Array($0) } }
        #expect(first == nil)
        let second = try env.write { t in try t.view.putIfAbsent(db, [1], [20]).map { Array($0) } }
        #expect(second == [10])
        #expect(try env.read { t in try t.view.get(db, [1]).map { Array($0) } } == [10])
    }

    @Test func noFileOrAnEmptyFileIsANewStore() throws {
        _ = try Environment(path: temporaryDirectory())
        let dir = temporaryDirectory()
        try Data().write(to: URL(fileURLWithPath: dir + "/data.mdb"))
        _ = try Environment(path: dir)
    }

    /// Regression: LMDB maps a truncated file at the map size, and the first read of a page
    /// past its end was a SIGBUS in every command.
    @Test func aTruncatedFileIsRefusedAtOpenWithItsSizes() throws {
        let bytes = try Self.bytes(try Self.healthyStore())
        let map = DataFileMap(bytes)
        for cut in [map.liveEnd - 1, map.liveEnd / 2, 3 * map.pageSize, 2 * map.pageSize, 2 * map.pageSize - 7, 100] {
            let dir = try Self.copy(with: Array(bytes.prefix(cut)))
            #expect(throws: DataFileError.self) { _ = try Environment(path: dir) }
            let report = try EntityStore.check(path: dir)
            #expect(report.isDamaged && report.problems.contains { $0.contains("truncated") }, "\(cut): \(report)")
        }
        let dir = try Self.copy(with: Array(bytes.prefix(map.liveEnd / 2)))
        do {
            _ = try Environment(path: dir)
        } catch let e as DataFileError {
            #expect(
                "\(e)"
                    == "data.mdb is truncated: its meta page says \(map.pages) pages of \(map.pageSize) bytes, the file has \(map.liveEnd / 2) bytes; the store is damaged (run offline-store check)"
            )
        }
    }

    /// Regression: a page size of 0 in the meta page LMDB uses made `mdb_env_open` divide by
    /// zero (SIGFPE); a meta page LMDB refuses gave only "MDB_INVALID".
    @Test func metaPagesLMDBWouldRefuseOrMisreadAreRefusedAtOpen() throws {
        let bytes = try Self.bytes(try Self.healthyStore())
        let map = DataFileMap(bytes)
        let newer = map.newerMeta * map.pageSize, older = (1 - map.newerMeta) * map.pageSize
        var cases: [(String, [UInt8])] = []
        var zeroSize = bytes
        for k in 0..<4 { zeroSize[newer + 40 + k] = 0 }
        cases.append(("gives a page size of 0 bytes", zeroSize))
        var badMagic = bytes
        badMagic[older + 16] ^= 0x40
        cases.append(("magic number", badMagic))
        var otherSize = bytes
        otherSize[map.pageSize + 41] ^= 0x30  // meta page 1 gives 8192 bytes where meta page 0 gives 4096
        cases.append(("disagree on the page size", otherSize))
        for (what, damaged) in cases {
            let dir = try Self.copy(with: damaged)
            #expect { _ = try Environment(path: dir) } throws: { "\($0)".contains(what) && $0 is DataFileError }
            let report = try EntityStore.check(path: dir)
            #expect(report.isDamaged && report.problems.contains { $0.contains(what) }, "\(report)")
        }
    }

    /// Damage LMDB would have crashed on (an assertion, an unmapped read) is named, with its
    /// database and page, by the audit and by `check`, which does not open the store.
    @Test func damageIsNamedWithItsDatabaseAndPage() throws {
        let bytes = try Self.bytes(try Self.healthyStore())
        let map = DataFileMap(bytes)
        let ps = map.pageSize
        let branch = try #require(
            map.live.first { $0.value.kind == .branch && $0.value.database == "e/BusinessPartners" })
        let leaf = try #require(map.live.first { $0.value.kind == .leaf && $0.value.database == "e/BusinessPartners" })
        let run = try #require(
            map.live.first { $0.value.kind == .overflowHead && $0.value.database == "e/BusinessPartners" })
        func with(_ edits: [(Int, UInt8)]) -> [UInt8] {
            var b = bytes
            for (o, v) in edits { b[o] = v }
            return b
        }
        let child0 = branch.key * ps + branch.value.nodes[0].offset
        let cases: [(String, [UInt8], String)] = [
            // LMDB asserts that a branch page has two keys (SIGABRT).
            ("one key", with([(branch.key * ps + 12, 18), (branch.key * ps + 13, 0)]), "holds 1 node(s)"),
            ("leaf flags on a branch", with([(branch.key * ps + 10, 2)]), "page flags 0x2"),
            (
                "a child pointing at its parent",
                with([
                    (child0, UInt8(branch.key & 0xFF)), (child0 + 1, UInt8(branch.key >> 8)),
                    (child0 + 2, 0), (child0 + 3, 0),
                ]), "already reached"
            ),
            (
                "a node past the end", with([(leaf.key * ps + 16, 0xF8), (leaf.key * ps + 17, UInt8(ps >> 8) - 1)]),
                "past the end of the page"
            ),
            ("an overflow run too short", with([(run.key * ps + 12, 0), (run.key * ps + 13, 0)]), "need"),
            ("a page number off by one", with([(leaf.key * ps, UInt8((leaf.key + 1) & 0xFF))]), "says it is page"),
        ]
        for (what, damaged, message) in cases {
            let report = try #require(try PageAudit.run(path: try Self.copy(with: damaged) + "/data.mdb"))
            #expect(!report.isSound, "\(what)")
            #expect(
                report.problems.contains {
                    $0.contains(message) && $0.contains("e/BusinessPartners") && $0.contains("page ")
                },
                "\(what): \(report.problems)")
            let check = try EntityStore.check(path: try Self.copy(with: damaged))
            #expect(check.isDamaged && !check.isConsistent, "\(what)")
        }
    }

    /// A free-list key of another size than a transaction id's 8 bytes is reported, not read
    /// (the audit itself trapped on it once, found by the corruption test).
    @Test func aFreeListKeyOfTheWrongSizeIsReported() throws {
        var bytes = try Self.bytes(try Self.healthyStore())
        let map = DataFileMap(bytes)
        let leaf = try #require(map.live.first { $0.value.kind == .leaf && $0.value.tree == .freeList })
        let node = leaf.key * map.pageSize + leaf.value.nodes[0].offset
        bytes[node + 6] = 7  // mn_ksize: 7 keeps the node inside its even-sized slot
        let report = try #require(try PageAudit.run(path: try Self.copy(with: bytes) + "/data.mdb"))
        #expect(
            report.problems.contains { $0.contains("the free list") && $0.contains("page \(leaf.key)") },
            "\(report.problems)")
    }

    /// The free list must not hold a page a tree uses: LMDB would hand it out again and overwrite
    /// live data with the next write.
    @Test func aFreeListHoldingALivePageIsReported() throws {
        var bytes = try Self.bytes(try Self.healthyStore())
        let map = DataFileMap(bytes)
        let leaf = try #require(
            map.live.first {
                $0.value.kind == .leaf && $0.value.tree == .freeList
                    && !$0.value.nodes[0].big && $0.value.nodes[0].dataSize >= 24
            })
        // The entry's page numbers follow its count, in descending order: put a live page first.
        let data = leaf.key * map.pageSize + leaf.value.nodes[0].offset + 8 + 8
        let second = Int(DataFileMap.u64(bytes, data + 16))
        let live = try #require(map.live.keys.filter { $0 > second }.min())
        for k in 0..<8 { bytes[data + 8 + k] = UInt8(truncatingIfNeeded: live >> (8 * k)) }
        let report = try #require(try PageAudit.run(path: try Self.copy(with: bytes) + "/data.mdb"))
        #expect(report.problems.contains { $0.contains("the free list") }, "\(report.problems)")
    }
}
