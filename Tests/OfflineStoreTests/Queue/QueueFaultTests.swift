import TestSupport
#if DEBUG  // the fault hook exists in debug builds only
import LMDB
import Foundation
import Testing
@testable import OfflineStore
import Samples
@testable import Queue
@testable import Sync
@testable import Storage

/// "The change and its request are in one transaction" as a claim tested, not assumed: every
/// `mdb_*` call that a create, update, replace or delete makes (collapse on and off) is made to
/// fail in turn, with each error LMDB can give on a write path. After each, the store passes
/// `check`, and its entities and queue are exactly as before the change or exactly as after it —
/// never one without the other. The store's indexes on the changed sets are covering (`INCLUDE`),
/// so `check` also proves their carried values exact after every fault.
@Suite(.soak, .checksStores, .runsOffThePool) struct QueueFaultTests {
    static let codes: [(String, Int32)] = [
        ("MDB_MAP_FULL", LMDBError.mapFull.code), ("EIO", EIO), ("ENOSPC", ENOSPC),
        ("MDB_TXN_FULL", LMDBError.txnFull.code), ("MDB_READERS_FULL", LMDBError.readersFull.code),
    ]

    /// A change, with what must be pending before it so that it collapses (or not).
    struct Scenario: Sendable, CustomStringConvertible {
        var name: String
        var before: [OfflineStore.Change]
        var change: OfflineStore.Change
        var description: String { name }
    }

    static let scenarios: [Scenario] = [
        Scenario(
            name: "create", before: [],
            change: .create(
                set: "Products",
                entity: ["ProductID": .string("F-1"), "Name": .string("new"), "SupplierID": .string("0100000001")])),
        Scenario(
            name: "update", before: [],
            change: .update(set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("changed")])),
        Scenario(
            name: "replace", before: [],
            change: .replace(set: "Products", key: [.string("HT-1001")], entity: ["Name": .string("replaced")])),
        Scenario(name: "delete", before: [], change: .delete(set: "Products", key: [.string("HT-1001")])),
        Scenario(
            name: "update after update (merge)",
            before: [.update(set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("a")])],
            change: .update(set: "Products", key: [.string("HT-1001")], changes: ["Price": .null])),
        Scenario(
            name: "delete after create (cancel)",
            before: [.create(set: "Products", entity: ["ProductID": .string("F-1")])],
            change: .delete(set: "Products", key: [.string("F-1")])),
        Scenario(
            name: "delete after update (supersede)",
            before: [.update(set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("a")])],
            change: .delete(set: "Products", key: [.string("HT-1001")])),
        Scenario(
            name: "child create under a new parent (dependency)",
            before: [
                .create(
                    set: "BusinessPartners", entity: ["BusinessPartnerID": .string("P-1"), "CompanyName": .string("p")])
            ],
            change: .create(set: "Products", entity: ["ProductID": .string("F-2"), "SupplierID": .string("P-1")])),
    ]

    /// Entities of the changed sets and every queue record, comparable.
    static func state(_ store: OfflineStore) throws -> [String] {
        var rows: [String] = []
        for set in ["Products", "BusinessPartners", "RequestQueue"] {
            try store.scan(set: set) { e in
                var e = e
                e["RepeatabilityID"] = nil
                e["CreatedAt"] = nil
                rows.append("\(set) \(e)")
                return true
            }
        }
        return rows.sorted()
    }

    @Test(arguments: scenarios)
    func everyCallOfAChangeFailsCleanly(scenario: Scenario) throws {
        var trials = 0, injected = 0, succeeded = 0
        var sites: Set<String> = []
        for optimize in [true, false] {
            // A template store with the scenario's pending changes; each trial works on a copy.
            let template = try makeSampleStore(optimize: optimize, covering: true)
            try template.apply(scenario.before)
            let templatePath = template.path
            let before = try Self.state(template)
            // The state after the change, and how many calls it makes.
            let probe = try Self.copy(templatePath)
            FaultInjection.countCalls(in: probe.entities.environment)
            try probe.apply([scenario.change])
            let calls = FaultInjection.stop(probe.entities.environment).calls
            let after = try Self.state(probe)
            #expect(calls.count > 3, "\(scenario): only \(calls.count) calls seen")
            sites.formUnion(calls)
            for n in 1...calls.count {
                for (codeName, code) in Self.codes {
                    let store = try Self.copy(templatePath)
                    let env = store.entities.environment
                    FaultInjection.fail(callNumber: n, with: code, in: env)
                    let result = Result { try store.apply([scenario.change]) }
                    let hit = FaultInjection.stop(env).injected
                    trials += 1
                    if hit { injected += 1 }
                    let now = try Self.state(store)
                    let report = try store.check()
                    let context =
                        "\(scenario), optimize \(optimize), call \(n) (\(calls[n - 1])) failing with \(codeName)"
                    #expect(report.isConsistent, "\(context): \(report)")
                    switch result {
                    case .success:
                        succeeded += 1
                        #expect(now == after, "\(context): succeeded but the store is not as after the change")
                    case .failure:
                        #expect(now == before, "\(context): failed but the store changed")
                    }
                    // The store still works after the failure.
                    if case .failure = result {
                        try store.apply([scenario.change])
                        #expect(try Self.state(store) == after, "\(context): the retried change did not land")
                    }
                }
            }
        }
        print(
            "fault injection, \(scenario): \(trials) trials, \(injected) faults injected, \(succeeded) recovered (map grown and rerun); call sites: \(sites.sorted().joined(separator: ", "))"
        )
        #expect(injected == trials)
    }

    /// A fresh store opened on a copy of `path`'s files.
    static func copy(_ path: String) throws -> OfflineStore {
        let dir = tempDir() + "/store"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: path + "/data.mdb", toPath: dir + "/data.mdb")
        return try OfflineStore.open(at: dir)
    }
}
#endif
