import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Remote
import Synchronization
import Sync
import Testing
@testable import OfflineStore
@testable import Queue
@testable import Storage
import TestSupport

/// Changing media offline (issue 39, item 3): a stream replaced in an offline copy is stored and
/// queued in one transaction, collapses with a pending replacement of the same stream, goes to
/// the service as a PUT of its own in its entity's order, and is read back from the service
/// byte for byte; against `serve` as the authority.
@Suite(.checksStores, .runsOffThePool) struct MediaUploadTests {
    static func requests(_ store: OfflineStore) throws -> [(method: String, key: String)] {
        try store.entities("RequestQueue").map {
            guard case .string(let m)? = $0["Method"], case .string(let k)? = $0["EntityKey"] else { return ("?", "?") }
            return (m, k)
        }
    }

    /// Files the queue keeps for stream replacements.
    static func kept(_ store: OfflineStore) throws -> Set<String> {
        try store.entities.read { t in try QueueRole.streamFiles(store.entities, t) }
    }

    @Test func aReplacedStreamIsQueuedCollapsedFlushedAndReadBack() async throws {
        let photo = MediaFixture.random(100_000, seed: 11)
        let authority = try await MediaFixture.authority(photo: photo, cover: [1, 2, 3])
        try await withServer(authority.path) { http, server in
            let copy = try MediaFixture.copy(of: server.url)
            _ = try await copy.refresh()
            let first = MediaFixture.random(70_000, seed: 12)
            let second = MediaFixture.random(300_000, seed: 13)
            let cover = MediaFixture.random(5_000, seed: 14)
            let one = try await copy.replaceStream("Photos(1)", contentType: "image/webp", bytes: first)
            #expect(one.pendingUpload && one.sha256 == MediaFixture.sha256(first))
            #expect(try copy.openStream("Photos(1)").bytes() == first)
            // A second replacement of the same stream takes the first one's place; its file goes.
            _ = try await copy.replaceStream("Photos(1)", contentType: "image/webp", bytes: second)
            _ = try await copy.update(set: "Photos", key: [.int(1)], changes: ["Name": .string("renamed")])
            _ = try await copy.replaceStream("Albums(1)/Cover", contentType: "image/jpeg", bytes: cover)
            let queued = try Self.requests(copy)
            #expect(queued.map(\.method) == ["PUT-STREAM", "PATCH", "PUT-STREAM"], "\(queued)")
            #expect(try Self.kept(copy).count == 2)
            _ = try await MediaFixture.settle(copy)
            #expect(try FileManager.default.contentsOfDirectory(atPath: copy.path + "/streams").count == 4)
            #expect(try copy.check().isConsistent)
            // A refresh meanwhile leaves the local bytes alone.
            _ = try await copy.refresh()
            #expect(try copy.openStream("Photos(1)").bytes() == second)
            #expect(try copy.streamInfo("Photos(1)")?.pendingUpload == true)

            let report = try await copy.flush()
            #expect(report.succeeded == 3 && report.archived == 0 && report.stopped == nil, "\(report)")
            #expect(try copy.pendingRequestCount() == 0 && Self.kept(copy).isEmpty)
            let served = try await http.get("Photos(1)/$value")
            #expect(served.body == second && served.header("Content-Type") == "image/webp")
            #expect(try await http.get("Albums(1)/Cover").body == cover)
            #expect(try await http.get("Photos(1)").object["Name"] as? String == "renamed")
            // The copy holds the service's version now: its media ETag, no longer pending.
            let info = try #require(try copy.streamInfo("Photos(1)"))
            #expect(!info.pendingUpload && info.mediaETag == served.header("ETag"), "\(info)")
            #expect(try copy.check().isConsistent)
            // Another copy downloads what this one sent.
            let other = try OfflineStore.create(
                at: tempDir() + "/other", metadata: Array(MediaFixture.metadata.utf8),
                configuration: copy.configuration)
            _ = try await other.refresh()
            #expect(try other.openStream("Photos(1)").bytes() == second)
            // Nothing changed since: the next refresh of the first copy downloads nothing.
            #expect(try await copy.refresh().streamsDownloaded == 0)
        }
    }

    /// A replacement followed by a delete of its entity is one DELETE; `undo` of a replacement
    /// puts back the service's version (not downloaded: the next refresh brings its bytes).
    @Test func aDeleteSupersedesAReplacementAndUndoPutsBackTheServicesVersion() async throws {
        let photo = MediaFixture.random(10_000, seed: 15)
        let authority = try await MediaFixture.authority(photo: photo, cover: [1])
        try await withServer(authority.path) { http, server in
            let copy = try MediaFixture.copy(of: server.url)
            _ = try await copy.refresh()
            _ = try await copy.replaceStream("Photos(2)", contentType: "image/png", bytes: [9, 9, 9])
            _ = try await copy.delete(set: "Photos", key: [.int(2)])
            #expect(try Self.requests(copy).map(\.method) == ["DELETE"])
            #expect(try Self.kept(copy).isEmpty)

            _ = try await copy.replaceStream("Photos(1)", contentType: "image/png", bytes: [7, 7])
            #expect(try copy.undo(set: "Photos", key: [.int(1)]).count == 1)
            let back = try #require(try copy.streamInfo("Photos(1)"))
            #expect(!back.downloaded && !back.pendingUpload)
            #expect(try copy.check().isConsistent)
            _ = try await copy.refresh()
            #expect(try copy.openStream("Photos(1)").bytes() == photo)

            let report = try await copy.flush()
            #expect(report.succeeded == 1, "\(report)")
            #expect(try await http.get("Photos(2)").status == 404)
            #expect(try await http.get("Photos(1)/$value").body == photo)
            // In a transaction a replacement is refused, and nothing changes.
            await #expect(throws: EntityError.self) {
                try await copy.replaceStream(
                    "Photos(1)", contentType: "image/png", bytes: [1], options: ChangeOptions(transactionID: "t"))
            }
            #expect(try copy.pendingRequestCount() == 0 && copy.openStream("Photos(1)").bytes() == photo)
        }
    }

    /// The service's stream changed after the copy's replacement was made: its `If-Match` (the
    /// media ETag it replaced) is refused with 412 — a conflict in the ErrorArchive, never an
    /// overwrite; giving up puts back the service's version.
    @Test func aReplacementOfAStreamChangedOnTheServiceIsAConflict() async throws {
        let authority = try await MediaFixture.authority(photo: [1, 2, 3], cover: [1])
        try await withServer(authority.path) { http, server in
            let copy = try MediaFixture.copy(of: server.url)
            _ = try await copy.refresh()
            _ = try await copy.replaceStream("Photos(1)", contentType: "image/png", bytes: [4, 5, 6])
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { _ = client.shutdown() }
            let theirs = try await MediaFixture.send(
                client, .PUT, server.url + "Photos(1)/$value", body: [7, 8, 9], headers: [("Content-Type", "image/png")]
            )
            #expect(theirs.status == 204)
            let report = try await copy.flush()
            #expect(report.archived == 1 && report.succeeded == 0, "\(report)")
            #expect(report.refused.first?.contains("412") == true, "\(report.refused)")
            #expect(try await http.get("Photos(1)/$value").body == [7, 8, 9])
            #expect(try copy.check().isConsistent)
            let errors = try copy.entities("ErrorArchive")
            #expect(errors.count == 1)
            guard case .int(let id)? = errors.first?["RequestID"] else { Issue.record("no request id"); return }
            _ = try copy.resolveError(requestID: id)
            #expect(try copy.pendingRequestCount() == 0 && Self.kept(copy).isEmpty)
            _ = try await copy.refresh()
            #expect(try copy.openStream("Photos(1)").bytes() == [7, 8, 9])
            #expect(try copy.check().isConsistent)
        }
    }

    /// The answer to a replacement is lost (the service applied it): the flush stops with the
    /// request sent; the next sends it again, the service refuses the stale `If-Match`, and the
    /// bytes read back — hashed, never held — are the ones sent: found applied, not a conflict.
    @Test func aReplacementWhoseAnswerWasLostIsFoundApplied() async throws {
        final class LoseFirstPut: WrappingBackend {
            let inner: HTTPTransport
            let lost = Mutex(false)
            init(inner: HTTPTransport) { self.inner = inner }
            func send(_ request: WireRequest) async throws -> WireResponse {
                let response = try await inner.send(request)
                if request.method == "PUT",
                    lost.withLock({
                        let first = !$0; $0 = true; return first
                    })
                {
                    throw BackendError.transport("the answer was lost (test)")
                }
                return response
            }
        }
        let authority = try await MediaFixture.authority(photo: [1, 2, 3], cover: [1])
        try await withServer(authority.path) { http, server in
            let copy = try MediaFixture.copy(of: server.url)
            _ = try await copy.refresh()
            let mine = MediaFixture.random(3_000_000, seed: 16)
            _ = try await copy.replaceStream("Photos(1)", contentType: "image/png", bytes: mine)
            let transport = LoseFirstPut(inner: HTTPTransport(serviceRoot: server.url))
            let lostOne = try await copy.flush(backend: transport)
            #expect(lostOne.stopped != nil && lostOne.succeeded == 0, "\(lostOne)")
            #expect(try Self.requests(copy).map(\.method) == ["PUT-STREAM"])
            let again = try await copy.flush(backend: transport)
            try await transport.inner.shutdown()
            #expect(again.succeeded == 1 && again.reconciled == 1 && again.archived == 0, "\(again)")
            #expect(try await http.get("Photos(1)/$value").body == mine)
            let info = try #require(try copy.streamInfo("Photos(1)"))
            #expect(!info.pendingUpload && info.sha256 == MediaFixture.sha256(mine))
            #expect(try copy.check().isConsistent && Self.kept(copy).isEmpty)
        }
    }

    /// `MediaFixture.metadata` with the photos' key one the service assigns (`Core.Computed`).
    static let computedKeys: String = {
        let plain = #"<Property Name="Id" Type="Edm.Int32" Nullable="false"/>"#
        let computed =
            #"<Property Name="Id" Type="Edm.Int32" Nullable="false"><Annotation Term="Org.OData.Core.V1.Computed" Bool="true"/></Property>"#
        // The first is the photo's (Photo comes before Album).
        return MediaFixture.metadata.replacingCharacters(
            in: MediaFixture.metadata.range(of: plain)!, with: computed)
    }()

    /// An offline copy of `root`'s photos (streams retrieved), their keys the service's.
    static func computedCopy(of root: String) throws -> OfflineStore {
        try OfflineStore.create(
            at: tempDir() + "/copy", metadata: Array(computedKeys.utf8), configuration: configuration(root))
    }

    /// A copy's configuration: `root`'s `set`, its streams retrieved.
    static func configuration(_ root: String, set: String = "Photos") -> StoreConfiguration {
        var config = StoreConfiguration()
        config.serviceRoot = root
        config.definingRequests = [.init(name: set.lowercased(), url: set, retrieveStreams: true)]
        return config
    }

    /// A media entity created offline: the entity with a local key, its bytes and two requests
    /// (the POST of the bytes, then a PATCH of its name), flushed to `serve`: the service makes
    /// the entity from the bytes with a key of its own, the copy moves the entity, its stream and
    /// the PATCH to that key, and the service holds the name and the bytes. A create then a
    /// delete before a flush is nothing at all.
    @Test func aMediaEntityCreatedOfflineGetsTheServicesKey() async throws {
        #expect(Self.computedKeys != MediaFixture.metadata)
        let authority = try OfflineStore.create(at: tempDir() + "/auth", metadata: Array(Self.computedKeys.utf8))
        try authority.load(set: "Photos", entities: [["Id": .int(1), "Name": .string("one")]])
        try await withServer(authority.path) { http, server in
            let copy = try Self.computedCopy(of: server.url)
            _ = try await copy.refresh()
            let bytes = MediaFixture.random(150_000, seed: 31)
            let receipt = try await copy.createMedia(
                set: "Photos", entity: ["Name": .string("beach")], contentType: "image/jpeg", slug: "beach.jpg",
                bytes: bytes)
            let local = try #require(receipt.entity?["Id"])
            guard case .int(let localID) = local else { Issue.record("no local key: \(local)"); return }
            #expect(localID < 0)
            #expect(try Self.requests(copy).map(\.method) == ["POST-MEDIA", "PATCH"])
            #expect(try copy.openStream("Photos(\(localID))").bytes() == bytes)
            #expect(try copy.check().isConsistent)
            // Created and deleted before a flush: nothing goes.
            let gone = try await copy.createMedia(
                set: "Photos", entity: [:], contentType: "image/png", bytes: [1, 2, 3])
            _ = try await copy.delete(set: "Photos", key: [try #require(gone.entity?["Id"])])
            #expect(try Self.requests(copy).count == 2)

            let report = try await copy.flush()
            #expect(report.succeeded == 2 && report.archived == 0, "\(report)")
            let photos = try copy.entities("Photos?$filter=Name eq 'beach'")
            #expect(photos.count == 1)
            guard case .int(let id)? = photos.first?["Id"] else { Issue.record("no photo"); return }
            #expect(id > 0)
            #expect(try copy.openStream("Photos(\(id))").bytes() == bytes)
            #expect(try copy.streamInfo("Photos(\(id))")?.pendingUpload == false)
            let served = try await http.get("Photos(\(id))/$value")
            #expect(served.body == bytes && served.header("Content-Type") == "image/jpeg")
            #expect(try await http.get("Photos(\(id))").object["Name"] as? String == "beach")
            #expect(try authority.entities("Photos").count == 2)
            _ = try await MediaFixture.settle(copy)
            let checked = try copy.check()
            #expect(checked.isConsistent && checked.orphanStreamFiles == 0, "\(checked)")
            #expect(try Self.kept(copy).isEmpty)
        }
    }

    /// An offline copy served to a client takes a media create (POST of the bytes) as a local
    /// change, answered 201 with the entity under a local key; its flush sends it on.
    @Test func aServedCopyTakesAMediaCreateAndFlushesIt() async throws {
        let authority = try OfflineStore.create(at: tempDir() + "/auth", metadata: Array(Self.computedKeys.utf8))
        try await withServer(authority.path) { http, server in
            let copy = try Self.computedCopy(of: server.url)
            let path = copy.path
            let bytes = MediaFixture.random(20_000, seed: 32)
            try await withServer(path) { _, sidecar in
                let client = HTTPClient(eventLoopGroupProvider: .singleton)
                defer { _ = client.shutdown() }
                let made = try await MediaFixture.send(
                    client, .POST, sidecar.url + "Photos", body: bytes,
                    headers: [("Content-Type", "image/gif"), ("Slug", "cat.gif")])
                #expect(made.status == 201, "\(made.text)")
                let location = try #require(made.header("Location"))
                let back = try await MediaFixture.send(client, .GET, location + "/$value")
                #expect(back.body == bytes && back.header("Content-Type") == "image/gif")
            }
            let reopened = try OfflineStore.open(at: path)
            #expect(try Self.requests(reopened).map(\.method) == ["POST-MEDIA"])
            let report = try await reopened.flush()
            #expect(report.succeeded == 1, "\(report)")
            let there = try authority.entities("Photos")
            #expect(there.count == 1)
            guard case .int(let id)? = there.first?["Id"] else { Issue.record("no photo"); return }
            #expect(try await http.get("Photos(\(id))/$value").body == bytes)
        }
    }

    /// In the V2 dialect (a V2 copy of a V2 `serve`): a replaced attachment goes as
    /// `PUT Attachments('a')/$value` with Gateway's idempotency headers, and is read back.
    @Test func aV2CopyReplacesAnAttachment() async throws {
        let authority = try OfflineStore.create(
            at: tempDir() + "/v2auth", metadata: Array(MediaFixture.v2Metadata.utf8))
        try authority.load(set: "Attachments", entities: [["Id": .string("a"), "FileName": .string("a.pdf")]])
        try await authority.putStream("Attachments('a')", contentType: "application/pdf", bytes: [1, 2, 3])
        try await withServer(authority.path) { http, server in
            let config = Self.configuration(server.url, set: "Attachments")
            let copy = try OfflineStore.create(
                at: tempDir() + "/v2copy", metadata: Array(MediaFixture.v2Metadata.utf8), configuration: config)
            _ = try await copy.refresh()
            let mine = MediaFixture.random(90_000, seed: 33)
            _ = try await copy.replaceStream("Attachments('a')", contentType: "application/pdf", bytes: mine)
            let report = try await copy.flush()
            #expect(report.succeeded == 1 && report.archived == 0, "\(report)")
            #expect(try await http.get("Attachments('a')/$value").body == mine)
            #expect(try copy.streamInfo("Attachments('a')")?.pendingUpload == false)
            #expect(try copy.check().isConsistent)
        }
    }

    /// Many copies, one truth: three copies replace the same four photos and flush at once, as
    /// three processes. Each photo ends with one copy's bytes on the service — the first to
    /// arrive; the others' replacements meet its media ETag and are conflicts in their
    /// ErrorArchive, never overwrites. The ways out: copy 2 keeps its own (re-sent against the
    /// service's version: its bytes win, in order), copy 3 gives up (its stream goes back to the
    /// service's); after a refresh every copy holds what the service holds.
    @Test func threeCopiesReplacingTheSamePhotosConvergeWithConflictsNotOverwrites() async throws {
        let authority = try OfflineStore.create(at: tempDir() + "/auth", metadata: Array(MediaFixture.metadata.utf8))
        try authority.load(set: "Photos", entities: (1...4).map { ["Id": .int(Int64($0)), "Name": .string("p\($0)")] })
        for id in 1...4 { try await authority.putStream("Photos(\(id))", contentType: "image/png", bytes: [UInt8(id)]) }
        try await withServer(authority.path) { http, server in
            var copies: [OfflineStore] = []
            var mine: [[Int: [UInt8]]] = []
            for n in 1...3 {
                let config = Self.configuration(server.url)
                let copy = try OfflineStore.create(
                    at: tempDir() + "/copy\(n)", metadata: Array(MediaFixture.metadata.utf8), configuration: config)
                _ = try await copy.refresh()
                var bytes: [Int: [UInt8]] = [:]
                for id in 1...4 {
                    bytes[id] = MediaFixture.random(50_000, seed: UInt64(n * 100 + id))
                    _ = try await copy.replaceStream("Photos(\(id))", contentType: "image/png", bytes: bytes[id]!)
                }
                copies.append(copy)
                mine.append(bytes)
            }
            // The three flushes at once, each its own process.
            let flushes = try await withThrowingTaskGroup(of: CLI.Result.self) { group in
                for copy in copies { group.addTask { try await CLI.run(["flush", "--store", copy.path]) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            // A flush that archived refusals exits 1 (the CLI's contract), saying so.
            for f in flushes {
                #expect(
                    f.status == 0 || f.status == 1 && f.stderr.contains("(a conflict: both versions kept)"),
                    "\(f.stderr)")
            }
            var winners: [Int: Int] = [:]
            for id in 1...4 {
                let there = try await http.get("Photos(\(id))/$value").body
                let holders = (0..<3).filter { mine[$0][id] == there }
                #expect(holders.count == 1, "Photos(\(id)) on the service is no copy's bytes")
                winners[id] = holders.first
            }
            // Every replacement is on the service or in its copy's ErrorArchive (a 412), one each.
            let archived = try copies.map { try $0.entities("ErrorArchive").count }
            #expect(archived.reduce(0, +) == 8, "\(archived)")
            for (n, copy) in copies.enumerated() {
                #expect(try copy.pendingRequestCount() == archived[n])
                #expect(try copy.check().isConsistent)
            }
            // Copy 2 keeps its own: each conflict re-sent against the service's version.
            for row in try copies[1].entities("ErrorArchive") {
                guard case .int(let id)? = row["RequestID"] else { continue }
                _ = try copies[1].retryError(requestID: id)
            }
            let resent = try await copies[1].flush()
            #expect(resent.succeeded == archived[1] && resent.archived == 0, "\(resent)")
            // Copy 3 gives up its conflicts.
            _ = try copies[2].resolveAllErrors()
            _ = try copies[0].resolveAllErrors()
            // Copy 2's bytes are the service's now: it won, or it re-sent after the winner.
            for id in 1...4 {
                let there = try await http.get("Photos(\(id))/$value").body
                #expect(there == mine[1][id], "Photos(\(id)), first won by copy \((winners[id] ?? -1) + 1)")
                for copy in copies {
                    _ = try await copy.refresh()
                    #expect(try copy.openStream("Photos(\(id))").bytes() == there, "Photos(\(id)) in \(copy.path)")
                }
            }
            for copy in copies {
                #expect(try copy.pendingRequestCount() == 0)
                _ = try await MediaFixture.settle(copy)
                let report = try copy.check()
                #expect(report.isConsistent && report.orphanStreamFiles == 0, "\(report)")
            }
        }
    }
}
