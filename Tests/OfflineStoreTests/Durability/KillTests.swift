import Foundation
import Testing
import TestSupport
@testable import OfflineStore
import Samples

/// SIGKILL a writing process at random instants: the store reopens consistent, and every batch
/// (one transaction) is there whole or not at all.
@Suite(.soak, .checksStores, .runsOffThePool) struct KillTests {
    @Test func killedWriterLeavesAConsistentStore() throws {
        var r = SeededRandom(seed: testSeed("killedWriterLeavesAConsistentStore"))
        let dir = tempDir()
        try write(SampleData.metadata, to: dir + "/m.xml")
        try write(SampleData.configuration.json.text, to: dir + "/c.json")
        #expect(
            try CLI.run(["init", "--store", dir + "/s", "--metadata", dir + "/m.xml", "--config", dir + "/c.json"])
                .status == 0)
        let batch = 500
        var previous = 0
        for round in 0..<4 {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: CLI.executable)
            p.arguments = [
                "generate", "--store", dir + "/s", "--set", "Products", "--count", "1000000",
                "--batch", String(batch), "--seed", String(round),
            ]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            // Random instants; the last round waits long enough that some batches surely committed.
            usleep(round == 3 ? 2_000_000 : UInt32.random(in: 100_000...800_000, using: &r))
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
            #expect(p.terminationReason == .uncaughtSignal, "round \(round): the writer finished before the kill")
            let check = try CLI.run(["check", "--store", dir + "/s"])
            #expect(check.status == 0, "round \(round): \(check.stdout)\(check.stderr)")
            let store = try OfflineStore.open(at: dir + "/s")
            let n = try store.count(set: "Products")
            #expect(n % batch == 0, "round \(round): \(n) products is not whole batches of \(batch)")
            #expect(n >= previous)
            previous = n
        }
        #expect(previous > 0)
    }
}

extension KillTests {
    /// `load` is one transaction: killed at any instant, the store has none of the file or all of it.
    @Test func killedLoadIsAllOrNothing() throws {
        var r = SeededRandom(seed: testSeed("killedLoadIsAllOrNothing"))
        let dir = tempDir()
        try write(SampleData.metadata, to: dir + "/m.xml")
        try write(SampleData.configuration.json.text, to: dir + "/c.json")
        #expect(
            try CLI.run(["init", "--store", dir + "/s", "--metadata", dir + "/m.xml", "--config", dir + "/c.json"])
                .status == 0)
        let rows = 120_000
        var text = "{\"value\":["
        for i in 0..<rows {
            if i > 0 { text += "," }
            text += "{\"ProductID\":\"P\(i)\",\"Category\":\"C\(i % 50)\",\"Price\":\(i % 997).25}"
        }
        try write(text + "]}", to: dir + "/p.json")
        for round in 0..<3 {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: CLI.executable)
            p.arguments = ["load", "--store", dir + "/s", "--set", "Products", dir + "/p.json"]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            // parse, then one write transaction: ~5 s in a debug build
            usleep(UInt32.random(in: 200_000...5_000_000, using: &r))
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
            #expect(try CLI.run(["check", "--store", dir + "/s"]).status == 0, "round \(round)")
            let n = try OfflineStore.open(at: dir + "/s").count(set: "Products")
            #expect(n == 0 || n == rows, "round \(round): \(n) of \(rows) products after the kill")
        }
        #expect(try CLI.run(["load", "--store", dir + "/s", "--set", "Products", dir + "/p.json"]).status == 0)
        #expect(try OfflineStore.open(at: dir + "/s").count(set: "Products") == rows)
        #expect(try CLI.run(["check", "--store", dir + "/s"]).status == 0)
    }

    /// `load --batch N` commits whole batches: killed at any instant, the store holds a whole
    /// number of batches, and loading the file again completes it.
    @Test func killedBatchedLoadKeepsWholeBatches() throws {
        var r = SeededRandom(seed: testSeed("killedBatchedLoadKeepsWholeBatches"))
        let dir = tempDir()
        try write(SampleData.metadata, to: dir + "/m.xml")
        try write(SampleData.configuration.json.text, to: dir + "/c.json")
        #expect(
            try CLI.run(["init", "--store", dir + "/s", "--metadata", dir + "/m.xml", "--config", dir + "/c.json"])
                .status == 0)
        let rows = 120_000, batch = 10_000
        try write(LoadStreamTests.products(0..<rows), to: dir + "/p.json")
        var partial = 0
        for round in 0..<4 {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: CLI.executable)
            p.arguments = [
                "load", "--store", dir + "/s", "--set", "Products", "--batch", String(batch), dir + "/p.json",
            ]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            usleep(UInt32.random(in: 100_000...4_000_000, using: &r))  // about 5 s in a debug build
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
            #expect(try CLI.run(["check", "--store", dir + "/s"]).status == 0, "round \(round)")
            let n = try OfflineStore.open(at: dir + "/s").count(set: "Products")
            #expect(
                n % batch == 0,
                "round \(round): \(n) products after the kill, not a whole number of batches of \(batch)")
            if n > 0 && n < rows { partial += 1 }
        }
        print("KillTests: a batched load killed 4 times; \(partial) kills left some batches and not all")
        #expect(
            try CLI.run(["load", "--store", dir + "/s", "--set", "Products", "--batch", String(batch), dir + "/p.json"])
                .status == 0)
        #expect(try OfflineStore.open(at: dir + "/s").count(set: "Products") == rows)
        #expect(try CLI.run(["check", "--store", dir + "/s"]).status == 0)
    }
}
