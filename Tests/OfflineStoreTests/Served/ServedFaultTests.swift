#if DEBUG  // the fault hook exists in debug builds only
import LMDB
import Foundation
import Testing
@testable import OfflineStore
import Samples
@testable import Storage

/// "A served write, its change-log entry and its repeatability record are in one transaction" as
/// a claim tested: every `mdb_*` call a served write makes is made to fail in turn, with each
/// error LMDB can give on a write path. After each, the store passes `check`, and every database
/// is exactly as before the write or exactly as after it.
@Suite(.soak, .checksStores) struct ServedFaultTests {
    static let window: TimeInterval = 86_400
    static let start = Date(timeIntervalSince1970: 1_700_000_000)

    struct Scenario: Sendable, CustomStringConvertible {
        var name: String
        /// Served writes made before, at `start`.
        var before: [@Sendable (ServedTransaction) throws -> Void] = []
        var id: String?
        var fingerprint: [UInt8] = [7]
        /// Seconds after `start` when the write runs.
        var at: TimeInterval = 10
        var body: @Sendable (ServedTransaction) throws -> Void
        var description: String { name }
    }

    static let response = RecordedResponse(
        status: 201, headers: [("ETag", "W/\"1\""), ("Location", "x")], body: Array("{}".utf8))

    static let scenarios: [Scenario] = [
        Scenario(name: "create", id: "f-create") { tx in
            _ = try tx.create(set: "Products", entity: ["ProductID": .string("F-1"), "Name": .string("new")])
        },
        Scenario(name: "update with If-Match", id: "f-update") { tx in
            let tag = try tx.get(set: "Products", key: [.string("HT-1001")])!.etag
            _ = try tx.update(
                set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("changed")], ifMatch: tag)
        },
        Scenario(name: "replace", id: "f-replace") { tx in
            _ = try tx.replace(
                set: "Products", key: [.string("HT-1001")], entity: ["Name": .string("replaced")], ifMatch: "*")
        },
        Scenario(name: "delete", id: "f-delete") { tx in
            try tx.delete(set: "Products", key: [.string("HT-1001")], ifMatch: nil)
        },
        Scenario(
            name: "update of a logged entity (compaction), no id",
            before: [
                { tx in
                    _ = try tx.update(
                        set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("a")], ifMatch: nil)
                }
            ],
            id: nil
        ) { tx in
            _ = try tx.update(set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("b")], ifMatch: nil)
        },
        Scenario(
            name: "create purging expired records",
            before: [{ _ in }, { _ in }, { _ in }], id: "f-purge", at: window + 60
        ) { tx in
            _ = try tx.create(set: "Products", entity: ["ProductID": .string("F-2")])
        },
        Scenario(name: "batch: two creates, an update, a delete", id: "f-batch") { tx in
            _ = try tx.create(
                set: "BusinessPartners", entity: ["BusinessPartnerID": .string("B-1"), "CompanyName": .string("b")])
            _ = try tx.create(set: "Products", entity: ["ProductID": .string("F-3"), "SupplierID": .string("B-1")])
            _ = try tx.update(set: "Products", key: [.string("HT-1000")], changes: ["Price": .null], ifMatch: nil)
            try tx.delete(set: "Products", key: [.string("HT-1002")], ifMatch: nil)
        },
        // A body that turns errors into answers (as an HTTP layer might): a failed call must still
        // undo the whole transaction, not commit what the write had done before it failed.
        Scenario(name: "a body that swallows errors", id: "f-swallow") { tx in
            do {
                _ = try tx.update(
                    set: "Products", key: [.string("HT-1000")], changes: ["Name": .string("s")], ifMatch: nil)
                _ = try tx.create(set: "Products", entity: ["ProductID": .string("F-5")])
            } catch {}
        },
        Scenario(
            name: "replay of a recorded request",
            before: [{ tx in _ = try tx.create(set: "Products", entity: ["ProductID": .string("F-4")]) }],
            id: "before-0"
        ) { _ in
            Issue.record("a replay ran its body")
        },
    ]

    /// Every named database's entries, raw: the whole state of the store.
    static func state(_ store: OfflineStore) throws -> [String: [[UInt8]]] {
        let env = store.entities.environment
        var out: [String: [[UInt8]]] = [:]
        for name in try env.databaseNames() {
            guard let db = try env.database(named: name, create: false) else { continue }
            out[name] = try env.read { txn in
                try txn.view.withCursor(db) { c in
                    var rows: [[UInt8]] = []
                    var e = try c.first()
                    while let (k, v) = e { rows.append(Array(k) + [0xFF, 0xFF] + Array(v)); e = try c.next() }
                    return rows
                }
            }
        }
        return out
    }

    static func run(_ scenario: Scenario, on store: OfflineStore) async -> Result<(RecordedResponse, Bool), any Error> {
        store.now = { start + scenario.at }
        let body = scenario.body
        do {
            let r = try await store.served(repeatabilityID: scenario.id, fingerprint: scenario.fingerprint) { tx in
                try body(tx)
                return Self.response
            }
            return .success(r)
        } catch {
            return .failure(error)
        }
    }

    @Test(arguments: scenarios)
    func everyCallOfAServedWriteFailsCleanly(scenario: Scenario) async throws {
        let template = try await makeSampleStore()
        template.now = { Self.start }
        for (n, write) in scenario.before.enumerated() {
            _ = try await template.served(repeatabilityID: "before-\(n)", fingerprint: scenario.fingerprint) { tx in
                try write(tx)
                return Self.response
            }
        }
        let before = try Self.state(template)
        // The state after the write, and the calls it makes.
        let probe = try QueueFaultTests.copy(template.path)
        FaultInjection.countCalls(in: probe.entities.environment)
        let done = try await Self.run(scenario, on: probe).get()
        let calls = FaultInjection.stop(probe.entities.environment).calls
        let after = try Self.state(probe)
        let replay = scenario.name.hasPrefix("replay")
        #expect(done.1 == replay)
        #expect(
            replay ? after == before : after != before,
            "\(scenario): the write changed \(replay ? "something" : "nothing")")
        #expect(calls.count >= (replay ? 3 : 10), "\(scenario): only \(calls.count) calls seen")
        var trials = 0, injected = 0, succeeded = 0
        for n in 1...calls.count {
            for (codeName, code) in QueueFaultTests.codes {
                let store = try QueueFaultTests.copy(template.path)
                let env = store.entities.environment
                FaultInjection.fail(callNumber: n, with: code, in: env)
                let result = await Self.run(scenario, on: store)
                let hit = FaultInjection.stop(env).injected
                trials += 1
                if hit { injected += 1 }
                let now = try Self.state(store)
                let report = try store.check()
                let context = "\(scenario), call \(n) (\(calls[n - 1])) failing with \(codeName)"
                #expect(report.isConsistent, "\(context): \(report)")
                switch result {
                case .success(let r):
                    succeeded += 1
                    #expect(
                        now == after && r.0 == Self.response && r.1 == replay,
                        "\(context): succeeded but the store is not as after the write")
                case .failure:
                    #expect(now == before, "\(context): failed but the store changed")
                    // The store still works after the failure.
                    let retried = await Self.run(scenario, on: store)
                    #expect((try? retried.get().1) == replay, "\(context): the retried write failed: \(retried)")
                    #expect(try Self.state(store) == after, "\(context): the retried write did not land")
                }
            }
        }
        print(
            "fault injection, served \(scenario): \(calls.count) calls (\(Set(calls).sorted().joined(separator: ", "))), \(trials) trials, \(injected) faults injected, \(succeeded) recovered (map grown and rerun)"
        )
        #expect(injected == trials)
    }

    /// The write units of one `$batch` in one group commit (`servedAll`): a unit applied and
    /// recorded, a unit refused by design (a taken key), a unit applied and recorded. Every call
    /// fails in turn: the store then holds exactly what the units that reported success do when
    /// run alone, in order — each unit all or nothing, whatever the others did — passes `check`,
    /// and the same batch sent again completes it (the applied units replayed from their records).
    static let groupUnits: [(id: String?, body: @Sendable (ServedTransaction) throws -> Void)] = [
        (
            "g-0",
            { tx in _ = try tx.create(set: "Products", entity: ["ProductID": .string("G-0"), "Name": .string("g")]) }
        ),
        (nil, { tx in _ = try tx.create(set: "Products", entity: ["ProductID": .string("HT-1000")]) }),
        (
            "g-2",
            { tx in
                _ = try tx.update(
                    set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("grouped")], ifMatch: nil)
                try tx.delete(set: "Products", key: [.string("HT-1002")], ifMatch: nil)
            }
        ),
    ]

    static func runGroup(on store: OfflineStore, only: Set<Int>? = nil) async -> [Bool] {
        store.now = { start + 10 }
        let units = groupUnits.enumerated().filter { only?.contains($0.offset) ?? true }.map { _, unit in
            let body = unit.body
            return OfflineStore.ServedUnit(repeatabilityID: unit.id, fingerprint: [7]) { tx in
                try body(tx)
                return Self.response
            }
        }
        let results = await store.servedAll(units)
        return results.map { (try? $0.get()) != nil }
    }

    @Test func everyCallOfAGroupCommitLeavesEachUnitWholeOrAbsent() async throws {
        let template = try await makeSampleStore()
        let probe = try QueueFaultTests.copy(template.path)
        FaultInjection.countCalls(in: probe.entities.environment)
        let outcome = await Self.runGroup(on: probe)
        let calls = FaultInjection.stop(probe.entities.environment).calls
        #expect(outcome == [true, false, true], "\(outcome)")
        let after = try Self.state(probe)
        var trials = 0, partial = 0, none = 0, all = 0
        for n in 1...calls.count {
            for (codeName, code) in QueueFaultTests.codes {
                let store = try QueueFaultTests.copy(template.path)
                let env = store.entities.environment
                FaultInjection.fail(callNumber: n, with: code, in: env)
                let reported = await Self.runGroup(on: store)
                FaultInjection.stop(env)
                trials += 1
                let context = "call \(n) (\(calls[n - 1])) failing with \(codeName): \(reported)"
                #expect(try store.check().isConsistent, "\(context)")
                #expect(!reported[1], "\(context): the refused unit succeeded")
                // What the units that reported success do alone, in order, on a fresh copy.
                let expected = try QueueFaultTests.copy(template.path)
                let applied = Set(reported.indices.filter { reported[$0] })
                _ = await Self.runGroup(on: expected, only: applied)
                #expect(try Self.state(store) == Self.state(expected), "\(context): not what the applied units make")
                switch applied.count {
                case 0: none += 1
                case 2: all += 1
                default: partial += 1
                }
                // Sent again, the batch completes: the applied units replayed, the others applied
                // now — the state of those units alone and then the whole batch (the change log
                // numbers its entries in the order the units landed, so `after` only when all did
                // at once).
                let again = await Self.runGroup(on: store)
                #expect(again == [true, false, true], "\(context): again \(again)")
                _ = await Self.runGroup(on: expected)
                #expect(
                    try Self.state(store) == Self.state(expected),
                    "\(context): the batch sent again did not complete it")
                if applied.count == 2 || applied.isEmpty { #expect(try Self.state(store) == after, "\(context)") }
            }
        }
        print(
            "fault injection, a group commit of 3 units: \(calls.count) calls, \(trials) trials: \(none) with no unit applied, \(partial) with one, \(all) with both"
        )
        #expect(trials > 0)
    }
}
#endif
