import NIOHTTP1
import AsyncHTTPClient
import Foundation
import LMDB
import Remote
import Sync
import Testing
@testable import OfflineStore
@testable import Storage
import TestSupport

/// Links (issue 39, item 5): a navigation property without a referential constraint (a
/// many-to-many here, Docs.Tags with its partner Tags.Docs) is stored as links from the expanded
/// results a refresh (or a file) brings, and `$expand`, `any`/`all` and both directions answer
/// from them; deleting an entity deletes its links; `check` holds them.
@Suite(.checksStores, .runsOffThePool) struct LinkTests {
    static let data = #"{"value":[{"Id":1,"Tags":[{"Id":1},{"Id":2}]},{"Id":2,"Tags":[]},{"Id":3,"Tags":[{"Id":2}]}]}"#

    static func ids(_ rows: [Properties], _ nav: String? = nil) -> [Int64] {
        rows.compactMap { if case .int(let i)? = $0["Id"] { return i } else { return nil } }
    }

    static func expanded(_ store: OfflineStore, _ url: String, _ nav: String) throws -> [Int64] {
        final class Text: @unchecked Sendable { var value = "" }
        let text = Text()
        try store.query(url) { text.value += $0 }
        let json = try JSON.parse(Array(text.value.utf8))
        guard case .array(let items)? = json[nav] else { return [] }
        return items.compactMap { if case .number(let n)? = $0["Id"] { return Int64(n) } else { return nil } }
    }

    @Test func expandedLinksAreStoredAndAnsweredBothWays() async throws {
        let store = try OfflineStore.create(
            at: tempDir() + "/links", metadata: Array(UnconstrainedNavigationTests.metadata.utf8))
        try store.load(set: "Docs", json: Array(Self.data.utf8))
        #expect(try store.count(set: "Tags") == 2)
        #expect(try Self.expanded(store, "Docs(1)?$expand=Tags", "Tags") == [1, 2])
        #expect(try Self.expanded(store, "Docs(2)?$expand=Tags", "Tags") == [])
        // The partner, answered from the same links read from their other end.
        #expect(try Self.expanded(store, "Tags(2)?$expand=Docs", "Docs") == [1, 3])
        #expect(try Self.expanded(store, "Tags(1)?$expand=Docs($select=Id)", "Docs") == [1])
        #expect(try Self.ids(store.entities("Docs?$filter=Tags/any(t: t/Id eq 2)")) == [1, 3])
        #expect(try Self.ids(store.entities("Tags?$filter=Docs/any(d: d/Id eq 3)")) == [2])
        // Navigation paths follow them too, with their options.
        #expect(try Self.ids(store.entities("Docs(1)/Tags")) == [1, 2])
        #expect(try Self.ids(store.entities("Tags(2)/Docs?$orderby=Id desc")) == [3, 1])
        #expect(try Self.ids(store.entities("Tags(2)/Docs?$filter=Id gt 1")) == [3])
        #expect(try Self.ids(store.entities("Docs(1)/Tags(2)")) == [2])
        #expect(try store.entities("Docs(2)/Tags").isEmpty)
        #expect(try store.entities("Docs(1)/Tags(3)").isEmpty)  // not linked: no entity there
        #expect(throws: EntityError.self) { try store.query("Docs(1)/Tags(3)", write: { (_: String) in }) }
        #expect(try store.queries.count("Docs(1)/Tags") == 2)
        #expect(try store.check().isConsistent)

        // A doc leaves: its links go both ways.
        try await store.entities.write { t in _ = try store.entities.set("Docs").delete(t, key: [.int(1)]) }
        #expect(try Self.expanded(store, "Tags(2)?$expand=Docs", "Docs") == [3])
        // Loading again replaces a doc's list with the one given.
        try store.load(set: "Docs", json: Array(#"{"value":[{"Id":3,"Tags":[{"Id":1}]}]}"#.utf8))
        #expect(try Self.expanded(store, "Docs(3)?$expand=Tags", "Tags") == [1])
        #expect(try Self.expanded(store, "Tags(2)?$expand=Docs", "Docs") == [])
        let report = try store.check()
        #expect(report.isConsistent, "\(report)")
    }

    @Test func checkFindsALinkWithoutItsTwinOrItsEntity() async throws {
        let store = try OfflineStore.create(
            at: tempDir() + "/damaged", metadata: Array(UnconstrainedNavigationTests.metadata.utf8))
        try store.load(set: "Docs", json: Array(Self.data.utf8))
        let links = try #require(store.entities.links)
        let doc = try store.entities.set("Docs").encodeKey([.int(2)])
        let tag = try store.entities.set("Tags").encodeKey([.int(9)])
        _ = try await store.entities.write { t in
            try t.put(
                links.forward, EntityStore.entityKey(set: "Docs", keyBytes: doc) + LinkStore.name("Tags") + tag, [])
        }
        let problems = try store.check().problems
        #expect(
            problems.contains { $0.contains("Docs(2)/Tags links to Tags(9), which is not in the store") }, "\(problems)"
        )
        #expect(problems.contains { $0.contains("has no links/by-target entry") }, "\(problems)")
        try await store.entities.write { t in
            _ = try t.delete(
                links.forward, EntityStore.entityKey(set: "Docs", keyBytes: doc) + LinkStore.name("Tags") + tag)
        }
        #expect(try store.check().isConsistent)
    }
}

/// Links against odatapy (`scripts/odatapy-server.sh` keeps relations without constraints,
/// seeded by `@odata.bind`, changed by `$ref`): a copy whose defining request expands Docs' tags
/// answers `$expand` both ways as odatapy does, before and after links change on the service.
@Suite(.external, .checksStores, .runsOffThePool) struct LinkODataPyTests {
    static func serviceIDs(_ client: HTTPClient, _ url: String, _ nav: String) async throws -> [Int64] {
        let reply = try await MediaFixture.send(client, .GET, url)
        let items = (reply.object[nav] as? [[String: Any]]) ?? []
        return items.compactMap { ($0["Id"] as? NSNumber)?.int64Value }.sorted()
    }

    /// odatapy with three tags and three docs: Doc 1 linked to Tags 1 and 2, Doc 3 to Tag 2.
    static func peer() throws -> ODataPy {
        try ODataPy(
            metadata: UnconstrainedNavigationTests.metadata,
            data: [
                ("Tags", #"{"value":[{"Id":1},{"Id":2},{"Id":3}]}"#),
                (
                    "Docs",
                    #"{"value":[{"Id":1,"Tags@odata.bind":["Tags(1)","Tags(2)"]},{"Id":2},{"Id":3,"Tags@odata.bind":["Tags(2)"]}]}"#
                ),
            ])
    }

    /// A copy's configuration: the docs with their tags, and the tags.
    static func configuration(_ root: String) -> StoreConfiguration {
        var config = StoreConfiguration()
        config.serviceRoot = root
        config.definingRequests = [.init(name: "docs", url: "Docs?$expand=Tags"), .init(name: "tags", url: "Tags")]
        return config
    }

    @Test func aCopyAnswersManyToManyAsTheServiceDoes() async throws {
        let server = try await LinkODataPyTests.peer().start()
        defer { Task { await server.stop() } }
        let config = LinkODataPyTests.configuration(server.url)
        let copy = try OfflineStore.create(
            at: tempDir() + "/copy", metadata: Array(UnconstrainedNavigationTests.metadata.utf8), configuration: config)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        func same() async throws {
            for id in 1...3 {
                let mine = try LinkTests.expanded(copy, "Docs(\(id))?$expand=Tags", "Tags").sorted()
                let theirs = try await Self.serviceIDs(client, server.url + "Docs(\(id))?$expand=Tags", "Tags")
                #expect(mine == theirs, "Docs(\(id))/Tags")
                let back = try LinkTests.expanded(copy, "Tags(\(id))?$expand=Docs", "Docs").sorted()
                let serviceBack = try await Self.serviceIDs(client, server.url + "Tags(\(id))?$expand=Docs", "Docs")
                #expect(back == serviceBack, "Tags(\(id))/Docs")
            }
            #expect(try copy.check().isConsistent)
        }
        do {
            try await copy.refresh()
            try await same()
            // The service links Doc 2 to Tag 3 and unlinks Doc 1 from Tag 1.
            let add = try await MediaFixture.send(
                client, .POST, server.url + "Docs(2)/Tags/$ref", body: Array(#"{"@odata.id":"Tags(3)"}"#.utf8),
                headers: [("Content-Type", "application/json")])
            #expect(add.status == 204, "\(add.text)")
            let remove = try await MediaFixture.send(
                client, .DELETE, server.url + "Docs(1)/Tags/$ref?$id=" + server.url + "Tags(1)")
            #expect(remove.status == 204, "\(remove.text)")
            try await copy.refresh()
            try await same()
            #expect(try LinkTests.expanded(copy, "Tags(3)?$expand=Docs", "Docs") == [2])
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }
}

/// Links changed offline reach odatapy: a copy links Doc 2 to Tag 3 and unlinks Doc 1 from Tag 1,
/// flushes (`POST Docs(2)/Tags/$ref`, `DELETE Docs(1)/Tags/$ref?$id=…`), and the service answers
/// both navigations as the copy does; a refresh after it changes nothing, and a second copy
/// refreshing sees the same links.
@Suite(.external, .checksStores, .runsOffThePool) struct LinkChangeODataPyTests {
    @Test func linksChangedOfflineReachOdatapy() async throws {
        let server = try await LinkODataPyTests.peer().start()
        defer { Task { await server.stop() } }
        let config = LinkODataPyTests.configuration(server.url)
        let copy = try OfflineStore.create(
            at: tempDir() + "/copy", metadata: Array(UnconstrainedNavigationTests.metadata.utf8), configuration: config)
        try await copy.refresh()
        _ = try await copy.link(set: "Docs", key: [.int(2)], navigation: "Tags", to: [.int(3)])
        _ = try await copy.unlink(set: "Docs", key: [.int(1)], navigation: "Tags", from: [.int(1)])
        // A refresh before the flush keeps the copy's own changes over the service's links.
        try await copy.refresh()
        #expect(try LinkTests.expanded(copy, "Docs(2)?$expand=Tags", "Tags") == [3])
        #expect(try LinkTests.expanded(copy, "Docs(1)?$expand=Tags", "Tags") == [2])
        let report = try await copy.flush()
        #expect(report.succeeded == 2 && report.archived == 0, "\(report)")
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            for id in 1...3 {
                let theirs = try await LinkODataPyTests.serviceIDs(
                    client, server.url + "Docs(\(id))?$expand=Tags", "Tags")
                #expect(
                    try LinkTests.expanded(copy, "Docs(\(id))?$expand=Tags", "Tags").sorted() == theirs, "Docs(\(id))")
            }
            #expect(try await LinkODataPyTests.serviceIDs(client, server.url + "Tags(3)?$expand=Docs", "Docs") == [2])
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
        try await copy.refresh()
        #expect(try LinkTests.expanded(copy, "Docs(2)?$expand=Tags", "Tags") == [3])
        #expect(try copy.check().isConsistent)
        let other = try OfflineStore.create(
            at: tempDir() + "/other", metadata: Array(UnconstrainedNavigationTests.metadata.utf8), configuration: config
        )
        try await other.refresh()
        #expect(try LinkTests.expanded(other, "Docs(1)?$expand=Tags", "Tags") == [2])
        #expect(try LinkTests.expanded(other, "Tags(3)?$expand=Docs", "Docs") == [2])
    }
}

#if DEBUG  // the fault hook exists in debug builds only
/// Storing links, with every `mdb_*` call of a load that brings them failed in turn (`EIO`): the
/// load is one transaction, so after each trial the store has all of it or none — entities and
/// links — and `check` passes (a link without its twin or its entities would fail it).
@Suite(.checksStores, .runsOffThePool) struct LinkFaultTests {
    @Test func everyLMDBCallOfStoringLinksCanFail() throws {
        let store = try OfflineStore.create(
            at: tempDir() + "/faults", metadata: Array(UnconstrainedNavigationTests.metadata.utf8))
        let env = store.entities.environment
        FaultInjection.countCalls(in: env)
        try store.load(set: "Docs", json: Array(LinkTests.data.utf8))
        let calls = FaultInjection.stop(env).calls
        #expect(calls.count > 10, "\(calls)")
        for n in 1...calls.count {
            let trial = try OfflineStore.create(
                at: tempDir() + "/fault-\(n)", metadata: Array(UnconstrainedNavigationTests.metadata.utf8))
            let e = trial.entities.environment
            FaultInjection.fail(callNumber: n, with: EIO, in: e)
            let result = Result { try trial.load(set: "Docs", json: Array(LinkTests.data.utf8)) }
            FaultInjection.stop(e)
            let report = try trial.check()
            #expect(report.isConsistent, "call \(n) (\(calls[n - 1])): \(report)")
            let docs = try trial.count(set: "Docs")
            if case .success = result {
                let back = try LinkTests.expanded(trial, "Tags(2)?$expand=Docs", "Docs")
                #expect(docs == 3 && back == [1, 3], "call \(n) (\(calls[n - 1]))")
            } else {
                let tags = try trial.count(set: "Tags")
                #expect(docs == 0 && tags == 0, "call \(n) (\(calls[n - 1]))")
                #expect(throws: QueryError.self) { try trial.entities("Docs?$expand=Tags") }
            }
        }
        print("LinkFaultTests: \(calls.count) fault trials of a load bringing links")
    }

    /// A link changed offline with each of its LMDB calls failed in turn: the link and its
    /// request, or neither.
    @Test func everyLMDBCallOfLinkingOfflineCanFail() async throws {
        let store = try LinkChangeTests.copy()
        let env = store.entities.environment
        func link() async throws {
            _ = try await store.link(set: "Docs", key: [.int(2)], navigation: "Tags", to: [.int(1)])
        }
        FaultInjection.countCalls(in: env)
        try await link()
        let calls = FaultInjection.stop(env).calls
        _ = try store.undo(set: "Docs", key: [.int(2)])
        for n in 1...calls.count {
            let what = "call \(n) (\(calls[n - 1]))"
            FaultInjection.fail(callNumber: n, with: EIO, in: env)
            let result = await Result { try await link() }
            FaultInjection.stop(env)
            let linked = try LinkTests.expanded(store, "Docs(2)?$expand=Tags", "Tags")
            if case .success = result {
                #expect(try linked == [1] && store.pendingRequestCount() == 1, "\(what)")
            } else {
                #expect(try linked == [] && store.pendingRequestCount() == 0, "\(what): half a link")
            }
            let report = try store.check()
            #expect(report.isConsistent, "\(what): \(report)")
            _ = try store.undo(set: "Docs", key: [.int(2)])
        }
        print("LinkFaultTests: \(calls.count) fault trials of linking offline")
    }
}
#endif

/// Links changed offline (issue 39, item 5's write side): `link`/`unlink` change the links at
/// once and queue a request in the source's chain; a link and its undoing cancel, `undo` puts the
/// links back, `check` holds; each dialect writes it as OData says (V4 `$ref`, V2 `$links`).
@Suite(.checksStores) struct LinkChangeTests {
    static func copy() throws -> OfflineStore {
        var config = StoreConfiguration()
        config.serviceRoot = "http://127.0.0.1:9/"
        let store = try OfflineStore.create(
            at: tempDir() + "/links", metadata: Array(UnconstrainedNavigationTests.metadata.utf8),
            configuration: config)
        try store.load(set: "Docs", json: Array(LinkTests.data.utf8))
        return store
    }

    static func methods(_ store: OfflineStore) throws -> [String] {
        try store.entities("RequestQueue").compactMap { if case .string(let m)? = $0["Method"] { m } else { nil } }
    }

    @Test func linksChangeAtOnceQueueCollapseAndUndo() async throws {
        let store = try Self.copy()
        let added = try await store.link(set: "Docs", key: [.int(2)], navigation: "Tags", to: [.int(1)])
        #expect(added != nil)
        #expect(try LinkTests.expanded(store, "Docs(2)?$expand=Tags", "Tags") == [1])
        #expect(try LinkTests.expanded(store, "Tags(1)?$expand=Docs", "Docs").sorted() == [1, 2])
        _ = try await store.unlink(set: "Docs", key: [.int(1)], navigation: "Tags", from: [.int(2)])
        #expect(try LinkTests.expanded(store, "Docs(1)?$expand=Tags", "Tags") == [1])
        #expect(try Self.methods(store) == ["POST-REF", "DELETE-REF"])
        // Linking what is linked changes nothing; undoing a pending link cancels it.
        #expect(try await store.link(set: "Docs", key: [.int(2)], navigation: "Tags", to: [.int(1)]) == nil)
        #expect(try await store.unlink(set: "Docs", key: [.int(2)], navigation: "Tags", from: [.int(1)]) == nil)
        #expect(try Self.methods(store) == ["DELETE-REF"])
        #expect(try LinkTests.expanded(store, "Docs(2)?$expand=Tags", "Tags") == [])
        #expect(try store.check().isConsistent)
        // Undo puts Doc 1's link back.
        #expect(try store.undo(set: "Docs", key: [.int(1)]).count == 1)
        #expect(try LinkTests.expanded(store, "Docs(1)?$expand=Tags", "Tags") == [1, 2])
        #expect(try store.pendingRequestCount() == 0)
        // What cannot be linked says why, and changes nothing.
        await #expect(throws: EntityError.self) {
            try await store.link(set: "Docs", key: [.int(1)], navigation: "Tags", to: [.int(9)])
        }
        await #expect(throws: EntityError.self) {
            try await store.link(set: "Docs", key: [.int(1)], navigation: "Nope", to: [.int(1)])
        }
        #expect(try store.pendingRequestCount() == 0 && store.check().isConsistent)
    }

    @Test func eachDialectWritesALinkAsODataSays() throws {
        let store = try Self.copy()
        func change(_ kind: OutgoingChange.Kind) -> OutgoingChange {
            var c = OutgoingChange(
                kind: kind, set: "Docs", key: [.int(1)], keyText: "1", body: nil, etag: nil,
                repeatabilityID: EDMGuid.random(), firstSent: .now, customHeaders: [], id: "1")
            c.link = OutgoingLink(
                navigation: "Tags", targetSet: "Tags", targetKey: [.int(3)], targetKeyText: "3", collection: true)
            c.link?.serviceRoot = "http://h/s/"
            return c
        }
        let v4Add = try V4Dialect().request(for: change(.link), store: store.entities)
        #expect(v4Add.method == "POST" && v4Add.url == "Docs(1)/Tags/$ref")
        #expect(String(decoding: v4Add.body ?? [], as: UTF8.self) == #"{"@odata.id":"http://h/s/Tags(3)"}"#)
        let v4Remove = try V4Dialect().request(for: change(.unlink), store: store.entities)
        #expect(v4Remove.method == "DELETE" && v4Remove.url == "Docs(1)/Tags/$ref?$id=http://h/s/Tags(3)")
        let v2Add = try V2Dialect().request(for: change(.link), store: store.entities)
        #expect(v2Add.method == "POST" && v2Add.url == "Docs(1)/$links/Tags")
        #expect(String(decoding: v2Add.body ?? [], as: UTF8.self) == #"{"uri":"http://h/s/Tags(3)"}"#)
        let v2Remove = try V2Dialect().request(for: change(.unlink), store: store.entities)
        #expect(v2Remove.method == "DELETE" && v2Remove.url == "Docs(1)/$links/Tags(3)")
        var single = change(.link)
        single.link?.collection = false
        #expect(try V4Dialect().request(for: single, store: store.entities).method == "PUT")
        #expect(try V2Dialect().request(for: single, store: store.entities).method == "PUT")
    }
}

/// `serve` takes link writes: an authority changes its own links (`POST …/Tags/$ref`,
/// `DELETE …/Tags/$ref?$id=…`), an offline copy served to a client queues them; a copy's link
/// changes flushed to an authority `serve` are read back there, both ways.
@Suite(.checksStores, .runsOffThePool) struct LinkServeTests {
    @Test func linksChangedInACopyReachAServedAuthority() async throws {
        let authority = try OfflineStore.create(
            at: tempDir() + "/auth", metadata: Array(UnconstrainedNavigationTests.metadata.utf8))
        try authority.load(set: "Docs", json: Array(LinkTests.data.utf8))
        try authority.load(set: "Tags", entities: [["Id": .int(3)]])
        try await withServer(authority.path) { http, server in
            var config = StoreConfiguration()
            config.serviceRoot = server.url
            config.definingRequests = [.init(name: "docs", url: "Docs?$expand=Tags"), .init(name: "tags", url: "Tags")]
            let copy = try OfflineStore.create(
                at: tempDir() + "/copy", metadata: Array(UnconstrainedNavigationTests.metadata.utf8),
                configuration: config)
            try await copy.refresh()
            _ = try await copy.link(set: "Docs", key: [.int(2)], navigation: "Tags", to: [.int(3)])
            _ = try await copy.unlink(set: "Docs", key: [.int(1)], navigation: "Tags", from: [.int(1)])
            let report = try await copy.flush()
            #expect(report.succeeded == 2 && report.archived == 0, "\(report)")
            #expect(try LinkTests.expanded(authority, "Docs(2)?$expand=Tags", "Tags") == [3])
            #expect(try LinkTests.expanded(authority, "Docs(1)?$expand=Tags", "Tags") == [2])
            #expect(try LinkTests.expanded(authority, "Tags(3)?$expand=Docs", "Docs") == [2])
            let served = try await http.get("Docs(2)?$expand=Tags")
            #expect(served.status == 200 && served.text.contains(#""Id":3"#), "\(served.text)")
            #expect(try authority.check().isConsistent)
            // Another copy refreshing sees them; the first, refreshed, keeps them.
            let other = try OfflineStore.create(
                at: tempDir() + "/other", metadata: Array(UnconstrainedNavigationTests.metadata.utf8),
                configuration: config)
            try await other.refresh()
            try await copy.refresh()
            for store in [copy, other] {
                #expect(try LinkTests.expanded(store, "Docs(1)?$expand=Tags", "Tags") == [2])
                #expect(try LinkTests.expanded(store, "Tags(3)?$expand=Docs", "Docs") == [2])
            }
            // A link to nothing, or over a navigation that has none, is refused and changes nothing.
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { _ = client.shutdown() }
            let missing = try await MediaFixture.send(
                client, .POST, server.url + "Docs(2)/Tags/$ref", body: Array(#"{"@odata.id":"Tags(9)"}"#.utf8),
                headers: [("Content-Type", "application/json")])
            #expect(missing.status == 404, "\(missing.text)")
            #expect(try LinkTests.expanded(authority, "Docs(2)?$expand=Tags", "Tags") == [3])

            // A served copy queues a client's link change.
            try await withServer(other.path) { _, sidecar in
                let add = try await MediaFixture.send(
                    client, .POST, sidecar.url + "Docs(3)/Tags/$ref",
                    body: Array(#"{"@odata.id":"\#(sidecar.url)Tags(1)"}"#.utf8),
                    headers: [("Content-Type", "application/json")])
                #expect(add.status == 204, "\(add.text)")
                let remove = try await MediaFixture.send(
                    client, .DELETE, sidecar.url + "Docs(3)/Tags/$ref?$id=Tags(2)")
                #expect(remove.status == 204, "\(remove.text)")
            }
            let reopened = try OfflineStore.open(at: other.path)
            #expect(try LinkChangeTests.methods(reopened) == ["POST-REF", "DELETE-REF"])
            #expect(try await reopened.flush().succeeded == 2)
            #expect(try LinkTests.expanded(authority, "Docs(3)?$expand=Tags", "Tags") == [1])

            // Binds in a create and an update (`Tags@odata.bind`) are links added after the write.
            try await withServer(other.path) { _, sidecar in
                let made = try await MediaFixture.send(
                    client, .POST, sidecar.url + "Docs",
                    body: Array(#"{"Id":9,"Tags@odata.bind":["Tags(1)","\#(sidecar.url)Tags(3)"]}"#.utf8),
                    headers: [("Content-Type", "application/json")])
                #expect(made.status == 201, "\(made.text)")
                let patched = try await MediaFixture.send(
                    client, .PATCH, sidecar.url + "Docs(2)", body: Array(#"{"Tags@odata.bind":["Tags(2)"]}"#.utf8),
                    headers: [("Content-Type", "application/json")])
                #expect(patched.status == 204 || patched.status == 200, "\(patched.text)")
                let refused = try await MediaFixture.send(
                    client, .PUT, sidecar.url + "Docs(2)", body: Array(#"{"Id":2,"Tags@odata.bind":["Tags(2)"]}"#.utf8),
                    headers: [("Content-Type", "application/json")])
                #expect(refused.status == 400, "\(refused.text)")
            }
            let again = try OfflineStore.open(at: other.path)
            #expect(try LinkTests.expanded(again, "Docs(9)?$expand=Tags", "Tags") == [1, 3])
            #expect(try LinkChangeTests.methods(again) == ["POST", "POST-REF", "POST-REF", "POST-REF"])
            let bound = try await again.flush()
            #expect(bound.succeeded == 4 && bound.archived == 0, "\(bound)")
            #expect(try LinkTests.expanded(authority, "Docs(9)?$expand=Tags", "Tags") == [1, 3])
            #expect(try LinkTests.expanded(authority, "Docs(2)?$expand=Tags", "Tags") == [2, 3])
            #expect(try authority.check().isConsistent && again.check().isConsistent)
        }
    }
}
