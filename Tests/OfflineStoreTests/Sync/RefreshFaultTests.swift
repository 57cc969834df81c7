#if DEBUG  // the fault hook exists in debug builds only
import LMDB
import Foundation
import NIOHTTP1
import Testing
@testable import OfflineStore
import Queue
import Sync
import Samples
@testable import Storage
import TestSupport

/// Refresh's transactions as claims tested, not assumed. A refresh against a real `serve` —
/// delta reads with `@removed` entries (Partners' `$expand`ed orders among them), a full read of a
/// request with a to-one `$expand` (which `serve` gives no delta link) and its sweep,
/// rebases of pending changes (an update, a delete, a create of a key the service now has), in
/// pages of 1 (so that the full read is two groups of pages: `PagePipe`), then the queue's compaction — has every `mdb_*` call it makes failed in turn with
/// an error LMDB can give on a write path. After each:
/// - `check` passes;
/// - a refresh that failed left the store exactly as one of its transactions' commits did: every
///   trial whose fault fell between the same two commits leaves the same state, and a fault
///   before the first commit leaves the store as it was — no half-written page, sweep chunk,
///   rebase or compaction;
/// - a refresh that succeeded anyway (the map grown, the transaction run again) left the store as
///   a refresh with no fault does;
/// - the next refresh completes and leaves the store as a refresh with no fault does.
/// The state compared is every entity (the request queue and the error archive included), the
/// `base/` images, `q/by-entity`, the ETags, membership (without its generation numbers: a
/// full read that failed takes a new one when read again) and the delta links; not the event log,
/// which records the failures.
@Suite(.soak, .checksStores) struct RefreshFaultTests {
    /// How many calls to fail, spread evenly over all of them from a seeded offset (a refresh
    /// makes ~600; each trial refreshes twice over HTTP): `REFRESH_FAULT_TRIALS=N`, 0 for every call.
    static let trialLimit = ProcessInfo.processInfo.environment["REFRESH_FAULT_TRIALS"].flatMap(Int.init) ?? 150
    /// A safety bound on the wall time of the trials; `REFRESH_FAULT_SECONDS`.
    static let secondsLimit = ProcessInfo.processInfo.environment["REFRESH_FAULT_SECONDS"].flatMap(Double.init) ?? 600

    /// Comparable lines for the state a refresh writes.
    static func state(_ store: OfflineStore) throws -> [String] {
        var rows: [String] = []
        let entities = store.entities
        // When a refresh records a conflict (issue 38), the ErrorArchive entry and the outcome
        // record carry the time it did: left out, as the EventLog is.
        let times: [String: String] = [SystemSets.errorArchive: "ArchivedAt", SystemSets.requestHistory: "DecidedAt"]
        for name in entities.schema.entitySetNames where name != SystemSets.eventLog {
            try store.scan(set: name) { e in
                var e = e
                if let time = times[name] { e[time] = nil }
                rows.append("\(name) \(e)")
                return true
            }
        }
        try entities.read { t in
            func dump(
                _ label: String, _ db: Database, values: Bool = true, skip: ([UInt8]) -> Bool = { _ in false }
            ) throws {
                try t.withCursor(db) { c in
                    var e = try c.first()
                    while let (k, v) = e {
                        if !skip(Array(k)) { rows.append("\(label) \(Array(k)) \(values ? Array(v) : [])") }
                        e = try c.next()
                    }
                }
            }
            for (set, db) in entities.bases.sorted(by: { $0.key < $1.key }) { try dump("base/\(set)", db) }
            try dump("q/by-entity", entities.byEntity)
            try dump("etag", entities.serverETags)
            try dump("membership", entities.membership, values: false)
            try dump("membership/by-entity", entities.membershipByEntity)
            try dump("meta", entities.meta) { $0.starts(with: Array("refresh/generation/".utf8)) }
        }
        return rows.sorted()
    }

    /// Read in full every time: `serve` cannot follow a to-one expansion from its change log.
    static let suppliers = DefiningRequest(name: "Suppliers", url: "Products?$expand=Supplier")

    /// A refreshed offline store with pending local changes, while the service changed the same
    /// entities and others; returns its path. `server` runs over `servedPath`.
    static func template(servedPath: String, server: ServerProcess, http: HTTP) async throws -> String {
        let offline = try await RefreshTests.offlineStore([
            RefreshTests.notebooks, RefreshTests.pricey, RefreshTests.partners, Self.suppliers,
        ])
        try await offline.refresh(serviceRoot: server.url, pageSize: 3)
        let served = try RefreshTests.served(servedPath)
        let notebooks = try served.entities("Products?$filter=Category eq 'Notebooks'&$orderby=ProductID")
        let dear = try #require(
            try served.entities("Products?$filter=Price gt 500 and Category ne 'Notebooks'&$orderby=ProductID").first)
        func url(_ p: Properties) -> String { "Products(\(EntitySetHandle.literal(p["ProductID"]!)))" }
        let (updated, deleted, leaving) = (notebooks[0], notebooks[1], notebooks[2])
        // Local changes.
        try await offline.update(
            set: "Products", key: updated.keyValues(of: "ProductID"), changes: ["Price": .decimal(EDMDecimal("1.50")!)])
        try await offline.delete(set: "Products", key: deleted.keyValues(of: "ProductID"))
        try await offline.create(
            set: "Products",
            entity: ["ProductID": .string("C-1"), "Name": .string("mine"), "Category": .string("Notebooks")])
        try await offline.update(
            set: "BusinessPartners", key: [.string("0100000001")], changes: ["CompanyName": .string("mine")])
        // The service's changes.
        for (method, path, body) in [
            (HTTPMethod.PATCH, url(updated), #"{"Name":"renamed on the server"}"#),
            (.PATCH, url(deleted), #"{"Name":"also renamed"}"#),
            (.POST, "Products", #"{"ProductID":"C-1","Name":"theirs","Category":"Notebooks","Price":7.00}"#),
            (.POST, "Products", #"{"ProductID":"N-1","Name":"new","Category":"Notebooks","Price":10.00}"#),
            (.PATCH, url(leaving), #"{"Category":"Tablets"}"#),
            (.DELETE, url(dear), nil),
            (.PATCH, "BusinessPartners('0100000001')", #"{"CompanyName":"theirs"}"#),
            (.DELETE, "SalesOrders('0500000003')", nil),
        ] {
            let reply = try await http.send(method, path, body: body)
            #expect((200..<300).contains(reply.status), "\(method) \(path): \(reply.status)")
        }
        return offline.path
    }

    @Test func everyCallOfARefreshFailsCleanly() async throws {
        let servedPath = try await ServeTests.sampleStore()
        try await withServer(servedPath) { http, server in
            let template = try await Self.template(servedPath: servedPath, server: server, http: http)
            func refresh(_ store: OfflineStore) async throws {
                try await store.refresh(serviceRoot: server.url, pageSize: 1)
            }

            let before = try Self.state(try QueueFaultTests.copy(template))
            let probe = try QueueFaultTests.copy(template)
            FaultInjection.countCalls(in: probe.entities.environment)
            let report = try await probe.refresh(serviceRoot: server.url, pageSize: 1)
            let calls = FaultInjection.stop(probe.entities.environment).calls
            let after = try Self.state(probe)
            #expect(
                report.requests.map(\.mode) == [.delta, .delta, .delta, .full] && report.rebased >= 3
                    && report.removed >= 2,
                "\(report)")
            #expect(before != after)
            // Three deltas (a transaction per part), a full read (its pages grouped: `PagePipe`,
            // two groups here: 16 pages of one, then the rest), its sweep, the compaction and the event log.
            let commits = calls.filter { $0 == "mdb_txn_commit" }.count
            #expect(commits >= 8, "\(commits) commits")

            // The trials: call n fails with one of the codes, in rotation (each code at every kind of call).
            let codes = QueueFaultTests.codes
            let started = ContinuousClock.now
            var trials = 0, injected = 0, recovered = 0, failed = 0
            var between: [Int: [String]] = [0: before]  // the state a failure between commit i and i + 1 leaves
            var committed = 0
            let stride = Self.trialLimit > 0 ? max(1, calls.count / Self.trialLimit) : 1
            let offset = Int(testSeed("RefreshFaultTests", variable: "REFRESH_FAULT_SEED") % UInt64(stride))
            for n in 1...calls.count {
                // a failed commit leaves the state of the commits before it
                if calls[n - 1] == "mdb_txn_commit" { committed += 1 }
                // Every commit is failed, and every `stride`-th call besides.
                guard calls[n - 1] == "mdb_txn_commit" || n % stride == offset else { continue }
                if ContinuousClock.now - started > .seconds(Self.secondsLimit) { break }
                let (codeName, code) = codes[n % codes.count]
                let store = try QueueFaultTests.copy(template)
                let env = store.entities.environment
                FaultInjection.fail(callNumber: n, with: code, in: env)
                let result: Result<Void, any Error>
                do { try await refresh(store); result = .success(()) } catch { result = .failure(error) }
                if FaultInjection.stop(env).injected { injected += 1 }
                trials += 1
                let context =
                    "call \(n) of \(calls.count) (\(calls[n - 1]), after \(committed - (calls[n - 1] == "mdb_txn_commit" ? 1 : 0)) commits) failing with \(codeName)"
                let report = try store.check()
                #expect(report.isConsistent, "\(context): \(report)")
                let now = try Self.state(store)
                switch result {
                case .success:
                    recovered += 1
                    #expect(
                        now == after,
                        "\(context): succeeded but the store is not as after a refresh: \(FlushFaultTests.diff(after, now))"
                    )
                case .failure:
                    failed += 1
                    let group = calls[n - 1] == "mdb_txn_commit" ? committed - 1 : committed
                    if let expected = between[group] {
                        #expect(
                            now == expected,
                            "\(context): the store is not as other failures after \(group) commits left it: \(FlushFaultTests.diff(expected, now))"
                        )
                    } else {
                        between[group] = now
                    }
                    try await refresh(store)
                    let again = try Self.state(store)
                    #expect(
                        again == after,
                        "\(context): refreshed again, it is not as after a refresh: \(FlushFaultTests.diff(after, again))"
                    )
                    #expect(try store.check().isConsistent, "\(context): after the next refresh")
                }
            }
            #expect(
                injected == trials
                    && trials >= min(calls.count, Self.trialLimit > 0 ? Self.trialLimit : calls.count) / 2,
                "\(trials) trials")
            #expect(failed > 0 && between.count > 1, "failures fell between \(between.count) pairs of commits")
            let sites = Dictionary(grouping: calls, by: { $0 }).map { "\($0.key)×\($0.value.count)" }.sorted()
            print(
                "refresh fault injection: \(calls.count) calls (\(commits) commits), \(trials) trials in \(ContinuousClock.now - started), \(injected) faults injected, \(failed) refreshes failed (their states fell into \(between.count) commit intervals), \(recovered) recovered; call sites: \(sites.joined(separator: ", "))"
            )
        }
    }
}
#endif
