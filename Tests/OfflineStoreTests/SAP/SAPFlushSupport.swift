import Foundation
import Testing
@testable import OfflineStore
import Storage

/// What the SAP flush tests share: a GWSAMPLE_BASIC store refreshed from mock-sap, and reading
/// the server back independently (Foundation's JSON through `MockSAP.entities`).
enum SAPFlush {
    static let service = MockSAP.gwsample

    /// A store made from GWSAMPLE_BASIC's own `$metadata`, `SG_Sales` and `SG_Product` defined,
    /// refreshed.
    static func store(
        _ sap: MockSAP, createMarkers: [String: String] = [:], contentIDReferences: Bool? = nil,
        deepInsert: Bool = false,
        at path: String? = nil
    ) async throws -> OfflineStore {
        let metadata = try await sap.metadata(service)
        var configuration = StoreConfiguration(
            serviceRoot: sap.root(service),
            definingRequests: [
                DefiningRequest(
                    name: "SG_Sales",
                    url: "BusinessPartnerSet?$filter=Address/Country eq 'DE'&$expand=ToSalesOrders/ToLineItems"),
                DefiningRequest(name: "SG_Product", url: "ProductSet"),
            ])
        configuration.createMarkers = createMarkers
        configuration.contentIDReferences = contentIDReferences
        configuration.deepInsert = deepInsert
        let store = try OfflineStore.create(
            at: path ?? tempDir() + "/sap-flush", metadata: Array(metadata.utf8), configuration: configuration)
        let report = try await store.refresh()
        #expect(report.received > 0)
        return store
    }

    /// The server's entity `path` (`ProductSet('HT-1000')`) as Foundation reads it, or nil (404).
    static func entity(_ sap: MockSAP, _ path: String) async throws -> [String: Any]? {
        let reply = try await sap.http.get(service + path, headers: [("Accept", "application/json")])
        if reply.status == 404 { return nil }
        guard reply.status == 200, let d = reply.object["d"] as? [String: Any] else {
            throw MockSAP.Failed(description: "GET \(path): \(reply.status) \(reply.text.prefix(300))")
        }
        return d
    }

    /// A decimal the server sent (V2: a string) as `Decimal`, exactly.
    static func decimal(_ any: Any?) -> Decimal? {
        if let s = any as? String { return Decimal(string: s) }
        return nil
    }

    /// Milliseconds of a V2 `/Date(ms)/`.
    static func millis(_ any: Any?) -> Int64? {
        guard let s = any as? String, s.hasPrefix("/Date("), s.hasSuffix(")/") else { return nil }
        let inner = s.dropFirst(6).dropLast(2)
        let end = inner.dropFirst().firstIndex { $0 == "+" || $0 == "-" } ?? inner.endIndex
        return Int64(inner[..<end])
    }

    /// The ErrorArchive's entries.
    static func errors(_ store: OfflineStore) throws -> [Properties] {
        try store.entities("ErrorArchive?$orderby=RequestID")
    }

    /// The requests left in the queue.
    static func queued(_ store: OfflineStore) throws -> [Properties] {
        try store.entities("RequestQueue?$orderby=RequestID")
    }

    /// The text of a string value (`""` for anything else).
    static func text(_ v: Value?) -> String {
        if case .string(let s)? = v { return s }
        return ""
    }

    static func decimalValue(_ text: String) -> Value { .decimal(EDMDecimal(text)!) }
}
