import TestSupport
import Foundation
import Testing
@testable import OfflineStore
import Query
import Samples

/// A small tmpfs mounted for one test (root only: where mounting is not allowed, the tests that
/// need one are skipped and say so).
final class SmallFileSystem {
    let path: String

    init?(kilobytes: Int) {
        path = tempDir() + "/fs"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(kilobytes)k", "tmpfs", path]) else { return nil }
    }

    deinit { _ = Self.run("/bin/umount", ["-l", path]) }

    static let available: Bool = {
        guard let fs = SmallFileSystem(kilobytes: 64) else { return false }
        return FileManager.default.fileExists(atPath: fs.path)
    }()

    /// Fills the file system up to `leaving` bytes (a file of zeros, `fill`).
    func fill(leaving: Int = 0) throws {
        var st = statvfs()
        _ = statvfs(path, &st)
        let free = Int(st.f_bavail) * Int(st.f_frsize) - leaving
        let fd = open(path + "/fill", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0, count: 4096)
        var written = 0
        while written < free {
            let n = chunk.withUnsafeBytes { write(fd, $0.baseAddress, min(4096, free - written)) }
            if n <= 0 { break }
            written += n
        }
    }

    func unfill() { unlink(path + "/fill") }

    func remountReadOnly() -> Bool { Self.run("/bin/mount", ["-o", "remount,ro", path]) }

    @discardableResult
    static func run(_ tool: String, _ args: [String]) -> Bool {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = args
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return false }
        p.waitUntilExit()
        return p.terminationStatus == 0
    }
}

@Suite(
    .soak, .serialized, .checksStores, .enabled(if: SmallFileSystem.available, "needs root to mount a small tmpfs"),
    .runsOffThePool)
struct DiskFullTests {
    /// Regression: `init` on a full file system died by SIGBUS in mdb_env_open (LMDB writes its
    /// sparse lock file through a shared map) and left a half-made directory.
    @Test func initOnAFullDiskSaysSoAndLeavesNothing() throws {
        let fs = try #require(SmallFileSystem(kilobytes: 256))
        let dir = tempDir()
        try write(SampleData.metadata, to: dir + "/m.xml")
        for leaving in [0, 16 << 10, 40 << 10, 100 << 10] {
            fs.unfill()
            try fs.fill(leaving: leaving)
            let r = try HostileEnvironmentTests.spawn(["init", "--store", fs.path + "/s", "--metadata", dir + "/m.xml"])
            #expect(r.signal == 0, "leaving \(leaving) bytes: died by signal \(r.signal)")
            if r.status != 0 {
                #expect(r.stderr.contains("the disk is full"), "leaving \(leaving): \(r.stderr)")
                #expect(
                    !FileManager.default.fileExists(atPath: fs.path + "/s"),
                    "leaving \(leaving): a half-made store is left")
            } else {
                #expect(try CLI.run(["check", "--store", fs.path + "/s"]).status == 0)
                try FileManager.default.removeItem(atPath: fs.path + "/s")
            }
        }
    }

    /// Writes that meet a full disk fail with "the disk is full", leave the store consistent and
    /// readable, and succeed again once space is freed.
    @Test func writesOnAFullDiskFailCleanlyAndResume() throws {
        let fs = try #require(SmallFileSystem(kilobytes: 3 << 10))
        let dir = tempDir()
        try write(SampleData.metadata, to: dir + "/m.xml")
        let store = fs.path + "/s"
        #expect(try CLI.run(["init", "--store", store, "--metadata", dir + "/m.xml"]).status == 0)
        try fs.fill(leaving: 64 << 10)
        let r = try HostileEnvironmentTests.spawn([
            "generate", "--store", store, "--set", "BusinessPartners", "--count", "50000", "--batch", "2000",
        ])
        #expect(r.signal == 0 && r.status == 1, "\(r)")
        #expect(r.stderr.contains("the disk is full"), "\(r.stderr)")
        let check = try CLI.run(["check", "--store", store])
        #expect(check.status == 0, "\(check.stdout)\(check.stderr)")
        let before = try OfflineStore.open(at: store, readOnly: true).count(set: "BusinessPartners")
        #expect(before % 2000 == 0, "\(before) is not whole batches")
        fs.unfill()
        let again = try CLI.run(["generate", "--store", store, "--set", "Products", "--count", "500"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try CLI.run(["check", "--store", store]).status == 0)
    }

    /// Regression: a sort that spilled with a full TMPDIR died by SIGBUS and stranded its
    /// directory. The scratch file is unlinked while open: nothing is ever left, even mid-sort.
    @Test func sortSpillOnAFullScratchDirectory() throws {
        let dir = try CLITests().sampleStore()
        let store = try OfflineStore.open(at: dir + "/store")
        let fs = try #require(SmallFileSystem(kilobytes: 256))
        let engine = QueryEngine(store: store.entities, memorySortLimit: 3, scratchDirectory: fs.path)
        var text = ""
        try engine.execute("SalesOrderItems?$orderby=NetAmount desc") { chunk in
            text += chunk
            #expect(
                (try? FileManager.default.contentsOfDirectory(atPath: fs.path))?.isEmpty == true,
                "a scratch file is visible")
        }
        #expect(text.contains("\"value\""))
        try fs.fill()
        do {
            try engine.execute("SalesOrderItems?$orderby=NetAmount desc") { (_: String) in }
            Issue.record("a spill into a full directory succeeded")
        } catch {
            #expect("\(error)".contains("disk is full") || "\(error)".contains("No space left"), "\(error)")
        }
        fs.unfill()
        #expect(try FileManager.default.contentsOfDirectory(atPath: fs.path).isEmpty)
    }

    /// Regression: a store on a read-only file system could not even be queried. Reading commands
    /// open it read-only; writing ones say why they cannot.
    @Test func readOnlyFileSystem() throws {
        let sample = try CLITests().sampleStore()
        let fs = try #require(SmallFileSystem(kilobytes: 4 << 10))
        let store = fs.path + "/s"
        try FileManager.default.copyItem(atPath: sample + "/store", toPath: store)
        try #require(fs.remountReadOnly())
        let get = try CLI.run(["get", "--store", store, "Products('HT-1001')"])
        #expect(get.status == 0 && get.stdout.contains("HT-1001"), "\(get.stderr)")
        let query = try CLI.run(["query", "--store", store, "SalesOrderItems?$filter=Quantity ge 5&$count=true&$top=1"])
        #expect(query.status == 0 && query.stdout.contains("@odata.count"), "\(query.stderr)")
        #expect(try CLI.run(["stats", "--store", store]).status == 0)
        let load = try CLI.run(["load", "--store", store, "--set", "Products", sample + "/Products.json"])
        #expect(load.status == 1 && load.stderr.contains("Read-only file system"), "\(load.stderr)")
    }
}
