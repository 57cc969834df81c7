import Foundation
import Testing
@testable import OfflineStore
import TestSupport

/// `offline-store refresh` of a copy whose defining requests retrieve streams, SIGKILLed at random
/// instants while it downloads (`MEDIA_KILLS`, default 12, within about `MEDIA_KILL_SECONDS`,
/// default 60), the service changing streams between rounds. After every kill `check` passes —
/// every stored stream has its whole file, with its size and SHA-256, and no stream is without
/// its entity — and each stored stream is one the service had; a last refresh to completion
/// leaves every stream equal to the service's and, once swept, no file no record names.
@Suite(.soak, .checksStores, .serialized) struct MediaKillTests {
    @Test func aMediaRefreshKilledAtRandomInstantsConverges() async throws {
        let photos = RefreshKillTests.env("MEDIA_KILL_PHOTOS", 40)
        let kills = RefreshKillTests.env("MEDIA_KILLS", 12)
        let budget = Double(RefreshKillTests.env("MEDIA_KILL_SECONDS", 60))
        let authority = try OfflineStore.create(at: tempDir() + "/auth", metadata: Array(MediaFixture.metadata.utf8))
        try authority.load(
            set: "Photos", entities: (1...photos).map { ["Id": .int(Int64($0)), "Name": .string("p\($0)")] })
        try authority.load(set: "Albums", entities: [["Id": .int(1), "Title": .string("A")]])
        var random = SeededRandom(seed: testSeed("MediaKillTests"))
        // Every version of every stream the service ever had, by SHA-256.
        var served: [Int: Set<String>] = [:]
        func change(_ id: Int, round: Int) async throws {
            let bytes = MediaFixture.random(
                Int.random(in: 100_000...400_000, using: &random), seed: UInt64(id * 1000 + round))
            let info = try await authority.putStream("Photos(\(id))", contentType: "image/png", bytes: bytes)
            served[id, default: []].insert(try #require(info.sha256))
        }
        for id in 1...photos { try await change(id, round: 0) }
        let logDir = tempDir() + "/logs"
        try FileManager.default.createDirectory(atPath: logDir, withIntermediateDirectories: true)
        try await withServer(authority.path) { _, server in
            let copy = try MediaFixture.copy(of: server.url)
            let path = copy.path
            let args = ["refresh", "--store", path]
            var killed = 0, completed = 0, round = 0
            let began = Date()
            while killed < kills && (Date().timeIntervalSince(began) < budget || killed < 3) {
                round += 1
                for _ in 0..<10 { try await change(Int.random(in: 1...photos, using: &random), round: round) }
                let pid = try RefreshKillTests.spawn(args, logDir: logDir)
                try await Task.sleep(for: .milliseconds(Int.random(in: 5...200, using: &random)))
                if RefreshKillTests.reap(pid) == nil {
                    kill(pid, SIGKILL)
                    _ = RefreshKillTests.reap(pid, wait: true)
                    killed += 1
                } else {
                    completed += 1
                }
                let store = try OfflineStore.open(at: path, readOnly: true)
                let report = try store.check()
                #expect(report.isConsistent, "after kill \(killed): \(report)")
                for id in 1...photos {
                    // A refresh killed before its first page committed left no photos yet.
                    guard try store.get(set: "Photos", key: [.int(Int64(id))]) != nil,
                        let info = try store.streamInfo("Photos(\(id))"), info.downloaded
                    else { continue }
                    #expect(
                        served[id]?.contains(info.sha256 ?? "") == true,
                        "Photos(\(id)) holds bytes the service never had")
                }
            }
            let done = try await CLI.run(args)
            #expect(done.status == 0, "\(done.stderr)")
            let store = try OfflineStore.open(at: path)
            for id in 1...photos {
                let mine = try store.streamInfo("Photos(\(id))")
                let theirs = try authority.streamInfo("Photos(\(id))")
                #expect(mine?.downloaded == true && mine?.sha256 == theirs?.sha256, "Photos(\(id))")
            }
            _ = try await MediaFixture.settle(store)
            let files = try FileManager.default.contentsOfDirectory(atPath: path + "/streams").count
            let report = try store.check()
            #expect(
                report.isConsistent && report.orphanStreamFiles == 0 && files == report.streams,
                "\(report), \(files) files")
            print(
                "MediaKillTests: \(photos) photos, \(round) rounds, \(killed) killed, \(completed) completed before the kill"
            )
        }
    }
}
