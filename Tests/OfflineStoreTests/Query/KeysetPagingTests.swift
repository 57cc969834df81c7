import Foundation
import Testing
@testable import OfflineStore
import Samples
import TestSupport

/// Keyset `$skiptoken`s (issue 24): a read in key order (no `$orderby`, `$top` or `$skip` of the
/// client's; a full scan or a key range) pages by its last key — `$skiptoken=k<hex>` — so a page
/// costs its own rows, and pages of a set being written between them neither lose nor repeat an
/// entity. Checked against the unpaged result on a quiet set, and with random creates and deletes
/// between pages.
@Suite(.checksStores) struct KeysetPagingTests {
    static func store() throws -> OfflineStore {
        let store = try OfflineStore.create(
            at: tempDir() + "/keyset", metadata: Array(SampleData.metadata.utf8),
            configuration: SampleData.configuration)
        for set in SampleData.setsInLoadOrder { _ = try store.load(set: set, json: Array(SampleData.json(set).utf8)) }
        _ = try store.generate(set: "SalesOrderItems", count: 600, seed: 3)
        return store
    }

    /// The same as `store()`, for an `async` caller (which the compiler picks): built
    /// off the concurrency pool, so the tests beside this one do not wait for a thread meanwhile.
    static func store() async throws -> OfflineStore { try await offThePool { try store() } }

    /// One page: its entities' keys (as JSON text of the key properties) and its next link.
    static func page(_ store: OfflineStore, _ url: String, pageSize: Int?) throws -> (keys: [String], next: String?) {
        var body: [UInt8] = []
        try store.query(url, format: .json, pageSize: pageSize, options: ResultOptions()) {
            body.append(contentsOf: $0)
        }
        let object = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] ?? [:]
        let rows = object["value"] as? [[String: Any]] ?? []
        let keys = rows.map { row in
            ["SalesOrderID", "ItemPosition", "ProductID"].compactMap { row[$0].map { "\($0)" } }.joined(separator: "/")
        }
        return (keys, object["@odata.nextLink"] as? String)
    }

    /// Every page of `url`, following next links (at most 10,000).
    static func all(
        _ store: OfflineStore, _ url: String, pageSize: Int, between: () throws -> Void = {}
    ) throws
        -> (keys: [String], tokens: [String])
    {
        var keys: [String] = [], tokens: [String] = []
        var next: String? = url
        while let u = next, tokens.count < 10_000 {
            let p = try page(store, u, pageSize: pageSize)
            keys += p.keys
            next = p.next
            if let n = p.next { tokens.append(String(n.split(separator: "$skiptoken=").last ?? "")) }
            try between()
        }
        return (keys, tokens)
    }

    @Test(.runsOffThePool) func pagesInKeyOrderAreTheWholeResultOnAQuietSet() throws {
        let store = try Self.store()
        // A full scan, one with a residual filter, a key range (the key's first component), a
        // navigation to a parent's items: keyset tokens. An index scan (Quantity's): offsets.
        let order = try #require(try store.entities("SalesOrders?$top=1&$select=SalesOrderID").first?["SalesOrderID"])
        guard case .string(let orderID) = order else { return }
        for (url, keyset) in [
            ("SalesOrderItems", true), ("SalesOrderItems?$filter=CurrencyCode eq 'EUR'", true),
            ("Products?$select=ProductID,Name", true), ("SalesOrderItems?$filter=SalesOrderID eq '\(orderID)'", true),
            ("SalesOrders('\(orderID)')/Items", true), ("SalesOrderItems?$filter=Quantity gt 3", false),
        ] {
            let whole = try Self.page(store, url, pageSize: nil).keys
            #expect(!whole.isEmpty, "\(url)")
            for size in [1, 2, 7, 50, 1_000] {
                let (keys, tokens) = try Self.all(store, url, pageSize: size)
                #expect(keys == whole, "\(url), pages of \(size)")
                #expect(
                    tokens.allSatisfy { $0.hasPrefix("k") == keyset }, "\(url): tokens \(tokens.prefix(3))")
            }
        }
        // Reads the keyset cannot continue page by offset, as before.
        let ordered = try Self.all(store, "SalesOrderItems?$orderby=Quantity desc", pageSize: 50)
        #expect(ordered.tokens.first == "50")
        #expect(ordered.keys == (try Self.page(store, "SalesOrderItems?$orderby=Quantity desc", pageSize: nil).keys))
        let topped = try Self.all(store, "SalesOrderItems?$top=120", pageSize: 50)
        #expect(topped.keys.count == 120 && topped.tokens == ["50", "100"])
        // An offset token still pages a read in key order.
        let byOffset = try Self.page(store, "SalesOrderItems?$skiptoken=10", pageSize: 5).keys
        #expect(byOffset == Array(try Self.page(store, "SalesOrderItems", pageSize: nil).keys[10..<15]))
    }

    @Test(.runsOffThePool) func aKeysetTokenElsewhereOrMalformedIsRefused() throws {
        let store = try Self.store()
        let first = try Self.page(store, "SalesOrderItems", pageSize: 3)
        let token = try #require(first.next.map { String($0.split(separator: "$skiptoken=").last!) })
        for bad in [
            "SalesOrderItems?$orderby=Quantity&$skiptoken=\(token)", "SalesOrderItems?$top=5&$skiptoken=\(token)",
            "SalesOrderItems?$skiptoken=k", "SalesOrderItems?$skiptoken=kzz", "SalesOrderItems?$skiptoken=k123",
            "SalesOrderItems?$skiptoken=kABCD",
        ] {
            #expect(throws: (any Error).self, "\(bad)") { try Self.page(store, bad, pageSize: 3) }
        }
    }

    @Test func pagesOfASetWrittenBetweenThemLoseAndRepeatNothing() async throws {
        let seed = testSeed("pagesOfASetWrittenBetweenThemLoseAndRepeatNothing")
        var random = SeededRandom(seed: seed)
        for round in 0..<8 {
            let store = try await Self.store()
            let before = Set(try Self.page(store, "SalesOrderItems", pageSize: nil).keys)
            var deleted = Set<String>()
            var created = 0
            let size = Int.random(in: 1...60, using: &random)
            let result = try Self.all(store, "SalesOrderItems", pageSize: size) {
                // Between pages: creates anywhere in key order and deletes of existing items.
                for _ in 0..<Int.random(in: 0...6, using: &random) {
                    if Bool.random(using: &random) {
                        created += 1
                        let order = String(format: "05%08d", Int.random(in: 0...99, using: &random))
                        let position = 100_000 + round * 10_000 + created
                        try store.entities.write { t in
                            try store.entities.set("SalesOrderItems").upsert(
                                t,
                                [
                                    "SalesOrderID": .string(order), "ItemPosition": .int(Int64(position)),
                                    "ProductID": .string("HT-1000"), "Quantity": .int(1),
                                ])
                        }
                    } else if let victim = before.subtracting(deleted).randomElement(using: &random) {
                        let parts = victim.split(separator: "/")
                        deleted.insert(victim)
                        try store.delete(
                            set: "SalesOrderItems", key: [.string(String(parts[0])), .int(Int64(parts[1])!)])
                    }
                }
            }
            let seen = result.keys
            let repeated = seen.count - Set(seen).count
            #expect(repeated == 0, "round \(round) (pages of \(size)): \(repeated) entities repeated")
            let lost = before.subtracting(deleted).subtracting(Set(seen))
            #expect(lost.isEmpty, "round \(round) (pages of \(size)): \(lost.count) lost, e.g. \(lost.prefix(3))")
            #expect(result.tokens.allSatisfy { $0.hasPrefix("k") })
            #expect(try store.check().isConsistent)
        }
    }
}
