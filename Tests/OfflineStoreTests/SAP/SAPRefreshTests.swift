import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore
@testable import Sync
import Storage

/// Refresh from SAP-shaped back ends: mock-sap's Gateway V2 services (GWSAMPLE_BASIC and S/4's
/// API_SALES_ORDER_SRV) and its S/4 RAP V4 service, each read back independently (Foundation's
/// JSON, not the store's reader) and compared value by value: strings, exact decimals (V2 sends
/// them as strings), `/Date(ms)/` instants, complex values, ETags.
@Suite(.external, .checksStores, .serialized) struct SAPRefreshTests {
    /// A store made from `service`'s own `$metadata`, with `requests` defined.
    static func store(_ sap: MockSAP, _ service: String, _ requests: [(String, String)]) async throws -> OfflineStore {
        let metadata = try await sap.metadata(service)
        let configuration = StoreConfiguration(
            serviceRoot: sap.root(service), definingRequests: requests.map { DefiningRequest(name: $0.0, url: $0.1) })
        return try OfflineStore.create(
            at: tempDir() + "/sap", metadata: Array(metadata.utf8), configuration: configuration)
    }

    /// Milliseconds since 1970 of a V2 `/Date(ms)/` or an ISO 8601 instant (V4).
    static func millis(_ text: String) -> Int64? {
        if text.hasPrefix("/Date("), let end = text.dropFirst(6).firstIndex(where: { !$0.isNumber && $0 != "-" }) {
            return Int64(text.dropFirst(6)[..<end])
        }
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let d = f.date(from: text) { return Int64((d.timeIntervalSince1970 * 1000).rounded()) }
        f.formatOptions = [.withInternetDateTime]
        return f.date(from: text).map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }
    }

    /// Why the server's `theirs` (Foundation JSON) and the store's `mine` differ, or nil.
    static func difference(_ theirs: Any, _ mine: Value, _ path: String) -> String? {
        switch (theirs, mine) {
        case (is NSNull, .null): return nil
        case (let s as String, .string(let m)): return s == m ? nil : "\(path): '\(s)' vs '\(m)'"
        case (let s as String, .decimal(let d)):
            return Decimal(string: s) == Decimal(string: d.description) ? nil : "\(path): \(s) vs \(d)"
        case (let n as NSNumber, .decimal(let d)):
            return n.doubleValue == Double(d.description) ? nil : "\(path): \(n) vs \(d)"
        case (let s as String, .int(let i)): return Int64(s) == i ? nil : "\(path): \(s) vs \(i)"
        case (let n as NSNumber, .int(let i)): return n.int64Value == i ? nil : "\(path): \(n) vs \(i)"
        case (let n as NSNumber, .double(let d)): return n.doubleValue == d ? nil : "\(path): \(n) vs \(d)"
        case (let n as NSNumber, .bool(let b)): return n.boolValue == b ? nil : "\(path): \(n) vs \(b)"
        case (let s as String, .dateTimeOffset(let v)):
            return millis(s) == v.ticks / 10_000 ? nil : "\(path): \(s) vs \(v)"
        case (let s as String, .date(let d)):
            if s.hasPrefix(d.description) { return nil }
            let f = ISO8601DateFormatter()
            f.formatOptions = [.withFullDate]
            let day = millis(s).map { f.string(from: Date(timeIntervalSince1970: Double($0) / 1000)) }
            return day == d.description ? nil : "\(path): \(s) vs \(d)"
        case (let o as [String: Any], .complex(let props)):
            for (k, v) in o where k != "__metadata" {
                if let d = difference(v, props[k] ?? .null, path + "/" + k) { return d }
            }
            return nil
        case (let a as [Any], .collection(let items)):
            guard a.count == items.count else { return "\(path): \(a.count) items vs \(items.count)" }
            for (x, y) in zip(a, items) { if let d = difference(x, y, path + "[]") { return d } }
            return nil
        case (let s as String, let other): return s == "\(other)" ? nil : "\(path): '\(s)' vs \(other)"
        default: return "\(path): \(theirs) vs \(mine)"
        }
    }

    /// Expects every entity the server answers for `path` to be in the store's `set` with the
    /// same value for every property the store's schema has; returns how many were compared.
    @discardableResult
    static func expectSame(
        _ sap: MockSAP, _ service: String, _ path: String, set: String, in store: OfflineStore,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Int {
        let rows = try await sap.entities(service, path)
        let handle = try store.entities.set(set)
        let names = Set(handle.type.properties.map(\.name))
        var problems: [String] = []
        for row in rows {
            var key: [Value] = []
            for k in handle.type.key {
                let p = handle.type.property(k)!
                key.append(
                    try ValueJSON(schema: store.schema).value(
                        from: .string("\(row[k]!)"), type: p.type, property: k))
            }
            guard let mine = try store.entities.read({ t in try handle.get(t, key: key) }) else {
                problems.append("\(set)\(key): on the server, not in the store")
                continue
            }
            for (name, value) in row where names.contains(name) {
                if let d = difference(value, mine[name] ?? .null, "\(set)\(key).\(name)") { problems.append(d) }
            }
            if let meta = row["__metadata"] as? [String: Any], let etag = meta["etag"] as? String {
                let kept = try store.serverETag(set: set, key: key)
                if kept != etag { problems.append("\(set)\(key): ETag \(etag) on the server, \(kept ?? "none") kept") }
            }
        }
        #expect(
            problems.isEmpty, "\(problems.count) differences: \(problems.prefix(10))", sourceLocation: sourceLocation)
        return rows.count
    }

    /// GWSAMPLE_BASIC with the seeds' defining requests: partners in DE with their orders and
    /// items (V2 nesting: `ToSalesOrders: {results: [{…, ToLineItems: {results: […]}}]}`), and
    /// all products, whose type has no change timestamp (mock-sap refuses change tracking for it:
    /// read in full, remembered, asked no more).
    @Test func gatewayV2GWSampleBasic() async throws {
        let sap = try await MockSAP.start()
        defer { Task { await sap.stop() } }
        let store = try await Self.store(
            sap, MockSAP.gwsample,
            [
                ("SG_Sales", "BusinessPartnerSet?$filter=Address/Country eq 'DE'&$expand=ToSalesOrders/ToLineItems"),
                ("SG_Product", "ProductSet"),
            ])
        let first = try await store.refresh()
        #expect(first.requests.map(\.mode) == [.full, .fullWithoutTracking], "\(first)")

        let partners = try await Self.expectSame(
            sap, MockSAP.gwsample, "BusinessPartnerSet?$filter=Address/Country%20eq%20'DE'", set: "BusinessPartnerSet",
            in: store)
        #expect(partners > 0)
        #expect(try store.entities("BusinessPartnerSet").count == partners)
        let products = try await Self.expectSame(sap, MockSAP.gwsample, "ProductSet", set: "ProductSet", in: store)
        #expect(try store.entities("ProductSet").count == products)
        // Orders and items: those of the DE partners, as the service expands them.
        let expanded = try await sap.entities(
            MockSAP.gwsample, "BusinessPartnerSet?$filter=Address/Country%20eq%20'DE'&$expand=ToSalesOrders/ToLineItems"
        )
        var orders: [[String: Any]] = [], items: [[String: Any]] = []
        for p in expanded {
            for o in ((p["ToSalesOrders"] as? [String: Any])?["results"] as? [[String: Any]]) ?? [] {
                orders.append(o)
                items += ((o["ToLineItems"] as? [String: Any])?["results"] as? [[String: Any]]) ?? []
            }
        }
        #expect(!orders.isEmpty && !items.isEmpty)
        #expect(try store.entities("SalesOrderSet").count == orders.count)
        #expect(try store.entities("SalesOrderLineItemSet").count == items.count)
        for o in orders {
            let id = o["SalesOrderID"] as! String
            try await Self.expectSame(
                sap, MockSAP.gwsample, "SalesOrderSet?$filter=SalesOrderID%20eq%20'\(id)'", set: "SalesOrderSet",
                in: store)
        }

        // Again: the refusal is remembered (no Prefer: odata.track-changes for ProductSet), and
        // nothing changed on the server, so nothing is written.
        let before = try await sap.requests().compactMap { $0["id"] as? Int }.max() ?? 0
        let second = try await store.refresh()
        #expect(second.requests.map(\.mode) == [.full, .fullWithoutTracking])
        #expect(second.written == 0, "\(second)")
        let asked = try await sap.requests(verbose: true).filter { ($0["id"] as? Int ?? 0) > before }
        let productReads = asked.filter { ($0["path"] as? String)?.hasSuffix("ProductSet") == true }
        #expect(productReads.count == 1, "\(asked)")
        let prefer = (productReads.first?["headers"] as? [String: Any])?["prefer"] as? String
        #expect(prefer?.contains("track-changes") != true, "\(productReads)")
        #expect(try store.check().isConsistent)
    }

    /// No V4 header, preference or option reaches a V2 service.
    @Test func aV2ServiceGetsV2Headers() async throws {
        let sap = try await MockSAP.start()
        defer { Task { await sap.stop() } }
        let store = try await Self.store(sap, MockSAP.gwsample, [("P", "ProductSet"), ("C", "ContactSet")])
        _ = try await store.refresh()
        let requests = try await sap.requests(verbose: true).filter {
            // The store's reads, not the test's own GET of $metadata.
            ($0["path"] as? String)?.contains("GWSAMPLE_BASIC") == true
                && ($0["path"] as? String)?.hasSuffix("$metadata") == false
        }
        #expect(!requests.isEmpty)
        for r in requests {
            let headers = (r["headers"] as? [String: Any]) ?? [:]
            #expect(headers["odata-version"] == nil && headers["odata-maxversion"] == nil, "\(r)")
            #expect(headers["dataserviceversion"] as? String == "2.0", "\(r)")
            #expect(headers["maxdataserviceversion"] as? String == "2.0", "\(r)")
            #expect((headers["prefer"] as? String)?.contains("maxpagesize") != true, "\(r)")
            #expect((r["query"] as? String)?.contains("$count") != true, "\(r)")
        }
    }

    /// `queryParameters` from the configuration (`sap-client`, `sap-language`) go on every
    /// request, once, and survive the store's reopening.
    @Test func configuredURLParametersGoOnEveryRequest() async throws {
        let sap = try await MockSAP.start()
        defer { Task { await sap.stop() } }
        let metadata = try await sap.metadata(MockSAP.gwsample)
        var configuration = StoreConfiguration(
            serviceRoot: sap.root(MockSAP.gwsample), definingRequests: [DefiningRequest(name: "P", url: "ProductSet")])
        configuration.queryParameters = ["sap-client": "100", "sap-language": "EN"]
        let dir = tempDir() + "/sap-params"
        _ = try OfflineStore.create(at: dir, metadata: Array(metadata.utf8), configuration: configuration)
        let store = try OfflineStore.open(at: dir)
        #expect(store.configuration.queryParameters == ["sap-client": "100", "sap-language": "EN"])
        let before = try await sap.requests().compactMap { $0["id"] as? Int }.max() ?? 0
        _ = try await store.refresh()
        try await store.update(set: "ProductSet", key: [.string("HT-1000")], changes: ["Name": .string("with client")])
        _ = try await store.flush()
        let asked = try await sap.requests().filter { ($0["id"] as? Int ?? 0) > before }
        #expect(asked.count >= 3, "\(asked)")  // the read, the CSRF fetch, the $batch
        for r in asked {
            let query = (r["query"] as? String) ?? ""
            #expect(
                query.components(separatedBy: "sap-client=100").count == 2 && query.contains("sap-language=EN"),
                "\(r["method"]!) \(r["path"]!)?\(query)")
        }
        #expect(throws: EntityError.self) {
            try StoreConfiguration(json: JSON.parse(Array(#"{"queryParameters":{"$top":"1"}}"#.utf8)))
        }
    }

    /// V2 delta: `__delta` with `!deltatoken`, changes and tombstones
    /// (`"__metadata":{"deleted":true}`) applied.
    @Test func gatewayV2DeltaAppliesChangesAndDeletions() async throws {
        let sap = try await MockSAP.start()
        defer { Task { await sap.stop() } }
        let store = try await Self.store(sap, MockSAP.gwsample, [("Orders", "SalesOrderSet")])
        let first = try await store.refresh()
        #expect(first.requests.map(\.mode) == [.full])
        let orders = try await sap.entities(MockSAP.gwsample, "SalesOrderSet")
        #expect(try store.entities("SalesOrderSet").count == orders.count)
        let changed = orders[0]["SalesOrderID"] as! String, deleted = orders[1]["SalesOrderID"] as! String
        let merge = try await sap.write(
            .PATCH, MockSAP.gwsample, "SalesOrderSet('\(changed)')", body: #"{"Note":"changed on the server"}"#)
        #expect((200..<300).contains(merge.status), "\(merge.status) \(merge.text)")
        let delete = try await sap.write(.DELETE, MockSAP.gwsample, "SalesOrderSet('\(deleted)')")
        #expect((200..<300).contains(delete.status), "\(delete.status) \(delete.text)")

        let second = try await store.refresh()
        #expect(second.requests.map(\.mode) == [.delta], "\(second)")
        #expect(second.removed == 1, "\(second)")
        #expect(try store.entities("SalesOrderSet?$filter=SalesOrderID eq '\(deleted)'").isEmpty)
        #expect(
            try store.entities("SalesOrderSet?$filter=SalesOrderID eq '\(changed)'").first?["Note"]
                == .string("changed on the server"))
        try await Self.expectSame(sap, MockSAP.gwsample, "SalesOrderSet", set: "SalesOrderSet", in: store)
        #expect(try store.entities("SalesOrderSet").count == orders.count - 1)
    }

    /// S/4's API_SALES_ORDER_SRV (V2) with nested `$expand`.
    @Test func s4SalesOrderV2() async throws {
        let sap = try await MockSAP.start()
        defer { Task { await sap.stop() } }
        let store = try await Self.store(sap, MockSAP.salesOrderV2, [("SO", "A_SalesOrder?$expand=to_Item")])
        let report = try await store.refresh()
        let orders = try await Self.expectSame(
            sap, MockSAP.salesOrderV2, "A_SalesOrder", set: "A_SalesOrder", in: store)
        let items = try await Self.expectSame(
            sap, MockSAP.salesOrderV2, "A_SalesOrderItem", set: "A_SalesOrderItem", in: store)
        #expect(orders > 0 && items > 0)
        #expect(report.received == orders + items, "\(report)")
    }

    /// S/4's RAP sales order service (V4): every entity type declares `SAP__Messages` as a
    /// non-nullable collection the service leaves out of GET answers: stored as empty.
    @Test func s4RAPSalesOrderV4() async throws {
        let sap = try await MockSAP.start()
        defer { Task { await sap.stop() } }
        let store = try await Self.store(sap, MockSAP.salesOrderV4, [("SO", "SalesOrder?$expand=to_Item")])
        let report = try await store.refresh()
        let orders = try await Self.expectSame(sap, MockSAP.salesOrderV4, "SalesOrder", set: "SalesOrder", in: store)
        let items = try await Self.expectSame(
            sap, MockSAP.salesOrderV4, "SalesOrderItem", set: "SalesOrderItem", in: store)
        #expect(orders > 0 && items > 0)
        #expect(report.received == orders + items, "\(report)")
        #expect(try store.entities("SalesOrder").allSatisfy { $0["SAP__Messages"] == .collection([]) })
    }

    /// A refused read reports the service's own message and code, not its raw JSON.
    @Test func serviceErrorsReadAsSAPWritesThem() async throws {
        let sap = try await MockSAP.start()
        defer { Task { await sap.stop() } }
        let store = try await Self.store(sap, MockSAP.gwsample, [("P", "ProductSet")])
        try await sap.fault(["match": "ProductSet", "method": "GET", "status": 500, "message": "Backend unreachable"])
        await #expect {
            try await store.refresh()
        } throws: { error in
            let text = "\(error)"
            return text.contains("500") && text.contains("Backend unreachable") && !text.contains("{")
        }
        try await sap.clearFaults()
        #expect(try await store.refresh().requests.first?.received ?? 0 > 0)
    }
}
