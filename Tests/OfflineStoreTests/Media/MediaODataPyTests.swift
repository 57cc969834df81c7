import NIOHTTP1
import AsyncHTTPClient
import Foundation
import Testing
@testable import OfflineStore
import TestSupport

/// Media against a service that is not ours: odatapy 5.3.0 (`scripts/odatapy-server.sh`, its
/// media seeded from `@serve.media` in the data and kept in its state). A copy whose defining
/// request retrieves streams downloads every photo (SHA-256 equal), a second refresh nothing, and
/// after a photo is replaced on the service only that one.
///
/// Where odatapy and OData 4.01 differ (Part 1 §11.4.7.2: a media entity's stream is replaced
/// with `If-Match` of its media ETag): odatapy checks `If-Match` against the entity's ETag and
/// answers 412 to the media ETag its own GET gave, so the replacement below sends the entity's.
/// odatapy does not keep `Edm.Stream` properties as bytes; its model here has media entities only.
@Suite(.external, .checksStores, .runsOffThePool) struct MediaODataPyTests {
    static let metadata = MediaFixture.metadata.replacingOccurrences(
        of: #"<Property Name="Cover" Type="Edm.Stream"/>"#, with: "")

    /// odatapy with `photos` (rows of JSON) and an album.
    static func peer(photos: [String]) throws -> ODataPy {
        try ODataPy(
            metadata: metadata,
            data: [
                ("Photos", #"{"value":[\#(photos.joined(separator: ","))]}"#),
                ("Albums", #"{"value":[{"Id":1,"Title":"A"}]}"#),
            ])
    }

    /// A copy's configuration: `root`'s photos, streams retrieved.
    static func configuration(_ root: String) -> StoreConfiguration {
        var config = StoreConfiguration()
        config.serviceRoot = root
        config.definingRequests = [.init(name: "photos", url: "Photos", retrieveStreams: true)]
        return config
    }

    @Test func aCopyDownloadsOdatapysMediaThenOnlyWhatChanged() async throws {
        let photos = (1...3).map { MediaFixture.random(20_000 * $0, seed: UInt64(40 + $0)) }
        let rows = photos.enumerated().map { i, bytes in
            #"{"Id":\#(i + 1),"Name":"p\#(i + 1)","@serve.media":"\#(Data(bytes).base64EncodedString())","@odata.mediaContentType":"image/png"}"#
        }
        let server = try await Self.peer(photos: rows).start()
        defer { Task { await server.stop() } }
        let config = Self.configuration(server.url)
        let copy = try OfflineStore.create(
            at: tempDir() + "/copy", metadata: Array(Self.metadata.utf8), configuration: config)

        let first = try await copy.refresh()
        #expect(first.streamsDownloaded == 3 && first.streamsFailed == 0, "\(first)")
        for (i, bytes) in photos.enumerated() {
            let info = try #require(try copy.streamInfo("Photos(\(i + 1))"))
            #expect(info.sha256 == MediaFixture.sha256(bytes) && info.contentType == "image/png", "Photos(\(i + 1))")
            #expect(info.mediaETag != nil)
        }
        let second = try await copy.refresh()
        #expect(second.streamsDownloaded == 0, "\(second)")

        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let entity = try await MediaFixture.send(client, .GET, server.url + "Photos(2)")
        let etag = try #require(entity.object["@odata.etag"] as? String)
        let replacement = MediaFixture.random(33_333, seed: 49)
        let put = try await MediaFixture.send(
            client, .PUT, server.url + "Photos(2)/$value", body: replacement,
            headers: [("Content-Type", "image/jpeg"), ("If-Match", etag)])
        try await client.shutdown()
        #expect(put.status == 204, "\(put.text)")

        let third = try await copy.refresh()
        #expect(third.streamsDownloaded == 1 && third.streamBytes == replacement.count, "\(third)")
        #expect(try copy.openStream("Photos(2)").bytes() == replacement)
        #expect(try copy.streamInfo("Photos(2)")?.contentType == "image/jpeg")
        #expect(try copy.openStream("Photos(1)").bytes() == photos[0])
        #expect(try copy.check().isConsistent)
    }

    /// A photo replaced offline is flushed to odatapy and read back from it. With the default
    /// `streamIfMatch` (the media ETag, as OData 4.01 says) odatapy refuses it with 412: a
    /// conflict in the ErrorArchive, nothing overwritten. With `streamIfMatch: entity` (the
    /// entity's ETag, what odatapy checks) the same change goes through, and a delete of another
    /// media entity goes after it.
    @Test func aPhotoReplacedOfflineReachesOdatapy() async throws {
        let rows = (1...2).map { i in
            #"{"Id":\#(i),"Name":"p\#(i)","@serve.media":"\#(Data(MediaFixture.random(5_000, seed: UInt64(60 + i))).base64EncodedString())","@odata.mediaContentType":"image/png"}"#
        }
        let server = try await Self.peer(photos: rows).start()
        defer { Task { await server.stop() } }
        let config = Self.configuration(server.url)
        let copy = try OfflineStore.create(
            at: tempDir() + "/copy", metadata: Array(Self.metadata.utf8), configuration: config)
        _ = try await copy.refresh()
        let mine = MediaFixture.random(40_000, seed: 69)
        _ = try await copy.replaceStream("Photos(1)", contentType: "image/jpeg", bytes: mine)
        let refused = try await copy.flush()
        #expect(refused.archived == 1 && refused.refused.first?.contains("412") == true, "\(refused)")
        _ = try copy.resolveAllErrors()

        var entityTags = config
        entityTags.streamIfMatch = .entity
        let other = try OfflineStore.create(
            at: tempDir() + "/other", metadata: Array(Self.metadata.utf8), configuration: entityTags)
        _ = try await other.refresh()
        _ = try await other.replaceStream("Photos(1)", contentType: "image/jpeg", bytes: mine)
        _ = try await other.delete(set: "Photos", key: [.int(2)])
        let sent = try await other.flush()
        #expect(sent.succeeded == 2 && sent.archived == 0, "\(sent)")
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let back = try await MediaFixture.send(client, .GET, server.url + "Photos(1)/$value")
        let gone = try await MediaFixture.send(client, .GET, server.url + "Photos(2)")
        try await client.shutdown()
        #expect(back.body == mine && back.header("Content-Type") == "image/jpeg")
        #expect(gone.status == 404)
        #expect(try other.streamInfo("Photos(1)")?.pendingUpload == false)
        #expect(try other.check().isConsistent)
        // The first copy's next refresh brings what the other sent.
        _ = try await copy.refresh()
        #expect(try copy.openStream("Photos(1)").bytes() == mine)
    }

    /// A media entity created offline reaches odatapy: the POST of its bytes (odatapy assigns
    /// the key), then a PATCH of its name; the copy takes the key odatapy gave, and the bytes read
    /// back from odatapy are the ones sent.
    @Test func aMediaEntityCreatedOfflineReachesOdatapy() async throws {
        let metadata = MediaUploadTests.computedKeys.replacingOccurrences(
            of: #"<Property Name="Cover" Type="Edm.Stream"/>"#, with: "")
        let peer = try ODataPy(
            metadata: metadata,
            data: [("Photos", #"{"value":[]}"#), ("Albums", #"{"value":[{"Id":1,"Title":"A"}]}"#)])
        let server = try await peer.start()
        defer { Task { await server.stop() } }
        var config = Self.configuration(server.url)
        config.streamIfMatch = .entity
        let copy = try OfflineStore.create(
            at: tempDir() + "/copy", metadata: Array(metadata.utf8), configuration: config)
        _ = try await copy.refresh()
        let bytes = MediaFixture.random(25_000, seed: 71)
        _ = try await copy.createMedia(
            set: "Photos", entity: ["Name": .string("dune")], contentType: "image/png", slug: "dune.png", bytes: bytes)
        let report = try await copy.flush()
        #expect(report.succeeded == 2 && report.archived == 0, "\(report)")
        let photos = try copy.entities("Photos")
        #expect(photos.count == 1 && photos.first?["Name"] == .string("dune"))
        guard case .int(let id)? = photos.first?["Id"] else { Issue.record("no photo: \(photos)"); return }
        #expect(id >= 0)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let back = try await MediaFixture.send(client, .GET, server.url + "Photos(\(id))/$value")
        let entity = try await MediaFixture.send(client, .GET, server.url + "Photos(\(id))")
        try await client.shutdown()
        #expect(back.body == bytes && back.header("Content-Type") == "image/png")
        #expect(entity.object["Name"] as? String == "dune")
        #expect(try copy.check().isConsistent)
    }
}
