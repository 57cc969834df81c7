import AsyncHTTPClient
import NIOHTTP1
import Foundation
import Testing
import TestSupport
@testable import OfflineStore
@testable import Queue
@testable import Sync
import Remote
import Samples
import Storage

/// odatapy 5.3.0 (an independent OData V4 server in Python, from PyPI) as a writable service for
/// a test: `scripts/odatapy-server.sh` on 127.0.0.1, a free port, a bounded lifetime, stopped by
/// its PID. Its state — entities, ETags, and the log of the writes it applied — lives in
/// `state.json` in `dir`, written after every write before the answer goes out; a server started
/// again on the same `dir` has the same data. Python comes from the venv `.venv-xcheck/` (made and
/// given odatapy from PyPI on first use); without python3 the start fails, and so does the test.
struct ODataPy {
    static let repository = repositoryRoot
    let dir: String
    let sets: [String]
    var state: String { dir + "/state.json" }

    /// Writes the `$metadata` and the data (set, `{"value":[…]}`) the server starts from.
    init(metadata: String, data: [(String, String)]) throws {
        dir = tempDir() + "/odatapy"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try metadata.write(toFile: dir + "/metadata.xml", atomically: true, encoding: .utf8)
        for (set, json) in data { try json.write(toFile: "\(dir)/\(set).json", atomically: true, encoding: .utf8) }
        sets = data.map(\.0)
    }

    /// The EPM sample: its `$metadata` and data.
    static func sample() throws -> ODataPy {
        try ODataPy(metadata: SampleData.metadata, data: SampleData.setsInLoadOrder.map { ($0, SampleData.json($0)) })
    }

    /// Starts a server on this state (the data files only the first time). With `exitAfterWrites`
    /// it exits (status 3) once that many writes are applied and saved, before answering.
    func start(lifetime: Double = 600, exitAfterWrites: Int? = nil) async throws -> ServerProcess {
        var args = [
            Self.repository + "/scripts/odatapy-server.sh", "--metadata", dir + "/metadata.xml", "--state", state,
            "--lifetime", String(lifetime), "--pid-file", dir + "/pid",
        ]
        for set in sets { args += ["--data", "\(set)=\(dir)/\(set).json"] }
        if let exitAfterWrites { args += ["--exit-after-writes", String(exitAfterWrites)] }
        // The first start may make the venv and install odatapy from PyPI.
        return try await ServerProcess.launch("/bin/sh", args, store: state, startTimeout: 600)
    }

    /// One write the server applied.
    struct Applied: Hashable {
        var method: String
        var set: String
        var key: String
        var rid: String?
        /// An action's name (`method` "ACTION"); nil for the other writes.
        var name: String? = nil
    }

    /// The server's log of applied writes, oldest first.
    func applied() throws -> [Applied] {
        let state =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: state))) as! [String: Any]
        return (state["applied"] as! [[String: Any]]).map {
            // An unbound action names no entity.
            Applied(
                method: $0["method"] as! String, set: $0["set"] as? String ?? "", key: $0["key"] as? String ?? "",
                rid: $0["rid"] as? String, name: $0["name"] as? String)
        }
    }

    /// Every entity of every set as the server answers `GET Set`, nulls left out, by key.
    static func read(_ url: String, schema offline: OfflineStore) async throws -> [String: [String: Properties]] {
        let backend = HTTPTransport(serviceRoot: url, retries: 0)
        var out: [String: [String: Properties]] = [:]
        do {
            for name in offline.schema.serviceSetNames {
                let response = try await backend.send(WireRequest(method: "GET", url: name))
                guard response.status == 200, case .array(let rows)? = try JSON.parse(response.body)["value"] else {
                    throw ODataPyFailed(
                        description:
                            "GET \(name) answered \(response.status): \(String(decoding: response.body.prefix(300), as: UTF8.self))"
                    )
                }
                let set = try offline.entities.set(name)
                var entities: [String: Properties] = [:]
                for row in rows {
                    let p = try ValueJSON(schema: offline.schema).properties(
                        from: row, properties: set.type.properties,
                        navigation: Set(set.type.navigationProperties.map(\.name)), owner: name)
                    entities[set.describeKey(try set.keyValues(p))] = Properties(p.filter { !$0.value.isNull })
                }
                out[name] = entities
            }
        } catch {
            try? await backend.shutdown()
            throw error
        }
        try await backend.shutdown()
        return out
    }

    /// The offline store's entities in the same form.
    static func contents(_ store: OfflineStore) throws -> [String: [String: Properties]] {
        var out: [String: [String: Properties]] = [:]
        for (name, rows) in try FlushFixture.contents(store) {
            let set = try store.entities.set(name)
            out[name] = Dictionary(uniqueKeysWithValues: try rows.map { (set.describeKey(try set.keyValues($0)), $0) })
        }
        return out
    }

    /// Expects the offline store to hold exactly what the server answers, entity for entity.
    static func expectSame(
        _ offline: OfflineStore, _ url: String, _ context: String, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let mine = try contents(offline), theirs = try await read(url, schema: offline)
        for set in offline.schema.serviceSetNames {
            let a = mine[set] ?? [:], b = theirs[set] ?? [:]
            let onlyA = Set(a.keys).subtracting(b.keys).sorted(), onlyB = Set(b.keys).subtracting(a.keys).sorted()
            let differ = Set(a.keys).intersection(b.keys).filter { a[$0]! != b[$0]! }.sorted()
            #expect(
                onlyA.isEmpty && onlyB.isEmpty && differ.isEmpty,
                "\(context): \(set): only offline \(onlyA), only on the server \(onlyB), differing \(differ.map { "\(a[$0]!) vs \(b[$0]!)" })",
                sourceLocation: sourceLocation)
        }
    }

    struct ODataPyFailed: Error, CustomStringConvertible { var description: String }
}

/// Sync against a service that is not ours: odatapy (`ODataPy`). Refresh from it, change offline,
/// flush, read it back and compare; refusals, a server stopped mid-flush, and the flushing process
/// SIGKILLed — with odatapy's own log of applied writes proving every change applied exactly once
/// (odatapy ignores `Repeatability-Request-ID`, so a re-sent request is settled by flush's
/// reconciliation). Every store a test made passes `check` afterwards (`.checksStores`).
@Suite(.external, .checksStores, .serialized) struct SyncODataPyTests {
    static let requests = [
        ("Partners", "BusinessPartners"), ("Products", "Products"), ("Orders", "SalesOrders?$expand=Items"),
    ]

    /// An empty offline store from the sample `$metadata`, the requests defined, refreshed from `url`.
    static func offline(_ url: String, optimize: Bool = true) async throws -> OfflineStore {
        var configuration = SampleData.configuration
        configuration.requestQueueOptimization = optimize
        let store = try OfflineStore.create(
            at: tempDir() + "/offline", metadata: Array(SampleData.metadata.utf8), configuration: configuration)
        for (name, url) in requests { try store.define(name: name, url: url) }
        let report = try await store.refresh(serviceRoot: url)
        #expect(report.received > 0)
        return store
    }

    static func product(_ id: String, _ name: String, price: String) -> Properties {
        [
            "ProductID": .string(id), "Name": .string(name), "Category": .string("Notebooks"),
            "SupplierID": .string("0100000001"),
            "Price": .decimal(EDMDecimal(price)!), "CurrencyCode": .string("EUR"), "WeightMeasure": .double(1.25),
        ]
    }

    /// Repeatability id of every queued request, by request id.
    static func queued(_ store: OfflineStore) throws -> [Int64: String] { try FlushKillTests.queued(store) }

    /// Expects the server's applied log, from `from` on, to be exactly the requests `gone` (their
    /// repeatability ids), once each.
    static func expectExactlyOnce(
        _ applied: [ODataPy.Applied], _ gone: Set<String>, _ context: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let rids = applied.compactMap(\.rid)
        #expect(
            rids.count == applied.count,
            "\(context): a write without Repeatability-Request-ID: \(applied.filter { $0.rid == nil })",
            sourceLocation: sourceLocation)
        #expect(
            rids.count == Set(rids).count,
            "\(context): applied twice: \(Dictionary(grouping: rids, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted())",
            sourceLocation: sourceLocation)
        #expect(
            Set(rids) == gone,
            "\(context): the server applied \(Set(rids).count) requests, \(gone.count) left the queue",
            sourceLocation: sourceLocation)
    }

    @Test func refreshChangeFlushReadBackAndRebase() async throws {
        let odatapy = try ODataPy.sample()
        let server = try await odatapy.start()
        defer { server.kill() }
        let store = try await Self.offline(server.url)
        try await ODataPy.expectSame(store, server.url, "after the first refresh")

        // Offline: create, update, delete, create-then-update, create-then-delete, an order and its item.
        try await store.create(set: "Products", entity: Self.product("HT-9000", "Created", price: "10.50"))
        try await store.update(
            set: "Products", key: [.string("HT-1001")],
            changes: ["Price": .decimal(EDMDecimal("1234.5")!), "Name": .string("Üpdated — \"1\"")])
        try await store.delete(set: "Products", key: [.string("HT-1023")])
        try await store.create(set: "Products", entity: Self.product("HT-9001", "Then updated", price: "1"))
        try await store.update(
            set: "Products", key: [.string("HT-9001")], changes: ["Name": .string("Updated after create")],
            options: .init(nonMergeable: true))
        try await store.create(set: "Products", entity: Self.product("HT-9002", "Then deleted", price: "2"))
        try await store.delete(set: "Products", key: [.string("HT-9002")])
        try await store.create(
            set: "SalesOrders",
            entity: [
                "SalesOrderID": .string("0600000001"), "CustomerID": .string("0100000003"),
                "GrossAmount": .decimal(EDMDecimal("99.95")!), "CurrencyCode": .string("EUR"),
                "LifecycleStatus": .string("N"),
                "CreatedAt": .dateTimeOffset(EDMDateTimeOffset("2024-05-06T07:08:09+02:00")!),
            ])
        try await store.create(
            set: "SalesOrderItems",
            entity: [
                "SalesOrderID": .string("0600000001"), "ItemPosition": .int(10), "ProductID": .string("HT-9000"),
                "Quantity": .int(3), "NetAmount": .decimal(EDMDecimal("31.50")!),
                "DeliveryDate": .date(EDMDate("2024-06-01")!),
            ])
        try await store.delete(set: "SalesOrderItems", key: [.string("0500000001"), .int(20)])
        try await store.update(
            set: "SalesOrders", key: [.string("0500000002")], changes: ["Note": .null, "LifecycleStatus": .string("C")])

        let before = try Self.queued(store)
        let report = try await store.flush(serviceRoot: server.url, batchSize: 4)
        #expect(
            report.stopped == nil && report.archived == 0 && report.left == 0 && report.succeeded == before.count,
            "\(report)")
        #expect(report.roundTrips >= 3)
        try await ODataPy.expectSame(store, server.url, "after the flush")
        let applied = try odatapy.applied()
        Self.expectExactlyOnce(applied, Set(before.values), "the flush")
        #expect(!applied.contains { $0.key == "'HT-9002'" }, "a create deleted before the flush reached the server")
        let kinds = Dictionary(grouping: applied, by: \.method).mapValues(\.count)
        #expect(kinds["POST"] == 4 && kinds["DELETE"] == 2 && kinds["PATCH"] == 3, "\(kinds)")
        // The service's navigation knows the new item (odatapy's relation table, derived again).
        let items = try store.entities("SalesOrders('0600000001')/Items")
        #expect(items.count == 1)

        // Rebase: the server changes HT-1002's name, the store changes its price; refresh with the
        // change pending puts the server's image under it, the flush then sends the price.
        let http = HTTP(client: .shared, base: server.url)
        let etag = try await http.get("Products('HT-1002')").header("ETag") ?? ""
        let patched = try await http.send(
            .PATCH, "Products('HT-1002')", body: #"{"Name":"Renamed on the server"}"#, headers: [("If-Match", etag)])
        #expect(patched.status == 204, "\(patched.status) \(patched.text)")
        try await store.update(
            set: "Products", key: [.string("HT-1002")], changes: ["Price": .decimal(EDMDecimal("77.70")!)])
        let refreshed = try await store.refresh(serviceRoot: server.url)
        #expect(refreshed.rebased == 1, "\(refreshed)")
        let rebased = try #require(try store.entities("Products('HT-1002')").first)
        #expect(
            rebased["Name"] == .string("Renamed on the server") && rebased["Price"] == .decimal(EDMDecimal("77.7")!),
            "\(rebased)")
        let pending = try Self.queued(store)
        #expect(pending.count == 1)
        let second = try await store.flush(serviceRoot: server.url)
        #expect(second.stopped == nil && second.succeeded == 1 && second.archived == 0, "\(second)")
        try await ODataPy.expectSame(store, server.url, "after the rebase and flush")
        let log = try odatapy.applied()
        #expect(log.count == applied.count + 2)  // the server's own PATCH and the flushed one
        #expect(log.last?.rid == pending.values.first)
        #expect(await server.stop() == 0)
        print("sync odatapy: \(report); applied \(kinds); rebased \(refreshed.rebased)")
    }

    /// Keys the service computes (`Core.Computed`, odatapy: max + 1): a note created without its
    /// key, and a comment and a line created with it, in one flush.
    @Test func computedKeysAssignedByOdatapy() async throws {
        let odatapy = try ODataPy(metadata: FlushFixture.notesMetadata, data: FlushFixture.notesData)
        let server = try await odatapy.start()
        defer { server.kill() }
        let store = try OfflineStore.create(
            at: tempDir() + "/offline", metadata: Array(FlushFixture.notesMetadata.utf8))
        for set in FlushFixture.notesSets { try store.define(name: set, url: set) }
        _ = try await store.refresh(serviceRoot: server.url)
        let note = try await store.create(
            set: "Notes", entity: ["Title": .string("new"), "Amount": .decimal(EDMDecimal("3.25")!)])
        let local = try #require(note.entity?["NoteID"])
        try await store.create(set: "Comments", entity: ["NoteID": local, "Text": .string("on the new note")])
        try await store.create(
            set: "Lines", entity: ["NoteID": local, "LineNo": .int(1), "Text": .string("first line")])
        try await store.update(
            set: "Notes", key: [local], changes: ["Title": .string("new, renamed")], options: .init(nonMergeable: true))
        let before = try Self.queued(store)
        let report = try await store.flush(serviceRoot: server.url)
        #expect(
            report.stopped == nil && report.archived == 0 && report.left == 0,
            "\(report): \((try? FlushFixture.errors(store)) ?? [])")
        let notes = try store.entities("Notes?$filter=Title eq 'new, renamed'")
        #expect(notes.count == 1 && notes.first?["NoteID"] == .int(4), "the service's key: \(notes)")
        #expect(try store.entities("Comments?$filter=NoteID eq 4").count == 1)
        #expect(try store.entities("Lines?$filter=NoteID eq 4").count == 1)
        try await ODataPy.expectSame(store, server.url, "after the flush")
        Self.expectExactlyOnce(try odatapy.applied(), Set(before.values), "the flush")
        #expect(await server.stop() == 0)
    }

    /// 4xx answers: a create whose key the server has meanwhile (409) goes to ErrorArchive with the
    /// item that needs it; an update with a stale ETag (412) goes too; the rest is applied.
    @Test func refusalsAreArchivedWithTheirDependentsAndTheRestGoesThrough() async throws {
        let odatapy = try ODataPy.sample()
        let server = try await odatapy.start()
        defer { server.kill() }
        let store = try await Self.offline(server.url)
        let http = HTTP(client: .shared, base: server.url)
        // Behind the store's back: an order with the key the store will create, and a new name.
        let made = try await http.send(
            .POST, "SalesOrders", body: #"{"SalesOrderID":"0700000001","Note":"the server's"}"#)
        #expect(made.status == 201, "\(made.text)")
        let etag = try await http.get("Products('HT-1003')").header("ETag") ?? ""
        let renamed = try await http.send(
            .PATCH, "Products('HT-1003')", body: #"{"Name":"server"}"#, headers: [("If-Match", etag)])
        #expect(renamed.status == 204)
        let serverWrites = try odatapy.applied().count

        try await store.create(set: "Products", entity: Self.product("HT-9100", "fine", price: "5"))
        try await store.create(
            set: "SalesOrders", entity: ["SalesOrderID": .string("0700000001"), "Note": .string("the store's")])
        try await store.create(
            set: "SalesOrderItems",
            entity: ["SalesOrderID": .string("0700000001"), "ItemPosition": .int(10), "Quantity": .int(1)])
        try await store.update(set: "Products", key: [.string("HT-1003")], changes: ["Name": .string("store")])
        try await store.update(set: "Products", key: [.string("HT-1004")], changes: ["Name": .string("also fine")])
        try await store.delete(set: "Products", key: [.string("HT-1005")])
        let before = try FlushFixture.queue(store)
        let report = try await store.flush(serviceRoot: server.url, batchSize: 10)
        #expect(report.stopped == nil && report.succeeded == 3 && report.archived == 3 && report.left == 0, "\(report)")
        let errors = try FlushFixture.errors(store)
        let statuses = errors.compactMap { e -> Int64? in if case .int(let s)? = e["HTTPStatusCode"] { s } else { nil }
        }.sorted()
        #expect(errors.count == 3 && statuses.contains(409) && statuses.contains(412), "\(errors)")
        let applied = try odatapy.applied().dropFirst(serverWrites)
        let archivedIDs = Set(
            before.filter { r in
                r.entitySet == "SalesOrders" || r.entitySet == "SalesOrderItems" || r.entityKey == "'HT-1003'"
            }.map(\.repeatabilityID.description))
        Self.expectExactlyOnce(
            Array(applied), Set(before.map(\.repeatabilityID.description)).subtracting(archivedIDs), "the flush")
        let names = try await http.get("Products('HT-1003')").object["Name"] as? String
        #expect(names == "server")
        #expect(await server.stop() == 0)
    }

    /// The server stops (exits) right after applying and saving a batch, before answering it: the
    /// flush stops with nothing lost; started again on the same state, the next flush finishes —
    /// the lost batch's create meets 409, its PATCH 412, its DELETE 404, each reconciled.
    @Test func aServerStoppedMidFlushLosesNothing() async throws {
        let odatapy = try ODataPy.sample()
        let first = try await odatapy.start()
        let store = try await Self.offline(first.url)
        #expect(await first.stop() == 0)
        // Started again on the same state, to stop after 4 more writes.
        let dying = try await odatapy.start(exitAfterWrites: try odatapy.applied().count + 4)
        defer { dying.kill() }
        // Batches of 3: the first goes through; the second (writes 4–6) is applied, saved and
        // not answered; the third never goes.
        try await store.create(set: "Products", entity: Self.product("HT-9200", "a", price: "1"))
        try await store.update(set: "Products", key: [.string("HT-1006")], changes: ["Name": .string("b")])
        try await store.delete(set: "Products", key: [.string("HT-1007")])
        try await store.create(set: "Products", entity: Self.product("HT-9201", "c", price: "2"))
        try await store.update(set: "Products", key: [.string("HT-1008")], changes: ["Name": .string("d")])
        try await store.delete(set: "Products", key: [.string("HT-1009")])
        try await store.update(set: "Products", key: [.string("HT-1010")], changes: ["Name": .string("e")])
        try await store.create(set: "Products", entity: Self.product("HT-9202", "f", price: "3"))
        let before = try Self.queued(store)
        let report = try await store.flush(serviceRoot: dying.url, batchSize: 3)
        #expect(report.stopped != nil && report.succeeded == 3 && report.archived == 0 && report.left == 5, "\(report)")
        #expect(await dying.stop() == 3, "the server did not stop after the writes: \(dying.stderr)")
        #expect(try FlushFixture.queue(store).filter { $0.status == .sent }.count == 3)

        let again = try await odatapy.start()
        defer { again.kill() }
        let done = try await store.flush(serviceRoot: again.url, batchSize: 3)
        #expect(
            done.stopped == nil && done.archived == 0 && done.left == 0 && done.succeeded == 5 && done.reconciled == 3,
            "\(done)")
        try await ODataPy.expectSame(store, again.url, "after the second flush")
        let log = try odatapy.applied()
        Self.expectExactlyOnce(log, Set(before.values), "the two flushes")
        #expect(await again.stop() == 0)
        print("sync odatapy, server stopped: first flush \(report); second \(done)")
    }

    /// `offline-store flush` SIGKILLed at random instants while it uploads to odatapy, then run
    /// again: odatapy's log of applied writes holds every request that left the queue exactly
    /// once (duplicates 0), ErrorArchive stays empty, and every few rounds the offline store
    /// equals what odatapy answers. Creates have keys the client gives (the sample has no
    /// computed key; a create whose key the service assigns cannot be made exactly-once against a
    /// service that ignores Repeatability-Request-ID). Bounded by `SYNC_KILLS` (default 10)
    /// kills and `SYNC_KILL_SECONDS` (default 60).
    @Test func aFlushKilledAtRandomAppliesEveryChangeOnceOnOdatapy() async throws {
        var rng = SeededRandom(seed: testSeed("aFlushKilledAtRandomAppliesEveryChangeOnceOnOdatapy"))
        let env = ProcessInfo.processInfo.environment
        let kills = env["SYNC_KILLS"].flatMap(Int.init) ?? 10
        let seconds = env["SYNC_KILL_SECONDS"].flatMap(Double.init) ?? 60
        let odatapy = try ODataPy.sample()
        // Only a bound on a server left behind: generous, as in FlushKillTests (a slowed run
        // outlived a lifetime of 4 × `seconds` + 120 s there).
        let server = try await odatapy.start(lifetime: max(1_800, seconds * 10))
        defer { server.kill() }
        let path = try await Self.offline(server.url).path
        let baseline = try odatapy.applied().count
        var acknowledged: Set<String> = []
        var totals = (kills: 0, finished: 0, changes: 0, sentLeft: 0, completions: 0, reconciled: 0)
        let start = Date()
        var round = 0
        // Bounded by count and time; on a loaded machine (a round can take 20 s beside builds) the
        // time bound stretches, up to three times, until a kill has hit a request in flight.
        func proven() -> Bool { totals.kills >= 1 && totals.sentLeft > 0 }
        while totals.kills < kills
            && (Date().timeIntervalSince(start) < seconds
                || (!proven() && Date().timeIntervalSince(start) < 3 * seconds))
        {
            let before: [Int64: String]
            do {
                let store = try OfflineStore.open(at: path)
                totals.changes += try await Self.change(store, round: round, rng: &rng)
                before = try Self.queued(store)
            }
            let killed = try await FlushKillTests.flushKilled(
                ["flush", "--store", path, "--service", server.url, "--batch-size", "2"],
                after: Int.random(in: 20...400, using: &rng))
            if killed { totals.kills += 1 } else { totals.finished += 1 }
            let store = try OfflineStore.open(at: path)
            let context = "round \(round)"
            let errors = try FlushFixture.errors(store)
            #expect(errors.isEmpty, "\(context): refused: \(errors)")
            let after = try Self.queued(store)
            acknowledged.formUnion(Set(before.keys).subtracting(after.keys).map { before[$0]! })
            totals.sentLeft += try FlushFixture.queue(store).filter { $0.status == .sent }.count
            if !errors.isEmpty { break }
            if round % 4 == 3 || totals.kills >= kills || Date().timeIntervalSince(start) >= seconds {
                totals.completions += 1
                let queued = try Self.queued(store)
                let done = try await store.flush(serviceRoot: server.url, batchSize: 3)
                #expect(done.stopped == nil && done.archived == 0 && done.left == 0, "\(context): \(done)")
                totals.reconciled += done.reconciled
                acknowledged.formUnion(queued.values)
                try await ODataPy.expectSame(store, server.url, context)
                Self.expectExactlyOnce(Array(try odatapy.applied().dropFirst(baseline)), acknowledged, context)
            }
            round += 1
        }
        let log = Array(try odatapy.applied().dropFirst(baseline))
        let kinds = Dictionary(grouping: log, by: \.method).mapValues(\.count)
        let duplicates = log.count - Set(log.compactMap(\.rid)).count
        #expect(await server.stop() == 0)
        print(
            "sync odatapy kill test: \(round) rounds, \(totals.kills) flushes killed, \(totals.finished) done before the kill; \(totals.changes) local changes; odatapy applied \(log.count) writes (POST \(kinds["POST"] ?? 0), PATCH \(kinds["PATCH"] ?? 0), DELETE \(kinds["DELETE"] ?? 0)), duplicates \(duplicates), \(acknowledged.count) requests left the queue; a request was left sent by a kill \(totals.sentLeft) times; \(totals.reconciled) reconciled in \(totals.completions) full flushes; \(String(format: "%.1f", Date().timeIntervalSince(start))) s"
        )
        #expect(duplicates == 0)
        #expect(totals.kills >= 1, "no flush killed in \(3 * seconds) s")
        #expect(totals.sentLeft > 0, "no kill hit a request in flight: the test proves little")
    }

    /// A few random local changes on the sample; returns how many.
    static func change(_ store: OfflineStore, round: Int, rng: inout SeededRandom) async throws -> Int {
        var n = 0
        for i in 0..<Int.random(in: 1...3, using: &rng) {
            try await store.create(
                set: "Products", entity: product("K\(round)-\(i)", "k\(round)", price: "\(round).\(i)5"))
            n += 1
        }
        if Int.random(in: 0..<2, using: &rng) == 0 {
            let order = "08" + String(String(100_000_000 + round).suffix(8))
            try await store.create(
                set: "SalesOrders", entity: ["SalesOrderID": .string(order), "Note": .string("r\(round)")])
            try await store.create(
                set: "SalesOrderItems",
                entity: ["SalesOrderID": .string(order), "ItemPosition": .int(10), "Quantity": .int(Int64(round))])
            n += 2
        }
        let products = try store.entities("Products?$select=ProductID").compactMap { $0["ProductID"] }
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            try await store.update(
                set: "Products", key: [products.randomElement(using: &rng)!],
                changes: ["Name": .string("u\(round)-\(n)")],
                options: .init(nonMergeable: Int.random(in: 0..<3, using: &rng) == 0))
            n += 1
        }
        if Int.random(in: 0..<2, using: &rng) == 0, products.count > 10 {
            try await store.delete(set: "Products", key: [products.randomElement(using: &rng)!])
            n += 1
        }
        return n
    }
}
