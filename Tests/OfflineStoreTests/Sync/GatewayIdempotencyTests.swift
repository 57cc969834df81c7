import NIOHTTP1
import Foundation
import Synchronization
import Testing
@testable import OfflineStore
import Remote
import Storage
import Sync

/// Issue 36, item 1: SAP Gateway's idempotency headers. Every change to a V2 service carries
/// `RequestID` (32 hexadecimal digits) and `RepeatabilityCreation`, the same on every attempt, per
/// request inside the multipart change set; `serve` in its V2 dialect honours them as an idempotent
/// Gateway service does (`RepeatabilityResult: accepted`, the first answer replayed). A create
/// whose key the service assigns, its answer lost and sent again, is then applied once; to a
/// service that does not deduplicate it is flagged in doubt — never a plain success.
@Suite(.checksStores) struct GatewayIdempotencyTests {
    static let metadata = """
        <edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx" xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" xmlns:sap="http://www.sap.com/Protocols/SAPData">
         <edmx:DataServices m:DataServiceVersion="2.0">
          <Schema Namespace="GW" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
           <EntityType Name="Order">
            <Key><PropertyRef Name="OrderID"/></Key>
            <Property Name="OrderID" Type="Edm.Int32" Nullable="false" sap:creatable="false" sap:updatable="false"/>
            <Property Name="Note" Type="Edm.String" MaxLength="40"/>
           </EntityType>
           <EntityContainer Name="C" m:IsDefaultEntityContainer="true">
            <EntitySet Name="Orders" EntityType="GW.Order"/>
           </EntityContainer>
          </Schema>
         </edmx:DataServices>
        </edmx:Edmx>
        """

    /// A V2 transport that keeps every `$batch`, loses the answer of the first one, and (with
    /// `stripIdempotency`) sends no Gateway idempotency headers: a service that cannot deduplicate.
    final class Losing: Transport, @unchecked Sendable {
        // @unchecked: the mutable state is behind `state`.
        let inner: HTTPTransport
        let stripIdempotency: Bool
        let state = Mutex<(batches: [[WireRequest]], lost: Bool)>(([], false))

        init(_ url: String, stripIdempotency: Bool) {
            inner = HTTPTransport(serviceRoot: url, retries: 0, version: .v2)
            self.stripIdempotency = stripIdempotency
        }

        var serviceRoot: String { inner.serviceRoot }
        var batches: [[WireRequest]] { state.withLock { $0.batches } }

        func send(_ request: WireRequest) async throws -> WireResponse { try await inner.send(request) }

        func batch(_ requests: [WireRequest], headers: [(String, String)]) async throws -> [WireResponse] {
            var requests = requests
            if stripIdempotency {
                for i in requests.indices {
                    requests[i].headers.removeAll {
                        ["requestid", "repeatabilitycreation"].contains($0.0.lowercased())
                    }
                }
            }
            state.withLock { $0.batches.append(requests) }
            let answers = try await inner.batch(requests, headers: headers)
            let lose = state.withLock { s in
                defer { s.lost = true }
                return !s.lost
            }
            if lose { throw BackendError.transport("the answer was lost (test)") }
            return answers
        }
    }

    func run(stripIdempotency: Bool) async throws -> (FlushReport, [[WireRequest]], served: Int, store: OfflineStore) {
        let dir = tempDir()
        _ = try OfflineStore.create(at: dir + "/served", metadata: Array(Self.metadata.utf8))
        let store = try OfflineStore.create(at: dir + "/offline", metadata: Array(Self.metadata.utf8))
        try await store.create(set: "Orders", entity: ["Note": .string("order 1")])
        let server = try await ServerProcess.start(store: dir + "/served")
        let transport = Losing(server.url, stripIdempotency: stripIdempotency)
        let lost = try await store.flush(backend: transport, batchSize: 10, reconcile: false)
        #expect(lost.stopped != nil && lost.succeeded == 0, "\(lost)")
        let again = try await store.flush(backend: transport, batchSize: 10, reconcile: false)
        try await transport.inner.shutdown()
        #expect(await server.stop() == 0)
        let served = try OfflineStore.open(at: dir + "/served", readOnly: true).count(set: "Orders")
        return (again, transport.batches, served, store)
    }

    @Test func aCreateSentAgainWithGatewaysHeadersIsAppliedOnce() async throws {
        let (report, batches, served, store) = try await run(stripIdempotency: false)
        #expect(report.succeeded == 1 && report.inDoubt.isEmpty && report.stopped == nil, "\(report)")
        #expect(served == 1, "the order was created once")
        #expect(try store.count(set: "Orders") == 1)
        // Both attempts: the same RequestID (32 hexadecimal digits) and RepeatabilityCreation.
        let ids = batches.map { $0.first?.header("RequestID") }
        #expect(ids.count == 2 && ids[0] == ids[1], "\(ids)")
        #expect(ids[0].map { $0.count == 32 && $0.allSatisfy(\.isHexDigit) } == true, "\(ids)")
        let created = batches.map { $0.first?.header("RepeatabilityCreation") }
        #expect(created[0] != nil && created[0] == created[1], "\(created)")
        #expect(
            batches.allSatisfy { $0.allSatisfy { $0.header("Repeatability-Request-ID") == nil } }, "no V4 headers to V2"
        )
    }

    /// The control: without the headers the service applies the create again — and the flush says
    /// so, in its report and the EventLog, counting exactly the duplicate it made.
    @Test func aCreateSentAgainToAServiceThatDoesNotDeduplicateIsFlaggedInDoubt() async throws {
        let (report, _, served, store) = try await run(stripIdempotency: true)
        #expect(served == 2, "the service applied the create twice")
        #expect(report.succeeded == 1 && report.inDoubt.count == served - 1, "\(report)")
        #expect(report.inDoubt.first?.contains("may have been applied twice") == true, "\(report.inDoubt)")
        #expect(report.description.contains("1 in doubt"), "\(report)")
        let events = try store.entities("EventLog?$filter=Type eq 'InDoubt'")
        #expect(events.count == 1, "\(events)")
    }

    /// Bad input: a `RepeatabilityCreation` that is not a date is refused (400,
    /// `RepeatabilityResult: rejected`) and creates nothing; one past the window the service keeps
    /// records for is refused with 412 — it can no longer tell whether the request was applied.
    @Test func gatewayRepeatabilityHeadersThatCannotBeHonouredAreRefusedAndChangeNothing() async throws {
        let dir = tempDir()
        _ = try OfflineStore.create(at: dir + "/served", metadata: Array(Self.metadata.utf8))
        try await withServer(dir + "/served") { http, _ in
            let token = try #require(
                try await http.get("", headers: [("X-CSRF-Token", "Fetch")]).header("X-CSRF-Token"))
            func post(_ created: String) async throws -> HTTP.Reply {
                try await http.send(
                    .POST, "Orders", body: #"{"Note":"refused"}"#,
                    headers: [
                        ("X-CSRF-Token", token), ("RequestID", "0123456789ABCDEF0123456789ABCDEF"),
                        ("RepeatabilityCreation", created),
                    ])
            }
            let malformed = try await post("yesterday")
            #expect(malformed.status == 400 && malformed.text.contains("RepeatabilityCreation"), "\(malformed.text)")
            #expect(malformed.header("RepeatabilityResult") == "rejected")
            let old = try await post("Mon, 01 Jan 2001 00:00:00 GMT")
            #expect(old.status == 412 && old.header("RepeatabilityResult") == "rejected", "\(old.text)")
        }
        #expect(try OfflineStore.open(at: dir + "/served", readOnly: true).count(set: "Orders") == 0)
    }
}
