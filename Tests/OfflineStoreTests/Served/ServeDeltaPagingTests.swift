import Foundation
import NIOHTTP1
import Testing
@testable import OfflineStore
import Samples
import Storage
import Sync
import TestSupport

/// `serve`'s delta responses in pages (`Prefer: odata.maxpagesize`): at most that many changes a
/// page, next links that keep the delta's bound, the last page's delta link the unpaged one's;
/// changes made between pages delivered by the delta after; bad skip tokens refused; a refresh
/// reading the delta in pages.
@Suite(.checksStores) struct ServeDeltaPagingTests {
    static let maxPage1000 = [("Prefer", "odata.maxpagesize=1000")]

    /// The `@odata.id` of a sales order item.
    static func id(_ item: Properties) throws -> String {
        guard case .string(let order)? = item["SalesOrderID"], case .int(let position)? = item["ItemPosition"] else {
            throw EntityError.badInput("no item key")
        }
        return "SalesOrderItems(SalesOrderID='\(order)',ItemPosition=\(position))"
    }

    /// Changes the Quantity of `count` items of the store at `path` (every item when `pick` is
    /// nil, else those `pick` chooses) in one served transaction; the delta token before them and
    /// the ids changed, in order. Another process (a `serve`) may have the store open.
    static func changeItems(
        _ path: String, count: Int, pick: ((Int) -> Int)? = nil
    ) async throws -> (token: UInt64, ids: [String]) {
        let store = try OfflineStore.open(at: path)
        let token = try store.changeToken()
        let all = try store.entities("SalesOrderItems?$select=SalesOrderID,ItemPosition")
        var chosen: [Properties] = []
        var used = Set<Int>()
        while chosen.count < count, chosen.count < all.count {
            let i = pick?(all.count) ?? chosen.count
            if used.insert(i).inserted { chosen.append(all[i]) }
        }
        let keys = chosen.map { $0.keyValues(of: "SalesOrderID", "ItemPosition") }
        try await store.servedWrite { tx in
            for (i, key) in keys.enumerated() {
                _ = try tx.update(
                    set: "SalesOrderItems", key: key, changes: ["Quantity": .int(Int64(1_000 + i))], ifMatch: nil)
            }
        }
        return (token, try chosen.map(id))
    }

    /// Follows a delta from `url` to its last page; every page's entries, and the delta link.
    static func pages(
        _ http: HTTP, _ url: String, headers: [(String, String)],
        between: (Int) async throws -> Void = { _ in }
    ) async throws -> (pages: [[[String: Any]]], deltaLink: String) {
        var url = url
        var pages: [[[String: Any]]] = []
        while true {
            let reply = try await http.get(url, headers: headers)
            #expect(reply.status == 200, "\(url): \(reply.text.prefix(500))")
            pages.append(try ServeExpandDeltaTests.entries(reply))
            if let next = reply.object["@odata.nextLink"] as? String {
                #expect(reply.object["@odata.deltaLink"] == nil, "a page with a next link has no delta link")
                try #require(pages.count < 10_000, "next links do not end")
                try await between(pages.count)
                url = next
                continue
            }
            return (pages, try #require(reply.object["@odata.deltaLink"] as? String, "\(reply.text.prefix(500))"))
        }
    }

    @Test func aDeltaOf2500ChangesComesInThreePagesOfAtMost1000() async throws {
        let path = try await ServeTests.sampleStore(items: 3_000)
        let (token, ids) = try await Self.changeItems(path, count: 2_500)
        try await withServer(path) { http, _ in
            let url = "SalesOrderItems?$select=Quantity&$deltatoken=\(token)"
            let unpaged = try await http.get(url)
            #expect(try ServeExpandDeltaTests.entries(unpaged).count == 2_500)
            #expect(unpaged.object["@odata.nextLink"] == nil)
            let unpagedLink = try #require(unpaged.object["@odata.deltaLink"] as? String)

            let first = try await http.get(url, headers: Self.maxPage1000)
            #expect(first.header("Preference-Applied") == "odata.maxpagesize=1000")
            let (pages, link) = try await Self.pages(http, url, headers: Self.maxPage1000)
            #expect(pages.map(\.count) == [1_000, 1_000, 500])
            let sent = pages.flatMap { $0 }.compactMap { $0["@odata.id"] as? String }
            #expect(sent.count == 2_500 && Set(sent) == Set(ids), "every changed entity exactly once")
            #expect(sent == ids, "in change order")
            #expect(link == unpagedLink, "the last page's delta link is the unpaged delta's")
            #expect(try ServeExpandDeltaTests.entries(try await http.get(link)).isEmpty)
        }
    }

    /// A seeded random sequence of updates, creates and deletes made between the pages of a
    /// delta (among them: an entity of a later page changed again, which moves above the delta's
    /// bound and so leaves the later pages; a new entity; a deleted one); after all pages and
    /// then the delta link, the client's picture equals the server's.
    @Test func changesBetweenPagesAreDeliveredByTheNextDelta() async throws {
        let seed = testSeed("changesBetweenPagesAreDeliveredByTheNextDelta")
        var random = SeededRandom(seed: seed)
        let path = try await ServeTests.sampleStore(items: 1_500)
        // The client's picture: every item's Quantity, as read before the changes.
        var picture: [String: Int] = [:]
        var alive: [String] = []
        for item in try RefreshTests.served(path).entities("SalesOrderItems") {
            guard case .int(let q)? = item["Quantity"] else { continue }
            picture[try Self.id(item)] = Int(q)
            alive.append(try Self.id(item))
        }
        let orders = try RefreshTests.served(path).entities("SalesOrders?$select=SalesOrderID").compactMap {
            if case .string(let id)? = $0["SalesOrderID"] { id } else { nil }
        }
        var r = random
        let (token, changed) = try await Self.changeItems(path, count: 600) { n in Int(r.next() % UInt64(n)) }
        random = r
        func apply(_ pages: [[[String: Any]]]) throws {
            for entry in pages.flatMap({ $0 }) {
                let id = try #require(entry["@odata.id"] as? String)
                if entry["@removed"] != nil {
                    picture[id] = nil
                } else {
                    picture[id] = try #require(entry["Quantity"] as? Int, "\(entry)")
                }
            }
        }
        try await withServer(path) { http, _ in
            let prefer = [("Prefer", "odata.maxpagesize=50")]
            var sent = Set<String>()
            var created = 0
            var readPages: [[[String: Any]]] = []
            func change(_ method: HTTPMethod, _ url: String, _ body: String?, _ status: Int) async throws {
                let reply = try await http.send(method, url, body: body)
                #expect(reply.status == status, "\(method) \(url): \(reply.text.prefix(300))")
            }
            let url = "SalesOrderItems?$select=Quantity&$deltatoken=\(token)"
            // Reads page by page so that the changes between them know what was sent.
            var next: String? = url
            var link = ""
            var pageNumber = 0
            while let current = next {
                let reply = try await http.get(current, headers: prefer)
                #expect(reply.status == 200, "\(reply.text.prefix(300))")
                #expect(reply.header("Preference-Applied") == "odata.maxpagesize=50")
                let entries = try ServeExpandDeltaTests.entries(reply)
                #expect(entries.count <= 50)
                readPages.append(entries)
                for e in entries { if let id = e["@odata.id"] as? String { sent.insert(id) } }
                next = reply.object["@odata.nextLink"] as? String
                if next == nil { link = try #require(reply.object["@odata.deltaLink"] as? String) }
                guard next != nil else { break }
                pageNumber += 1
                let unsent = changed.filter { !sent.contains($0) && alive.contains($0) }
                if pageNumber == 1, unsent.count >= 2 {
                    // An entity of a later page changed again; another deleted; a new one.
                    try await change(.PATCH, unsent[unsent.count - 1], #"{"Quantity":4242}"#, 204)
                    try await change(.DELETE, unsent[unsent.count - 2], nil, 204)
                    alive.removeAll { $0 == unsent[unsent.count - 2] }
                }
                for _ in 0..<Int(random.next() % 4) {
                    switch random.next() % 3 {
                    case 0 where !alive.isEmpty:
                        let target = alive[Int(random.next() % UInt64(alive.count))]
                        try await change(.PATCH, target, #"{"Quantity":\#(random.next() % 500)}"#, 204)
                    case 1 where !alive.isEmpty:
                        let target = alive.remove(at: Int(random.next() % UInt64(alive.count)))
                        try await change(.DELETE, target, nil, 204)
                    default:
                        created += 1
                        let order = orders[Int(random.next() % UInt64(orders.count))]
                        let body = #"{"SalesOrderID":"\#(order)","ItemPosition":\#(90_000 + created),"Quantity":3}"#
                        try await change(.POST, "SalesOrderItems", body, 201)
                        alive.append("SalesOrderItems(SalesOrderID='\(order)',ItemPosition=\(90_000 + created))")
                    }
                }
            }
            #expect(readPages.count >= 12, "600 changes in pages of 50: \(readPages.count) pages")
            let perPage = readPages.flatMap { $0 }.compactMap { $0["@odata.id"] as? String }
            #expect(perPage.count == Set(perPage).count, "no entity twice in one delta")
            try apply(readPages)
            // Then the delta link, paged too: it brings what changed between the pages.
            let after = try await Self.pages(http, link, headers: prefer)
            #expect(!after.pages.flatMap({ $0 }).isEmpty)
            try apply(after.pages)
            var server: [String: Int] = [:]
            for item in try RefreshTests.served(path).entities("SalesOrderItems") {
                guard case .int(let q)? = item["Quantity"] else { continue }
                server[try Self.id(item)] = Int(q)
            }
            #expect(picture.count == server.count, "seed \(seed)")
            #expect(picture == server, "seed \(seed): the client's picture is the server's")
            #expect(try await Self.pages(http, after.deltaLink, headers: prefer).pages.allSatisfy(\.isEmpty))
        }
    }

    @Test func badSkipTokensAnswer400AndChangeNothing() async throws {
        let path = try await ServeTests.sampleStore(items: 100)
        let (token, _) = try await Self.changeItems(path, count: 30)
        try await withServer(path) { http, server in
            let prefer = [("Prefer", "odata.maxpagesize=10")]
            let url = "SalesOrderItems?$deltatoken=\(token)"
            let first = try await http.get(url, headers: prefer)
            let next = try #require(first.object["@odata.nextLink"] as? String)
            let second = try await http.get(next, headers: prefer)
            #expect(second.status == 200)
            let skip = try #require(next.components(separatedBy: "$skiptoken=").last)
            let bound = try #require(UInt64(skip.dropFirst().split(separator: "-")[0]))
            let newest = try RefreshTests.served(path).changeToken()
            #expect(bound == newest && bound == token + 30, "\(skip)")
            let fullSkip = try await http.get("SalesOrderItems?$select=Quantity", headers: prefer)
            let fullNext = try #require(fullSkip.object["@odata.nextLink"] as? String)
            let foreign = try #require(fullNext.components(separatedBy: "$skiptoken=").last)
            for bad in [
                "garbage", "", "d", "d5", "d-1-2", "dx-y", "d+40-5", "d40-+5", "d99999999999999999999999-5",
                "d\(bound)-\(token)",  // last not above the delta token
                "d\(bound)-\(bound)",  // last not below the bound
                "d\(bound + 100)-\(token + 5)",  // a bound this store never reached
                foreign,  // a full read's skip token
            ] {
                let reply = try await http.get(url + "&$skiptoken=" + bad, headers: prefer)
                #expect(reply.status == 400, "\(bad): \(reply.status) \(reply.text.prefix(300))")
                let error = reply.object["error"] as? [String: Any]
                #expect(error?["target"] as? String == "$skiptoken", "\(bad): \(reply.text.prefix(300))")
                #expect((error?["message"] as? String)?.contains("skip token") == true, "\(bad)")
            }
            // A skip token of another delta (its own $deltatoken above the page's last change).
            let other = try await http.get("SalesOrderItems?$deltatoken=\(bound - 1)&$skiptoken=\(skip)")
            #expect(other.status == 400, "\(other.text.prefix(300))")
            // Nothing changed: the log where it was, and the page as before.
            #expect(try RefreshTests.served(path).changeToken() == newest)
            let again = try await http.get(next, headers: prefer)
            #expect(again.body == second.body)
            _ = server
        }
    }

    /// `OfflineStore.refresh(serviceRoot:pageSize:)` after 2,500 changes reads the delta in three
    /// pages and ends equal to a full read.
    @Test func aRefreshReadsALargeDeltaInPages() async throws {
        let path = try await ServeTests.sampleStore(items: 3_000)
        let request = DefiningRequest(name: "SG_Items", url: "SalesOrderItems")
        let offline = try await RefreshTests.offlineStore([request])
        try await withServer(path) { _, server in
            let first = try await offline.refresh(serviceRoot: server.url, pageSize: 1_000)
            #expect(first.requests.map(\.mode) == [.full])
            _ = try await Self.changeItems(path, count: 2_500)
            let delta = try await offline.refresh(serviceRoot: server.url, pageSize: 1_000)
            #expect(delta.requests.map(\.mode) == [.delta])
            #expect(delta.requests.first?.pages == 3, "\(delta)")
            #expect(delta.received == 2_500, "\(delta)")
            let full = try await RefreshTests.offlineStore([request])
            try await full.refresh(serviceRoot: server.url, pageSize: 1_000)
            RefreshTests.expectSame(
                try RefreshTests.contents(offline), try RefreshTests.contents(full), "after the paged delta")
        }
    }
}
