import Foundation
import OfflineStore
import Samples
import Synchronization

// observe-bench: what live queries (`OfflineStore.observe`) cost the writes of a store, and how soon
// a commit reaches an observer. See PerfTests/README.md, "Live queries".

let usage = """
    observe-bench [--tiny] [--writes N] [--observers A,B,…] [--distinct] [--latency L] [--dir DIR]

    A store with the demo's sample data (durable commits). For each observer count (default
    0,1,100,10000; --tiny 0,1,10,100), that many live queries on Products, each on one product
    (`Products('HT-1000')`, …, the products taken in turn), and N (default 300; --tiny 40) durable
    updates of a product's price, one after another, each changing the result of the queries on
    that product: the updates' rate against the rate with no observer. Observers of the same URL
    share its runs; --distinct gives each observer a URL of its own (`Products('HT-1000')?observer=7`,
    a custom option the query ignores), so each runs its own query. Then L (default 300;
    --tiny 40) updates of one watched product: the time of the update call (its durable commit) and
    the time from the call to the element that shows it, median and 99th percentile.
    """

struct Options {
    var writes = 300
    var observers = [0, 1, 100, 10_000]
    var latency = 300
    var distinct = false
    var dir: String?

    static func parse(_ args: [String]) throws -> Options {
        var o = Options()
        var i = 0
        func value() throws -> String {
            i += 1
            guard i < args.count else { throw BenchFailure("\(args[i - 1]) needs a value\n\n\(usage)") }
            return args[i]
        }
        while i < args.count {
            switch args[i] {
            case "--tiny": (o.writes, o.observers, o.latency) = (40, [0, 1, 10, 100], 40)
            case "--writes": o.writes = Int(try value()) ?? 0
            case "--latency": o.latency = Int(try value()) ?? 0
            case "--observers": o.observers = try value().split(separator: ",").compactMap { Int($0) }
            case "--distinct": o.distinct = true
            case "--dir": o.dir = try value()
            case "--help", "-h":
                print(usage)
                exit(0)
            default: throw BenchFailure("unknown argument \(args[i])\n\n\(usage)")
            }
            i += 1
        }
        guard o.writes > 0, o.latency > 0, !o.observers.isEmpty, o.observers.allSatisfy({ $0 >= 0 }) else {
            throw BenchFailure("--writes and --latency need numbers above 0, --observers counts of 0 or more")
        }
        return o
    }
}

struct BenchFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// What the observer tasks have received: elements in all, and each task's latest result.
final class Received: Sendable {
    let elements = Atomic<Int>(0)
    let started = Atomic<Int>(0)
    let latestName = Mutex<String?>(nil)
}

func now() -> ContinuousClock.Instant { ContinuousClock.now }
func ms(_ d: Duration) -> Double {
    Double(d.components.seconds) * 1e3 + Double(d.components.attoseconds) / 1e15
}
func fixed(_ x: Double, _ digits: Int = 2) -> String { String(format: "%.\(digits)f", x) }
func percentile(_ xs: [Double], _ p: Double) -> Double {
    let s = xs.sorted()
    return s[min(s.count - 1, Int(Double(s.count - 1) * p))]
}

func price(_ n: Int) -> Value { .decimal(EDMDecimal("\(100 + n % 9_000).\(n % 100 < 10 ? "0" : "")\(n % 100)")!) }

@main struct ObserveBench {
    static func main() async {
        do {
            try await run(try Options.parse(Array(CommandLine.arguments.dropFirst())))
        } catch {
            FileHandle.standardError.write(Data("observe-bench: \(error)\n".utf8))
            exit(1)
        }
    }

    static func run(_ o: Options) async throws {
        let dir = o.dir ?? NSTemporaryDirectory() + "observe-bench-\(getpid())"
        try? FileManager.default.removeItem(atPath: dir)
        defer { if o.dir == nil { try? FileManager.default.removeItem(atPath: dir) } }
        let store = try OfflineStore.create(
            at: dir, metadata: Array(SampleData.metadata.utf8), configuration: SampleData.configuration)
        for set in SampleData.setsInLoadOrder { _ = try store.load(set: set, json: Array(SampleData.json(set).utf8)) }
        let keys = try store.entities("Products?$orderby=ProductID").compactMap { p -> String? in
            if case .string(let s)? = p["ProductID"] { return s }
            return nil
        }
        print(
            "observe-bench: \(keys.count) products, durable commits, \(ProcessInfo.processInfo.activeProcessorCount) cores, "
                + (o.distinct ? "a URL of its own for each observer" : "observers of a product share its URL")
        )
        print("")
        print("observers   updates   seconds   updates/s   × no observer   elements")
        var base: Double? = nil
        var step = 0
        for count in o.observers {
            let received = Received()
            var tasks: [Task<Void, any Error>] = []
            for i in 0..<count {
                let url = "Products('\(keys[i % keys.count])')" + (o.distinct ? "?observer=\(i)" : "")
                let stream = try store.observe(url)
                tasks.append(
                    Task {
                        var first = true
                        for try await _ in stream {
                            if first { received.started.add(1, ordering: .relaxed); first = false }
                            received.elements.add(1, ordering: .relaxed)
                        }
                    })
            }
            while received.started.load(ordering: .relaxed) < count { try await Task.sleep(for: .milliseconds(5)) }
            let before = received.elements.load(ordering: .relaxed)
            let start = now()
            for _ in 0..<o.writes {
                step += 1
                let key = keys[step % keys.count]
                try await store.update(set: "Products", key: [.string(key)], changes: ["Price": price(step)])
            }
            let seconds = ms(now() - start) / 1e3
            try await Task.sleep(for: .milliseconds(200))  // the last elements
            let elements = received.elements.load(ordering: .relaxed) - before
            for t in tasks { t.cancel() }
            for t in tasks { _ = await t.result }
            let rate = Double(o.writes) / seconds
            if base == nil { base = rate }
            print(
                "\(String(count).padding(toLength: 9, withPad: " ", startingAt: 0))   "
                    + "\(String(o.writes).padding(toLength: 7, withPad: " ", startingAt: 0))   "
                    + "\(fixed(seconds).padding(toLength: 7, withPad: " ", startingAt: 0))   "
                    + "\(fixed(rate, 0).padding(toLength: 9, withPad: " ", startingAt: 0))   "
                    + "\(fixed(rate / base!).padding(toLength: 13, withPad: " ", startingAt: 0))   \(elements)")
        }
        // Latency: one observer, one product.
        let key = keys[0]
        let received = Received()
        let stream = try store.observe("Products('\(key)')")
        let watcher = Task {
            for try await result in stream {
                received.started.add(1, ordering: .relaxed)
                if case .string(let n)? = result.first?["Name"] { received.latestName.withLock { $0 = n } }
            }
        }
        while received.started.load(ordering: .relaxed) < 1 { try await Task.sleep(for: .milliseconds(5)) }
        var commit: [Double] = []
        var element: [Double] = []
        for i in 0..<o.latency {
            let name = "latency \(i)"
            let t0 = now()
            try await store.update(set: "Products", key: [.string(key)], changes: ["Name": .string(name)])
            commit.append(ms(now() - t0))
            while received.latestName.withLock({ $0 }) != name { await Task.yield() }
            element.append(ms(now() - t0))
        }
        watcher.cancel()
        _ = await watcher.result
        print("")
        print("latency, one observer, \(o.latency) updates     median ms   99th percentile ms")
        print(
            "update call (its durable commit)            \(fixed(percentile(commit, 0.5), 3))       \(fixed(percentile(commit, 0.99), 3))"
        )
        print(
            "from the call to the element showing it    \(fixed(percentile(element, 0.5), 3))       \(fixed(percentile(element, 0.99), 3))"
        )
        print("")
        print(
            "observers: live queries on Products, each on one product (the products in turn); an update changes the price of"
        )
        print(
            "the next product, so the queries of one product in \(keys.count) get an element and every query on Products runs again."
        )
    }
}
