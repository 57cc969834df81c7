import Foundation
import Testing
@testable import OfflineStore
import Samples
import Storage
import TestSupport

/// Memory a service or a file can make the client take (finding 8 of the second hardening
/// round: a 100 MiB answer of tiny JSON values took 2,942 MiB in refresh and in flush, a
/// 100 MiB file with a large non-entity member 3,033 MiB in `load`). Each command runs as a
/// child process whose anonymous memory (RssAnon: not the mapped store, not the page cache of a
/// spooled answer) is sampled every 5 ms.
enum MemoryProbe {
    static let hugeBytes = RefreshKillTests.env("HUGE_BYTES", 100 << 20)

    /// Runs `offline-store args`; its exit status, peak RssAnon in bytes, standard output and error.
    /// The sampling runs on a thread of its own: a task on the concurrency pool, which other suites
    /// keep busy, was starved in a CI run until the child had ended (a "peak" of 0.0 MiB).
    static func run(_ args: [String]) async throws -> (status: Int32?, peak: Int, out: String, err: String) {
        let logDir = tempDir() + "/logs"
        try FileManager.default.createDirectory(atPath: logDir, withIntermediateDirectories: true)
        let pid = try RefreshKillTests.spawn(args, logDir: logDir)
        let (status, peakKB) = await withCheckedContinuation { (c: CheckedContinuation<(Int32?, Int), Never>) in
            let sampler = Thread {
                var peakKB = 0
                var status: Int32? = nil
                let deadline = Date().addingTimeInterval(300)
                while status == nil && Date() < deadline {
                    if let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
                        let line = text.split(separator: "\n").first(where: { $0.hasPrefix("RssAnon:") }),
                        let kb = Int(line.split(separator: " ").dropFirst().first ?? "")
                    {
                        peakKB = max(peakKB, kb)
                    }
                    usleep(5_000)
                    status = RefreshKillTests.reap(pid)
                }
                if status == nil {
                    kill(pid, SIGKILL)
                    _ = RefreshKillTests.reap(pid, wait: true)
                }
                c.resume(returning: (status, peakKB))
            }
            sampler.start()
        }
        let read = { (name: String) in (try? String(contentsOfFile: logDir + "/" + name, encoding: .utf8)) ?? "" }
        return (status, peakKB * 1024, read("out"), read("err"))
    }

    /// A live Swift process holds more anonymous memory than this: a peak below it was not sampled.
    static let sampled = 1 << 20

    static func mib(_ bytes: Int) -> String { String(format: "%.1f MiB", Double(bytes) / 1_048_576) }

    /// Entities in the sample data of `set`.
    static func count(_ set: String) throws -> Int {
        guard case .array(let items)? = try JSON.parse(SampleData.json(set))["value"] else { return -1 }
        return items.count
    }
}

@Suite(.external, .checksStores, .serialized) struct BoundedMemoryRefreshTests {
    /// A refresh whose first page holds `HUGE_BYTES` (default 100 MiB) of tiny values — in a
    /// property the local `$metadata` lacks, or in an annotation of the page before its
    /// entities — runs in memory far below the answer's size: the answer goes to a temporary
    /// file, its entities are parsed as they stream, the values nobody reads are never built.
    @Test(arguments: ["huge-unknown", "huge-annotation"])
    func aHugePageOfTinyValuesTakesLittleMemory(mode: String) async throws {
        let upstream = try await HostileUpstream.start(["--huge-bytes", String(MemoryProbe.hugeBytes)])
        defer { Task { await upstream.stop() } }
        let store = try HostileUpstreamTests.store(upstream.root(mode))
        let path = store.path
        let run = try await MemoryProbe.run(["refresh", "--store", path])
        print(
            "bounded memory, refresh \(mode): \(MemoryProbe.mib(MemoryProbe.hugeBytes)) answer, peak RssAnon \(MemoryProbe.mib(run.peak)); \(run.out.split(separator: "\n").first ?? "")"
        )
        #expect(run.status == 0, "\(run.err)")
        #expect(run.peak > MemoryProbe.sampled && run.peak < 48 << 20, "peak RssAnon \(MemoryProbe.mib(run.peak))")
        let after = try OfflineStore.open(at: path, readOnly: true)
        #expect(try after.count(set: "Products") == MemoryProbe.count("Products"))
        if mode == "huge-unknown" { #expect(run.out.contains("1 unknown properties skipped"), "\(run.out)") }
        #expect(try after.check().isConsistent)
    }

    /// A flush whose answer to a create holds `HUGE_BYTES` of tiny values in a property the
    /// local `$metadata` lacks: the answer is kept (up to the backend's `maxBodyBytes`) but not
    /// built, so the peak stays at two or three copies of the answer (measured: 195–201 MiB for
    /// 100 MiB), not 29 of it.
    @Test func aHugeAnswerToAWriteIsNotBuilt() async throws {
        let upstream = try await HostileUpstream.start(["--huge-bytes", String(MemoryProbe.hugeBytes)])
        defer { Task { await upstream.stop() } }
        let store = try HostileUpstreamTests.store(upstream.root("huge-unknown"))
        try await store.create(
            set: "Products", entity: ["ProductID": .string("HX-1"), "Name": .string("n")])
        let path = store.path
        let run = try await MemoryProbe.run(["flush", "--store", path])
        print(
            "bounded memory, flush huge-unknown: \(MemoryProbe.mib(MemoryProbe.hugeBytes)) answer, peak RssAnon \(MemoryProbe.mib(run.peak))"
        )
        #expect(run.status == 0 && run.out.contains("succeeded 1"), "\(run.out) \(run.err)")
        #expect(
            run.peak > MemoryProbe.sampled && run.peak < MemoryProbe.hugeBytes * 3 + (48 << 20),
            "peak RssAnon \(MemoryProbe.mib(run.peak))")
        let after = try OfflineStore.open(at: path, readOnly: true)
        #expect(try after.pendingRequestCount() == 0)
        #expect(try after.check().isConsistent)
    }
}

@Suite(.soak, .checksStores) struct BoundedMemoryLoadTests {
    /// `load` of a file whose document carries `HUGE_BYTES` of tiny values in a member that is
    /// not the entity array — before it or after it — runs in memory far below the file's size.
    @Test(arguments: [true, false]) func aLargeMemberBesideTheEntitiesTakesLittleMemory(before: Bool) async throws {
        let store = try OfflineStore.create(
            at: tempDir() + "/store", metadata: Array(SampleData.metadata.utf8), configuration: SampleData.configuration
        )
        let path = store.path
        let file = tempDir() + "/products.json"
        _ = FileManager.default.createFile(atPath: file, contents: nil)
        guard let out = FileHandle(forWritingAtPath: file) else {
            Issue.record("cannot write \(file)")
            return
        }
        let products = try JSON.parse(SampleData.json("Products"))["value"]!.text
        let huge = Data(("[" + String(repeating: "0,", count: MemoryProbe.hugeBytes / 2 - 1) + "0]").utf8)
        out.write(Data(#"{"@odata.context":"$metadata#Products","#.utf8))
        if before { out.write(Data(#""@huge.annotation":"#.utf8)); out.write(huge); out.write(Data(",".utf8)) }
        out.write(Data(#""value":\#(products)"#.utf8))
        if !before { out.write(Data(#","@huge.annotation":"#.utf8)); out.write(huge) }
        out.write(Data("}".utf8))
        try out.close()
        let run = try await MemoryProbe.run(["load", "--store", path, "--set", "Products", file])
        print(
            "bounded memory, load with a huge member \(before ? "before" : "after") the entities: \(MemoryProbe.mib(MemoryProbe.hugeBytes)), peak RssAnon \(MemoryProbe.mib(run.peak))"
        )
        #expect(run.status == 0, "\(run.err)")
        #expect(run.peak > MemoryProbe.sampled && run.peak < 48 << 20, "peak RssAnon \(MemoryProbe.mib(run.peak))")
        #expect(try OfflineStore.open(at: path, readOnly: true).count(set: "Products") == MemoryProbe.count("Products"))
    }
}
