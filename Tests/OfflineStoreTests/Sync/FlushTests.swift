import TestSupport
import NIOCore
import AsyncHTTPClient
import Foundation
import NIOHTTP1
import Synchronization
import Testing
@testable import OfflineStore
@testable import Queue
@testable import Sync
import Remote
import Samples
import Storage

/// Flush against real `offline-store serve` processes: the offline store is a separate store
/// loaded with the same data as the served one; after a flush the two hold exactly the same
/// entities. Every store passes `check` after each test (`.checksStores`).
@Suite(.checksStores) struct FlushTests {
    static func dec(_ s: String) -> Value { .decimal(EDMDecimal(s)!) }

    @Test(arguments: [true, false])
    func everyKindOfChangeReachesTheService(optimize: Bool) async throws {
        let (served, store) = try await FlushFixture.pair(optimize: optimize)
        // create, update, replace, delete, create-then-update, create-then-delete, a parent and
        // its child created together, an order and its item, a change set.
        try await store.create(
            set: "Products",
            entity: [
                "ProductID": .string("P-1"), "Name": .string("Pen"), "Price": Self.dec("1.50"),
                "SupplierID": .string("0100000001"),
            ])
        try await store.update(
            set: "Products", key: [.string("HT-1001")],
            changes: ["Name": .string("renamed"), "Price": Self.dec("999.990")],
            options: ChangeOptions(customHeaders: ["X-Why": "sale"]))
        try await store.replace(
            set: "Products", key: [.string("HT-1003")],
            entity: ["Name": .string("replaced"), "Category": .string("Tablets")])
        try await store.delete(set: "Products", key: [.string("HT-1020")])
        try await store.create(set: "Products", entity: ["ProductID": .string("P-2"), "Name": .string("draft")])
        try await store.update(
            set: "Products", key: [.string("P-2")], changes: ["Name": .string("final"), "Price": Self.dec("2")])
        try await store.create(set: "Products", entity: ["ProductID": .string("P-3"), "Name": .string("gone")])
        try await store.delete(set: "Products", key: [.string("P-3")])
        try await store.create(
            set: "BusinessPartners",
            entity: [
                "BusinessPartnerID": .string("BP-NEW"), "CompanyName": .string("New Co"), "Country": .string("DE"),
            ])
        try await store.create(
            set: "Products",
            entity: ["ProductID": .string("P-4"), "Name": .string("child"), "SupplierID": .string("BP-NEW")])
        try await store.create(
            set: "SalesOrders",
            entity: [
                "SalesOrderID": .string("SO-NEW"), "CustomerID": .string("BP-NEW"), "GrossAmount": Self.dec("12.345"),
            ])
        try await store.create(
            set: "SalesOrderItems",
            entity: [
                "SalesOrderID": .string("SO-NEW"), "ItemPosition": .int(10), "ProductID": .string("P-4"),
                "Quantity": .int(3),
            ])
        try await store.apply(
            [
                .update(set: "Products", key: [.string("HT-1005")], changes: ["Name": .string("in a change set")]),
                .update(set: "Products", key: [.string("HT-1006")], changes: ["Price": .null]),
            ],
            options: ChangeOptions(transactionID: "tx-1"))
        try await store.update(
            set: "Products", key: [.string("HT-1001")], changes: ["Category": .string("Again")],
            options: ChangeOptions(nonMergeable: true))
        let queued = try FlushFixture.queue(store)
        #expect(queued.count == (optimize ? 12 : 15))

        let server = try await ServerProcess.start(store: served)
        let probe = ProbeBackend(server.url)
        let report = try await store.flush(backend: probe, batchSize: 4)
        await probe.shutdown()
        #expect(report.stopped == nil && report.archived == 0 && report.left == 0, "\(report)")
        #expect(report.succeeded == queued.count && report.sent == queued.count)
        #expect(report.roundTrips == (queued.count + 3) / 4)
        // What went over the wire: in request-id order, each with its repeatability headers,
        // the change set as one atomicity group, custom headers, dependsOn inside a batch.
        let sent = probe.batches.flatMap { $0 }
        #expect(sent.map(\.id) == queued.map { String($0.id) })
        for (r, q) in zip(sent, queued) {
            #expect(r.header("Repeatability-Request-ID") == q.repeatabilityID.description)
            #expect(r.header("Repeatability-First-Sent")?.hasSuffix(" GMT") == true)
        }
        #expect(sent.first { $0.url == "Products('HT-1001')" }?.header("X-Why") == "sale")
        let group = sent.filter { $0.group != nil }
        #expect(group.count == 2 && Set(group.map(\.group)).count == 1)
        if !optimize {
            // The update of P-2 goes in the batch of its create, depending on it.
            let create = try #require(
                sent.first {
                    $0.method == "POST" && $0.body.map { String(decoding: $0, as: UTF8.self).contains("P-2") } == true
                })
            let update = try #require(sent.first { $0.method == "PATCH" && $0.url == "Products('P-2')" })
            #expect(update.dependsOn.contains(create.id!))
        }
        // ETags: each entity the flush wrote has the service's ETag recorded.
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let http = HTTP(client: client, base: server.url)
        for (set, key) in [
            ("Products", "HT-1001"), ("Products", "P-1"), ("Products", "P-2"), ("Products", "HT-1003"),
            ("BusinessPartners", "BP-NEW"),
        ] {
            let read = try await http.get("\(set)('\(key)')")
            #expect(read.status == 200)
            #expect(try store.serverETag(set: set, key: [.string(key)]) == read.header("ETag"), "\(set)('\(key)')")
        }
        #expect(try store.serverETag(set: "Products", key: [.string("HT-1020")]) == nil)
        // A second change of HT-1001 goes with If-Match: the ETag the service gave.
        let etag = try #require(try store.serverETag(set: "Products", key: [.string("HT-1001")]))
        try await store.update(set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("third time")])
        let probe2 = ProbeBackend(server.url)
        let second = try await store.flush(backend: probe2)
        await probe2.shutdown()
        #expect(second.succeeded == 1 && second.stopped == nil)
        #expect(probe2.batches.first?.first?.header("If-Match") == etag)
        try await client.shutdown()
        #expect(await server.stop() == 0)
        try FlushFixture.expectInSync(store, served)
        let events = try store.entities("EventLog?$orderby=EventID")
        #expect(
            events.count == 2
                && events.allSatisfy { $0["Type"] == .string("Upload") && $0["Outcome"] == .string("succeeded") })
        #expect(events.first?["Requests"] == .int(Int64(queued.count)))
    }

    @Test func localKeysAreReplacedByTheKeysTheServiceAssigns() async throws {
        let (served, store) = try await FlushFixture.pair(notes: true, optimize: false)
        // A note without its key (the service computes it), its comment (a foreign key to it),
        // its line (its key holds the note's), a tag pointing at it, and a change to the note.
        let note = try await store.create(set: "Notes", entity: ["Title": .string("new"), "Amount": Self.dec("3.30")])
        let local = try #require(note.entity?["NoteID"])
        #expect(local == .int(-1))
        try await store.create(set: "Comments", entity: ["NoteID": local, "Text": .string("on the new note")])
        try await store.create(set: "Lines", entity: ["NoteID": local, "LineNo": .int(1), "Text": .string("line 1")])
        try await store.create(
            set: "Tags", entity: ["TagID": .string("blue"), "Label": .string("Blue"), "NoteID": local])
        try await store.update(set: "Notes", key: [local], changes: ["Title": .string("renamed offline")])
        try await store.update(set: "Tags", key: [.string("red")], changes: ["NoteID": local])
        try await store.create(set: "Notes", entity: ["Title": .string("second new")])

        let report = try await withServerFlush(served) { url in try await store.flush(serviceRoot: url, batchSize: 10) }
        #expect(report.stopped == nil && report.archived == 0 && report.succeeded == 7, "\(report)")
        #expect(report.roundTrips == 2, "the creates of new notes first, then what refers to them")
        try FlushFixture.expectInSync(store, served)
        let notes = try store.entities("Notes?$filter=NoteID gt 3")
        #expect(notes.count == 2)
        let renamed = try #require(notes.first { $0["Title"] == .string("renamed offline") })
        let id = try #require(renamed["NoteID"])
        #expect(try store.entities("Comments?$filter=Text eq 'on the new note'").first?["NoteID"] == id)
        #expect(try store.get(set: "Lines", key: [id, .int(1)]) != nil)
        #expect(try store.get(set: "Tags", key: [.string("red")])?["NoteID"] == id)
        #expect(try store.entities("Notes?$filter=offline.isLocal()").isEmpty)
        #expect(try store.serverETag(set: "Notes", key: [id]) != nil)
        #expect(try store.serverETag(set: "Notes", key: [local]) == nil)
    }

    /// Each round goes when the answer to the one before it has come, before that one is
    /// settled: the round after it was planned and marked sent while it was on its way. Rounds
    /// still go in request-id order, and a request that waits for the round on its way (a later
    /// change of its entity) waits for the next planning, not going ahead of its turn.
    @Test func eachRoundGoesBeforeTheOneBeforeItIsSettled() async throws {
        let (served, store) = try await FlushFixture.pair(optimize: false)
        for i in 0..<6 {
            try await store.create(set: "Products", entity: ["ProductID": .string("R-\(i)"), "Name": .string("n\(i)")])
        }
        // 7 changes the entity of 4, of round 2 (batch size 3): it is not marked while round 2 is on its way.
        try await store.update(set: "Products", key: [.string("R-3")], changes: ["Name": .string("again")])
        try await store.create(set: "Products", entity: ["ProductID": .string("R-7"), "Name": .string("last")])
        let queued = try FlushFixture.queue(store)
        let server = try await ServerProcess.start(store: served)
        let probe = ProbeBackend(server.url)
        // What the queue holds when each round trip comes. When round 1's answer has come, a
        // write of the test holds the store's writer until round 2 comes (10 s at most), so that
        // round 1's settlement cannot commit before: round 2 comes only if it goes unsettled.
        let seen = Mutex<[Int: [RequestRecord]]>([:])
        let (holding, release) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        probe.after(roundTrip: 1) {
            Thread {
                _ = try? store.entities.write { _ in
                    holding.signal()
                    // Bounded, but long: a loaded run on two cores took more than 10 s to send round 2.
                    _ = release.wait(timeout: .now() + 120)
                }
            }.start()
            holding.wait()
        }
        for n in 1...4 {
            probe.before(roundTrip: n) {
                let q = (try? FlushFixture.queue(store)) ?? []
                seen.withLock { $0[n] = q }
                if n == 2 { release.signal() }
            }
        }
        let report = try await store.flush(backend: probe, batchSize: 3)
        await probe.shutdown()
        #expect(await server.stop() == 0)
        #expect(report.stopped == nil && report.succeeded == 8 && report.left == 0, "\(report)")
        let rounds = probe.batches.map { $0.map { $0.id ?? "" } }
        #expect(rounds == [["1", "2", "3"], ["4", "5", "6"], ["7", "8"]], "in request-id order")
        #expect(queued.map(\.id) == Array(1...8))
        let at = seen.withLock { $0 }
        // Round 2 came with round 1 still queued, marked sent: not settled yet.
        let atTwo = try #require(at[2])
        #expect(atTwo.map(\.id) == Array(1...8))
        #expect(atTwo.filter { $0.status == .sent }.map(\.id) == [1, 2, 3, 4, 5, 6])
        // Round 3 was planned after round 2 was settled (7 waits for 4), not marked ahead of it.
        let atThree = try #require(at[3])
        #expect(atThree.map(\.id) == [7, 8])
        #expect(atThree.allSatisfy { $0.status == .sent && $0.attempts == 1 })
        try FlushFixture.expectInSync(store, served)
    }

    /// A round marked sent while the one before it was on its way does not go when that one is
    /// not all applied: its marking is taken back in the settlement, and it is planned again.
    @Test func aRoundMarkedAheadIsTakenBackWhenTheOneBeforeIsRefused() async throws {
        let (served, store) = try await FlushFixture.pair(optimize: false)
        try await store.update(set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("gone there")])
        for i in 0..<5 {
            try await store.create(set: "Products", entity: ["ProductID": .string("K-\(i)"), "Name": .string("n\(i)")])
        }
        let server = try await ServerProcess.start(store: served)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        #expect(try await HTTP(client: client, base: server.url).send(.DELETE, "Products('HT-1001')").status == 204)
        try await client.shutdown()
        let probe = ProbeBackend(server.url)
        let atTwo = Mutex<[RequestRecord]>([])
        probe.before(roundTrip: 2) { atTwo.withLock { $0 = (try? FlushFixture.queue(store)) ?? [] } }
        let report = try await store.flush(backend: probe, batchSize: 2)
        await probe.shutdown()
        #expect(await server.stop() == 0)
        #expect(report.stopped == nil && report.succeeded == 5 && report.archived == 1, "\(report)")
        #expect(probe.batches.map { $0.map { $0.id ?? "" } } == [["1", "2"], ["3", "4"], ["5", "6"]])
        // When round 2 went, request 1 was archived and round 2's requests were marked once
        // (taken back, then marked again), not twice.
        let q = atTwo.withLock { $0 }
        #expect(q.map(\.id) == [1, 3, 4, 5, 6] && q.first?.status == .error)
        #expect(q[1...2].allSatisfy { $0.status == .sent && $0.attempts == 1 }, "\(q)")
        #expect(try FlushFixture.errors(store).map { $0["RequestID"] } == [.int(1)])
    }

    @Test func aRefusedRequestIsArchivedWithItsDependentsAndTheRestGoesThrough() async throws {
        let (served, store) = try await FlushFixture.pair(optimize: false)
        try await store.update(
            set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("deleted on the server")],
            options: .init(customTag: "a"))
        // its dependent
        try await store.update(set: "Products", key: [.string("HT-1001")], changes: ["Price": Self.dec("1")])
        // unrelated
        try await store.update(set: "Products", key: [.string("HT-1005")], changes: ["Name": .string("fine")])
        try await store.create(
            set: "BusinessPartners", entity: ["BusinessPartnerID": .string("BP-X"), "CompanyName": .string("Mine")])
        // needs BP-X
        try await store.create(set: "Products", entity: ["ProductID": .string("P-X"), "SupplierID": .string("BP-X")])
        try await store.create(set: "Products", entity: ["ProductID": .string("P-Y"), "Name": .string("fine too")])
        let server = try await ServerProcess.start(store: served)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let http = HTTP(client: client, base: server.url)
        // Meanwhile on the service: HT-1001 is deleted, BP-X is created by someone else.
        #expect(try await http.send(.DELETE, "Products('HT-1001')").status == 204)
        #expect(
            try await http.send(
                .POST, "BusinessPartners", body: #"{"BusinessPartnerID":"BP-X","CompanyName":"Theirs"}"#
            ).status == 201)
        let report = try await store.flush(serviceRoot: server.url, batchSize: 3)
        #expect(report.stopped == nil && report.succeeded == 2 && report.archived == 4 && report.left == 0, "\(report)")
        let errors = try FlushFixture.errors(store)
        #expect(errors.map { $0["RequestID"] } == [.int(1), .int(2), .int(4), .int(5)])
        #expect(
            errors[0]["HTTPStatusCode"] == .int(404) && errors[0]["CustomTag"] == .string("a")
                && errors[0]["CausedBy"] == nil)
        #expect(
            errors[0]["RequestURL"] == .string("Products('HT-1001')") && errors[0]["RequestMethod"] == .string("PATCH"))
        #expect(errors[1]["CausedBy"] == .int(1))
        #expect(errors[2]["HTTPStatusCode"] == .int(409) && errors[2]["Code"] != nil)
        #expect(errors[3]["CausedBy"] == .int(4))
        #expect(try store.entities("Products?$filter=offline.inErrorState()").count == 2)
        // Giving the refused changes up brings back the image the store had of the service's
        // entities (which changed meanwhile: a refresh brings them).
        #expect(try store.resolveAllErrors() == [1, 2, 4, 5])
        try await client.shutdown()
        #expect(await server.stop() == 0)
        try FlushFixture.expectInSync(
            store, served, ignoring: ["Products": ["'HT-1001'"], "BusinessPartners": ["'BP-X'"]])
    }

    @Test func aServerThatIsDownOrDiesMidFlushLosesNothing() async throws {
        let (served, store) = try await FlushFixture.pair()
        for i in 0..<7 {
            try await store.create(
                set: "Products",
                entity: ["ProductID": .string("D-\(i)"), "Name": .string("n\(i)"), "Price": Self.dec("\(i).25")])
        }
        try await store.update(set: "Products", key: [.string("HT-1002")], changes: ["Name": .string("x")])
        let queued = try FlushFixture.queue(store)
        // No server at all: no connection, so nothing was sent — the queue exactly as it was,
        // every request pending with no attempt counted (issue 41: they were left "sent", and
        // `undo` refused them).
        func backend(_ url: String) -> HTTPTransport { HTTPTransport(serviceRoot: url, connectTimeout: .seconds(1)) }
        let down = backend("http://127.0.0.1:9/")
        let nobody = try await store.flush(backend: down, batchSize: 3)
        try await down.shutdown()
        #expect(nobody.stopped?.contains("nothing was sent") == true, "\(nobody)")
        #expect(nobody.succeeded == 0 && nobody.sent == 0 && nobody.left == 8, "\(nobody)")
        let after = try FlushFixture.queue(store)
        #expect(after == queued, "the queue as it was")
        #expect(after.allSatisfy { $0.status == .pending && $0.attempts == 0 && $0.firstSentAt == nil })
        // A server killed when the second round trip comes, after the first one's answer.
        let first = try await ServerProcess.start(store: served)
        let dying = ProbeBackend(first.url)
        dying.before(roundTrip: 2) { first.kill() }
        let killed = try await store.flush(backend: dying, batchSize: 3)
        await dying.shutdown()
        #expect(killed.stopped != nil && killed.succeeded == 3 && killed.left == 5, "\(killed)")
        let resent = try FlushFixture.queue(store)
        // The second round either went on the kept-alive connection and met its reset (it may
        // have reached the service: marked sent, one attempt) or found its new connection refused
        // (nothing sent: taken back). Either way the third round, marked while the second was on
        // its way, did not go, and its marking is taken back.
        #expect(resent.count == 5, "\(resent)")
        let round2 = Array(resent.prefix(3)), rest = Array(resent.dropFirst(3))
        let mayHaveGone = round2.allSatisfy { $0.status == .sent && $0.attempts == 1 && $0.firstSentAt != nil }
        let notSent = round2.allSatisfy { $0.status == .pending && $0.attempts == 0 && $0.firstSentAt == nil }
        #expect(mayHaveGone || notSent, "\(round2.map { ($0.id, $0.status, $0.attempts) }) \(killed)")
        #expect(rest.allSatisfy { $0.status == .pending && $0.attempts == 0 && $0.firstSentAt == nil })
        // A later flush against the restarted server finishes.
        let second = try await ServerProcess.start(store: served)
        let done = try await store.flush(serviceRoot: second.url, batchSize: 3)
        #expect(done.stopped == nil && done.succeeded == 5 && done.archived == 0, "\(done)")
        #expect(await second.stop() == 0)
        try FlushFixture.expectInSync(store, served)
        let outcomes = try store.entities("EventLog?$orderby=EventID").map { $0["Outcome"] }
        #expect(outcomes == [.string("failed"), .string("failed"), .string("succeeded")])
    }

    @Test func aBatchRefusedAsAWholeStopsTheFlushAndArchivesNothing() async throws {
        let (served, store) = try await FlushFixture.pair()
        try await store.update(set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("x")])
        try await store.update(set: "Products", key: [.string("HT-1002")], changes: ["Name": .string("y")])
        let report = try await withServerFlush(served) { url in
            // An Accept the service cannot satisfy: the $batch itself is answered 406.
            let refused = try await store.flush(serviceRoot: url, headers: [("Accept", "application/xml")])
            #expect(
                refused.stopped?.contains("406") == true && refused.archived == 0 && refused.left == 2, "\(refused)")
            #expect(try FlushFixture.errors(store).isEmpty)
            return try await store.flush(serviceRoot: url)
        }
        #expect(report.succeeded == 2 && report.stopped == nil)
        try FlushFixture.expectInSync(store, served)
    }

    @Test func anAnswerLostIsReplayedByTheServiceNotAppliedTwice() async throws {
        let (served, store) = try await FlushFixture.pair(notes: true)
        try await store.create(set: "Notes", entity: ["Title": .string("once")])  // a key the service assigns
        try await store.create(set: "Tags", entity: ["TagID": .string("green"), "Label": .string("G")])
        try await store.delete(set: "Notes", key: [.int(3)])
        try await store.apply(
            [
                .update(set: "Notes", key: [.int(2)], changes: ["Title": .string("grouped")]),
                .create(set: "Tags", entity: ["TagID": .string("grey"), "Label": .string("g")]),
            ],
            options: ChangeOptions(transactionID: "t"))
        let server = try await ServerProcess.start(store: served)
        let probe = ProbeBackend(server.url)
        probe.loseAnswer(of: 1)
        let lost = try await store.flush(backend: probe, batchSize: 10, reconcile: false)
        #expect(lost.stopped != nil && lost.succeeded == 0, "\(lost)")
        #expect(try FlushFixture.queue(store).allSatisfy { $0.status == .sent })
        let again = try await store.flush(backend: probe, batchSize: 10, reconcile: false)
        #expect(
            again.stopped == nil && again.succeeded == 5 && again.archived == 0 && again.reconciled == 0, "\(again)")
        #expect(probe.batches.count == 2)
        // The same requests, the same repeatability ids, the same first-sent times.
        #expect(
            probe.batches[0].map { $0.header("Repeatability-Request-ID") }
                == probe.batches[1].map { $0.header("Repeatability-Request-ID") })
        #expect(
            probe.batches[0].map { $0.header("Repeatability-First-Sent") }
                == probe.batches[1].map { $0.header("Repeatability-First-Sent") })
        await probe.shutdown()
        #expect(await server.stop() == 0)
        try FlushFixture.expectInSync(store, served)
        #expect(try FlushFixture.served(served)["Notes"]?.count == 3, "the note was created once")
        #expect(try FlushFixture.repeatIDs(served).count == 4, "one record per request, one for the change set")
    }

    /// A service that does not honour `Repeatability-Request-ID` applied the first attempt, whose
    /// answer was lost; the attempt again meets "already exists", 404 or 412: reconciled by
    /// reading the entity back. (Simulated with `serve`: the first attempts are made without the
    /// header, then the records are marked sent as a lost attempt leaves them.)
    @Test func reSentRequestsAreReconciledWithAServiceThatDoesNotHonourRepeatability() async throws {
        let (served, store) = try await FlushFixture.pair()
        try await store.create(
            set: "Products", entity: ["ProductID": .string("R-1"), "Name": .string("same"), "Price": Self.dec("5.00")])
        try await store.delete(set: "Products", key: [.string("HT-1010")])
        try await store.update(set: "Products", key: [.string("HT-1011")], changes: ["Name": .string("patched")])
        // the service has another R-2
        try await store.create(set: "Products", entity: ["ProductID": .string("R-2"), "Name": .string("mine")])
        // the service has another name
        try await store.update(set: "Products", key: [.string("HT-1012")], changes: ["Name": .string("mine")])
        let server = try await ServerProcess.start(store: served)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let http = HTTP(client: client, base: server.url)
        // The store knew the ETags of HT-1011 and HT-1012 (a refresh would have brought them).
        for key in ["HT-1011", "HT-1012"] {
            let tag = try #require(try await http.get("Products('\(key)')").header("ETag"))
            let h = try store.entities.set("Products")
            let keyBytes = try h.encodeKey([.string(key)])
            try await store.entities.write { t in
                try ServerETags(store: store.entities).put(t, set: "Products", keyBytes: keyBytes, etag: tag)
            }
        }
        // The first attempts, applied by the service, answers lost.
        #expect(
            try await http.send(.POST, "Products", body: #"{"ProductID":"R-1","Name":"same","Price":5.0}"#).status
                == 201)
        #expect(try await http.send(.DELETE, "Products('HT-1010')").status == 204)
        #expect(try await http.send(.PATCH, "Products('HT-1011')", body: #"{"Name":"patched"}"#).status == 204)
        #expect(try await http.send(.POST, "Products", body: #"{"ProductID":"R-2","Name":"theirs"}"#).status == 201)
        #expect(try await http.send(.PATCH, "Products('HT-1012')", body: #"{"Name":"theirs"}"#).status == 204)
        let queue = store.requestQueue
        try await store.entities.write { t in for id in Int64(1)...5 { try queue.markSent(t, id: id) } }
        let report = try await store.flush(serviceRoot: server.url)
        #expect(
            report.succeeded == 3 && report.reconciled == 3 && report.archived == 2 && report.stopped == nil,
            "\(report)")
        #expect(try FlushFixture.errors(store).map { $0["HTTPStatusCode"] } == [.int(409), .int(412)])
        let tag = try await http.get("Products('HT-1011')").header("ETag")
        #expect(try store.serverETag(set: "Products", key: [.string("HT-1011")]) == tag)
        try store.resolveAllErrors()
        try await client.shutdown()
        #expect(await server.stop() == 0)
        try FlushFixture.expectInSync(store, served, ignoring: ["Products": ["'R-2'", "'HT-1012'"]])
    }

    @Test func aCategoryFlushesAloneAndWaitsForWhatItNeeds() async throws {
        let (served, store) = try await FlushFixture.pair()
        try await store.create(
            set: "BusinessPartners", entity: ["BusinessPartnerID": .string("BP-A"), "CompanyName": .string("A")],
            options: .init(uploadCategory: "a"))
        try await store.create(
            set: "Products", entity: ["ProductID": .string("C-B"), "SupplierID": .string("BP-A")],
            options: .init(uploadCategory: "b"))
        try await store.update(
            set: "Products", key: [.string("HT-1007")], changes: ["Name": .string("b")],
            options: .init(uploadCategory: "b"))
        try await store.update(set: "Products", key: [.string("HT-1008")], changes: ["Name": .string("none")])
        let report = try await withServerFlush(served) { url in
            let b = try await store.flush(serviceRoot: url, category: "b")
            #expect(b.succeeded == 1 && b.left == 1 && b.stopped == nil, "C-B waits for BP-A, of category a: \(b)")
            let a = try await store.flush(serviceRoot: url, category: "a")
            #expect(a.succeeded == 1 && a.left == 0, "\(a)")
            let b2 = try await store.flush(serviceRoot: url, category: "b")
            #expect(b2.succeeded == 1 && b2.left == 0, "\(b2)")
            #expect(try FlushFixture.queue(store).map(\.uploadCategory) == [nil])
            return try await store.flush(serviceRoot: url)
        }
        #expect(report.succeeded == 1)
        try FlushFixture.expectInSync(store, served)
    }

    @Test func aChangeSetIsAllOrNothing() async throws {
        let (served, store) = try await FlushFixture.pair()
        try await store.apply(
            [
                .update(set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("one")]),
                .create(set: "Products", entity: ["ProductID": .string("TX-9"), "Name": .string("mine")]),
                .update(set: "Products", key: [.string("HT-1003")], changes: ["Name": .string("three")]),
            ],
            options: .init(transactionID: "t"))
        try await store.update(set: "Products", key: [.string("HT-1004")], changes: ["Name": .string("alone")])
        let report = try await withServerFlush(served) { url in
            // Someone else created TX-9 meanwhile: the change set fails as a whole.
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            let created = try await HTTP(client: client, base: url).send(
                .POST, "Products", body: #"{"ProductID":"TX-9","Name":"theirs"}"#)
            try await client.shutdown()
            #expect(created.status == 201)
            return try await store.flush(serviceRoot: url)
        }
        #expect(report.succeeded == 1 && report.archived == 3 && report.stopped == nil, "\(report)")
        let errors = try FlushFixture.errors(store)
        #expect(errors.count == 3)
        #expect(errors.filter { $0["CausedBy"] == nil }.map { $0["HTTPStatusCode"] } == [.int(409)])
        #expect(errors.filter { $0["CausedBy"] != nil }.allSatisfy { $0["HTTPStatusCode"] == .int(424) })
        try store.resolveAllErrors()
        try FlushFixture.expectInSync(store, served, ignoring: ["Products": ["'TX-9'"]])
    }

    @Test func theCommandLineFlushesAndPrintsTheEventLog() async throws {
        let (served, path): (String, String) = try {
            let (served, store) = try FlushFixture.pair()
            try store.update(set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("cli")])
            try store.update(set: "Products", key: [.string("HT-1002")], changes: ["Name": .string("deleted there")])
            return (served, store.path)
        }()
        let server = try await ServerProcess.start(store: served)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        #expect(try await HTTP(client: client, base: server.url).send(.DELETE, "Products('HT-1002')").status == 204)
        try await client.shutdown()
        let bad = try await CLI.run(["flush", "--store", path, "--service", server.url, "--header", "no colon"])
        #expect(bad.status == 1 && bad.stderr.contains("Name: value"))
        let run = try await CLI.run([
            "flush", "--store", path, "--service", server.url, "--batch-size", "1", "--header",
            "Authorization: Basic dTpw",
        ])
        #expect(run.status == 1, "a refused request: exit 1")
        #expect(
            run.stdout.hasPrefix("flush: sent 2, succeeded 1, archived 1, left 0, round trips 2, in ")
                && run.stdout.hasSuffix(" s\n") && run.stdout.split(separator: "\n").count == 1,
            "\(run.stdout)\(run.stderr)")
        let again = try await CLI.run(["flush", "--store", path, "--service", server.url])
        #expect(again.status == 0 && again.stdout.hasPrefix("flush: sent 0, succeeded 0"))
        let noService = try await CLI.run(["flush", "--store", path])
        #expect(noService.status == 1 && noService.stderr.contains("no service"))
        let events = try await CLI.run(["events", "--store", path])
        #expect(events.status == 0)
        let json = try JSONSerialization.jsonObject(with: Data(events.stdout.utf8)) as? [String: Any]
        let value = json?["value"] as? [[String: Any]]
        #expect(value?.map { $0["Outcome"] as? String } == ["succeeded", "succeeded"])
        #expect(value?.first?["Requests"] as? Int == 2)
        #expect(await server.stop() == 0)
    }

    @Test func serveAnswersARepeatedRequestOfABatchFromItsRecordAndAssignsComputedKeys() async throws {
        let (served, _) = try await FlushFixture.pair(notes: true)
        try await withServer(served) { http, _ in
            let id = UUID().uuidString
            let batch = """
                {"requests":[{"id":"1","method":"POST","url":"Notes","headers":{"Content-Type":"application/json","Repeatability-Request-ID":"\(id)"},"body":{"Title":"keyless"}},
                             {"id":"2","method":"POST","url":"Tags","body":{"TagID":"x","Label":"x"}}]}
                """
            let first = try await http.send(.POST, "$batch", body: batch)
            let again = try await http.send(.POST, "$batch", body: batch)
            let a = try #require((first.object["responses"] as? [[String: Any]]))
            let b = try #require((again.object["responses"] as? [[String: Any]]))
            #expect(a[0]["status"] as? Int == 201 && b[0]["status"] as? Int == 201)
            #expect((a[0]["headers"] as? [String: String])?["repeatability-result"] == "accepted")
            #expect((b[0]["headers"] as? [String: String])?["repeatability-result"] == "replayed")
            let key = try #require((a[0]["body"] as? [String: Any])?["NoteID"] as? Int)
            #expect(
                key > 0 && (b[0]["body"] as? [String: Any])?["NoteID"] as? Int == key, "the same answer, the same key")
            #expect(b[1]["status"] as? Int == 409, "a request without the header runs again")
            #expect(Int(try await http.get("Notes/$count").text) == 4)
        }
    }

    @Test func checkFindsDamagedETagsAndRecords() async throws {
        let store = try await makeSampleStore()
        let etags = ServerETags(store: store.entities)
        let h = try store.entities.set("Products")
        let good = try h.encodeKey([.string("HT-1000")])
        let db = store.entities.serverETags
        try await store.entities.write { t in
            try etags.put(t, set: "Products", keyBytes: good, etag: #"W/"ok""#)
            _ = try t.put(db, ServerETags.key(set: "Nope", keyBytes: good), Array("W/\"x\"".utf8))
            _ = try t.put(db, ServerETags.key(set: "Products", keyBytes: good + [1]), Array("W/\"x\"".utf8))
            _ = try t.put(
                db, ServerETags.key(set: "BusinessPartners", keyBytes: try KeyCodec.encode([.string("0100000000")])),
                [0x57, 0x0A])
        }
        var problems = try store.check().problems
        #expect(problems.count == 3, "\(problems)")
        #expect(problems.contains { $0.contains("'Nope' is not one of the service's entity sets") })
        #expect(problems.contains { $0.contains("not one key of that set") })
        #expect(problems.contains { $0.contains("cannot be sent as an If-Match header") })
        try await store.entities.write { t in
            _ = try t.clear(db); try etags.put(t, set: "Products", keyBytes: good, etag: #"W/"ok""#)
        }
        #expect(try store.check().isConsistent)
        #expect(try store.serverETag(set: "Products", key: [.string("HT-1000")]) == #"W/"ok""#)
        // A request record with a first-sent time but no attempt.
        try await store.update(set: "Products", key: [.string("HT-1000")], changes: ["Name": .string("x")])
        let records = try store.entities.set(SystemSets.requestQueue)
        try await store.entities.write { t in
            var p = try records.get(t.reader, key: [.int(1)])!
            p["FirstSentAt"] = .dateTimeOffset(.now)
            try records.upsert(t, p)
        }
        problems = try store.check().problems
        #expect(problems == ["RequestQueue: request 1 has a FirstSentAt but was never sent"])
        try await store.entities.write { t in
            var p = try records.get(t.reader, key: [.int(1)])!
            p["FirstSentAt"] = nil
            try records.upsert(t, p)
        }
    }

    @Test func aRecordWrittenBeforeFirstSentAtReadsAsNeverSent() async throws {
        let store = try await makeSampleStore()
        try await store.update(set: "Products", key: [.string("HT-1000")], changes: ["Name": .string("x")])
        let records = try store.entities.set(SystemSets.requestQueue)
        // The row as the previous format wrote it: without the last property.
        let old = RowCodec(schema: store.schema, properties: Array(records.type.properties.dropLast()))
        let row = try store.entities.read { t in try records.get(t, key: [.int(1)])! }
        let bytes = old.encode(row)
        let keyBytes = try records.encodeKey([.int(1)])
        try await store.entities.write { t in _ = try t.put(records.entities, keyBytes, bytes) }
        let r = try #require(try FlushFixture.queue(store).first)
        #expect(r.firstSentAt == nil && r.status == .pending && r.method == .update)
        let marked = try await store.entities.write { t in try store.requestQueue.markSent(t, id: 1, at: Self.at) }
        #expect(marked.firstSentAt == Self.at && marked.attempts == 1)
        #expect(Wire.imfDate(Self.at) == "Tue, 14 Nov 2023 22:13:20 GMT")
    }

    static let at = EDMDateTimeOffset(ticks: 1_700_000_000 * ticksPerSecond)

    /// A request's path is percent-encoded exactly as Foundation's `urlPathAllowed` would: paths
    /// that need nothing come back as they are, the others encoded.
    @Test(.runsOffThePool) func pathsAreEncodedAsFoundationEncodesThem() {
        let paths = [
            "Products", "Products('HT-1000')", "SalesOrderItems(SalesOrderID='0500000001',ItemPosition=10)",
            "Products('a b')", "Products('100%')", "Products('é')", "Products('x#y?z')", "Products('\u{7F}')", "",
            "Set(Key=guid'01234567-89ab-cdef-0123-456789abcdef')", "Products('[a]{b}|c^`\"<>\\')",
        ]
        for p in paths {
            #expect(Wire.percentEncoded(p) == p.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed), "\(p)")
        }
    }

    /// Runs `body` with a started server's URL; stops it after.
    func withServerFlush<R: Sendable>(_ served: String, _ body: (String) async throws -> R) async throws -> R {
        let server = try await ServerProcess.start(store: served)
        do {
            let r = try await body(server.url)
            #expect(await server.stop() == 0)
            return r
        } catch {
            await server.stop()
            throw error
        }
    }

    /// A service that refuses connections is reported in about a second — three quick retries,
    /// nothing sent — not after the connect timeout (AsyncHTTPClient kept retrying the connection
    /// for all of it: 10 s by default, issue 41), as "cannot be reached (nothing was sent)".
    @Test func aRefusedConnectionFailsFast() async throws {
        // A port nothing listens on: bind one, note it, close it.
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(probe, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(probe, $0, &length) }
        }
        close(probe)
        let port = UInt16(bigEndian: address.sin_port)
        let backend = HTTPTransport(
            serviceRoot: "http://127.0.0.1:\(port)/", retries: 3, backoff: .milliseconds(200),
            connectTimeout: .seconds(60))
        // Timed generously (a loaded test run once took 54 s of wall time for a 1 s call): before,
        // this waited out the whole 60 s connect timeout.
        let started = ContinuousClock.now
        do {
            _ = try await backend.send(WireRequest(method: "POST", url: "Products", body: Array("{}".utf8)))
            Issue.record("a POST to a closed port succeeded")
        } catch let e as BackendError {
            #expect(
                "\(e)"
                    == "the service cannot be reached (nothing was sent): POST Products: http://127.0.0.1:\(port)/ refused the connection",
                "\(e)")
        }
        #expect(ContinuousClock.now - started < .seconds(40))
        try await backend.shutdown()
    }
}
