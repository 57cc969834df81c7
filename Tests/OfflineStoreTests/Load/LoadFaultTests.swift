#if DEBUG  // the fault hook exists in debug builds only
import LMDB
import Foundation
import Testing
import TestSupport
@testable import OfflineStore
@testable import Storage

/// The streamed `load` as a claim tested: an `mdb_*` call of its writes fails (a seeded spread
/// over all of them, each with one of the codes in rotation). All or nothing, the store is as
/// before; with a batch size, it holds whole batches. `check` passes either way, and loading the
/// file again lands it all.
@Suite(.soak, .checksStores, .runsOffThePool) struct LoadFaultTests {
    @Test(arguments: [nil, 100] as [Int?])
    func everyKindOfCallOfALoadFailsCleanly(batchSize: Int?) throws {
        let dir = try CLITests().sampleStore()
        let template = dir + "/store"
        try write(LoadStreamTests.products(0..<300), to: dir + "/p.json")
        let before = try OfflineStore.open(at: template).count(set: "Products")
        let probe = try QueueFaultTests.copy(template)
        FaultInjection.countCalls(in: probe.entities.environment)
        try probe.load(set: "Products", file: dir + "/p.json", batchSize: batchSize)
        let calls = FaultInjection.stop(probe.entities.environment).calls
        let after = try probe.count(set: "Products")
        #expect(after == before + 300)
        var r = SeededRandom(seed: testSeed("LoadFaultTests"))
        // Every commit and begin, and a seeded spread of the rest.
        let chosen = Set(
            calls.indices.filter { calls[$0].contains("txn") }
                + (0..<40).map { _ in Int.random(in: 0..<calls.count, using: &r) })
        var trials = 0, failed = 0, recovered = 0
        for (k, i) in chosen.sorted().enumerated() {
            let (codeName, code) = QueueFaultTests.codes[k % QueueFaultTests.codes.count]
            let store = try QueueFaultTests.copy(template)
            let env = store.entities.environment
            FaultInjection.fail(callNumber: i + 1, with: code, in: env)
            let result = Result { try store.load(set: "Products", file: dir + "/p.json", batchSize: batchSize) }
            _ = FaultInjection.stop(env)
            trials += 1
            let context =
                "call \(i + 1) of \(calls.count) (\(calls[i])) failing with \(codeName), batch \(batchSize.map(String.init) ?? "none")"
            let report = try store.check()
            #expect(report.isConsistent, "\(context): \(report)")
            let now = try store.count(set: "Products")
            switch result {
            case .success:
                recovered += 1
                #expect(now == after, "\(context): succeeded with \(now) products")
            case .failure(let error):
                failed += 1
                if let batchSize {
                    #expect(
                        (now - before) % batchSize == 0, "\(context): \(now - before) new products, not whole batches")
                    #expect((error as? LoadError)?.committed == now - before, "\(context): \(error)")
                } else {
                    #expect(now == before, "\(context): failed but \(now - before) products came")
                }
                try store.load(set: "Products", file: dir + "/p.json", batchSize: batchSize)
                #expect(try store.count(set: "Products") == after, "\(context)")
                #expect(try store.check().isConsistent, "\(context)")
            }
        }
        print(
            "load fault injection, batch \(batchSize.map(String.init) ?? "none"): \(calls.count) calls, \(trials) trials, \(failed) failed cleanly, \(recovered) recovered"
        )
        #expect(failed > trials / 2)
    }
}
#endif
