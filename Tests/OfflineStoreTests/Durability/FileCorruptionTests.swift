import Remote
import Foundation
import Testing
@testable import OfflineStore
import Queue
import Sync
import Samples
import TestSupport

/// `offline-store check` on damaged copies of a store's `data.mdb`, each in a child process with
/// a time limit: it never dies by a signal, never hangs, exits 0 only with "ok", reports every
/// damage to a structure LMDB reads, and passes damage to bytes nothing reads.
///
/// Bounded for CI by count and time: `CORRUPTION_TRIALS` (default 300) and
/// `CORRUPTION_SECONDS` (default 60, none when `CORRUPTION_TRIALS` is given alone). The seed
/// is printed; `TEST_SEED` replays a run.
@Suite(.soak) struct FileCorruptionTests {
    struct Tally {
        var trials = 0, reported = 0, ok = 0, signals = 0, hangs = 0, missed = 0, falseAlarms = 0, badExits = 0
    }

    @Test func checkReportsDamageAndNeverDiesBySignal() async throws {
        let seed = testSeed("checkReportsDamageAndNeverDiesBySignal")
        let pristine = try await Self.buildOfflineStore(seed: seed)
        let map = DataFileMap(Array(try Data(contentsOf: URL(fileURLWithPath: pristine + "/data.mdb"))))
        // The store has what the damage should reach: deep trees, overflow runs, a free list
        // whose entry needs an overflow run of its own, and free pages.
        #expect(map.live.values.contains { $0.kind == .branch && $0.tree == .named })
        #expect(map.live.values.contains { $0.kind == .overflowHead && $0.tree == .named })
        #expect(map.live.values.contains { $0.kind == .overflowHead && $0.tree == .freeList })
        #expect(map.freePages.count > 50)

        let env = ProcessInfo.processInfo.environment
        let maxTrials = env["CORRUPTION_TRIALS"].flatMap(Int.init) ?? 300
        let maxSeconds =
            env["CORRUPTION_SECONDS"].flatMap(Double.init) ?? (env["CORRUPTION_TRIALS"] == nil ? 60 : .infinity)
        var r = SeededRandom(seed: seed)
        let store = tempDir() + "/damaged"
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        var tally: [FileDamage.Kind: Tally] = [:]
        var issues = 0
        let start = Date()
        var trial = 0
        while trial < maxTrials && Date().timeIntervalSince(start) < maxSeconds {
            trial += 1
            let damage = FileDamage.make(FileDamage.Kind.allCases.randomElement(using: &r)!, map, &r)
            try Data(damage.bytes).write(to: URL(fileURLWithPath: store + "/data.mdb"))
            try? FileManager.default.removeItem(atPath: store + "/lock.mdb")
            let o = try await ChildProcess.run(["check", "--store", store], timeout: 60)
            var t = tally[damage.kind, default: Tally()]
            t.trials += 1
            var failure: String?
            if let signal = o.signal {
                t.signals += 1
                failure = "died by signal \(signal)"
            } else if o.hung {
                t.hangs += 1
                failure = "hung"
            } else if o.status == 0 && o.stdout.hasPrefix("ok:") {
                t.ok += 1
                if damage.expectation == .reported { t.missed += 1; failure = "passed damage it must report" }
            } else if o.status == 1 && !(o.stdout + o.stderr).isEmpty {
                t.reported += 1
                if damage.expectation == .ok { t.falseAlarms += 1; failure = "reported harmless damage" }
            } else {
                t.badExits += 1
                failure = "exited \(o.status) without a report"
            }
            if damage.kind == .truncation, failure == nil { failure = try Self.readersOnTruncated(store, damage) }
            tally[damage.kind] = t
            if let failure, issues < 20 {
                issues += 1
                Issue.record(
                    "trial \(trial), \(damage.kind) \(damage.detail), expected \(damage.expectation): \(failure)\nstdout: \(o.stdout.prefix(600))\nstderr: \(o.stderr.prefix(600))"
                )
            }
        }
        let seconds = Date().timeIntervalSince(start)
        print(Self.summary(tally, trials: trial, seconds: seconds))
        let all = tally.values.reduce(into: Tally()) {
            $0.signals += $1.signals; $0.hangs += $1.hangs; $0.missed += $1.missed; $0.falseAlarms += $1.falseAlarms;
            $0.badExits += $1.badExits
        }
        #expect(all.signals == 0 && all.hangs == 0 && all.badExits == 0)
        #expect(all.missed == 0 && all.falseAlarms == 0)
        #expect(trial >= min(maxTrials, 20), "too few trials in the time allowed")
    }

    /// Each named database's root made a page past the file's end in turn (in its record in the
    /// main database), as a power cut without fsync can leave it. In this process, opening the
    /// store and reading every set, and `check()`, throw or answer — never trap — and opening
    /// throws when the damaged root is `meta`'s (what opening reads first); `check(at:)`, which
    /// audits the file before LMDB reads it, reports every one. LMDB marks a read transaction
    /// failed where it reads a root and ignores the error (`mdb_cursor_init`), then answers the
    /// next call `MDB_BAD_TXN` — which `_check` once took for misuse and trapped on
    /// (PowerLossTests' noSync run crashed opening a store so damaged). Damage LMDB asserts on
    /// itself (a page of the wrong type met while walking a tree) still aborts: `get` and
    /// `query` do not audit, `check` does.
    @Test(.runsOffThePool) func aRootPastTheEndOfTheFileThrowsInProcess() throws {
        let pristine = try Self.buildStore(seed: testSeed("aRootPastTheEndOfTheFileThrowsInProcess"))
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: pristine + "/data.mdb")))
        let map = DataFileMap(bytes)
        let ps = map.pageSize
        // The main database's leaf nodes: a named database's name, and its record (48 bytes, the
        // root page number last).
        var records: [(name: String, root: Int)] = []
        for (p, page) in map.live where page.tree == .main && page.kind == .leaf {
            for node in page.nodes where !node.big && node.dataSize == 48 {
                let key = p * ps + node.offset + 8
                let name = String(decoding: bytes[key..<key + node.keySize], as: UTF8.self)
                records.append((name, key + node.keySize + 40))
            }
        }
        #expect(records.contains { $0.name == "meta" }, "\(records.map(\.name))")
        var refusedAtOpen = 0
        for (n, (name, root)) in records.enumerated() {
            let dir = tempDir() + "/root-of-\(n)"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            var damaged = bytes
            let past = UInt64(map.pages + 1_000)
            for i in 0..<8 { damaged[root + i] = UInt8(truncatingIfNeeded: past >> (8 * UInt64(i))) }
            try Data(damaged).write(to: URL(fileURLWithPath: dir + "/data.mdb"))
            var refused = false
            do {
                let store = try OfflineStore.open(at: dir, readOnly: true)
                for set in SampleData.setsInLoadOrder { _ = try? store.entities(set) }
                _ = try? store.check()
            } catch {
                refused = true
                #expect("\(error)".count < 2_000)
            }
            if refused { refusedAtOpen += 1 }
            if name == "meta" { #expect(refused, "a store whose meta root is past the end opened") }
            let report = try OfflineStore.check(at: dir)
            #expect(!report.isConsistent, "the audit passed the root of '\(name)' past the end")
            try? FileManager.default.removeItem(atPath: dir)
        }
        print(
            "roots past the end: \(records.count) databases, \(refusedAtOpen) refused at open, all reported by check(at:)"
        )
    }

    /// `get` and `query` on a truncated copy: a clear error naming the truncation, never a signal;
    /// when only free pages were cut, they work. Returns what went wrong, if anything.
    static func readersOnTruncated(_ store: String, _ damage: FileDamage) throws -> String? {
        for args in [
            ["get", "--store", store, "Products('HT-1000')"], ["query", "--store", store, "Products?$top=2"],
        ] {
            let o = try ChildProcess.run(args, timeout: 60)
            if let signal = o.signal { return "\(args[0]) died by signal \(signal)" }
            if o.hung { return "\(args[0]) hung" }
            switch damage.expectation {
            case .reported where damage.bytes.isEmpty:
                if o.status == 0 { return "\(args[0]) succeeded on an empty data.mdb" }
            case .reported:
                if o.status != 1 || !o.stderr.contains("truncated") {
                    return "\(args[0]) exited \(o.status): \(o.stderr)"
                }
            case .ok, .either:
                if o.status != 0 { return "\(args[0]) failed on a file cut only in free pages: \(o.stderr)" }
            }
        }
        return nil
    }

    static func summary(_ tally: [FileDamage.Kind: Tally], trials: Int, seconds: Double) -> String {
        var lines = [
            "corruption trials: \(trials) in \(String(format: "%.1f", seconds)) s",
            "kind          trials reported   ok signals hangs missed falseAlarms badExits",
        ]
        for kind in FileDamage.Kind.allCases {
            let t = tally[kind, default: Tally()]
            let columns = zip(
                [t.trials, t.reported, t.ok, t.signals, t.hangs, t.missed, t.falseAlarms, t.badExits],
                [6, 9, 5, 8, 6, 7, 12, 9])
            lines.append(
                kind.rawValue.padding(toLength: 13, withPad: " ", startingAt: 0)
                    + columns.map { String($0).leftPadded(to: $1) }.joined())
        }
        return lines.joined(separator: "\n")
    }

    /// A store from the sample `$metadata`: the sample data, generated orders and items (items
    /// generated twice, so replaced rows leave free pages), orders with notes too long for a page
    /// (overflow runs), most of them deleted in one transaction, so the free list's entry for it
    /// needs an overflow run too.
    static func buildStore(seed: UInt64) throws -> String {
        let dir = tempDir() + "/pristine"
        let store = try OfflineStore.create(
            at: dir, metadata: Array(SampleData.metadata.utf8), configuration: SampleData.configuration)
        for set in SampleData.setsInLoadOrder { _ = try store.load(set: set, json: Array(SampleData.json(set).utf8)) }
        _ = try store.generate(set: "SalesOrders", count: 300, seed: seed)
        _ = try store.generate(set: "SalesOrderItems", count: 1_500, seed: seed)
        _ = try store.generate(set: "SalesOrderItems", count: 1_500, seed: seed &+ 1)
        let generator = try store.generator(set: "SalesOrders", count: 150, seed: seed &+ 2)
        var big: [Properties] = []
        for i in 0..<150 {
            var order = generator.entity(i)
            order["SalesOrderID"] = .string("BIG\(1000 + i)")
            order["Note"] = .string(String(repeating: "note \(i) ", count: 500 + 10 * i))
            big.append(order)
        }
        _ = try store.load(set: "SalesOrders", entities: big)
        let orders = try store.entities.set("SalesOrders")
        let doomed = big.prefix(120).map { $0["SalesOrderID"]! }
        try store.entities.write { t in
            for key in doomed { _ = try orders.delete(t, key: [key]) }
        }
        #expect(try store.check().isConsistent)
        return dir
    }

    /// `buildStore`'s store with a covering index and the offline role's databases too: two defining requests refreshed
    /// (membership, ETags, delta state) and local changes pending (queue records, `q/by-entity`,
    /// `base/` images).
    static func buildOfflineStore(seed: UInt64) async throws -> String {
        let dir = try buildStore(seed: seed)
        let store = try OfflineStore.open(at: dir)
        // A covering index: its entries carry property values that `check` compares with the rows.
        try store.addIndex(set: "SalesOrderItems", definition: "ProductID INCLUDE Quantity, NetAmount")
        try store.define(name: "P", url: "Products")
        try store.define(name: "BP", url: "BusinessPartners")
        let report = try await store.refresh(backend: ETaggedSampleBackend())
        #expect(report.received > 0)
        let (members, etags) = try store.entities.read { t in
            (try t.count(store.entities.membership), try t.count(store.entities.serverETags))
        }
        #expect(members == report.received && etags == report.received, "\(members) members, \(etags) ETags")
        try await store.update(set: "Products", key: [.string("HT-1000")], changes: ["Name": .string("changed")])
        try await store.delete(set: "Products", key: [.string("HT-1001")])
        try await store.create(
            set: "Products",
            entity: ["ProductID": .string("LOCAL-1"), "Name": .string("new"), "Category": .string("Notebooks")])
        #expect(try store.check().isConsistent)
        return dir
    }
}

/// `SampleBackend`'s answers with an `@odata.etag` on every entity.
struct ETaggedSampleBackend: Transport {
    var serviceRoot: String { SampleBackend().serviceRoot }

    func send(_ request: WireRequest) async throws -> WireResponse {
        let answer = try await SampleBackend().send(request)
        guard answer.status == 200,
            var doc = try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any],
            let value = doc["value"] as? [[String: Any]]
        else { return answer }
        doc["value"] = value.enumerated().map { i, e in e.merging(["@odata.etag": "W/\"\(i)\""]) { a, _ in a } }
        return WireResponse(status: 200, body: Array(try JSONSerialization.data(withJSONObject: doc)))
    }

    func batch(_ requests: [WireRequest], headers: [(String, String)]) async throws -> [WireResponse] {
        try await SampleBackend().batch(requests, headers: headers)
    }
}

extension String {
    func leftPadded(to width: Int) -> String { String(repeating: " ", count: max(0, width - count)) + self }
}
