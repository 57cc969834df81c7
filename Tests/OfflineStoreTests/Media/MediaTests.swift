import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import Remote
import Sync
import Testing
@testable import OfflineStore
@testable import Storage
import TestSupport

/// Media (issue 39): media entities (`HasStream`) and `Edm.Stream` properties kept in the schema,
/// their bytes in files of the store checked by `check`, served by `serve`, and downloaded by a
/// refresh whose defining request retrieves streams — new and changed ones only.
enum MediaFixture {
    static let metadata = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:DataServices>
            <Schema Namespace="T" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <EntityType Name="Photo" HasStream="true">
                <Key><PropertyRef Name="Id"/></Key>
                <Property Name="Id" Type="Edm.Int32" Nullable="false"/>
                <Property Name="Name" Type="Edm.String"/>
              </EntityType>
              <EntityType Name="Album">
                <Key><PropertyRef Name="Id"/></Key>
                <Property Name="Id" Type="Edm.Int32" Nullable="false"/>
                <Property Name="Title" Type="Edm.String"/>
                <Property Name="Cover" Type="Edm.Stream"/>
              </EntityType>
              <EntityContainer Name="C">
                <EntitySet Name="Photos" EntityType="T.Photo"/>
                <EntitySet Name="Albums" EntityType="T.Album"/>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    static let v2Metadata = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx"
          xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">
          <edmx:DataServices m:DataServiceVersion="2.0">
            <Schema Namespace="T" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
              <EntityType Name="Attachment" m:HasStream="true">
                <Key><PropertyRef Name="Id"/></Key>
                <Property Name="Id" Type="Edm.String" Nullable="false"/>
                <Property Name="FileName" Type="Edm.String"/>
              </EntityType>
              <EntityContainer Name="C" m:IsDefaultEntityContainer="true">
                <EntitySet Name="Attachments" EntityType="T.Attachment"/>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    /// An authority store with three photos and an album; photo 1 and the album's cover have bytes.
    static func authority(photo: [UInt8], cover: [UInt8]) async throws -> OfflineStore {
        let store = try OfflineStore.create(at: tempDir() + "/auth", metadata: Array(metadata.utf8))
        try store.load(
            set: "Photos", entities: (1...3).map { ["Id": .int($0), "Name": .string("photo \($0)")] })
        try store.load(set: "Albums", entities: [["Id": .int(1), "Title": .string("A")]])
        try await store.putStream("Photos(1)", contentType: "image/png", bytes: photo)
        try await store.putStream("Albums(1)/Cover", contentType: "image/jpeg", bytes: cover)
        return store
    }

    /// An offline copy of `root` whose defining requests retrieve streams.
    static func copy(of root: String, retrieveStreams: Bool = true) throws -> OfflineStore {
        var config = StoreConfiguration()
        config.serviceRoot = root
        config.definingRequests = [
            .init(name: "photos", url: "Photos", retrieveStreams: retrieveStreams),
            .init(name: "albums", url: "Albums", retrieveStreams: retrieveStreams),
        ]
        return try OfflineStore.create(
            at: tempDir() + "/copy", metadata: Array(metadata.utf8), configuration: config)
    }

    /// Sweeps until at most `leaving` files no record names are left (those this test holds), at
    /// most a second: a child another test spawns shares this process's descriptors for an
    /// instant (until it execs), and with them a just-released file's lock — such a file waits
    /// for the next sweep. Returns how many files were removed.
    static func settle(_ store: OfflineStore, leaving: Int = 0) async throws -> Int {
        var removed = 0
        for _ in 0..<20 {
            removed += try store.entities.sweepStreams()
            if try orphans(store) <= leaving { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        return removed
    }

    /// Files of `streams/` that no record and no queued request names (what `check` counts as
    /// `orphanStreamFiles`, without reading the store whole).
    static func orphans(_ store: OfflineStore) throws -> Int {
        let named = try store.entities.read { t in try store.entities.referencedStreamFiles(t) }
        let files = (try? FileManager.default.contentsOfDirectory(atPath: store.path + "/streams")) ?? []
        return files.filter { !$0.hasPrefix(".") && !named.contains($0) }.count
    }

    static func random(_ count: Int, seed: UInt64) -> [UInt8] {
        var g = SeededRandom(seed: seed)
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &g) }
    }

    static func sha256(_ bytes: [UInt8]) -> String {
        SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
    }

    /// One request with a binary body (the suites' `HTTP` sends text).
    static func send(
        _ client: HTTPClient, _ method: HTTPMethod, _ url: String, body: [UInt8]? = nil,
        headers: [(String, String)] = []
    ) async throws -> HTTP.Reply {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (k, v) in headers { request.headers.add(name: k, value: v) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await client.execute(request, timeout: .seconds(60))
        let bytes = try await response.body.collect(upTo: 1 << 28)
        return HTTP.Reply(
            status: Int(response.status.code), headers: response.headers, body: Array(bytes.readableBytesView))
    }
}

@Suite(.checksStores) struct MediaStoreTests {
    @Test func theSchemaKeepsMediaEntitiesAndStreamProperties() throws {
        let v4 = try CSDL.parse(MediaFixture.metadata)
        #expect(v4.entityType(ofSet: "Photos")?.hasStream == true)
        #expect(v4.entityType(ofSet: "Photos")?.streamProperties == [])
        #expect(v4.entityType(ofSet: "Albums")?.hasStream == false)
        #expect(v4.entityType(ofSet: "Albums")?.streamProperties == ["Cover"])
        // A stream property is not a structural property: no value in the row.
        #expect(v4.entityType(ofSet: "Albums")?.property("Cover") == nil)
        let v2 = try CSDL.parse(MediaFixture.v2Metadata)
        #expect(v2.entityType(ofSet: "Attachments")?.hasStream == true)
    }

    @Test func aStreamIsStoredReadAndChecked() async throws {
        let photo = MediaFixture.random(300_000, seed: 1)
        let store = try await MediaFixture.authority(photo: photo, cover: Array("cover".utf8))
        let info = try #require(try store.streamInfo("Photos(1)"))
        #expect(info.downloaded && info.size == photo.count && info.contentType == "image/png")
        #expect(info.sha256 == MediaFixture.sha256(photo))
        #expect(try store.openStream("Photos(1)/$value").bytes() == photo)
        #expect(try store.openStream("Albums(1)/Cover").bytes() == Array("cover".utf8))
        // Photo 2 has none; an address of a stream the type does not declare is an error.
        #expect(try store.streamInfo("Photos(2)") == nil)
        #expect(throws: StreamNotDownloaded.self) { try store.openStream("Photos(2)") }
        #expect(throws: EntityError.self) { try store.openStream("Albums(1)") }
        #expect(throws: EntityError.self) { try store.openStream("Albums(1)/Title") }
        #expect(throws: EntityError.self) { try store.streamInfo("Photos(9)") }
        let report = try store.check()
        #expect(report.isConsistent, "\(report)")
        #expect(report.streams == 2 && report.streamBytes == photo.count + 5)

        // A replacement leaves one file per stream once swept; a delete takes the stream with it.
        try await store.putStream("Photos(1)", contentType: "image/png", bytes: Array("small".utf8))
        #expect(try store.openStream("Photos(1)").bytes() == Array("small".utf8))
        _ = try await MediaFixture.settle(store)
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.path + "/streams").count == 2)
        try await store.entities.write { t in _ = try store.entities.set("Photos").delete(t, key: [.int(1)]) }
        #expect(try await MediaFixture.settle(store) == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.path + "/streams").count == 1)
        let after = try store.check()
        #expect(after.isConsistent && after.streams == 1, "\(after)")
    }

    @Test func checkFindsEveryKindOfDamage() async throws {
        let store = try await MediaFixture.authority(photo: Array("photo-bytes".utf8), cover: Array("cover".utf8))
        let streams = try #require(store.entities.streams)
        let photo = try #require(try store.streamInfo("Photos(1)"))
        let dir = store.path + "/streams/"
        let file = try #require(
            try store.entities.read { t in
                try streams.record(
                    t,
                    entityKey: EntityStore.entityKey(
                        set: "Photos", keyBytes: try store.entities.set("Photos").encodeKey([.int(1)])), name: "")
            }?.file)
        // Same size, other bytes: the SHA-256 says so.
        try Data("PHOTO-bytes".utf8).write(to: URL(fileURLWithPath: dir + file))
        #expect(try store.check().problems.contains { $0.contains("does not have the recorded SHA-256") })
        // Shorter.
        try Data("photo".utf8).write(to: URL(fileURLWithPath: dir + file))
        #expect(try store.check().problems.contains { $0.contains("has 5 bytes, not 11") })
        // Gone.
        try FileManager.default.removeItem(atPath: dir + file)
        #expect(try store.check().problems.contains { $0.contains("cannot be opened") })
        // A record without its entity, and one of a stream the type does not declare.
        let orphan = EntityStore.entityKey(
            set: "Photos", keyBytes: try store.entities.set("Photos").encodeKey([.int(99)]))
        let album = EntityStore.entityKey(
            set: "Albums", keyBytes: try store.entities.set("Albums").encodeKey([.int(1)]))
        try await store.entities.write { t in
            try streams.put(t, entityKey: orphan, name: "", StreamRecord(state: .notDownloaded))
            try streams.put(t, entityKey: album, name: "Back", StreamRecord(state: .notDownloaded))
        }
        let problems = try store.check().problems
        #expect(problems.contains { $0.contains("Photos(99)/$value has a stream but no entity") }, "\(problems)")
        #expect(problems.contains { $0.contains("Albums(1)/Back is not a stream the type") }, "\(problems)")
        _ = photo
        // Put right again for the suite's check after the test.
        try await store.entities.write { t in
            try streams.remove(t, entityKey: orphan, name: "")
            try streams.remove(t, entityKey: album, name: "Back")
        }
        try await store.putStream("Photos(1)", contentType: "image/png", bytes: Array("photo-bytes".utf8))
        #expect(try store.check().isConsistent)
    }

    /// A file written but not committed: kept while its writer holds it (its transaction may
    /// still commit), removed once the writer is gone without committing.
    @Test func theSweepRemovesOnlyFilesNoOneWillCommit() async throws {
        let store = try await MediaFixture.authority(photo: [1, 2, 3], cover: [4])
        let streams = try #require(store.entities.streams)
        let pending = try streams.incoming(for: "a test")
        try pending.append([9, 9, 9])
        _ = try pending.finish(StreamRecord(state: .notDownloaded))
        let lost = try streams.incoming(for: "another test")
        try lost.append([8])
        _ = try lost.finish(StreamRecord(state: .notDownloaded))
        lost.committed()  // its lock goes, no record names it: as after a crash before the commit
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.path + "/streams").count == 4)
        #expect(try await MediaFixture.settle(store, leaving: 1) == 1)
        #expect(try store.check().orphanStreamFiles == 1)  // `pending`, still held
        pending.abandon()
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.path + "/streams").count == 2)
        #expect(try store.check().isConsistent)
    }

    /// A `$metadata` migration that drops a stream property and makes a media type plain drops
    /// their streams (records at once, files at the next sweep); `check` stays clean.
    @Test func aMigrationDropsTheStreamsTheNewMetadataNoLongerDeclares() async throws {
        // Closed before the migration (which refuses a store open in another process, and must
        // not have it open in this one).
        let path = try await MediaFixture.authority(photo: [1, 2, 3], cover: [4, 5]).path
        let after = MediaFixture.metadata
            .replacingOccurrences(
                of: #"<EntityType Name="Photo" HasStream="true">"#, with: #"<EntityType Name="Photo">"#
            )
            .replacingOccurrences(of: #"<Property Name="Cover" Type="Edm.Stream"/>"#, with: "")
        let report = try OfflineStore.migrate(at: path, metadata: Array(after.utf8))
        #expect(report.warnings.contains { $0.contains("2 stream(s)") }, "\(report.warnings)")
        let reopened = try OfflineStore.open(at: path)
        let check = try reopened.check()
        #expect(check.isConsistent && check.streams == 0 && check.orphanStreamFiles == 0, "\(check)")
        #expect(throws: EntityError.self) { try reopened.openStream("Photos(1)") }
    }

    /// `retrieveStreams` in the JSON configuration (written back only when true, an unknown
    /// member refused) and SAP's `.ini` key `automatically_retrieves_streams`.
    @Test func theConfigurationSaysWhichRequestsRetrieveStreams() throws {
        let json =
            #"{"definingRequests":[{"name":"p","url":"Photos","retrieveStreams":true},{"name":"a","url":"Albums"}]}"#
        let config = try StoreConfiguration(json: Array(json.utf8))
        #expect(config.definingRequests.map(\.retrieveStreams) == [true, false])
        let again = try StoreConfiguration(json: Array(config.json.text.utf8))
        #expect(again.definingRequests == config.definingRequests)
        #expect(config.json.text.components(separatedBy: "retrieveStreams").count == 2)
        #expect(throws: EntityError.self) {
            try StoreConfiguration(json: Array(#"{"definingRequests":[{"name":"p","url":"Photos","streams":1}]}"#.utf8))
        }
        let ini =
            "[endpoint]\nname=http://127.0.0.1:1/\n[defining_request]\nname=p\ndefining_query=Photos\nautomatically_retrieves_streams=Y\n"
        let read = try StoreConfiguration.readINI(Array(ini.utf8), metadata: Array(MediaFixture.metadata.utf8))
        #expect(read.configuration.definingRequests.first?.retrieveStreams == true)
        #expect(read.warnings.isEmpty, "\(read.warnings)")
    }

    @Test func anOlderStoreIsUpgradedAndAStoreWithoutMediaHasNoStreamsDirectory() throws {
        let store = try OfflineStore.create(at: tempDir() + "/plain", metadata: Array(MediaFixture.metadata.utf8))
        try store.load(set: "Photos", entities: [["Id": .int(1)]])
        #expect(!FileManager.default.fileExists(atPath: store.path + "/streams"))
        #expect(try store.check().isConsistent)
    }
}

@Suite(.checksStores, .runsOffThePool) struct MediaServeTests {
    /// `serve` answers a stream with its bytes, type and media ETag; a copy whose defining
    /// requests retrieve streams downloads each once, and after a change on the service only
    /// the changed one.
    @Test func aRefreshDownloadsNewAndChangedStreamsOnly() async throws {
        let photo = MediaFixture.random(200_000, seed: 2)
        let cover = MediaFixture.random(1_000, seed: 3)
        let authority = try await MediaFixture.authority(photo: photo, cover: cover)
        let path = authority.path
        try await withServer(path) { http, server in
            let got = try await http.get("Photos(1)/$value")
            #expect(got.status == 200 && got.body == photo)
            #expect(got.header("Content-Type") == "image/png")
            let tag = try #require(got.header("ETag"))
            #expect(try await http.get("Photos(1)/$value", headers: [("If-None-Match", tag)]).status == 304)
            let coverReply = try await http.get("Albums(1)/Cover")
            #expect(coverReply.body == cover && coverReply.header("Content-Type") == "image/jpeg")
            #expect(try await http.get("Photos(2)/$value").status == 204)
            #expect(try await http.get("Photos(9)/$value").status == 404)
            // The entity says where its stream is, its type and its media ETag.
            let entity = try await http.get("Photos(1)").object
            #expect(entity["@odata.mediaReadLink"] as? String == "Photos(1)/$value")
            #expect(entity["@odata.mediaEtag"] as? String == tag)
            #expect(try await http.get("Albums(1)").object["Cover@odata.mediaContentType"] as? String == "image/jpeg")

            let copy = try MediaFixture.copy(of: server.url)
            let first = try await copy.refresh()
            #expect(first.streamsDownloaded == 4 && first.streamBytes == photo.count + cover.count, "\(first)")
            #expect(try copy.openStream("Photos(1)").bytes() == photo)
            #expect(try copy.streamInfo("Photos(1)")?.sha256 == MediaFixture.sha256(photo))
            #expect(try copy.openStream("Albums(1)/Cover").bytes() == cover)
            #expect(try copy.openStream("Photos(2)").size == 0)  // answered 204: no bytes yet
            let second = try await copy.refresh()
            #expect(second.streamsDownloaded == 0, "\(second)")

            // A new stream for photo 3 over HTTP (If-Match of another version: 412, nothing changes).
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { _ = client.shutdown() }
            let three = MediaFixture.random(50_000, seed: 4)
            let refused = try await MediaFixture.send(
                client, .PUT, server.url + "Photos(1)/$value", body: three, headers: [("If-Match", "\"other\"")])
            #expect(refused.status == 412)
            let put = try await MediaFixture.send(
                client, .PUT, server.url + "Photos(3)/$value", body: three, headers: [("Content-Type", "image/gif")])
            #expect(put.status == 204 && put.header("ETag") != nil)
            let third = try await copy.refresh()
            #expect(third.streamsDownloaded == 1 && third.streamBytes == three.count, "\(third)")
            #expect(try copy.openStream("Photos(3)").bytes() == three)
            #expect(try copy.streamInfo("Photos(3)")?.contentType == "image/gif")
            #expect(try copy.openStream("Photos(1)").bytes() == photo)
            #expect(try copy.check().isConsistent)
            // One file per stream: the replaced ones were swept.
            _ = try await MediaFixture.settle(copy)
            #expect(try FileManager.default.contentsOfDirectory(atPath: copy.path + "/streams").count == 4)
        }
    }

    /// Without `retrieveStreams` a copy knows of each stream, not its bytes; it says so, and
    /// fetches one on demand.
    @Test func aStreamNotRetrievedIsFetchedOnDemand() async throws {
        let photo = MediaFixture.random(10_000, seed: 5)
        let authority = try await MediaFixture.authority(photo: photo, cover: [1])
        try await withServer(authority.path) { http, server in
            let copy = try MediaFixture.copy(of: server.url, retrieveStreams: false)
            let report = try await copy.refresh()
            #expect(report.streamsDownloaded == 0)
            let known = try #require(try copy.streamInfo("Photos(1)"))
            #expect(!known.downloaded && known.contentType == "image/png" && known.mediaETag != nil)
            #expect(throws: StreamNotDownloaded.self) { try copy.openStream("Photos(1)") }
            let fetched = try await copy.fetchStream("Photos(1)")
            #expect(fetched.downloaded && fetched.sha256 == MediaFixture.sha256(photo))
            #expect(try copy.openStream("Photos(1)").bytes() == photo)
            // The CLI says the same.
            let info = try await CLI.run(["stream", "--store", copy.path, "Photos(2)", "--info"])
            #expect(info.status == 0 && info.stdout.contains("\"downloaded\":false"), "\(info.stderr)")
            let refused = try await CLI.run(["stream", "--store", copy.path, "Photos(2)"])
            #expect(refused.status != 0 && refused.stderr.contains("not downloaded"), "\(refused.stderr)")
            // A served copy answers 404 for a stream it has not downloaded, saying so.
            _ = http
        }
    }
}

/// SAP's V2 client reads a media entity's stream from `serve` in its V2 dialect: the bytes and
/// Content-Type through `EntityProxy.get_value()` (`Set('key')/$value`, pyodata percent-encodes
/// the key), and a V2 copy refreshing from it downloads the stream (`__metadata` `media_src`,
/// `content_type`, `media_etag`).
@Suite(.external, .checksStores, .runsOffThePool) struct MediaV2Tests {
    @Test func pyodataReadsAStreamAndAV2CopyDownloadsIt() async throws {
        let bytes = MediaFixture.random(120_000, seed: 31)
        let authority = try OfflineStore.create(
            at: tempDir() + "/v2auth", metadata: Array(MediaFixture.v2Metadata.utf8))
        try authority.load(set: "Attachments", entities: [["Id": .string("a"), "FileName": .string("a.pdf")]])
        try await authority.putStream("Attachments('a')", contentType: "application/pdf", bytes: bytes)
        try await withServer(authority.path) { http, server in
            let entity = try await http.get("Attachments('a')?$format=json").object
            let metadata = (entity["d"] as? [String: Any])?["__metadata"] as? [String: Any]
            #expect(metadata?["content_type"] as? String == "application/pdf")
            #expect((metadata?["media_src"] as? String)?.hasSuffix("Attachments('a')/$value") == true)
            let run = try await ChildProcess.run(
                executable: "/bin/sh",
                [
                    repositoryRoot + "/scripts/pyodata-check.sh", "--media", "--service", server.url, "--set",
                    "Attachments", "--key", "a", "--sha256", MediaFixture.sha256(bytes), "--content-type",
                    "application/pdf",
                ], timeout: 300)
            #expect(
                run.status == 0 && run.stdout.contains("\"failed\": 0"), "\(run.stdout)\n\(run.stderr.suffix(2_000))")

            var config = StoreConfiguration()
            config.serviceRoot = server.url
            config.definingRequests = [.init(name: "att", url: "Attachments", retrieveStreams: true)]
            let copy = try OfflineStore.create(
                at: tempDir() + "/v2copy", metadata: Array(MediaFixture.v2Metadata.utf8), configuration: config)
            let report = try await copy.refresh()
            #expect(report.streamsDownloaded == 1, "\(report)")
            #expect(try copy.openStream("Attachments('a')").bytes() == bytes)
            #expect(try copy.streamInfo("Attachments('a')")?.contentType == "application/pdf")
        }
    }
}

/// A service is input too: a media read link to another origin is not followed (credentials go
/// only to the service root) and does not stop the refresh — that stream stays not downloaded,
/// counted with the reason, and the others are downloaded.
@Suite(.checksStores, .runsOffThePool) struct MediaHostileLinkTests {
    /// Rewrites Photos(2)'s read link in every page to point at another host.
    struct OtherOriginLink: WrappingBackend {
        let inner: HTTPTransport
        func send(_ request: WireRequest) async throws -> WireResponse {
            var response = try await inner.send(request)
            guard request.url.hasPrefix("Photos") || request.url.contains("/Photos") else { return response }
            let text = String(decoding: response.body, as: UTF8.self)
            response.body = Array(
                text.replacingOccurrences(
                    of: #""@odata.mediaReadLink":"Photos(2)/$value""#,
                    with: #""@odata.mediaReadLink":"http://127.0.0.2:9/steal""#
                ).utf8)
            return response
        }
    }

    @Test func aReadLinkToAnotherOriginIsNotFollowed() async throws {
        let authority = try await MediaFixture.authority(photo: [1, 2, 3], cover: [4])
        try await authority.putStream("Photos(2)", contentType: "image/png", bytes: [5, 6])
        try await withServer(authority.path) { _, server in
            let copy = try MediaFixture.copy(of: server.url)
            let transport = OtherOriginLink(inner: HTTPTransport(serviceRoot: server.url))
            let report = try await copy.refresh(backend: transport)
            try await transport.inner.shutdown()
            #expect(report.streamsFailed == 1 && report.streamsDownloaded == 3, "\(report)")
            #expect(report.description.contains("another origin"), "\(report)")
            #expect(try copy.streamInfo("Photos(2)")?.downloaded == false)
            #expect(try copy.openStream("Photos(1)").bytes() == [1, 2, 3])
            #expect(try copy.check().isConsistent)
        }
    }
}
