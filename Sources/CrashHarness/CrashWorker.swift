package import ArgumentParser
import CommandSupport
import Foundation
import OfflineStore
import Samples
import Synchronization

/// The hidden worker of `crashtest`: a seeded random workload on one offline store until it is
/// killed. `--writers` threads make local changes to `Products` (creates, updates, replaces,
/// deletes, batches of two or three; a third non-mergeable, so collapse runs on and off), each on
/// its own keys `W<worker>-<n>`; one task flushes (batch size 1 or many), refreshes (with changes
/// pending) and changes the defining requests. Every line goes to standard output in one
/// `write(2)` (atomic on a pipe):
///
/// - `op T N kind:id,…` before writer T's change N, `ack T N id=state;…` after the call returned
///   (`state` as `CrashModel.state` prints it);
/// - `begin flush|refresh|define` and `end flush|refresh|define MS detail` around the other work.
///
/// A refresh or flush that meets no server (the parent kills it too) is reported and retried; any
/// other error ends the worker with status 2 and the error on stderr.
package struct CrashWorker: ParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(commandName: "_crash-worker", shouldDisplay: false)

    @OptionGroup var options: StoreOption
    @Option var serviceFile: String
    @Option var seed: UInt64 = 1
    @Option var worker: Int = 0
    @Option var keys: Int = 12
    @Option var writers: Int = 2
    /// For the test that the crash test catches a loss: after this many changes, writer 0 reports
    /// a change it never made.
    @Option var falseAckAfter: Int?

    package func run() throws {
        try runReportingErrors {
            guard writers >= 1, keys >= writers else { throw CLIError("need --writers ≥ 1 and --keys ≥ --writers") }
            let store = try OfflineStore.open(at: options.store)
            let ids = CrashModel.keys(worker: worker, count: keys)
            let lines = CrashLines()
            let hold = Hold()
            for t in 0..<writers {
                let mine = ids.enumerated().filter { $0.offset % writers == t }.map(\.element)
                let seed = self.seed &+ UInt64(t) &* 0x9E37
                let thread = Thread {
                    do {
                        try Self.write(
                            store, ids: mine, writer: t, seed: seed, lines: lines, hold: hold,
                            falseAckAfter: t == 0 ? falseAckAfter : nil)
                    } catch { Self.fail("writer \(t)", error) }
                }
                thread.stackSize = 1 << 22
                thread.start()
            }
            let (file, seed) = (serviceFile, self.seed)
            try blocking {
                do { try await Self.synchronize(store, serviceFile: file, seed: seed, lines: lines, hold: hold) } catch
                { Self.fail("sync", error) }
            }
        }
    }

    static func fail(_ who: String, _ error: any Error) -> Never {
        Output.note("crash worker (\(who)): \(error)\n")
        Foundation.exit(2)
    }

    /// One writer: change after change, reported before and after.
    static func write(
        _ store: OfflineStore, ids: [String], writer: Int, seed: UInt64, lines: CrashLines, hold: Hold,
        falseAckAfter: Int?
    ) throws {
        var rng = _SplitMix(state: seed)
        var n = 0
        // The key a false acknowledgement names is never really written: nothing mends the model.
        let falseKey = falseAckAfter != nil && ids.count > 1 ? ids[0] : nil
        let ids = falseKey != nil ? Array(ids.dropFirst()) : ids
        while true {
            // Before the write numbered `falseAckAfter` of each life (0: first thing), so the
            // test of the check does not depend on how long a worker lives between kills.
            if n == falseAckAfter, let falseKey { try lines.emit("ack \(writer) \(n) \(falseKey)=never-written/-") }
            let batch = try RandomChanges.next(
                store, ids: ids, size: rng.below(5) == 0 ? 2 + rng.below(2) : 1, n: n,
                name: .string("s\(seed % 10_000)-\(n)"), rng: &rng)
            try lines.emit("op \(writer) \(n) \(batch.described.joined(separator: ","))")
            try store.apply(batch.changes, options: ChangeOptions(customTag: "crash", nonMergeable: rng.below(3) == 0))
            let after = try batch.touched.map { "\($0)=\(try CrashModel.state(store, $0))" }
            try lines.emit("ack \(writer) \(n) \(after.joined(separator: ";"))")
            n += 1
            // A pace a flush keeps up with: the queue stays short, so flushes and refreshes are
            // many and quick and the kills find them often.
            usleep(UInt32(2_000 + rng.below(25_000)))
            while try hold.on || store.pendingRequestCount() > 60 { usleep(5_000) }
        }
    }

    /// URLs the extra defining request takes in turn: each holds some of what `Products` holds,
    /// or another set, so undefining it never removes a product the worker made.
    static let extraURLs = [
        "Products?$filter=startswith(ProductID,'W')", "Products?$filter=Price gt 500",
        "SalesOrders?$expand=Items", "BusinessPartners",
    ]

    /// Flushes, refreshes and defining-request changes, one after another.
    static func synchronize(
        _ store: OfflineStore, serviceFile: String, seed: UInt64, lines: CrashLines, hold: Hold
    ) async throws {
        var rng = _SplitMix(state: seed ^ 0x5EED)
        let parent = getppid()
        var flushes = 0
        while true {
            // Orphaned (the crash test itself was killed): stop rather than run on.
            if getppid() != parent { Foundation.exit(0) }
            let url = try String(decoding: readFile(serviceFile), as: UTF8.self).trimmingCharacters(
                in: .whitespacesAndNewlines)
            let roll = rng.below(100)
            let start = Date()
            func ms() -> Int { Int(Date().timeIntervalSince(start) * 1000) }
            if roll < 50 {
                let size = rng.below(2) == 0 ? 1 : 2 + rng.below(19)
                try lines.emit("begin flush")
                // Writes go on during the first 150 ms of a flush, then wait for it: a flush
                // chasing writers that refill the queue as fast as it drains would never end.
                flushes += 1
                let number = flushes
                hold.started(number)
                defer { hold.ended() }
                let holding = Task {
                    try await Task.sleep(for: .milliseconds(150))
                    hold.hold(number)
                }
                let report = try await store.quickFlush(serviceRoot: url, batchSize: size, connectTimeout: 1)
                holding.cancel()
                hold.ended()
                try lines.emit(
                    "end flush \(ms()) size \(size): \(report.description.replacingOccurrences(of: "\n", with: " "))")
                if report.stopped != nil { try await Task.sleep(for: .milliseconds(20)) }
            } else if roll < 88 {
                try lines.emit("begin refresh")
                do {
                    let report = try await store.quickRefresh(
                        serviceRoot: url, pageSize: rng.below(2) == 0 ? 7 : 1_000, connectTimeout: 1)
                    try lines.emit("end refresh \(ms()) \(report.requests.count) requests")
                } catch let e as BackendError {
                    // No server: the parent killed it (and starts it again).
                    try lines.emit("end refresh \(ms()) failed: \(Output.sanitized("\(e)", limit: 200))")
                    try await Task.sleep(for: .milliseconds(20))
                } catch RefreshError.service(let request, let status, let message) where status >= 500 {
                    try lines.emit(
                        "end refresh \(ms()) failed: \(request) \(status) \(Output.sanitized(message, limit: 200))")
                    try await Task.sleep(for: .milliseconds(20))
                }
            } else {
                try lines.emit("begin define")
                if store.definingRequests.contains(where: { $0.name == "Extra" }) && rng.below(2) == 0 {
                    let removed = try store.undefine(name: "Extra")
                    try lines.emit("end define \(ms()) undefined Extra, \(removed) removed")
                } else {
                    let url = extraURLs[rng.below(extraURLs.count)]
                    try store.define(name: "Extra", url: url)
                    try lines.emit("end define \(ms()) Extra = \(url)")
                }
            }
        }
    }
}

/// Whether writers should wait: the flush running now (its number) has run long. A flush's
/// number is set when it starts and cleared when it ends, so a late `hold` of a flush that has
/// ended holds nobody.
final class Hold: Sendable {
    private let running = Atomic<Int>(0)
    private let held = Atomic<Int>(0)
    var on: Bool {
        let h = held.load(ordering: .acquiring)
        return h != 0 && h == running.load(ordering: .acquiring)
    }
    func started(_ n: Int) { running.store(n, ordering: .releasing) }
    func ended() { running.store(0, ordering: .releasing) }
    func hold(_ n: Int) { held.store(n, ordering: .releasing) }
}

/// Lines to standard output from several threads, each in one `write(2)`.
final class CrashLines: Sendable {
    private let lock = Mutex(())
    func emit(_ line: String) throws {
        try lock.withLock { _ in try output(line) }
    }
}

/// What the parent and the worker agree on: the keys and how an entity's state is printed.
enum CrashModel {
    /// The worker's keys: `W<worker>-<n>` (within `ProductID`'s 10 characters).
    static func keys(worker: Int, count: Int) -> [String] { (0..<count).map { "W\(worker)-\($0)" } }

    /// `absent`, or the name and price the worker set (a price as a number: `12.50` and `12.5`
    /// are the same).
    static func state(_ store: OfflineStore, _ id: String) throws -> String {
        guard let e = try store.get(set: "Products", key: [.string(id)]) else { return "absent" }
        return state(e)
    }

    static func state(_ e: Properties) -> String {
        let name: String = if case .string(let s)? = e["Name"] { s } else { "-" }
        let price: String = if case .decimal(let d)? = e["Price"] { d.normalizedText } else { "-" }
        return "\(name)/\(price)"
    }
}

extension EDMDecimal {
    /// The text without trailing fractional zeros (`12.50` → `12.5`, `3.00` → `3`).
    var normalizedText: String {
        var text = description
        guard text.contains(".") else { return text }
        while text.hasSuffix("0") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() }
        return text
    }
}
