import TestSupport
import LMDB
import Foundation
import Synchronization
import Testing
@testable import OfflineStore
import Samples
@testable import Served
@testable import Sync
@testable import Storage

/// A value a served body hands out (bodies are `@Sendable` and may not capture a `var`).
final class Captured<T: Sendable>: Sendable {
    private let value = Mutex<T?>(nil)
    func set(_ v: T) { value.withLock { $0 = v } }
    var get: T? { value.withLock { $0 } }
}

final class Counter: Sendable {
    private let n = Atomic<Int>(0)
    func bump() { n.add(1, ordering: .relaxed) }
    var value: Int { n.load(ordering: .relaxed) }
}

/// A clock for repeatability records that tests move by hand.
final class TestClock: Sendable {
    private let date = Mutex(Date(timeIntervalSince1970: 1_700_000_000))
    var now: Date { date.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { date.withLock { $0 += seconds } }
}

extension OfflineStore {
    /// `served` with no repeatability id, returning what `body` returns.
    func servedWrite<R: Sendable>(_ body: @escaping @Sendable (ServedTransaction) throws -> R) async throws -> R {
        let out = Captured<R>()
        _ = try await served(repeatabilityID: nil, fingerprint: []) { tx in
            out.set(try body(tx))
            return RecordedResponse(status: 200, headers: [], body: [])
        }
        return out.get!
    }

    /// Every change-log entry, oldest first.
    func changeLog() throws -> [ChangeLog.Entry] {
        let log = ChangeLog(store: entities)
        return try entities.read { t in try log.entries(t, set: nil, since: 0).entries }
    }

    /// Every repeatability record by id.
    func repeatRecords() throws -> [String: RepeatRecord] {
        let records = RepeatRecords(store: entities), db = entities.repeatRecords
        return try entities.read { t in
            var out: [String: RepeatRecord] = [:]
            try t.withCursor(db) { c in
                var e = try c.first()
                while let (k, _) = e {
                    out[String(decoding: k, as: UTF8.self)] = try records.get(t, id: Array(k))
                    e = try c.next()
                }
            }
            return out
        }
    }

    func entryCount(_ db: Database) throws -> Int { try entities.read { t in try t.count(db) } }

    /// The stored row's ETag.
    func storedETag(set: String, key: [Value]) throws -> String? {
        let h = try entities.set(set)
        return try entities.read { t in try t.get(h.entities, try h.encodeKey(key)).map { EntityTag.of(row: $0) } }
    }
}

/// The served role's write path: writes apply directly with ETags and If-Match, each is logged
/// in the change log (compacted to one entry per entity), and a write with a
/// `Repeatability-Request-ID` is recorded and replayed, never applied twice.
@Suite(.checksStores) struct ServedTests {
    static let pen: Properties = [
        "ProductID": .string("N-1"), "Name": .string("Pen"), "Price": .decimal(EDMDecimal("1.50")!),
    ]
    static let ok = RecordedResponse(status: 204, headers: [], body: [])

    // MARK: Writes, ETags, If-Match

    /// Reading the clock costs the same the millionth time as the first. (It once grew: the
    /// closure came out of its `Mutex` through `withLock`'s `inout` and went back in wrapped in
    /// two more reabstraction thunks, so every served write took longer than the one before.)
    @Test(.runsOffThePool) func readingTheClockDoesNotSlowDown() throws {
        let clock = ServedClock()
        func timeReads(_ n: Int) -> Duration {
            let start = ContinuousClock.now
            for _ in 0..<n { _ = clock.read() }
            return ContinuousClock.now - start
        }
        let first = timeReads(2_000)
        for _ in 0..<20 { _ = timeReads(2_000) }
        let later = timeReads(2_000)
        // Growing by two thunks a read, the later 2,000 reads walk some 80,000 thunks each.
        #expect(
            later < first * 10 + .milliseconds(20),
            "2,000 clock reads took \(first) at first, \(later) after 42,000 reads")
    }

    @Test func writesApplyDirectlyWithTheirETags() async throws {
        let store = try await makeSampleStore()
        let (created, tag) = try await store.servedWrite { tx in try tx.create(set: "Products", entity: Self.pen) }
        #expect(created == Self.pen)
        #expect(tag == (try store.storedETag(set: "Products", key: [.string("N-1")])) && tag.hasPrefix("W/\""))
        #expect(try store.get(set: "Products", key: [.string("N-1")]) == Self.pen)
        // Inside one transaction, get sees the transaction's own writes.
        let seen = try await store.servedWrite { tx in
            let before = try tx.get(set: "Products", key: [.string("N-2")])
            let made = try tx.create(set: "Products", entity: ["ProductID": .string("N-2")])
            let after = try tx.get(set: "Products", key: [.string("N-2")])
            return before == nil && after?.etag == made.etag && after?.entity == made.entity
        }
        #expect(seen)
        // Update (PATCH merge), replace (PUT: what is left out becomes null), delete.
        let (updated, tag2) = try await store.servedWrite { tx in
            try tx.update(set: "Products", key: [.string("N-1")], changes: ["Name": .string("Ink")], ifMatch: nil)
        }
        #expect(updated["Name"] == .string("Ink") && updated["Price"] == .decimal(EDMDecimal("1.50")!) && tag2 != tag)
        #expect(tag2 == (try store.storedETag(set: "Products", key: [.string("N-1")])))
        let (replaced, tag3) = try await store.servedWrite { tx in
            try tx.replace(set: "Products", key: [.string("N-1")], entity: ["Name": .string("Nib")], ifMatch: nil)
        }
        #expect(replaced == ["ProductID": .string("N-1"), "Name": .string("Nib")])
        #expect(tag3 == (try store.storedETag(set: "Products", key: [.string("N-1")])))
        try await store.servedWrite { tx in try tx.delete(set: "Products", key: [.string("N-1")], ifMatch: nil) }
        #expect(try store.get(set: "Products", key: [.string("N-1")]) == nil)
        // The same content gives the same tag (it is the row's bytes).
        let (_, again) = try await store.servedWrite { tx in
            try tx.create(set: "Products", entity: ["ProductID": .string("N-1"), "Name": .string("Nib")])
        }
        #expect(again == tag3)
        // Nothing went through the request queue.
        #expect(try store.pendingRequestCount() == 0)
        #expect(try store.entryCount(store.entities.byEntity) == 0)
        #expect(try store.entryCount(store.entities.base(ofSet: "Products")) == 0)
    }

    @Test func ifMatchIsCheckedAgainstTheCurrentTag() async throws {
        let store = try await makeSampleStore()
        let key: [Value] = [.string("HT-1001")]
        let first = try #require(try store.storedETag(set: "Products", key: key))
        var n = 0
        func update(_ ifMatch: String?) async throws -> String {
            n += 1
            let name = Value.string("v\(n)")
            return try await store.servedWrite { tx in
                try tx.update(set: "Products", key: key, changes: ["Name": name], ifMatch: ifMatch).etag
            }
        }
        let second = try await update(first)  // the current tag
        await #expect(throws: ServedError.preconditionFailed(set: "Products", key: "'HT-1001'")) {
            try await update(first)
        }  // stale
        #expect(try store.get(set: "Products", key: key)?["Name"] == .string("v1"))
        let third = try await update("*")
        let fourth = try await update(#"W/"0000000000000000", "nope", \#(third)"#)  // a list holding the current tag
        let bare = String(fourth.dropFirst(2))  // "…" without W/: weak comparison
        let fifth = try await update(bare)
        _ = try await update(nil)
        await #expect(throws: ServedError.self) { try await update(#""x""#) }
        await #expect(throws: ServedError.self) { try await update("") }
        await #expect(throws: ServedError.self) { try await update(fifth) }  // stale again
        #expect(Set([first, second, third, fourth, fifth]).count == 5)
        // Replace and delete check it too.
        await #expect(throws: ServedError.preconditionFailed(set: "Products", key: "'HT-1001'")) {
            try await store.servedWrite { tx in try tx.replace(set: "Products", key: key, entity: [:], ifMatch: first) }
        }
        await #expect(throws: ServedError.preconditionFailed(set: "Products", key: "'HT-1001'")) {
            try await store.servedWrite { tx in try tx.delete(set: "Products", key: key, ifMatch: second) }
        }
        let current = try #require(try store.storedETag(set: "Products", key: key))
        try await store.servedWrite { tx in try tx.delete(set: "Products", key: key, ifMatch: "W/\"1\", " + current) }
        #expect(try store.get(set: "Products", key: key) == nil)
    }

    @Test func refusalsNameTheProblemAndChangeNothing() async throws {
        let store = try await makeSampleStore()
        let log = try store.changeLog()
        let missing: [Value] = [.string("nope")]
        await #expect(throws: ServedError.alreadyExists(set: "Products", key: "'HT-1000'")) {
            try await store.servedWrite { tx in
                try tx.create(set: "Products", entity: ["ProductID": .string("HT-1000")])
            }
        }
        await #expect(throws: ServedError.notFound(set: "Products", key: "'nope'")) {
            try await store.servedWrite { tx in try tx.update(set: "Products", key: missing, changes: [:], ifMatch: "*")
            }
        }
        await #expect(throws: ServedError.notFound(set: "Products", key: "'nope'")) {
            try await store.servedWrite { tx in try tx.replace(set: "Products", key: missing, entity: [:], ifMatch: nil)
            }
        }
        await #expect(throws: ServedError.notFound(set: "Products", key: "'nope'")) {
            try await store.servedWrite { tx in try tx.delete(set: "Products", key: missing, ifMatch: nil) }
        }
        await #expect(throws: EntityError.unknownProperty(set: "Products", property: "Pric")) {
            try await store.servedWrite { tx in
                try tx.create(set: "Products", entity: ["ProductID": .string("X"), "Pric": .int(1)])
            }
        }
        await #expect(throws: EntityError.keyChange(set: "Products", property: "ProductID")) {
            try await store.servedWrite { tx in
                try tx.update(
                    set: "Products", key: [.string("HT-1000")], changes: ["ProductID": .string("Y")], ifMatch: nil)
            }
        }
        await #expect(throws: EntityError.unknownEntitySet("Nope")) {
            try await store.servedWrite { tx in try tx.create(set: "Nope", entity: [:]) }
        }
        await #expect(throws: EntityError.self) {
            try await store.servedWrite { tx in try tx.create(set: "RequestQueue", entity: ["RequestID": .int(1)]) }
        }
        #expect(ServedError.preconditionFailed(set: "P", key: "'1'").httpStatus == 412)
        #expect(
            "\(ServedError.alreadyExists(set: "Products", key: "'HT-1000'"))"
                == "entity Products('HT-1000') already exists")
        #expect(try store.changeLog() == log)
        #expect(try store.get(set: "Products", key: [.string("X")]) == nil)
    }

    // MARK: The change log

    @Test func theChangeLogKeepsOneEntryPerEntityAndNeverReusesANumber() async throws {
        let store = try await makeSampleStore()
        #expect(try store.changeToken() == 0)  // loaded data is not logged
        let a: [Value] = [.string("A")], b: [Value] = [.string("B")]
        // Write A, then write it again: its entry is the last one, deleted as the new one is made.
        try await store.servedWrite { tx in _ = try tx.create(set: "Products", entity: ["ProductID": .string("A")]) }
        #expect(try store.changeToken() == 1)
        try await store.servedWrite { tx in
            _ = try tx.update(set: "Products", key: a, changes: ["Name": .string("1")], ifMatch: nil)
        }
        #expect(try store.changeToken() == 2, "the number of the entity's own deleted entry was reused")
        #expect(try store.changes(set: "Products", since: 1).changed.map(\.key) == [a])
        for n in 2...10 {
            try await store.servedWrite { tx in
                _ = try tx.update(set: "Products", key: a, changes: ["Name": .string("\(n)")], ifMatch: nil)
            }
        }
        #expect(try store.changeLog().map(\.sequence) == [11])
        try await store.servedWrite { tx in try tx.delete(set: "Products", key: a, ifMatch: nil) }
        try await store.servedWrite { tx in _ = try tx.create(set: "Products", entity: ["ProductID": .string("B")]) }
        let log = try store.changeLog()
        #expect(log.map(\.sequence) == [12, 13] && log.map(\.kind) == [.delete, .upsert])
        // Recreated: one entry again, an upsert, at the end.
        try await store.servedWrite { tx in _ = try tx.create(set: "Products", entity: ["ProductID": .string("A")]) }
        let all = try store.changes(set: "Products", since: 0)
        #expect(all.changed.map(\.key) == [b, a] && all.changed.map(\.deleted) == [false, false] && all.token == 14)
        #expect(
            try store.entryCount(store.entities.changes) == 2 && store.entryCount(store.entities.changesByEntity) == 2)
    }

    /// A delta's pages: at most `limit` changes of the delta's sets (others passed over, not
    /// counted) above the page before's last and at most the first page's bound; an entity
    /// changed again after the bound was fixed leaves the pages (its entry moves above it).
    @Test func changesComeInPagesUnderTheFirstPagesBound() async throws {
        let store = try await makeSampleStore()
        let ids = (1...7).map { "P-\($0)" }
        try await store.servedWrite { tx in
            for (i, id) in ids.enumerated() {
                _ = try tx.create(set: "Products", entity: ["ProductID": .string(id)])
                if i == 2 {
                    _ = try tx.update(
                        set: "BusinessPartners", key: [.string("0100000000")], changes: ["CompanyName": .string("x")],
                        ifMatch: nil)
                }
            }
        }
        func page(
            _ after: UInt64?, _ bound: UInt64?
        ) throws -> (keys: [String], bound: UInt64, last: UInt64?, more: Bool) {
            let p = try store.entities.read { t in
                try store.changes(t, sets: ["Products"], since: 0, resumingAfter: after, bound: bound, limit: 3)
            }
            return (p.changes.map { if case .string(let s) = $0.key[0] { s } else { "?" } }, p.bound, p.last, p.more)
        }
        let first = try page(nil, nil)
        #expect(first.keys == ["P-1", "P-2", "P-3"] && first.bound == 8 && first.last == 3 && first.more)
        // P-5, of the next page, changes again: above the bound, in no page of this delta.
        try await store.servedWrite { tx in
            _ = try tx.update(set: "Products", key: [.string("P-5")], changes: ["Name": .string("n")], ifMatch: nil)
        }
        let second = try page(first.last, first.bound)
        #expect(second.keys == ["P-4", "P-6", "P-7"] && second.last == 8 && !second.more, "\(second)")
        #expect(try page(second.last, first.bound).keys.isEmpty)
        // The next delta, from the bound, brings it.
        let next = try store.entities.read { t in try store.changes(t, sets: ["Products"], since: 8) }
        #expect(next.changes.map(\.key) == [[.string("P-5")]] && next.bound == 9 && !next.more)
        #expect(throws: ChangeTokenError(token: 10, newest: 9)) {
            try store.entities.read { t in try store.changes(t, sets: ["Products"], since: 0, bound: 10) }
        }
    }

    @Test func changesSinceATokenAreTheNewestStateOfEachEntity() async throws {
        let store = try await makeSampleStore()
        try await store.servedWrite { tx in
            _ = try tx.create(set: "Products", entity: ["ProductID": .string("P-1")])
            _ = try tx.create(set: "Products", entity: ["ProductID": .string("P-2")])
            _ = try tx.update(
                set: "BusinessPartners", key: [.string("0100000000")], changes: ["CompanyName": .string("x")],
                ifMatch: nil)
        }
        let token = try store.changeToken()
        #expect(token == 3)
        #expect(try store.changes(set: "Products", since: token).changed.isEmpty)
        try await store.servedWrite { tx in
            _ = try tx.update(set: "Products", key: [.string("P-1")], changes: ["Name": .string("n")], ifMatch: nil)
            try tx.delete(set: "Products", key: [.string("HT-1000")], ifMatch: nil)
            _ = try tx.update(set: "Products", key: [.string("P-1")], changes: ["Name": .string("m")], ifMatch: nil)
            _ = try tx.create(
                set: "BusinessPartners", entity: ["BusinessPartnerID": .string("B-1"), "CompanyName": .string("b")])
        }
        let since = try store.changes(set: "Products", since: token)
        #expect(since.changed.map(\.key) == [[.string("HT-1000")], [.string("P-1")]])
        #expect(since.changed.map(\.deleted) == [true, false])
        #expect(since.token == 7)
        let partners = try store.changes(set: "BusinessPartners", since: 0)
        #expect(partners.changed.map(\.key) == [[.string("0100000000")], [.string("B-1")]] && partners.token == 7)
        #expect(
            try store.changes(set: "Products", since: 0).changed.map(\.key) == [
                [.string("P-2")], [.string("HT-1000")], [.string("P-1")],
            ])
        // Inside a read the caller has.
        #expect(try store.entities.read { t in try store.changeToken(t) } == 7)
        #expect(try store.entities.read { t in try store.changes(t, set: "Products", since: 5).changed.count } == 1)
        #expect(throws: ChangeTokenError(token: 8, newest: 7)) { try store.changes(set: "Products", since: 8) }
        #expect(throws: ChangeTokenError.self) { try store.changes(set: "Products", since: .max) }
        #expect(throws: EntityError.unknownEntitySet("Nope")) { try store.changes(set: "Nope", since: 0) }
    }

    // MARK: Repeatability

    @Test func aRepeatedRequestIsAnsweredFromItsRecordAndAppliedOnce() async throws {
        let store = try await makeSampleStore()
        let clock = TestClock()
        store.now = { clock.now }
        let runs = Counter()
        let fingerprint = OfflineStore.requestFingerprint(
            method: "POST", url: "Products", body: Array(#"{"ProductID":"R-1"}"#.utf8))
        let create: @Sendable (ServedTransaction) throws -> RecordedResponse = { tx in
            runs.bump()
            let (_, tag) = try tx.create(set: "Products", entity: ["ProductID": .string("R-1")])
            return RecordedResponse(
                status: 201, headers: [("ETag", tag), ("Location", "Products('R-1')"), ("Location", "twice")],
                body: Array("created".utf8))
        }
        let first = try await store.served(repeatabilityID: "id-1", fingerprint: fingerprint, body: create)
        #expect(!first.replayed && first.response.status == 201 && runs.value == 1)
        let record = try #require(try store.repeatRecords()["id-1"])
        #expect(record.recordedAt == 1_700_000_000_000 && record.fingerprint == fingerprint)
        let log = try store.changeLog()
        let entity = try store.get(set: "Products", key: [.string("R-1")])
        clock.advance(3600)
        // Again: the record, not the body (which would now fail: the key exists).
        let second = try await store.served(repeatabilityID: "id-1", fingerprint: fingerprint, body: create)
        #expect(second.replayed && second.response == first.response && runs.value == 1)
        #expect(try store.changeLog() == log && store.get(set: "Products", key: [.string("R-1")]) == entity)
        #expect(try store.repeatRecords()["id-1"] == record)
        // The same id with another request.
        await #expect(throws: ServedError.repeatMismatch(id: "id-1")) {
            try await store.served(repeatabilityID: "id-1", fingerprint: fingerprint + [0], body: create)
        }
        #expect(try runs.value == 1 && store.changeLog() == log)
        #expect(ServedError.repeatMismatch(id: "id-1").httpStatus == 422)
        // Without an id, a request runs every time.
        await #expect(throws: ServedError.alreadyExists(set: "Products", key: "'R-1'")) {
            try await store.served(repeatabilityID: nil, fingerprint: fingerprint, body: create)
        }
        #expect(runs.value == 2)
    }

    @Test func aRefusedWriteIsNotRecordedSoItsRepeatRunsAgain() async throws {
        let store = try await makeSampleStore()
        let runs = Counter()
        let update: @Sendable (ServedTransaction) throws -> RecordedResponse = { tx in
            runs.bump()
            _ = try tx.update(set: "Products", key: [.string("LATER")], changes: ["Name": .string("x")], ifMatch: nil)
            return Self.ok
        }
        await #expect(throws: ServedError.notFound(set: "Products", key: "'LATER'")) {
            try await store.served(repeatabilityID: "id-2", fingerprint: [1], body: update)
        }
        #expect(try store.repeatRecords().isEmpty)
        try await store.servedWrite { tx in _ = try tx.create(set: "Products", entity: ["ProductID": .string("LATER")])
        }
        let r = try await store.served(repeatabilityID: "id-2", fingerprint: [1], body: update)
        #expect(try !r.replayed && runs.value == 2 && store.repeatRecords().keys.sorted() == ["id-2"])
    }

    @Test func repeatabilityIDsAreOneTo200Bytes() async throws {
        let store = try await makeSampleStore()
        for bad in ["", String(repeating: "x", count: 201), String(repeating: "🙂", count: 51)] {
            await #expect(throws: ServedError.self, "\(bad.utf8.count) bytes") {
                try await store.served(repeatabilityID: bad, fingerprint: []) { _ in Self.ok }
            }
        }
        do {
            _ = try await store.served(repeatabilityID: "", fingerprint: []) { _ in Self.ok }
        } catch let e as ServedError {
            #expect(e == .badRepeatabilityID("the Repeatability-Request-ID is empty") && e.httpStatus == 400)
        }
        for good in ["x", String(repeating: "x", count: 200), String(repeating: "é", count: 100), "a b\u{0}c"] {
            let r = try await store.served(repeatabilityID: good, fingerprint: []) { _ in Self.ok }
            #expect(!r.replayed)
            #expect(try await store.served(repeatabilityID: good, fingerprint: []) { _ in Self.ok }.replayed)
        }
        #expect(try store.repeatRecords().count == 4)
    }

    @Test func recordsExpireAfterTheWindowAndArePurgedAFewAtATime() async throws {
        var configuration = SampleData.configuration
        configuration.repeatabilityWindowSeconds = 60
        let store = try OfflineStore.create(
            at: tempDir() + "/store", metadata: Array(SampleData.metadata.utf8), configuration: configuration)
        let clock = TestClock()
        store.now = { clock.now }
        let runs = Counter()
        let body: @Sendable (ServedTransaction) throws -> RecordedResponse = { _ in
            runs.bump(); return Self.ok
        }
        _ = try await store.served(repeatabilityID: "old", fingerprint: [1], body: body)
        clock.advance(60)  // exactly the window: still kept
        #expect(try await store.served(repeatabilityID: "old", fingerprint: [1], body: body).replayed)
        clock.advance(1)  // past it: applied again, and recorded anew
        #expect(try await !store.served(repeatabilityID: "old", fingerprint: [2], body: body).replayed)
        #expect(runs.value == 2)
        #expect(
            try store.repeatRecords()["old"]?.recordedAt == 1_700_000_061_000
                && store.repeatRecords()["old"]?.fingerprint == [2])
        #expect(try store.entryCount(store.entities.repeatRecordsByTime) == 1)
        // 20 records; past the window, each write purges 16 of them, oldest first.
        for n in 0..<20 { _ = try await store.served(repeatabilityID: "r\(n)", fingerprint: [], body: body) }
        clock.advance(120)
        _ = try await store.served(repeatabilityID: nil, fingerprint: [], body: body)
        #expect(try store.entryCount(store.entities.repeatRecords) == 5)
        _ = try await store.served(repeatabilityID: "new", fingerprint: [], body: body)
        #expect(try store.repeatRecords().keys.sorted() == ["new"])
        // A refused write purges nothing either (it writes nothing).
        clock.advance(120)
        await #expect(throws: ServedError.self) {
            try await store.served(repeatabilityID: nil, fingerprint: []) { tx in
                try tx.delete(set: "Products", key: [.string("none")], ifMatch: nil); return Self.ok
            }
        }
        #expect(try store.repeatRecords().keys.sorted() == ["new"])
    }

    @Test(.runsOffThePool) func theWindowIsAConfigurationField() throws {
        let c = try StoreConfiguration(json: Array(#"{"repeatabilityWindowSeconds": 3600}"#.utf8))
        #expect(c.repeatabilityWindowSeconds == 3600)
        #expect(try StoreConfiguration(json: c.json).repeatabilityWindowSeconds == 3600)
        #expect(StoreConfiguration().repeatabilityWindowSeconds == 86_400)
        #expect(!StoreConfiguration().json.text.contains("repeatability"))  // the default is not written
        for bad in ["0", "-1", "1.5", #""60""#, "31536001", "null"] {
            #expect(throws: EntityError.self, "\(bad)") {
                try StoreConfiguration(json: Array(#"{"repeatabilityWindowSeconds": \#(bad)}"#.utf8))
            }
        }
        var wrong = SampleData.configuration
        wrong.repeatabilityWindowSeconds = 0
        #expect(throws: EntityError.self) {
            try OfflineStore.create(
                at: tempDir() + "/store", metadata: Array(SampleData.metadata.utf8), configuration: wrong)
        }
        // Kept by the store.
        var configuration = SampleData.configuration
        configuration.repeatabilityWindowSeconds = 90
        let path = tempDir() + "/store"
        _ = try OfflineStore.create(at: path, metadata: Array(SampleData.metadata.utf8), configuration: configuration)
        #expect(try OfflineStore.open(at: path, readOnly: true).configuration.repeatabilityWindowSeconds == 90)
    }

    // MARK: Atomicity

    @Test func aBodyThatThrowsLeavesNothingAtAll() async throws {
        let store = try await makeSampleStore()
        try await store.servedWrite { tx in _ = try tx.create(set: "Products", entity: ["ProductID": .string("Z-0")]) }
        let log = try store.changeLog()
        let products = try store.count(set: "Products")
        let before = try store.get(set: "Products", key: [.string("HT-1000")])
        struct Refused: Error {}
        await #expect(throws: Refused.self) {
            try await store.served(repeatabilityID: "atomic", fingerprint: []) { tx in
                _ = try tx.create(set: "Products", entity: ["ProductID": .string("Z-1")])
                _ = try tx.create(set: "Products", entity: ["ProductID": .string("Z-2")])
                _ = try tx.update(
                    set: "Products", key: [.string("HT-1000")], changes: ["Name": .string("gone")], ifMatch: nil)
                try tx.delete(set: "Products", key: [.string("Z-0")], ifMatch: nil)
                throw Refused()
            }
        }
        #expect(try store.count(set: "Products") == products)
        #expect(
            try store.get(set: "Products", key: [.string("Z-1")]) == nil
                && store.get(set: "Products", key: [.string("HT-1000")]) == before)
        #expect(try store.changeLog() == log && store.repeatRecords().isEmpty)
        // A body may catch a refusal (nothing was written by it) and go on: the rest commits.
        let r = try await store.served(repeatabilityID: "batch", fingerprint: []) { tx in
            do { _ = try tx.create(set: "Products", entity: ["ProductID": .string("Z-0")]) } catch ServedError
                .alreadyExists
            {}
            _ = try tx.create(set: "Products", entity: ["ProductID": .string("Z-1")])
            _ = try tx.create(set: "Products", entity: ["ProductID": .string("Z-2")])
            return RecordedResponse(
                status: 200, headers: [("Content-Type", "multipart/mixed")], body: Array("batch".utf8))
        }
        #expect(try !r.replayed && store.count(set: "Products") == products + 2)
        #expect(try store.changeLog().map(\.sequence) == [1, 2, 3] && store.repeatRecords().keys.sorted() == ["batch"])
    }

    // MARK: Concurrency

    /// 8 tasks write at once: every write is there with its log entry and record, and the writer
    /// grouped them (fewer commits than writes).
    @Test func concurrentServedWritesAreAllThereAndGroupCommitted() async throws {
        let store = try await makeSampleStore()
        let tasks = 8, perTask = 30
        let commitsBefore = store.entities.environment.commitCount
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                group.addTask {
                    for n in 0..<perTask {
                        let key = "T\(task)-\(n % 5)", name = Value.string("\(n)")
                        let r = try await store.served(repeatabilityID: "\(task)/\(n)", fingerprint: []) { tx in
                            if n < 5 {
                                _ = try tx.create(set: "Products", entity: ["ProductID": .string(key), "Name": name])
                            } else {
                                _ = try tx.update(
                                    set: "Products", key: [.string(key)], changes: ["Name": name], ifMatch: nil)
                            }
                            return Self.ok
                        }
                        #expect(!r.replayed)
                    }
                }
            }
            try await group.waitForAll()
        }
        let commits = store.entities.environment.commitCount - commitsBefore
        for task in 0..<tasks {
            for k in 0..<5 {
                #expect(
                    try store.get(set: "Products", key: [.string("T\(task)-\(k)")])?["Name"]
                        == .string("\(perTask - 5 + k)"))
            }
        }
        let log = try store.changeLog()
        #expect(log.count == tasks * 5, "one entry per entity")
        #expect(try store.changeToken() == UInt64(tasks * perTask), "one number per write")
        #expect(try store.repeatRecords().count == tasks * perTask)
        #expect(commits < tasks * perTask, "\(commits) commits for \(tasks * perTask) writes: nothing was grouped")
        print("served writes: \(tasks * perTask) from \(tasks) tasks in \(commits) commits")
    }

    // MARK: Format

    @Test func formatTwoStoresAreUpgradedWhenOpenedWritable() async throws {
        let store = try await makeSampleStore()
        let path = store.path, env = store.entities.environment
        let meta = store.entities.meta
        _ = try await store.entities.write { t in try t.put(meta, EntityStore.formatKey, Array("offline-store 2".utf8))
        }
        for name in (ServedRole.databaseNames(schema: store.schema) + SyncRole.databaseNames(schema: store.schema)) {
            try env.dropDatabase(named: name)
        }
        #expect(try !env.databaseNames().contains("changes"))
        #expect { try OfflineStore.open(at: path, readOnly: true) } throws: {
            "\($0)"
                == "the store in '\(path)' has format 2; open it writable once (any writing command) to upgrade it to format \(EntityStore.formatVersion)"
        }
        let upgraded = try OfflineStore.open(at: path)
        #expect(
            try upgraded.entities.read { t in try t.get(meta, EntityStore.formatKey).map { Array($0) } }
                == Array("offline-store \(EntityStore.formatVersion)".utf8))
        #expect(
            try Set(upgraded.entities.environment.databaseNames()).isSuperset(
                of: (ServedRole.databaseNames(schema: store.schema) + SyncRole.databaseNames(schema: store.schema))))
        let r = try await upgraded.served(repeatabilityID: "after-upgrade", fingerprint: []) { tx in
            _ = try tx.create(set: "Products", entity: ["ProductID": .string("U-1")])
            return Self.ok
        }
        #expect(try !r.replayed && upgraded.changeToken() == 1)
        #expect(try OfflineStore.open(at: path, readOnly: true).check().isConsistent)
    }
}
