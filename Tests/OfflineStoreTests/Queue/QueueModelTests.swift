import LMDB
import Foundation
import Testing
import TestSupport
@testable import OfflineStore
import Samples
@testable import Queue
@testable import Sync
@testable import Storage

/// Random change sequences, applied to two stores — request-queue optimization on and off. The
/// collapsed queue must mean the same as the uncollapsed one (undo is left out here: with the
/// optimization on, a merged request is undone as one unit, so the two may rightly differ after
/// an undo; `undoKeepsTheQueueFaithful` checks undo on its own):
/// - both stores hold the same entities (collapse never changes local state);
/// - replaying either queue, in request-id order, onto the data the stores started from gives
///   exactly the local state (the queue is a faithful log), and never sends a request before a
///   parent it refers to exists (collapse never moves a change ahead of what it depends on);
/// - the collapsed queue is no longer than the uncollapsed one.
@Suite(.checksStores, .runsOffThePool) struct QueueModelTests {
    static let products = (1001...1004).map { "HT-\($0)" } + ["N-1", "N-2", "N-3"]
    static let partners = ["0100000001", "0100000002", "P-1", "P-2"]

    @Test func collapsedAndUncollapsedQueuesReplayToTheLocalState() throws {
        var rng = SeededRandom(seed: testSeed("collapsedAndUncollapsedQueuesReplayToTheLocalState"))
        let sequences = 30, steps = 50
        var requests = (collapsed: 0, plain: 0)
        for sequence in 0..<sequences {
            let fast = try Self.store(optimize: true), plain = try Self.store(optimize: false)
            let original = try Self.snapshot(fast)
            var log: [String] = []
            for _ in 0..<steps {
                guard let (change, options, undo) = try Self.randomChange(fast, &rng, undo: false) else { continue }
                log.append(undo.map { "undo \($0)" } ?? "\(change!) \(options.nonMergeable ? "(non-mergeable)" : "")")
                for store in [fast, plain] {
                    do {
                        if let undo {
                            try store.undo(set: undo.0, key: undo.1)
                        } else {
                            try store.apply([change!], options: options)
                        }
                    } catch {
                        Issue.record(
                            Comment(rawValue: "\(error) in sequence \(sequence):\n\(log.joined(separator: "\n"))"))
                        return
                    }
                }
            }
            let context = "sequence \(sequence):\n" + log.joined(separator: "\n")
            let local = try Self.snapshot(fast)
            let plainLocal = try Self.snapshot(plain)
            let same = plainLocal == local
            #expect(same, "collapse changed local state: \(Self.diff(plainLocal, local)); \(context)")
            for store in [fast, plain] { try Self.expectFaithful(store, original, context) }
            let (f, p) = (try fast.pendingRequestCount(), try plain.pendingRequestCount())
            #expect(f <= p, "collapsed \(f) > uncollapsed \(p); \(context)")
            requests.collapsed += f
            requests.plain += p
        }
        print(
            "queue model: \(sequences) sequences of \(steps) changes; \(requests.plain) requests uncollapsed, \(requests.collapsed) collapsed"
        )
    }

    /// Undo on its own, optimization on and off: after random changes and undos the queue still
    /// replays to the local state and never sends a child before its parent.
    @Test func undoKeepsTheQueueFaithful() throws {
        var rng = SeededRandom(seed: testSeed("undoKeepsTheQueueFaithful"))
        var undos = 0
        for sequence in 0..<30 {
            let store = try Self.store(optimize: sequence % 2 == 0)
            let original = try Self.snapshot(store)
            var log: [String] = []
            for _ in 0..<50 {
                guard let (change, options, undo) = try Self.randomChange(store, &rng, undo: true) else { continue }
                log.append(undo.map { "undo \($0)" } ?? "\(change!)")
                if let undo {
                    try store.undo(set: undo.0, key: undo.1)
                    undos += 1
                } else {
                    try store.apply([change!], options: options)
                }
            }
            try Self.expectFaithful(store, original, "sequence \(sequence):\n" + log.joined(separator: "\n"))
        }
        print("undo model: 30 sequences, \(undos) undos")
    }

    static func expectFaithful(_ store: OfflineStore, _ original: State, _ context: String) throws {
        let replayed = try replay(store, onto: original)
        #expect(replayed.problems.isEmpty, "\(replayed.problems); \(context)")
        let mine = try snapshot(store)
        let same = replayed.state == mine
        #expect(same, "the queue does not replay to the local state: \(diff(replayed.state, mine)); \(context)")
    }

    /// `noSync` by default: the logic is under test there, not the disk.
    static func store(optimize: Bool, durability: Durability = .noSync) throws -> OfflineStore {
        let path = tempDir() + "/store"
        var configuration = SampleData.configuration
        configuration.requestQueueOptimization = optimize
        configuration.durability = durability
        let store = try OfflineStore.create(
            at: path, metadata: Array(SampleData.metadata.utf8), configuration: configuration)
        for set in ["BusinessPartners", "Products"] { try store.load(set: set, json: Array(SampleData.json(set).utf8)) }
        StoreRegistry.register(path)
        return store
    }

    typealias State = [String: [String: Properties]]  // set → key → entity

    static func snapshot(_ store: OfflineStore) throws -> State {
        var out: State = [:]
        for set in ["BusinessPartners", "Products"] {
            try store.scan(set: set) { e in
                out[set, default: [:]][Self.key(set, e)] = e
                return true
            }
        }
        return out
    }

    /// The entities that differ, as `set key: a | b`.
    static func diff(_ a: State, _ b: State) -> String {
        var out: [String] = []
        for set in Set(a.keys).union(b.keys).sorted() {
            for k in Set((a[set] ?? [:]).keys).union((b[set] ?? [:]).keys).sorted() where a[set]?[k] != b[set]?[k] {
                out.append(
                    "\(set) \(k): \(a[set]?[k].map { "\($0)" } ?? "absent") | \(b[set]?[k].map { "\($0)" } ?? "absent")"
                )
            }
        }
        return out.joined(separator: "\n")
    }

    static func key(_ set: String, _ e: Properties) -> String {
        "\(e[set == "Products" ? "ProductID" : "BusinessPartnerID"]!)"
    }

    /// A change valid in the store's current state (or an undo), or nil.
    static func randomChange(
        _ store: OfflineStore, _ rng: inout SeededRandom, undo: Bool
    ) throws -> (OfflineStore.Change?, ChangeOptions, (String, [Value])?)? {
        let options = ChangeOptions(
            customTag: Bool.random(using: &rng) ? "t\(Int.random(in: 0..<3, using: &rng))" : nil,
            nonMergeable: Int.random(in: 0..<10, using: &rng) == 0)
        let existingPartners = try partners.filter { try store.get(set: "BusinessPartners", key: [.string($0)]) != nil }
        func supplier() -> Value {
            guard !existingPartners.isEmpty, Bool.random(using: &rng) else { return .null }
            return .string(existingPartners.randomElement(using: &rng)!)
        }
        let roll = Int.random(in: 0..<100, using: &rng)
        if roll < 25 {
            // Partners: create or delete (parents of products).
            let id = partners.randomElement(using: &rng)!
            if try store.get(set: "BusinessPartners", key: [.string(id)]) == nil {
                return (
                    .create(
                        set: "BusinessPartners",
                        entity: ["BusinessPartnerID": .string(id), "CompanyName": .string("C\(roll)")]), options, nil
                )
            }
            if roll < 8 && undo { return (nil, options, ("BusinessPartners", [.string(id)])) }
            return (
                .update(set: "BusinessPartners", key: [.string(id)], changes: ["CompanyName": .string("U\(roll)")]),
                options, nil
            )
        }
        let id = products.randomElement(using: &rng)!
        let key: [Value] = [.string(id)]
        guard try store.get(set: "Products", key: key) != nil else {
            return (
                .create(
                    set: "Products",
                    entity: ["ProductID": .string(id), "Name": .string("n\(roll)"), "SupplierID": supplier()]), options,
                nil
            )
        }
        switch roll {
        case 25..<60:
            var changes: Properties = [:]
            if Bool.random(using: &rng) { changes["Name"] = .string("p\(roll)") }
            if Bool.random(using: &rng) { changes["SupplierID"] = supplier() }
            if Bool.random(using: &rng) {
                changes["Price"] = Bool.random(using: &rng) ? .null : .decimal(EDMDecimal("\(roll).5")!)
            }
            return (.update(set: "Products", key: key, changes: changes), options, nil)
        case 60..<72:
            return (
                .replace(set: "Products", key: key, entity: ["Name": .string("r\(roll)"), "SupplierID": supplier()]),
                options, nil
            )
        case 72..<92:
            return (.delete(set: "Products", key: key), options, nil)
        default:
            return undo ? (nil, options, ("Products", key)) : (.delete(set: "Products", key: key), options, nil)
        }
    }

    /// The queue applied in request-id order to `original`, as a service would, with what went wrong.
    static func replay(_ store: OfflineStore, onto original: State) throws -> (state: State, problems: [String]) {
        var state = original
        var problems: [String] = []
        let queue = RequestQueue(store: store.entities)
        for p in try store.entities("RequestQueue?$orderby=RequestID") {
            let r = try RequestRecord(p)
            let body = try queue.body(of: r)
            let k = "\(try r.keyBytes.withUnsafeBytes { try KeyCodec.decode($0, count: 1).values[0] })"
            let exists = state[r.entitySet]?[k] != nil
            switch r.method {
            case .create:
                if exists { problems.append("request \(r.id): POST of \(k), which exists") }
                state[r.entitySet, default: [:]][k] = Properties(body.filter { !$0.value.isNull })
            case .update:
                guard var e = state[r.entitySet]?[k] else {
                    problems.append("request \(r.id): PATCH of missing \(k)"); continue
                }
                for (n, v) in body { e[n] = v.isNull ? nil : v }
                state[r.entitySet]![k] = e
            case .replace:
                if !exists { problems.append("request \(r.id): PUT of missing \(k)") }
                state[r.entitySet, default: [:]][k] = Properties(body.filter { !$0.value.isNull })
            case .delete:
                if !exists { problems.append("request \(r.id): DELETE of missing \(k)") }
                state[r.entitySet]?[k] = nil
            case .putStream, .createMedia, .link, .unlink, .call:
                problems.append("request \(r.id): a stream, link or call request, which this model makes none of")
            }
            // A product sent with a supplier that the service does not have yet: a child before its parent.
            if r.entitySet == "Products", r.method != .delete,
                case .string(let s)? = state["Products"]?[k]?["SupplierID"],
                body["SupplierID"] != nil, state["BusinessPartners"]?["\(Value.string(s))"] == nil
            {
                problems.append("request \(r.id): \(k) refers to supplier \(s) before the service has it")
            }
        }
        // Entities without properties set compare equal to stored ones only property by property.
        for (set, entities) in state {
            state[set] = entities.mapValues { Properties($0.filter { !$0.value.isNull }) }
        }
        return (state, problems)
    }
}
