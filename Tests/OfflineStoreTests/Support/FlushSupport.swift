import Served
import Foundation
import Testing
@testable import OfflineStore
import Queue
import Sync
import Remote
import Samples
import Storage

/// What the flush tests share: store pairs (the served one and an offline copy of the same data),
/// a fixture schema with keys the service assigns, exact comparison of the two stores, and a
/// `Backend` that records what goes over the wire and can lose an answer.
enum FlushFixture {
    /// A schema whose keys the service computes (`Core.Computed`): notes, their comments (a foreign
    /// key to the note), their lines (the note's key is part of the line's key) and tags (a key
    /// the client gives, and a foreign key to a note).
    static let notesMetadata = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:DataServices>
            <Schema Namespace="Notes" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <EntityType Name="Note">
                <Key><PropertyRef Name="NoteID"/></Key>
                <Property Name="NoteID" Type="Edm.Int32" Nullable="false"><Annotation Term="Org.OData.Core.V1.Computed" Bool="true"/></Property>
                <Property Name="Title" Type="Edm.String" MaxLength="80"/>
                <Property Name="Amount" Type="Edm.Decimal" Precision="12" Scale="2"/>
                <NavigationProperty Name="Comments" Type="Collection(Notes.Comment)" Partner="Note"/>
                <NavigationProperty Name="Lines" Type="Collection(Notes.Line)" Partner="Note"/>
              </EntityType>
              <EntityType Name="Comment">
                <Key><PropertyRef Name="CommentID"/></Key>
                <Property Name="CommentID" Type="Edm.Int32" Nullable="false"><Annotation Term="Org.OData.Core.V1.Computed" Bool="true"/></Property>
                <Property Name="NoteID" Type="Edm.Int32"/>
                <Property Name="Text" Type="Edm.String"/>
                <NavigationProperty Name="Note" Type="Notes.Note" Partner="Comments">
                  <ReferentialConstraint Property="NoteID" ReferencedProperty="NoteID"/>
                </NavigationProperty>
              </EntityType>
              <EntityType Name="Line">
                <Key><PropertyRef Name="NoteID"/><PropertyRef Name="LineNo"/></Key>
                <Property Name="NoteID" Type="Edm.Int32" Nullable="false"/>
                <Property Name="LineNo" Type="Edm.Int32" Nullable="false"/>
                <Property Name="Text" Type="Edm.String"/>
                <NavigationProperty Name="Note" Type="Notes.Note" Nullable="false" Partner="Lines">
                  <ReferentialConstraint Property="NoteID" ReferencedProperty="NoteID"/>
                </NavigationProperty>
              </EntityType>
              <EntityType Name="Tag">
                <Key><PropertyRef Name="TagID"/></Key>
                <Property Name="TagID" Type="Edm.String" Nullable="false" MaxLength="20"/>
                <Property Name="Label" Type="Edm.String"/>
                <Property Name="NoteID" Type="Edm.Int32"/>
                <NavigationProperty Name="Note" Type="Notes.Note">
                  <ReferentialConstraint Property="NoteID" ReferencedProperty="NoteID"/>
                </NavigationProperty>
              </EntityType>
              <EntityContainer Name="Container">
                <EntitySet Name="Notes" EntityType="Notes.Note">
                  <NavigationPropertyBinding Path="Comments" Target="Comments"/>
                  <NavigationPropertyBinding Path="Lines" Target="Lines"/>
                </EntitySet>
                <EntitySet Name="Comments" EntityType="Notes.Comment"><NavigationPropertyBinding Path="Note" Target="Notes"/></EntitySet>
                <EntitySet Name="Lines" EntityType="Notes.Line"><NavigationPropertyBinding Path="Note" Target="Notes"/></EntitySet>
                <EntitySet Name="Tags" EntityType="Notes.Tag"><NavigationPropertyBinding Path="Note" Target="Notes"/></EntitySet>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    static let notesData: [(String, String)] = [
        (
            "Notes",
            #"{"value":[{"NoteID":1,"Title":"first","Amount":"10.50"},{"NoteID":2,"Title":"second","Amount":"0.10"},{"NoteID":3,"Title":"third"}]}"#
        ),
        ("Comments", #"{"value":[{"CommentID":1,"NoteID":1,"Text":"hello"}]}"#),
        ("Lines", #"{"value":[{"NoteID":1,"LineNo":1,"Text":"a"},{"NoteID":1,"LineNo":2,"Text":"b"}]}"#),
        ("Tags", #"{"value":[{"TagID":"red","Label":"Red","NoteID":1}]}"#),
    ]

    static let notesSets = ["Notes", "Comments", "Lines", "Tags"]

    /// A served store and an offline store (`optimize`: request-queue optimization) with the same
    /// data: the sample's, or the notes fixture's. Both registered for the integrity check.
    static func pair(notes: Bool = false, optimize: Bool = true) throws -> (served: String, offline: OfflineStore) {
        let dir = tempDir()
        let metadata = Array((notes ? notesMetadata : SampleData.metadata).utf8)
        var configuration = notes ? StoreConfiguration() : SampleData.configuration
        configuration.requestQueueOptimization = optimize
        let data = notes ? notesData : SampleData.setsInLoadOrder.map { ($0, SampleData.json($0)) }
        var stores: [OfflineStore] = []
        for name in ["served", "offline"] {
            let store = try OfflineStore.create(at: dir + "/" + name, metadata: metadata, configuration: configuration)
            for (set, json) in data { _ = try store.load(set: set, json: Array(json.utf8)) }
            stores.append(store)
        }
        return (dir + "/served", stores[1])
    }

    /// The same as `pair(notes:optimize:)`, for an `async` caller (which the compiler picks): built
    /// off the concurrency pool, so the tests beside this one do not wait for a thread meanwhile.
    static func pair(notes: Bool = false, optimize: Bool = true) async throws -> (served: String, offline: OfflineStore)
    {
        try await offThePool { try pair(notes: notes, optimize: optimize) }
    }

    static func sets(_ store: OfflineStore) -> [String] { store.schema.serviceSetNames }

    /// A copy of the notes fixture's data under `configuration`, registered for the integrity check.
    static func notesCopy(_ configuration: StoreConfiguration, name: String) throws -> OfflineStore {
        let path = tempDir() + "/" + name
        let store = try OfflineStore.create(
            at: path, metadata: Array(notesMetadata.utf8), configuration: configuration)
        StoreRegistry.current?.add(path)
        for (set, json) in notesData { _ = try store.load(set: set, json: Array(json.utf8)) }
        return store
    }

    /// Every entity of every service set, nulls left out, as comparable lines.
    static func contents(_ store: OfflineStore) throws -> [String: [Properties]] {
        var out: [String: [Properties]] = [:]
        for set in sets(store) {
            var rows: [Properties] = []
            try store.scan(set: set) { e in
                rows.append(Properties(e.filter { !$0.value.isNull }))
                return true
            }
            out[set] = rows
        }
        return out
    }

    /// The served store's contents (opened read-only, also while `serve` runs).
    static func served(_ path: String) throws -> [String: [Properties]] {
        try contents(try OfflineStore.open(at: path, readOnly: true))
    }

    /// Expects the offline store to hold exactly what the service holds (but the entities named
    /// in `ignoring`: set → keys as in a URL), and an empty queue.
    static func expectInSync(
        _ offline: OfflineStore, _ served: String, _ context: String = "", ignoring: [String: Set<String>] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        func keep(_ c: [String: [Properties]]) throws -> [String: [Properties]] {
            var out = c
            for (set, keys) in ignoring {
                let h = try offline.entities.set(set)
                out[set] = try c[set]?.filter { !keys.contains(h.describeKey(try h.keyValues($0))) }
            }
            return out
        }
        let mine = try keep(try contents(offline)), theirs = try keep(try Self.served(served))
        for set in sets(offline) where mine[set] != theirs[set] {
            let a = Set(mine[set] ?? []), b = Set(theirs[set] ?? [])
            Issue.record(
                "\(context) \(set) differs: only offline \(a.subtracting(b).map(\.description).sorted()); only served \(b.subtracting(a).map(\.description).sorted())",
                sourceLocation: sourceLocation)
        }
        #expect(
            try offline.pendingRequestCount() == 0, "\(context) the queue is not empty", sourceLocation: sourceLocation)
    }

    static func queue(_ store: OfflineStore) throws -> [RequestRecord] {
        try store.entities("RequestQueue?$orderby=RequestID").map { try RequestRecord($0) }
    }

    static func errors(_ store: OfflineStore) throws -> [Properties] {
        try store.entities("ErrorArchive?$orderby=RequestID")
    }

    /// The keys of the served store's repeatability records.
    static func repeatIDs(_ path: String) throws -> [String] {
        let store = try OfflineStore.open(at: path, readOnly: true)
        let db = store.entities.repeatRecords
        return try store.entities.read { t in
            var ids: [String] = []
            try t.withCursor(db) { c in
                var e = try c.first()
                while let (k, _) = e {
                    ids.append(String(decoding: k, as: UTF8.self))
                    e = try c.next()
                }
            }
            return ids
        }
    }
}

/// `HTTPTransport` with a recorder: every `$batch` it sends is kept, and the answer of chosen
/// round trips can be lost (the service got and applied the batch; the client hears nothing).
final class ProbeBackend: Transport, @unchecked Sendable {
    // @unchecked: the mutable state is guarded by `lock`.
    let inner: HTTPTransport
    private let lock = NSLock()
    private var _batches: [[WireRequest]] = []
    private var _lose: Set<Int> = []
    private var _before: [Int: @Sendable () -> Void] = [:]
    private var _after: [Int: @Sendable () -> Void] = [:]

    init(_ serviceRoot: String) { inner = HTTPTransport(serviceRoot: serviceRoot, retries: 0) }

    var serviceRoot: String { inner.serviceRoot }
    var batches: [[WireRequest]] { lock.withLock { _batches } }
    /// Loses the answer of round trip `n` (1-based, counted from now on over all calls).
    func loseAnswer(of n: Int) { lock.withLock { _ = _lose.insert(_batches.count + n) } }
    /// Runs `action` when round trip `n` (1-based, over all calls) comes, before it is passed on.
    func before(roundTrip n: Int, _ action: @escaping @Sendable () -> Void) { lock.withLock { _before[n] = action } }
    /// Runs `action` when the answer to round trip `n` has come, before it is returned.
    func after(roundTrip n: Int, _ action: @escaping @Sendable () -> Void) { lock.withLock { _after[n] = action } }

    func send(_ request: WireRequest) async throws -> WireResponse { try await inner.send(request) }

    func batch(_ requests: [WireRequest], headers: [(String, String)]) async throws -> [WireResponse] {
        let (n, action) = lock.withLock {
            _batches.append(requests); return (_batches.count, _before[_batches.count])
        }
        action?()
        let answers = try await inner.batch(requests, headers: headers)
        lock.withLock { _after[n] }?()
        if lock.withLock({ _lose.contains(n) }) { throw BackendError.transport("the answer was lost (test)") }
        return answers
    }

    func shutdown() async { try? await inner.shutdown() }
}
