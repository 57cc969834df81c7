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

/// Flush's two transactions as claims tested, not assumed: every `mdb_*` call of the one that
/// plans a round and marks its requests sent, and of the one that settles the answers
/// (acknowledge: the record goes, the answer — key, properties, ETag — is applied, a local key is
/// rewritten everywhere; refusals archived with their dependents), is made to fail in turn with
/// each error LMDB can give on a write path. After each: `check` passes, and the store is exactly
/// as before the transaction (every request still queued, as it was) or exactly as after it
/// (records gone with the answers applied) — and the transaction run again lands.
///
/// Its tests run one after another (`.serialized`): run side by side, their copies of the
/// template stayed open together — 574 at once for three of them, 953 for four, each mapping 64
/// GiB of address space — and a full CI run, with every other suite beside them, ran out of
/// address space (`mdb_env_open`: ENOMEM). One at a time, the suite held at most 21 (measured).
@Suite(.soak, .checksStores, .serialized, .runsOffThePool) struct FlushFaultTests {
    static let now = EDMDateTimeOffset(ticks: 1_700_000_000 * ticksPerSecond)

    /// The notes fixture with changes of every kind queued: a create with a local key and a change
    /// depending on it (not in the first round), an update, a delete, a create with a given key,
    /// a create with a local key of its own under a server note, and two updates of a note the
    /// service refuses (the second a dependent).
    static func template() throws -> String {
        let (_, store) = try FlushFixture.pair(notes: true, optimize: false)
        let note = try store.create(set: "Notes", entity: ["Title": .string("new")])
        try store.update(set: "Tags", key: [.string("red")], changes: ["NoteID": note.entity!["NoteID"]!])
        try store.update(set: "Notes", key: [.int(1)], changes: ["Title": .string("changed")])
        try store.delete(set: "Notes", key: [.int(2)])
        try store.create(set: "Tags", entity: ["TagID": .string("t"), "Label": .string("T"), "NoteID": .int(1)])
        try store.create(set: "Comments", entity: ["NoteID": .int(1), "Text": .string("c")])
        try store.update(set: "Notes", key: [.int(3)], changes: ["Title": .string("refused")])
        try store.update(set: "Notes", key: [.int(3)], changes: ["Amount": .decimal(EDMDecimal("1.00")!)])
        return store.path
    }

    /// Entities, queue, archive (without its clock) and ETags, comparable.
    static func state(_ store: OfflineStore) throws -> [String] {
        var rows: [String] = []
        for set in FlushFixture.notesSets + ["RequestQueue", "ErrorArchive", "RequestHistory"] {
            try store.scan(set: set) { e in
                var e = e
                e["ArchivedAt"] = nil
                e["DecidedAt"] = nil
                rows.append("\(set) \(e)")
                return true
            }
        }
        let db = store.entities.serverETags
        try store.entities.read { t in
            try t.withCursor(db) { c in
                var e = try c.first()
                while let (k, v) = e {
                    rows.append("etag \(Array(k)) \(String(decoding: v, as: UTF8.self))")
                    e = try c.next()
                }
            }
        }
        return rows.sorted()
    }

    static func prepare(_ store: OfflineStore) throws -> [Flush.Outgoing] {
        let queue = store.requestQueue
        return try store.entities.write { t in try Flush.prepare(t, queue: queue, options: .init(), now: Self.now) }
    }

    /// The service's answers to the first round, as a test service would give them.
    static func verdicts(_ round: [Flush.Outgoing]) -> [(RequestRecord, Flush.Verdict)] {
        round.map { o in
            let r = o.record
            let verdict: Flush.Verdict
            switch (r.entitySet, r.method) {
            case ("Notes", .create):
                // Flagged in doubt, as a create sent again to a service that did not deduplicate
                // is: its InDoubt event is written in the settlement, so faults reach it too.
                verdict = .success(
                    image: ["NoteID": .int(900), "Title": .string("new")], etag: #"W/"n900""#, reconciled: false,
                    inDoubt: true)
            case ("Notes", .update) where r.entityKey == "3":
                // A conflict: kept whole (the service's version read back), rebased onto it.
                verdict =
                    r.body!.contains("refused")
                    ? .conflict(
                        ServiceError(httpStatus: 412, code: "PreconditionFailed", message: "changed"),
                        server: ["NoteID": .int(3), "Title": .string("theirs")], etag: #"W/"n3-theirs""#)
                    : .dependent(ServiceError(httpStatus: 424, message: "failed dependency"))
            case ("Notes", .update): verdict = .success(image: nil, etag: #"W/"n1""#, reconciled: false)
            case ("Notes", .delete): verdict = .success(image: nil, etag: nil, reconciled: false)
            case ("Comments", .create):
                verdict = .success(
                    image: ["CommentID": .int(901), "NoteID": .int(1), "Text": .string("c")], etag: #"W/"c901""#,
                    reconciled: false)
            default: verdict = .success(image: nil, etag: #"W/"x""#, reconciled: false)
            }
            return (r, verdict)
        }
    }

    static func settle(_ store: OfflineStore, _ work: [(RequestRecord, Flush.Verdict)]) throws -> Flush.Settled {
        let queue = store.requestQueue
        return try store.entities.write { t in try Flush.settle(t, queue: queue, work) }
    }

    @Test func everyCallOfPlanningAndMarkingSentFailsCleanly() throws {
        let template = try Self.template()
        let result = try Self.inject(template: template, name: "plan and mark sent") { store in
            let round = try Self.prepare(store)
            #expect(round.count == 7, "all but the change that needs the new note's key")
        }
        #expect(result.injected == result.trials)
    }

    /// The template after the first round was marked sent, and the service's answers to that round.
    static func firstRound() throws -> (marked: String, work: [(RequestRecord, Flush.Verdict)]) {
        let marked: String = try {
            let store = try QueueFaultTests.copy(try Self.template())
            _ = try Self.prepare(store)
            return store.path
        }()
        let work = Self.verdicts(
            try {
                // The same round, read back (prepare on a copy marks them a second time: use its records' ids only).
                let probe = try QueueFaultTests.copy(marked)
                let records = try FlushFixture.queue(probe).filter { $0.status == .sent }
                return records.map {
                    Flush.Outgoing(
                        record: $0,
                        change: OutgoingChange(
                            kind: .update, set: $0.entitySet, key: [], keyText: $0.entityKey, body: nil, etag: nil,
                            repeatabilityID: $0.repeatabilityID, firstSent: Self.now, customHeaders: [],
                            id: String($0.id)))
                }
            }())
        return (marked, work)
    }

    @Test func everyCallOfSettlingFailsCleanly() throws {
        let (marked, work) = try Self.firstRound()
        #expect(work.count == 7)
        // What settling does, on a copy.
        let probe = try QueueFaultTests.copy(marked)
        let settled = try Self.settle(probe, work)
        #expect(settled.succeeded.count == 5 && settled.archived.count == 2 && settled.stop == nil, "\(settled)")
        #expect(try probe.get(set: "Notes", key: [.int(900)]) != nil && probe.get(set: "Notes", key: [.int(-1)]) == nil)
        #expect(
            try probe.get(set: "Tags", key: [.string("red")])?["NoteID"] == .int(900),
            "the local key rewritten in a foreign key")
        #expect(try probe.serverETag(set: "Notes", key: [.int(900)]) == #"W/"n900""#)
        #expect(try probe.serverETag(set: "Notes", key: [.int(2)]) == nil)
        #expect(try probe.conflict(requestID: 7)?.server?["Title"] == .string("theirs"), "the conflict kept")
        #expect(try probe.serverETag(set: "Notes", key: [.int(3)]) == #"W/"n3-theirs""#)
        #expect(try FlushFixture.queue(probe).map(\.id) == [2, 7, 8])
        #expect(settled.inDoubt.count == 1 && settled.inDoubt.values.first?.contains("Notes(900)") == true)
        #expect(try probe.entities("EventLog?$filter=Type eq 'InDoubt'").count == 1, "the flag, in the settlement")
        // The outcome record, written in the settlement: what became of each of the seven.
        let outcomes = Dictionary(uniqueKeysWithValues: try probe.requestHistory().map { ($0.requestID, $0.outcome) })
        #expect(outcomes.values.filter { $0 == "refused" }.count == 2, "\(outcomes)")
        #expect(outcomes.values.filter { $0 == "in doubt" }.count == 1, "\(outcomes)")
        #expect(outcomes.count == 7, "\(outcomes)")
        // Settling again finds nothing left to settle.
        #expect(try Self.settle(probe, work) == Flush.Settled())
        let result = try Self.inject(template: marked, name: "settle") { store in _ = try Self.settle(store, work) }
        #expect(result.injected == result.trials)
    }

    /// A flush settles a round and marks the next one sent in one transaction
    /// (`Flush.settleAndPrepare`): every call of it failed in turn leaves the store as before it.
    @Test func everyCallOfSettlingAndMarkingTheNextRoundSentFailsCleanly() throws {
        let (marked, work) = try Self.firstRound()
        func run(_ store: OfflineStore) throws -> (Flush.Settled, [Flush.Outgoing]?) {
            let queue = store.requestQueue
            return try store.entities.write { t in
                try Flush.settleAndPrepare(t, queue: queue, work, options: .init(), now: Self.now)
            }
        }
        let probe = try QueueFaultTests.copy(marked)
        let (settled, next) = try run(probe)
        #expect(settled.succeeded.count == 5 && settled.archived.count == 2 && settled.stop == nil, "\(settled)")
        let ids = Set((next ?? []).map(\.record.id))
        #expect(!ids.isEmpty, "the change that waited for the new note's key goes next")
        #expect(try FlushFixture.queue(probe).filter { ids.contains($0.id) }.allSatisfy { $0.status == .sent })
        let result = try Self.inject(template: marked, name: "settle and mark the next round sent") { store in
            _ = try run(store)
        }
        #expect(result.injected == result.trials)
    }

    /// A flush that marked a round while the one before it was on its way, and then did not
    /// send it (that one was not all applied), takes its marking back in the transaction that
    /// settles the answers and plans again (`Flush.takeBack`, then `settleAndPrepare`): every
    /// call of it failed in turn leaves the store as before it.
    @Test func everyCallOfTakingBackARoundMarkedAheadFailsCleanly() throws {
        let first = try QueueFaultTests.copy(try Self.template())
        let marked = try Self.prepare(first)  // the copies of `first` hold these records as marked
        #expect(marked.count == 7)
        let (answered, ahead) = (Array(marked.prefix(3)), Array(marked.dropFirst(3)))
        let work = Self.verdicts(answered)
        func run(_ store: OfflineStore) throws -> (Flush.Settled, [Flush.Outgoing]?) {
            let queue = store.requestQueue
            return try store.entities.write { t in
                try Flush.takeBack(t, queue: queue, ahead)
                return try Flush.settleAndPrepare(t, queue: queue, work, options: .init(), now: Self.now)
            }
        }
        let probe = try QueueFaultTests.copy(first.path)
        let (settled, next) = try run(probe)
        #expect(settled.succeeded.count == 3 && settled.stop == nil, "\(settled)")
        // The round taken back is planned again: marked once, not twice.
        let again = Set((next ?? []).map(\.record.id))
        #expect(again.isSuperset(of: ahead.map(\.record.id)), "\(again)")
        #expect(try FlushFixture.queue(probe).filter { again.contains($0.id) }.allSatisfy { $0.attempts == 1 })
        let result = try Self.inject(template: first.path, name: "take back, settle, mark the next round sent") {
            store in _ = try run(store)
        }
        #expect(result.injected == result.trials)
    }

    /// The lines only in `expected` (−) and only in `actual` (+).
    static func diff(_ expected: [String], _ actual: [String]) -> String {
        let a = Set(expected), b = Set(actual)
        return (a.subtracting(b).sorted().map { "− " + $0 } + b.subtracting(a).sorted().map { "+ " + $0 }).joined(
            separator: "\n")
    }

    /// Fails every call of `body` in turn on copies of `template`; returns the counts. `state`:
    /// what is compared (`state(_:)` unless given).
    static func inject(
        template: String, name: String, state: (OfflineStore) throws -> [String] = { try FlushFaultTests.state($0) },
        _ body: (OfflineStore) throws -> Void
    ) throws -> (trials: Int, injected: Int) {
        let before = try state(try QueueFaultTests.copy(template))
        let probe = try QueueFaultTests.copy(template)
        FaultInjection.countCalls(in: probe.entities.environment)
        try body(probe)
        let calls = FaultInjection.stop(probe.entities.environment).calls
        let after = try state(probe)
        #expect(before != after)
        #expect(calls.count > 10, "\(name): only \(calls.count) calls seen")
        var trials = 0, injected = 0, recovered = 0
        for n in 1...calls.count {
            for (codeName, code) in QueueFaultTests.codes {
                let store = try QueueFaultTests.copy(template)
                let env = store.entities.environment
                FaultInjection.fail(callNumber: n, with: code, in: env)
                let result = Result { try body(store) }
                if FaultInjection.stop(env).injected { injected += 1 }
                trials += 1
                let context = "\(name): call \(n) (\(calls[n - 1])) failing with \(codeName)"
                let report = try store.check()
                #expect(report.isConsistent, "\(context): \(report)")
                let now = try state(store)
                switch result {
                case .success:
                    recovered += 1
                    #expect(
                        now == after, "\(context): succeeded but the store is not as after it: \(Self.diff(after, now))"
                    )
                case .failure:
                    #expect(now == before, "\(context): failed but the store changed: \(Self.diff(before, now))")
                    try body(store)
                    let again = try state(store)
                    #expect(again == after, "\(context): run again, it did not land: \(Self.diff(after, again))")
                }
            }
        }
        let sites = Dictionary(grouping: calls, by: { $0 }).map { "\($0.key)×\($0.value.count)" }.sorted()
        print(
            "flush fault injection, \(name): \(calls.count) calls, \(trials) trials, \(injected) faults injected, \(recovered) recovered (map grown and rerun); call sites: \(sites.joined(separator: ", "))"
        )
        return (trials, injected)
    }
}
#endif
