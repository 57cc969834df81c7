import NIOCore
import Foundation
import NIOHTTP1
import Remote
import Testing
@testable import OfflineStore
import Samples
import Storage
import Sync

/// Delta links of defining requests with `$expand` against a real `offline-store serve`: the
/// delta reports the changes of every set the expand tree reaches, and a refresh through it
/// leaves the offline store as a full read of the same request would.
@Suite(.checksStores) struct ExpandDeltaTests {
    static let sales = DefiningRequest(
        name: "SG_Sales", url: "BusinessPartners?$expand=SalesOrders($expand=Items($filter=Quantity ge 2))")

    /// The sample data with 1,000 more sales orders and 10,000 items under them (about 11,000
    /// entities under the partners).
    static func bigStore() throws -> String {
        let path = try ServeTests.sampleStore()
        let store = try OfflineStore.open(at: path)
        try store.generate(set: "SalesOrders", count: 1_000, seed: 11)
        try store.generate(set: "SalesOrderItems", count: 10_000, seed: 7)
        return path
    }

    /// The same as `bigStore()`, for an `async` caller (which the compiler picks): built
    /// off the concurrency pool, so the tests beside this one do not wait for a thread meanwhile.
    static func bigStore() async throws -> String { try await offThePool { try bigStore() } }

    /// `refresh(serviceRoot:)`, through a client that waits up to 300 s for a byte (30 s by
    /// default): in a loaded CI run the debug `serve` once sent nothing for 30 s while it made the
    /// first page of `sales` (about 11,000 entities under the partners).
    @discardableResult
    static func refresh(_ store: OfflineStore, _ root: String, pageSize: Int? = nil) async throws -> RefreshReport {
        let backend = HTTPTransport(
            serviceRoot: root, timeout: .seconds(600), idleTimeout: .seconds(300), version: store.schema.version)
        do {
            let report = try await store.refresh(backend: backend, pageSize: pageSize)
            try await backend.shutdown()
            return report
        } catch {
            try? await backend.shutdown()
            throw error
        }
    }

    @Test func deltaRefreshOfAnExpandRequestMovesOnlyTheChangesAndEqualsAFullRead() async throws {
        let path = try await Self.bigStore()
        let offline = try await RefreshTests.offlineStore([Self.sales])
        try await withServer(path) { http, server in
            let first = try await Self.refresh(offline, server.url, pageSize: 50)
            #expect(first.requests.map(\.mode) == [.full])
            #expect(first.received > 8_000, "\(first)")
            let quiet = try await Self.refresh(offline, server.url)
            #expect(quiet.requests.map(\.mode) == [.delta])
            #expect(quiet.received == 0 && quiet.written == 0, "\(quiet)")

            // Ten changes on the server.
            let served = try RefreshTests.served(path)
            let (kept, keptItem) = try ServeExpandDeltaTests.itemID(served, "Quantity ge 2")
            let (leaving, leavingItem) = try ServeExpandDeltaTests.itemID(served, "Quantity ge 2", skip: 1)
            let (doomed, doomedItem) = try ServeExpandDeltaTests.itemID(served, "Quantity ge 2", skip: 2)
            let (entering, _) = try ServeExpandDeltaTests.itemID(served, "Quantity lt 2")
            let moved = try #require(try served.entities("SalesOrders?$filter=CustomerID ne null&$skip=7&$top=1").first)
            guard case .string(let movedID)? = moved["SalesOrderID"],
                case .string(let oldPartner)? = moved["CustomerID"]
            else { throw EntityError.badInput("no order") }
            let other = try served.entities("BusinessPartners?$filter=BusinessPartnerID ne '\(oldPartner)'&$top=1")
            guard case .string(let newPartner)? = other.first?["BusinessPartnerID"] else {
                throw EntityError.badInput("no other partner")
            }
            let dropped = try #require(
                try served.entities("SalesOrders?$filter=SalesOrderID ne '\(movedID)'&$skip=20&$top=1").first)
            guard case .string(let droppedID)? = dropped["SalesOrderID"] else { throw EntityError.badInput("no order") }
            let droppedItems = try served.entities("SalesOrders('\(droppedID)')/Items").count
            let movedItems = try served.entities("SalesOrders('\(movedID)')/Items?$filter=Quantity ge 2").count
            for (method, url, body, status) in [
                (HTTPMethod.PATCH, kept, #"{"Quantity":77}"#, 204),
                (.PATCH, leaving, #"{"Quantity":1}"#, 204),  // leaves the nested $filter
                (.DELETE, doomed, "", 204),
                (.PATCH, entering, #"{"Quantity":9}"#, 204),  // enters it
                (.PATCH, "SalesOrders('\(movedID)')", #"{"CustomerID":"\#(newPartner)"}"#, 204),  // moves
                (.DELETE, "SalesOrders('\(droppedID)')", "", 204),  // its items stay on the server, out of scope
                (.PATCH, "BusinessPartners('\(oldPartner)')", #"{"CompanyName":"Renamed"}"#, 204),
                (.POST, "BusinessPartners", #"{"BusinessPartnerID":"NEW-1","CompanyName":"New"}"#, 201),
                (.POST, "SalesOrderItems", #"{"SalesOrderID":"\#(movedID)","ItemPosition":99990,"Quantity":3}"#, 201),
                (.PATCH, "Products('HT-1000')", #"{"Price":1.00}"#, 204),  // not in the tree
            ] {
                let reply = try await http.send(method, url, body: body.isEmpty ? nil : body)
                #expect(reply.status == status, "\(method) \(url): \(reply.text)")
            }
            // A pending local change to an entity the delta brings: rebased, the local value wins.
            let keptKey = keptItem.keyValues(of: "SalesOrderID", "ItemPosition")
            try await offline.update(
                set: "SalesOrderItems", key: keptKey, changes: ["NetAmount": .decimal(EDMDecimal("4.25")!)])

            let delta = try await Self.refresh(offline, server.url)
            #expect(delta.requests.map(\.mode) == [.delta])
            // Each change once, and below a changed entity in scope its own subtree (the service
            // cannot tell one that entered the scope from one that was in it): the renamed partner's
            // orders and items, the moved order's items; the dropped order's items removed.
            var renamedSubtree = 0
            for o in try served.entities("BusinessPartners('\(oldPartner)')/SalesOrders") {
                guard case .string(let id)? = o["SalesOrderID"] else { continue }
                renamedSubtree += 1 + (try served.entities("SalesOrders('\(id)')/Items?$filter=Quantity ge 2").count)
            }
            let bound = 10 + renamedSubtree + movedItems + 1 + droppedItems
            #expect(delta.received <= bound, "O(k): \(delta.received) entries, at most \(bound) expected; \(delta)")
            #expect(delta.received * 10 < first.received, "far below a full read: \(delta)")
            #expect(delta.rebased == 1, "\(delta)")
            #expect(
                try offline.get(set: "SalesOrderItems", key: doomedItem.keyValues(of: "SalesOrderID", "ItemPosition"))
                    == nil)
            #expect(
                try offline.get(set: "SalesOrderItems", key: leavingItem.keyValues(of: "SalesOrderID", "ItemPosition"))
                    == nil)
            let local = try #require(try offline.get(set: "SalesOrderItems", key: keptKey))
            #expect(local["Quantity"] == .int(77) && local["NetAmount"] == .decimal(EDMDecimal("4.25")!))

            // The same request read in full by a second store: the same entities, but for the local change.
            let full = try await RefreshTests.offlineStore([Self.sales])
            try await full.refresh(serviceRoot: server.url, pageSize: 500)
            var expected = try RefreshTests.contents(full)
            let items = try full.entities.set("SalesOrderItems")
            expected["SalesOrderItems"]![try items.encodeKey(keptKey)]!["NetAmount"] = .decimal(EDMDecimal("4.25")!)
            RefreshTests.expectSame(try RefreshTests.contents(offline), expected, "after the delta refresh")
            // Navigation answers as on the server.
            for partner in [oldPartner, newPartner] {
                let url = "BusinessPartners('\(partner)')/SalesOrders?$select=SalesOrderID&$orderby=SalesOrderID"
                #expect(try offline.entities(url) == served.entities(url), "\(url)")
            }
            let itemsURL =
                "SalesOrders('\(movedID)')/Items?$filter=Quantity ge 2&$select=ItemPosition&$orderby=ItemPosition"
            #expect(try offline.entities(itemsURL) == served.entities(itemsURL))
            #expect(try offline.entities("SalesOrders('\(droppedID)')/Items").isEmpty)

            // Nothing more changed: an empty delta.
            let after = try await Self.refresh(offline, server.url)
            #expect(after.requests.map(\.mode) == [.delta] && after.received == 0, "\(after)")
        }
    }

    /// `serve` through HTTP, with an entry of a set the request's expand tree does not reach
    /// added at the end of its delta responses while `taint` is set.
    final class TaintingBackend: Transport, @unchecked Sendable {
        // @unchecked: `taint` is guarded by `lock`.
        let inner: HTTPTransport
        private let lock = NSLock()
        private var _taint = true
        var taint: Bool {
            get { lock.withLock { _taint } }
            set { lock.withLock { _taint = newValue } }
        }
        static let entry =
            #"{"@odata.context":"$metadata#Products/$entity","@odata.id":"Products('HT-1000')","ProductID":"HT-1000","Name":"not asked for"}"#

        init(_ serviceRoot: String) { inner = HTTPTransport(serviceRoot: serviceRoot, retries: 0) }
        var serviceRoot: String { inner.serviceRoot }

        func send(_ request: WireRequest) async throws -> WireResponse {
            guard taint, request.url.contains("deltatoken") else { return try await inner.send(request) }
            var plain = request
            plain.largeAnswer = false
            var response = try await inner.send(plain)
            let text = String(decoding: response.body, as: UTF8.self)
            guard let end = text.range(of: "],\"@odata.deltaLink\"") else { return response }
            let comma = text[..<end.lowerBound].hasSuffix("[") ? "" : ","
            response.body = Array((text[..<end.lowerBound] + comma + Self.entry + text[end.lowerBound...]).utf8)
            return response
        }

        func batch(_ requests: [WireRequest], headers: [(String, String)]) async throws -> [WireResponse] {
            try await inner.batch(requests, headers: headers)
        }
    }

    @Test func aDeltaEntryOfASetOutsideTheExpandTreeIsRefusedAndNothingApplied() async throws {
        let path = try await ServeTests.sampleStore(items: 200)
        let offline = try await RefreshTests.offlineStore([Self.sales])
        try await withServer(path) { http, server in
            try await Self.refresh(offline, server.url)
            let served = try RefreshTests.served(path)
            let (kept, _) = try ServeExpandDeltaTests.itemID(served, "Quantity ge 2")
            #expect(try await http.send(.PATCH, kept, body: #"{"Quantity":55}"#).status == 204)
            let before = try RefreshTests.contents(offline)
            let backend = TaintingBackend(server.url)
            do {
                try await offline.refresh(backend: backend)
                Issue.record("a delta with an entry of Products was applied")
            } catch let error as EntityError {
                #expect("\(error)".contains("'Products'") && "\(error)".contains("$expand"), "\(error)")
            }
            RefreshTests.expectSame(try RefreshTests.contents(offline), before, "nothing applied")
            #expect(try offline.get(set: "Products", key: [.string("HT-1000")]) == nil)
            // The delta link was not moved: the same delta, untainted, lands.
            backend.taint = false
            let report = try await offline.refresh(backend: backend)
            #expect(report.requests.map(\.mode) == [.delta] && report.received >= 1, "\(report)")
            let full = try await RefreshTests.offlineStore([Self.sales])
            try await full.refresh(serviceRoot: server.url)
            RefreshTests.expectSame(
                try RefreshTests.contents(offline), try RefreshTests.contents(full), "after the delta")
            try await backend.inner.shutdown()
        }
    }

    @Test func aDeltaOverTheExpansionLimitIsRefusedBeforeItsFirstByteAndReadInPagesUnderIt() async throws {
        // A served store whose responses may expand at most 300 entities: a page of one partner
        // stays under it, a delta bringing every partner with its orders and items does not —
        // unless it comes in pages of one change each.
        var configuration = SampleData.configuration
        configuration.limits.maxExpandedEntities = 300
        let path = tempDir() + "/limited"
        let served = try OfflineStore.create(
            at: path, metadata: Array(SampleData.metadata.utf8), configuration: configuration)
        for set in SampleData.setsInLoadOrder { _ = try served.load(set: set, json: Array(SampleData.json(set).utf8)) }
        try served.generate(set: "SalesOrders", count: 100, seed: 11)
        try served.generate(set: "SalesOrderItems", count: 600, seed: 7)
        let partners = try served.entities("BusinessPartners?$select=BusinessPartnerID").compactMap { p -> String? in
            guard case .string(let id)? = p["BusinessPartnerID"] else { return nil }
            return id
        }
        let offline = try await RefreshTests.offlineStore([Self.sales])
        // A second client that will ask for the delta without a page size: refused, it reads in full.
        let unpagedClient = try await RefreshTests.offlineStore([Self.sales])
        try await withServer(path) { http, server in
            let first = try await Self.refresh(offline, server.url, pageSize: 1)
            #expect(first.received > 300, "\(first)")
            try await unpagedClient.refresh(serviceRoot: server.url, pageSize: 1)
            let tracked = try await http.get(
                "BusinessPartners?$expand=SalesOrders($expand=Items($filter=Quantity%20ge%202))",
                headers: [("Prefer", "odata.track-changes,odata.maxpagesize=1")])
            var link = try #require(tracked.object["@odata.nextLink"] as? String)
            while true {
                let page = try await http.get(link, headers: [("Prefer", "odata.maxpagesize=1")])
                guard let next = page.object["@odata.nextLink"] as? String else {
                    link = try #require(page.object["@odata.deltaLink"] as? String)
                    break
                }
                link = next
            }
            for id in partners {
                let reply = try await http.send(.PATCH, "BusinessPartners('\(id)')", body: #"{"CompanyName":"Busy"}"#)
                #expect(reply.status == 204)
            }
            // Unpaged, the delta passes the limit: refused before its first byte.
            let unpaged = try await http.get(link)
            #expect(unpaged.status == 400, "\(unpaged.text.prefix(300))")
            // In pages of one change, each page stays under it.
            let report = try await Self.refresh(offline, server.url, pageSize: 1)
            #expect(report.requests.map(\.mode) == [.delta], "\(report)")
            #expect(report.requests.first?.pages == partners.count, "\(report)")
            let full = try await RefreshTests.offlineStore([Self.sales])
            try await full.refresh(serviceRoot: server.url, pageSize: 1)
            RefreshTests.expectSame(
                try RefreshTests.contents(offline), try RefreshTests.contents(full), "after the paged delta")
            // Without a page size the delta is refused (400) and the refresh falls back to a full
            // read. `serve` pages that read by its default size and ends each page before the
            // partner that would pass the limit, so the fallback reads everything, in more than
            // one page, and keeps the new delta link, not the refused one.
            let fallback = try await unpagedClient.refresh(serviceRoot: server.url)
            #expect(fallback.requests.map(\.mode) == [.fullAfterExpiredDelta], "\(fallback)")
            #expect((fallback.requests.first?.pages ?? 0) > 1, "\(fallback)")
            RefreshTests.expectSame(
                try RefreshTests.contents(unpagedClient), try RefreshTests.contents(full), "after the fallback")
            #expect(try unpagedClient.check().isConsistent)
            let again = try await unpagedClient.refresh(serviceRoot: server.url)
            #expect(again.requests.map(\.mode) == [.delta], "\(again)")
            RefreshTests.expectSame(
                try RefreshTests.contents(unpagedClient), try RefreshTests.contents(full), "after the next delta")
            #expect(try offline.check().isConsistent)
        }
    }

    /// `serve` through HTTP without its `OfflineStore-Delta-Expand` header: a service whose delta
    /// links say nothing of the expansion, as SAP Gateway's (whose delta reports the top set only).
    struct UnmarkedBackend: WrappingBackend {
        let inner: HTTPTransport

        func send(_ request: WireRequest) async throws -> WireResponse {
            var response = try await inner.send(request)
            response.headers.removeAll { $0.0.lowercased() == Refresher.deltaExpandHeader.lowercased() }
            return response
        }
    }

    @Test func aDeltaLinkThatDoesNotSayItFollowsTheExpansionIsNotKept() async throws {
        let path = try await ServeTests.sampleStore(items: 200)
        let plain = DefiningRequest(name: "Plain", url: "Products?$filter=Price gt 500")
        let offline = try await RefreshTests.offlineStore([Self.sales, plain])
        try await withServer(path) { http, server in
            let backend = UnmarkedBackend(inner: HTTPTransport(serviceRoot: server.url, retries: 0))
            let first = try await offline.refresh(backend: backend)
            #expect(first.requests.map(\.mode) == [.full, .full])
            let served = try RefreshTests.served(path)
            let (kept, item) = try ServeExpandDeltaTests.itemID(served, "Quantity ge 2")
            #expect(try await http.send(.PATCH, kept, body: #"{"Quantity":66}"#).status == 204)
            // The request with $expand is read in full again (and sees the item); the plain one keeps its delta.
            let second = try await offline.refresh(backend: backend)
            #expect(second.requests.map(\.mode) == [.full, .delta], "\(second)")
            let key = item.keyValues(of: "SalesOrderID", "ItemPosition")
            #expect(try offline.get(set: "SalesOrderItems", key: key)?["Quantity"] == .int(66))
            // Through serve as it is, the link is kept.
            try await Self.refresh(offline, server.url)
            #expect(try await Self.refresh(offline, server.url).requests.map(\.mode) == [.delta, .delta])
            try await backend.inner.shutdown()
        }
    }
}
