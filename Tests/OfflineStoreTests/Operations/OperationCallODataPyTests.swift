import Foundation
import Testing
@testable import OfflineStore
@testable import Queue
@testable import Storage
import TestSupport

/// Calls made offline flushed to odatapy (issue 40, "Done means"): a bound action, an unbound
/// action (an import) and a function, interleaved with creates and updates of the same
/// entities — applied on the service in exactly the queue's order, each once; a refused action
/// archived with the service's message, fixed and sent again; an action whose answer was lost
/// sent again and executed once (the service deduplicates by `Repeatability-Request-ID`). The
/// service's business logic for actions is scripts/odatapy-server/serve.py's ("Actions").
@Suite(.external, .checksStores, .runsOffThePool) struct OperationCallODataPyTests {
    static func peer() throws -> ODataPy {
        try ODataPy(
            metadata: OperationCallTests.metadata,
            data: [("Books", OperationCallTests.books), ("Loans", #"{"value":[]}"#)])
    }

    static func copy(_ root: String) async throws -> OfflineStore {
        var config = StoreConfiguration()
        config.serviceRoot = root
        config.definingRequests = [.init(name: "books", url: "Books"), .init(name: "loans", url: "Loans")]
        let store = try OfflineStore.create(
            at: tempDir() + "/library", metadata: Array(OperationCallTests.metadata.utf8), configuration: config)
        try await store.refresh()
        return store
    }

    /// What the service applied, as `METHOD Set(key)` or `ACTION name on Set(key)`.
    static func log(_ odatapy: ODataPy) throws -> [String] {
        try odatapy.applied().map { a in
            a.method == "ACTION"
                ? "ACTION \(a.name ?? "?")" + (a.set.isEmpty ? "" : " on \(a.set)(\(a.key))")
                : "\(a.method) \(a.set)(\(a.key))"
        }
    }

    @Test func callsGoInTheirPlaceOnceAndARefusedOneIsFixed() async throws {
        let odatapy = try Self.peer()
        let server = try await odatapy.start()
        defer { Task { await server.stop() } }
        let copy = try await Self.copy(server.url)
        try await copy.update(set: "Books", key: [.int(1)], changes: ["Title": .string("Dune II")])
        try await copy.call("Renew", on: "Books", key: [.int(1)], parameters: ["Days": .int(30)])
        try await copy.create(
            set: "Books", entity: ["BookID": .int(3), "Title": .string("Ulysses"), "Days": .int(1)])
        try await copy.call("Lib.Renew", on: "Books", key: [.int(3)], parameters: ["Days": .int(7)])
        try await copy.call("Recall", parameters: ["Status": .string("all")])
        try await copy.update(set: "Books", key: [.int(2)], changes: ["Status": .string("out")])
        guard
            case .queued(let refused) = try await copy.call(
                "Renew", on: "Books", key: [.int(2)], parameters: ["Days": .int(5), "Fail": .bool(true)])
        else { Issue.record("not queued"); return }
        try await copy.update(set: "Books", key: [.int(2)], changes: ["Title": .string("Emma 2")])
        let report = try await copy.flush()
        #expect(report.succeeded == 6 && report.archived == 2 && report.stopped == nil, "\(report)")
        #expect(
            try Self.log(odatapy) == [
                "PATCH Books(1)", "ACTION Lib.Renew on Books(1)", "POST Books(3)", "ACTION Lib.Renew on Books(3)",
                "ACTION Recall", "PATCH Books(2)",
            ])
        // What the bound actions did, read back after them.
        #expect(try copy.get(set: "Books", key: [.int(1)])?["Days"] == .int(30))
        #expect(try copy.get(set: "Books", key: [.int(3)])?["Days"] == .int(7))
        // Refused: archived with the service's message; the update behind it waits for it.
        let entry = try #require(try copy.get(set: "ErrorArchive", key: [.int(refused)]))
        guard case .string(let message)? = entry["Message"] else { Issue.record("no message: \(entry)"); return }
        #expect(message.contains("asked it to fail"), "\(message)")
        #expect(entry["RequestURL"] == .string("Books(2)/Lib.Renew"))
        // Fixed and sent again, with the update behind it, in order.
        #expect(try copy.fixCall(requestID: refused, parameters: ["Days": .int(5)]).count == 2)
        let second = try await copy.flush()
        #expect(second.succeeded == 2 && second.archived == 0, "\(second)")
        #expect(try Self.log(odatapy).suffix(2) == ["ACTION Lib.Renew on Books(2)", "PATCH Books(2)"])
        #expect(try copy.get(set: "Books", key: [.int(2)])?["Days"] == .int(5))
        #expect(try copy.pendingRequestCount() == 0)
        let rids = try odatapy.applied().compactMap(\.rid)
        #expect(Set(rids).count == rids.count, "a request applied twice: \(rids)")
        // A function needs the service: it is not queued, and is answered online.
        do {
            try await copy.call("Overdue", parameters: ["Days": .int(1)])
            Issue.record("an unmapped function was answered offline")
        } catch {
            #expect("\(error)".contains("call it online"), "\(error)")
        }
        let online = try await copy.callOnline("Overdue", parameters: ["Days": .int(30)])
        let rows = try #require(try JSON.parse(Array(online.utf8))["value"])
        guard case .array(let books) = rows else { Issue.record("not a collection: \(online)"); return }
        #expect(books.compactMap { $0["BookID"] } == [.number("1")], "\(online)")
        #expect(try copy.pendingRequestCount() == 0)
        await #expect(throws: EntityError.self) { try await copy.callOnline("Recall", parameters: [:]) }
        try await copy.refresh()
        #expect(try copy.get(set: "Books", key: [.int(2)])?["Title"] == .string("Emma 2"))
    }

    /// The service stops right after applying an action, before answering: the flush stops with
    /// the call in doubt (sent); started again on the same state, the next flush sends it again
    /// with the same `Repeatability-Request-ID`, and the service answers it without running it
    /// twice.
    @Test func anActionWhoseAnswerWasLostRunsOnce() async throws {
        let odatapy = try Self.peer()
        let first = try await odatapy.start()
        let copy = try await Self.copy(first.url)
        #expect(await first.stop() == 0)
        let dying = try await odatapy.start(exitAfterWrites: try odatapy.applied().count + 2)
        defer { dying.kill() }
        try await copy.update(set: "Books", key: [.int(1)], changes: ["Title": .string("a")])
        try await copy.call("Renew", on: "Books", key: [.int(1)], parameters: ["Days": .int(9)])
        try await copy.update(set: "Books", key: [.int(1)], changes: ["Title": .string("b")])
        let report = try await copy.flush(serviceRoot: dying.url)
        #expect(report.stopped != nil && report.succeeded == 1, "\(report)")
        #expect(await dying.stop() == 3, "the server did not stop after the action: \(dying.stderr)")
        let again = try await odatapy.start()
        defer { again.kill() }
        let done = try await copy.flush(serviceRoot: again.url)
        #expect(done.stopped == nil && done.archived == 0 && done.succeeded == 2, "\(done)")
        #expect(try Self.log(odatapy) == ["PATCH Books(1)", "ACTION Lib.Renew on Books(1)", "PATCH Books(1)"])
        #expect(try copy.get(set: "Books", key: [.int(1)])?["Days"] == .int(9))
        #expect(await again.stop() == 0)
    }
}

/// `offline-store flush` SIGKILLed at random instants while it sends actions and updates to
/// odatapy, then run again: every request that left the queue — the actions too — is in
/// odatapy's log of applied writes exactly once (odatapy's test service deduplicates actions by
/// `Repeatability-Request-ID`; a re-sent PATCH is reconciled), and nothing is refused. Bounded by
/// `OPERATION_KILLS` (default 8) kills and `OPERATION_KILL_SECONDS` (default 40).
@Suite(.external, .soak, .checksStores, .runsOffThePool) struct OperationCallKillTests {
    @Test func aFlushOfActionsKilledAtRandomRunsEachOnce() async throws {
        var rng = SeededRandom(seed: testSeed("aFlushOfActionsKilledAtRandomRunsEachOnce"))
        let env = ProcessInfo.processInfo.environment
        let kills = env["OPERATION_KILLS"].flatMap(Int.init) ?? 8
        let seconds = env["OPERATION_KILL_SECONDS"].flatMap(Double.init) ?? 40
        let odatapy = try OperationCallODataPyTests.peer()
        let server = try await odatapy.start(lifetime: max(1_200, seconds * 10))
        defer { server.kill() }
        let path = try await OperationCallODataPyTests.copy(server.url).path
        var acknowledged: Set<String> = []
        var (killed, finished, sentLeft, calls) = (0, 0, 0, 0)
        let start = Date()
        var round = 0
        while killed < kills && Date().timeIntervalSince(start) < seconds {
            let before: [Int64: String]
            do {
                let store = try OfflineStore.open(at: path)
                let book = Value.int(Int64(1 + round % 2))
                try await store.update(set: "Books", key: [book], changes: ["Title": .string("r\(round)")])
                try await store.call("Renew", on: "Books", key: [book], parameters: ["Days": .int(Int64(round))])
                try await store.call("Recall", parameters: ["Status": .string("r\(round)")])
                try await store.update(set: "Books", key: [book], changes: ["Status": .string("s\(round)")])
                calls += 2
                before = try FlushKillTests.queued(store)
            }
            let wasKilled = try await FlushKillTests.flushKilled(
                ["flush", "--store", path, "--service", server.url], after: Int.random(in: 10...300, using: &rng))
            if wasKilled { killed += 1 } else { finished += 1 }
            let store = try OfflineStore.open(at: path)
            let errors = try FlushFixture.errors(store)
            #expect(errors.isEmpty, "round \(round): refused: \(errors)")
            if !errors.isEmpty { break }
            let after = try FlushKillTests.queued(store)
            acknowledged.formUnion(Set(before.keys).subtracting(after.keys).map { before[$0]! })
            sentLeft += try FlushFixture.queue(store).filter { $0.status == .sent }.count
            round += 1
        }
        let store = try OfflineStore.open(at: path)
        let queued = try FlushKillTests.queued(store)
        let done = try await store.flush(serviceRoot: server.url)
        #expect(done.stopped == nil && done.archived == 0 && done.left == 0, "\(done)")
        acknowledged.formUnion(queued.values)
        let log = try odatapy.applied().filter { $0.rid != nil }
        SyncODataPyTests.expectExactlyOnce(log, acknowledged, "after \(round) rounds")
        let actions = log.filter { $0.method == "ACTION" }.count
        #expect(actions == calls, "\(calls) calls queued, \(actions) executed")
        #expect(await server.stop() == 0)
        print(
            "operation kill test: \(round) rounds, \(killed) flushes killed, \(finished) done before the kill; \(calls) calls, odatapy ran \(actions) actions and applied \(log.count) writes in all; a request was left sent by a kill \(sentLeft) times; \(String(format: "%.1f", Date().timeIntervalSince(start))) s"
        )
        #expect(killed >= 1)
    }
}

/// A call in a change set (a transaction id): with the create of the entity it acts on, whose
/// key the service assigns — named by its Content-ID, `POST $1/Lib.Close` — all or nothing on
/// odatapy: a change set whose action is refused takes its create with it.
@Suite(.external, .checksStores, .runsOffThePool) struct OperationChangeSetODataPyTests {
    @Test func aCallGoesWithItsChangeSetAllOrNothing() async throws {
        let odatapy = try OperationCallODataPyTests.peer()
        let server = try await odatapy.start()
        defer { Task { await server.stop() } }
        let copy = try await OperationCallODataPyTests.copy(server.url)
        let first = ChangeOptions(transactionID: "loan-1")
        let created = try await copy.create(set: "Loans", entity: ["Reader": .string("ann")], options: first)
        let key = try #require(created.entity?["LoanID"])
        try await copy.call("Close", on: "Loans", key: [key], parameters: ["Status": .string("closed")], options: first)
        let second = ChangeOptions(transactionID: "loan-2")
        let refused = try await copy.create(set: "Loans", entity: ["Reader": .string("bob")], options: second)
        let refusedKey = try #require(refused.entity?["LoanID"])
        try await copy.call("Close", on: "Loans", key: [refusedKey], parameters: ["Fail": .bool(true)], options: second)
        let report = try await copy.flush()
        #expect(report.succeeded == 2 && report.archived == 2 && report.stopped == nil, "\(report)")
        #expect(try OperationCallODataPyTests.log(odatapy) == ["POST Loans(1)", "ACTION Lib.Close on Loans(1)"])
        let loans = try await ODataPy.read(server.url, schema: copy)["Loans"] ?? [:]
        #expect(loans.count == 1 && loans.values.first?["Status"] == .string("closed"), "\(loans)")
        // The copy: the loan under the service's key; the refused change set archived whole.
        #expect(try copy.get(set: "Loans", key: [.int(1)])?["Reader"] == .string("ann"))
        #expect(try FlushFixture.errors(copy).count == 2)
        try await copy.refresh()
        #expect(try copy.get(set: "Loans", key: [.int(1)])?["Status"] == .string("closed"))
    }
}

/// Many copies, one service: three offline copies — separate `offline-store` processes — each
/// update their own book, call `Lib.Renew` on a book they all share and the unbound `Recall`, and
/// flush, in rounds at once. odatapy runs every call once, and each copy's requests in its own
/// queue's order; nothing is refused.
@Suite(.external, .checksStores, .runsOffThePool) struct OperationCallCopiesTests {
    @Test func threeCopiesCallingActionsAtOnceAreEachAppliedOnceInOrder() async throws {
        // Book 1 is everyone's (the actions); books 2–4 one copy's each (the updates).
        let books = (1...4).map { #"{"BookID":\#($0),"Title":"b\#($0)","Status":"in","Days":0}"# }
        let odatapy = try ODataPy(
            metadata: OperationCallTests.metadata,
            data: [("Books", #"{"value":["# + books.joined(separator: ",") + "]}"), ("Loans", #"{"value":[]}"#)])
        let server = try await odatapy.start()
        defer { Task { await server.stop() } }
        var paths: [String] = []
        for _ in 0..<3 { paths.append(try await OperationCallODataPyTests.copy(server.url).path) }
        let rounds = 4
        // Each copy's requests as queued, in order: their repeatability ids.
        let queuedInOrder = try await withThrowingTaskGroup(of: [String].self) { group in
            for (k, path) in paths.enumerated() {
                group.addTask {
                    var order: [String] = []
                    for round in 0..<rounds {
                        for args in [
                            ["update", "--store", path, "Books(\(k + 2))", #"{"Title":"c\#(k)-r\#(round)"}"#],
                            [
                                "call", "--store", path, "Lib.Renew", #"{"Days":\#(k * 100 + round)}"#, "--on",
                                "Books(1)",
                            ],
                            ["call", "--store", path, "Recall", #"{"Status":"c\#(k)"}"#],
                        ] {
                            let r = try await ChildProcess.run(args, timeout: 120)
                            guard r.status == 0 else {
                                throw ODataPy.ODataPyFailed(description: "\(args): \(r.stderr)")
                            }
                        }
                        let store = try OfflineStore.open(at: path)
                        order += try FlushFixture.queue(store).sorted { $0.id < $1.id }.map(
                            \.repeatabilityID.description)
                        let flush = try await ChildProcess.run(
                            ["flush", "--store", path, "--service", server.url], timeout: 300)
                        guard flush.status == 0 else {
                            throw ODataPy.ODataPyFailed(description: "flush: \(flush.stderr)")
                        }
                    }
                    return order
                }
            }
            var all: [[String]] = []
            for try await order in group { all.append(order) }
            return all
        }
        let log = try odatapy.applied()
        let position = Dictionary(
            log.enumerated().compactMap { i, a in a.rid.map { ($0, i) } }, uniquingKeysWith: { a, _ in a })
        let rids = log.compactMap(\.rid)
        #expect(Set(rids).count == rids.count, "a request applied twice")
        for order in queuedInOrder {
            let places = order.compactMap { position[$0] }
            #expect(places.count == order.count, "a copy's request never reached the service")
            #expect(places == places.sorted(), "a copy's requests were applied out of its queue's order")
        }
        let actions = log.filter { $0.method == "ACTION" }.count
        #expect(actions == 3 * rounds * 2, "\(actions) actions run for \(3 * rounds * 2) calls")
        for path in paths {
            let store = try OfflineStore.open(at: path)
            #expect(try store.pendingRequestCount() == 0 && FlushFixture.errors(store).isEmpty)
        }
        print(
            "operation copies: 3 copies × \(rounds) rounds, odatapy ran \(actions) actions and applied \(log.count) writes, each once, every copy in its order"
        )
    }
}
