import AsyncHTTPClient
import Foundation
import NIOHTTP1
import Testing
@testable import OfflineStore
import Samples

/// Writes through `offline-store serve`, over HTTP: status codes, ETags and `If-Match`, `$batch`
/// atomicity, repeatable requests, delta links. Each test ends with the integrity check of the
/// store (`.checksStores`), which covers the change log and the repeatability records too.
@Suite(.checksStores) struct ServeWriteTests {
    static let product = #"{"ProductID":"T-1","Name":"Test","Category":"Tablets","Price":10.5,"CurrencyCode":"EUR"}"#

    static func count(_ store: String, _ set: String) throws -> Int {
        try OfflineStore.open(at: store, readOnly: true).count(set: set)
    }

    @Test func writesAnswerWithTheRightStatus() async throws {
        let store = try await ServeTests.sampleStore()
        let before = try Self.count(store, "Products")
        try await withServer(store) { http, _ in
            let created = try await http.send(.POST, "Products", body: Self.product)
            #expect(created.status == 201, "\(created.text)")
            #expect(created.header("Location")?.hasSuffix("/Products('T-1')") == true)
            let etag = try #require(created.header("ETag"))
            #expect(created.object["@odata.etag"] as? String == etag)
            #expect(created.object["Name"] as? String == "Test")

            let duplicate = try await http.send(.POST, "Products", body: Self.product)
            #expect(duplicate.status == 409)
            let badJSON = try await http.send(.POST, "Products", body: #"{"ProductID":"T-2","Name":}"#)
            #expect(badJSON.status == 400 && (badJSON.object["error"] as? [String: Any])?["message"] as? String != nil)
            let badType = try await http.send(.POST, "Products", body: #"{"ProductID":"T-2","Price":"cheap"}"#)
            #expect(badType.status == 400)
            let unknown = try await http.send(.POST, "Products", body: #"{"ProductID":"T-2","Colour":"red"}"#)
            #expect(unknown.status == 400)
            let nullKey = try await http.send(.POST, "Products", body: #"{"ProductID":null}"#)
            #expect(nullKey.status == 400)
            let xml = try await http.send(
                .POST, "Products", body: "<a/>", headers: [("Content-Type", "application/xml")])
            #expect(xml.status == 415)
            let invalidUTF8 = try await http.send(
                .POST, "Products", body: String(decoding: [0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x7D], as: UTF8.self))
            #expect(invalidUTF8.status == 400)
            let toEntity = try await http.send(.POST, "Products('T-1')", body: Self.product)
            #expect(toEntity.status == 405)
            let toQueue = try await http.send(.POST, "RequestQueue", body: "{}")
            #expect(toQueue.status == 405)

            let stale = try await http.send(
                .PATCH, "Products('T-1')", body: #"{"Price":11}"#, headers: [("If-Match", #"W/"0123456789abcdef""#)])
            #expect(stale.status == 412)
            let patched = try await http.send(
                .PATCH, "Products('T-1')", body: #"{"Price":11}"#, headers: [("If-Match", etag)])
            #expect(patched.status == 204)
            let newTag = try #require(patched.header("ETag"))
            #expect(newTag != etag)
            let again = try await http.send(
                .PATCH, "Products('T-1')", body: #"{"Price":12}"#, headers: [("If-Match", etag)])
            #expect(again.status == 412, "the old ETag no longer matches")
            let read = try await http.get("Products('T-1')")
            #expect(read.header("ETag") == newTag && "\(read.object["Price"]!)" == "11")
            let notModified = try await http.get("Products('T-1')", headers: [("If-None-Match", newTag)])
            #expect(notModified.status == 304)

            let replaced = try await http.send(
                .PUT, "Products('T-1')", body: #"{"ProductID":"T-1","Name":"Whole"}"#,
                headers: [("Prefer", "return=representation")])
            #expect(replaced.status == 200 && replaced.object["Name"] as? String == "Whole")
            #expect(replaced.object["Price"] is NSNull, "PUT leaves out Price: it becomes null")
            let keyChange = try await http.send(.PATCH, "Products('T-1')", body: #"{"ProductID":"T-9"}"#)
            #expect(keyChange.status == 400)
            let missing = try await http.send(.PATCH, "Products('NOPE')", body: #"{"Price":1}"#)
            #expect(missing.status == 404)

            let deleted = try await http.send(.DELETE, "Products('T-1')", headers: [("If-Match", "*")])
            #expect(deleted.status == 204)
            #expect(try await http.get("Products('T-1')").status == 404)
            #expect(try await http.send(.DELETE, "Products('T-1')").status == 404)
        }
        #expect(try Self.count(store, "Products") == before)
        #expect(try Self.count(store, "RequestQueue") == 0, "a served store queues nothing")
    }

    /// `Nav@odata.bind` sets a foreign key from the bound entity's key; what the service does not
    /// do — creating inline the entity a new one refers to (its principal), binding a collection, a
    /// bound entity that does not exist, a bind that contradicts the body — is refused with 400 and
    /// changes nothing. Inline entities that refer to the new one (a deep insert) are created with
    /// it, their foreign keys set from its key.
    @Test func bindSetsForeignKeysAndDeepInsertCreatesDependents() async throws {
        let store = try await ServeTests.sampleStore()
        let partners = try OfflineStore.open(at: store, readOnly: true).entities(
            "BusinessPartners?$top=2&$orderby=BusinessPartnerID")
        let (a, b) = (partners[0]["BusinessPartnerID"]!, partners[1]["BusinessPartnerID"]!)
        guard case .string(let first) = a, case .string(let second) = b else {
            Issue.record("string keys expected"); return
        }
        let before = try Self.count(store, "Products")
        try await withServer(store) { http, server in
            let bound = try await http.send(
                .POST, "Products",
                body: #"{"ProductID":"B-1","Name":"Bound","Supplier@odata.bind":"BusinessPartners('\#(first)')"}"#)
            #expect(bound.status == 201, "\(bound.text)")
            #expect(bound.object["SupplierID"] as? String == first)
            let absolute = try await http.send(
                .PATCH, "Products('B-1')",
                body: #"{"Supplier@odata.bind":"\#(server.url)BusinessPartners('\#(second)')"}"#)
            #expect(absolute.status == 204, "\(absolute.text)")
            #expect(try await http.get("Products('B-1')").object["SupplierID"] as? String == second)
            let unbound = try await http.send(.PATCH, "Products('B-1')", body: #"{"Supplier@odata.bind":null}"#)
            #expect(unbound.status == 204, "\(unbound.text)")
            #expect(try await http.get("Products('B-1')").object["SupplierID"] is NSNull)
            // No related entity now: 204 No Content (not 404, which says Products('B-1') is missing).
            let noSupplier = try await http.get("Products('B-1')/Supplier")
            #expect(noSupplier.status == 204 && noSupplier.text.isEmpty, "\(noSupplier.status) \(noSupplier.text)")
            #expect(try await http.get("Products('NO-SUCH')/Supplier").status == 404)

            for (body, why) in [
                (#"{"ProductID":"B-2","Supplier@odata.bind":"BusinessPartners('NO-SUCH')"}"#, "does not exist"),
                (#"{"ProductID":"B-2","Supplier@odata.bind":"SalesOrders('0500000001')"}"#, "not of"),
                (
                    #"{"ProductID":"B-2","Supplier@odata.bind":"BusinessPartners('\#(first)')","SupplierID":"\#(second)"}"#,
                    "but the body gives"
                ),
                (#"{"ProductID":"B-2","Supplier@odata.bind":42}"#, "expected an entity URL"),
                (#"{"ProductID":"B-2","Supplier":{"BusinessPartnerID":"NEW-1","CompanyName":"Deep"}}"#, "deep insert"),
                (#"{"ProductID":"B-2","Colour@odata.bind":"BusinessPartners('\#(first)')"}"#, "Colour"),
            ] {
                let refused = try await http.send(.POST, "Products", body: body)
                let message = (refused.object["error"] as? [String: Any])?["message"] as? String ?? refused.text
                #expect(refused.status == 400 && message.contains(why), "\(body): \(refused.status) \(message)")
            }
            let deepOrders = try await http.send(
                .POST, "BusinessPartners",
                body: #"{"BusinessPartnerID":"D-1","CompanyName":"Deep","SalesOrders":[{"SalesOrderID":"D-9"}]}"#)
            #expect(deepOrders.status == 201, "\(deepOrders.text)")
            let orders = deepOrders.object["SalesOrders"] as? [[String: Any]]
            #expect(orders?.first?["SalesOrderID"] as? String == "D-9", "\(deepOrders.text)")
            let bindMany = try await http.send(
                .POST, "BusinessPartners",
                body:
                    #"{"BusinessPartnerID":"D-1","CompanyName":"Deep","SalesOrders@odata.bind":["SalesOrders('0500000001')"]}"#
            )
            #expect(bindMany.status == 400 && bindMany.text.contains("collection-valued"), "\(bindMany.text)")
            #expect(try await http.get("SalesOrders('D-9')").object["CustomerID"] as? String == "D-1")
        }
        #expect(try Self.count(store, "Products") == before + 1)
    }

    @Test func aFailingAtomicityGroupLeavesNothing() async throws {
        let store = try await ServeTests.sampleStore()
        let before = try Self.count(store, "Products")
        try await withServer(store) { http, _ in
            let batch = """
                {"requests":[
                 {"id":"a1","atomicityGroup":"g1","method":"POST","url":"Products","body":{"ProductID":"B-1","Name":"one"}},
                 {"id":"a2","atomicityGroup":"g1","method":"PATCH","url":"$a1","body":{"Name":"one, changed"}},
                 {"id":"r1","method":"GET","url":"Products('B-1')?$select=Name","dependsOn":["g1"]},
                 {"id":"b1","atomicityGroup":"g2","method":"POST","url":"Products","body":{"ProductID":"B-2","Name":"two"}},
                 {"id":"b2","atomicityGroup":"g2","method":"POST","url":"Products","body":{"ProductID":"B-1","Name":"taken"}},
                 {"id":"c1","method":"DELETE","url":"Products('B-2')","dependsOn":["g2"]},
                 {"id":"d1","method":"DELETE","url":"Products('NOPE')"}
                ]}
                """
            let reply = try await http.send(.POST, "$batch", body: batch)
            #expect(reply.status == 200, "\(reply.text)")
            let responses = try #require(reply.object["responses"] as? [[String: Any]])
            let status = Dictionary(uniqueKeysWithValues: responses.map { ($0["id"] as! String, $0["status"] as! Int) })
            #expect(
                status == ["a1": 201, "a2": 204, "r1": 200, "b1": 424, "b2": 409, "c1": 424, "d1": 404], "\(status)")
            let r1 = responses.first { $0["id"] as? String == "r1" }?["body"] as? [String: Any]
            #expect(r1?["Name"] as? String == "one, changed", "the GET sees the group's writes")
            #expect(try await http.get("Products('B-2')").status == 404, "g2 failed: B-2 was never created")

            // An empty multipart batch answers an empty multipart (MultipartBatchServeTests has the rest).
            let multipart = try await http.send(
                .POST, "$batch", body: "--x--", headers: [("Content-Type", "multipart/mixed;boundary=x")])
            #expect(multipart.status == 200 && multipart.text.hasSuffix("--\r\n"), "\(multipart.text)")
            let text = try await http.send(.POST, "$batch", body: "--x--", headers: [("Content-Type", "text/plain")])
            #expect(text.status == 415)
            let malformed = try await http.send(.POST, "$batch", body: #"{"requests":[{"id":"1","method":"POST"}]}"#)
            #expect(malformed.status == 400)
            let apart = try await http.send(
                .POST, "$batch",
                body: """
                    {"requests":[{"id":"1","atomicityGroup":"g","method":"DELETE","url":"Products('B-1')"},
                    {"id":"2","method":"DELETE","url":"Products('HT-1000')"},
                    {"id":"3","atomicityGroup":"g","method":"DELETE","url":"Products('HT-1001')"}]}
                    """)
            #expect(apart.status == 400, "a group's requests must be adjacent")
        }
        #expect(try Self.count(store, "Products") == before + 1)
    }

    @Test func aRepeatedRequestIsAnsweredOnceAndAppliedOnce() async throws {
        let store = try await ServeTests.sampleStore()
        let before = try Self.count(store, "Products")
        try await withServer(store) { http, _ in
            let id = UUID().uuidString
            let firstSent = Self.imfDate(Date())
            let headers = [("Repeatability-Request-ID", id), ("Repeatability-First-Sent", firstSent)]
            let first = try await http.send(.POST, "Products", body: Self.product, headers: headers)
            #expect(first.status == 201 && first.header("Repeatability-Result") == "accepted")
            let second = try await http.send(.POST, "Products", body: Self.product, headers: headers)
            #expect(second.status == 201, "replayed, not a 409: \(second.text)")
            #expect(second.header("Repeatability-Result") == "replayed")
            #expect(second.body == first.body && second.header("ETag") == first.header("ETag"))
            let other = try await http.send(.POST, "Products", body: #"{"ProductID":"T-2"}"#, headers: headers)
            #expect(other.status == 422, "the same id with another request")
            let old = try await http.send(
                .POST, "Products", body: #"{"ProductID":"T-3"}"#,
                headers: [
                    ("Repeatability-Request-ID", UUID().uuidString),
                    ("Repeatability-First-Sent", Self.imfDate(Date(timeIntervalSinceNow: -3 * 86400))),
                ])
            #expect(old.status == 412 && old.header("Repeatability-Result") == "rejected")
            let garbage = try await http.send(
                .POST, "Products", body: #"{"ProductID":"T-3"}"#,
                headers: [("Repeatability-Request-ID", UUID().uuidString), ("Repeatability-First-Sent", "yesterday")])
            #expect(garbage.status == 400)

            // A repeatable $batch: its write units are recorded and replayed.
            let batchHeaders = [("Repeatability-Request-ID", UUID().uuidString)]
            let batch =
                #"{"requests":[{"id":"1","method":"POST","url":"Products","body":{"ProductID":"T-4"}},{"id":"2","method":"GET","url":"Products/$count"}]}"#
            let b1 = try await http.send(.POST, "$batch", body: batch, headers: batchHeaders)
            let b2 = try await http.send(.POST, "$batch", body: batch, headers: batchHeaders)
            #expect(b1.header("Repeatability-Result") == "accepted" && b2.header("Repeatability-Result") == "replayed")
            let statuses = (b2.object["responses"] as? [[String: Any]])?.map { $0["status"] as? Int }
            #expect(statuses == [201, 200])
        }
        #expect(try Self.count(store, "Products") == before + 2)
    }

    @Test func deltaLinksReportCreatesUpdatesAndDeletes() async throws {
        let store = try await ServeTests.sampleStore()
        try await withServer(store) { http, _ in
            let track = [("Prefer", "odata.track-changes")]
            let url = "Products?$filter=Category%20eq%20'Tablets'&$select=Name,Price"
            let initial = try await http.get(url, headers: track)
            #expect(initial.header("Preference-Applied")?.contains("odata.track-changes") == true)
            let tablets = try #require(initial.object["value"] as? [[String: Any]])
            #expect(tablets.allSatisfy { $0["@odata.id"] != nil }, "keys not selected: @odata.id identifies each")
            var link = try #require(initial.object["@odata.deltaLink"] as? String)

            let empty = try await http.get(link)
            #expect((empty.object["value"] as? [Any])?.isEmpty == true)
            link = try #require(empty.object["@odata.deltaLink"] as? String)

            let someTablet = try #require(tablets.first?["@odata.id"] as? String)
            #expect(try await http.send(.POST, "Products", body: Self.product).status == 201)
            #expect(
                try await http.send(.POST, "Products", body: #"{"ProductID":"T-N","Category":"Notebooks"}"#).status
                    == 201)
            #expect(try await http.send(.PATCH, someTablet, body: #"{"Price":1.25}"#).status == 204)
            #expect(try await http.send(.PATCH, "Products('T-1')", body: #"{"Price":2}"#).status == 204)
            let leaving = try #require(tablets.dropFirst().first?["@odata.id"] as? String)
            #expect(try await http.send(.PATCH, leaving, body: #"{"Category":"Software"}"#).status == 204)
            let doomed = try #require(tablets.last?["@odata.id"] as? String)
            #expect(try await http.send(.DELETE, doomed).status == 204)

            let delta = try await http.get(link)
            #expect(delta.status == 200, "\(delta.text)")
            let entries = try #require(delta.object["value"] as? [[String: Any]])
            var byID: [String: [String: Any]] = [:]
            for e in entries { byID[e["@odata.id"] as! String] = e }
            #expect(byID.count == entries.count, "one entry per entity")
            #expect(byID["Products('T-1')"]?["Price"] != nil && byID["Products('T-1')"]?["@removed"] == nil)
            #expect("\(byID[someTablet]?["Price"] ?? "")" == "1.25")
            #expect((byID[leaving]?["@removed"] as? [String: Any])?["reason"] as? String == "changed")
            #expect((byID[doomed]?["@removed"] as? [String: Any])?["reason"] as? String == "deleted")
            // Not a tablet: never in the client's set. The change log does not know what the client
            // holds, so it may say "removed (changed)" — which a delta client ignores for an entity
            // it does not have — but it must never send it as a member.
            #expect(byID["Products('T-N')"] == nil || byID["Products('T-N')"]?["@removed"] != nil, "not a tablet")
            let next = try #require(delta.object["@odata.deltaLink"] as? String)
            #expect(next != link)
            #expect((try await http.get(next).object["value"] as? [Any])?.isEmpty == true)
            #expect(try await http.get("Products?$deltatoken=999999").status == 410)
            #expect(try await http.get("Products?$deltatoken=abc").status == 400)
        }
    }

    static func imfDate(_ date: Date) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return f.string(from: date)
    }
}
