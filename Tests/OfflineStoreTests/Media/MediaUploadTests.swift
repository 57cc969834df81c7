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
}
