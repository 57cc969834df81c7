import Foundation
import Testing
import TestSupport
@testable import OfflineStore
import Samples

/// SIGKILL a process that is making local changes, at random instants, hundreds of times: every
/// change it was told was saved is in the store and in the queue; the one in flight is there
/// whole or not at all; `check` passes and the queue replays to the local state after every kill.
@Suite(.soak, .checksStores, .runsOffThePool) struct QueueKillTests {
    @Test func killedWriterLosesNothingAcknowledged() throws {
        var rng = SeededRandom(seed: testSeed("killedWriterLosesNothingAcknowledged"))
        let rounds = ProcessInfo.processInfo.environment["KILL_ROUNDS"].flatMap(Int.init) ?? 200
        let ids = (0..<20).map { "K-\($0)" } + (1001...1005).map { "HT-\($0)" }
        // Made, read and closed here: the test opens each store anew after every kill (LMDB wants
        // one handle per file in a process).
        let (paths, original, initial): ([String], QueueModelTests.State, [[String: String]]) = try {
            let stores = [
                try QueueModelTests.store(optimize: true, durability: .full),
                try QueueModelTests.store(optimize: false, durability: .full),
            ]
            // A covering index on the changed set: `check` after each kill compares its carried values with the rows.
            for s in stores { try s.addIndex(set: "Products", definition: "Category INCLUDE Price, Name") }
            return (
                stores.map(\.path), try QueueModelTests.snapshot(stores[0]),
                try stores.map { s in try Dictionary(uniqueKeysWithValues: ids.map { ($0, try Self.state(s, $0)) }) }
            )
        }()
        var acknowledged = initial
        var totals = (kills: 0, acks: 0, lost: 0, halfThere: 0, inFlightLanded: 0, inFlightLost: 0)
        let start = Date()
        for round in 0..<rounds {
            let which = round % 2
            let p = Process()
            p.executableURL = URL(fileURLWithPath: CLI.executable)
            p.arguments = ["_change-worker", "--store", paths[which], "--seed", String(rng.next() % 1_000_000)]
            let out = Pipe()
            p.standardOutput = out
            p.standardError = FileHandle.nullDevice
            try p.run()
            // The kill comes at a random instant after the worker's first line (it has opened
            // the store and begun its first change), so a loaded machine's slow start does not
            // leave rounds that kill before anything is written.
            let first = out.fileHandleForReading.availableData
            usleep(UInt32.random(in: 0...130_000, using: &rng))
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
            totals.kills += 1
            let lines = String(decoding: first + out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(
                separator: "\n")
            // What the worker was told, and what was in flight when it died.
            var inFlight: [(kind: String, id: String)]? = nil
            for line in lines {
                let parts = line.split(separator: " ", maxSplits: 2).map(String.init)
                guard parts.count == 3 else { continue }  // a line cut by the kill
                if parts[0] == "op" {
                    inFlight = parts[2].split(separator: ",").map { op in
                        let kv = op.split(separator: ":", maxSplits: 1)
                        return (String(kv[0]), String(kv[1]))
                    }
                } else if parts[0] == "ack" {
                    for item in parts[2].split(separator: ";") {
                        let kv = item.split(separator: "=", maxSplits: 1)
                        acknowledged[which][String(kv[0])] = String(kv[1])
                    }
                    inFlight = nil
                    totals.acks += 1
                }
            }
            let store = try OfflineStore.open(at: paths[which])
            let actual = try Dictionary(uniqueKeysWithValues: ids.map { ($0, try Self.state(store, $0)) })
            let context = "round \(round) (store \(which)), in flight: \(inFlight.map { "\($0)" } ?? "nothing")"
            let flying = Set(inFlight?.map(\.id) ?? [])
            for id in ids where !flying.contains(id) && actual[id] != acknowledged[which][id] {
                totals.lost += 1
                Issue.record("\(context): \(id) is \(actual[id]!), acknowledged \(acknowledged[which][id]!)")
            }
            if let inFlight {
                let unchanged = inFlight.allSatisfy { actual[$0.id] == acknowledged[which][$0.id] }
                let applied = inFlight.allSatisfy { ($0.kind == "delete") == (actual[$0.id] == "absent") }
                if !(unchanged || applied) {
                    totals.halfThere += 1
                    Issue.record(
                        "\(context): the change in flight is half there: \(inFlight.map { "\($0.id)=\(actual[$0.id]!)" })"
                    )
                }
                if !unchanged {
                    totals.inFlightLanded += 1
                    for op in inFlight { acknowledged[which][op.id] = actual[op.id] }
                } else {
                    totals.inFlightLost += 1
                }
            }
            let report = try store.check()
            #expect(report.isConsistent, "\(context): \(report)")
            try QueueModelTests.expectFaithful(store, original, context)
            if !report.isConsistent { break }
        }
        print(
            "queue kill test: \(totals.kills) kills, \(totals.acks) changes acknowledged, \(totals.lost) lost, \(totals.halfThere) half there; the change in flight landed \(totals.inFlightLanded) times, did not \(totals.inFlightLost) times; \(String(format: "%.1f", Date().timeIntervalSince(start))) s"
        )
        #expect(totals.acks > rounds, "too few changes were acknowledged to mean anything")
    }

    /// A product as the worker prints it: its JSON, or `absent`.
    static func state(_ store: OfflineStore, _ id: String) throws -> String {
        try store.get(set: "Products", key: [.string(id)]).map { try store.json(set: "Products", entity: $0) }
            ?? "absent"
    }
}
