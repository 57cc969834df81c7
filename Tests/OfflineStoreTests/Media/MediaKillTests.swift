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
    /// Runs the tool with `args` and SIGKILLs it after `milliseconds` unless it ended before:
    /// whether it was killed.
    static func runKilled(_ args: [String], logDir: String, after milliseconds: Int) async throws -> Bool {
        let pid = try RefreshKillTests.spawn(args, logDir: logDir)
        try await Task.sleep(for: .milliseconds(milliseconds))
        guard RefreshKillTests.reap(pid) == nil else { return false }
        kill(pid, SIGKILL)
        _ = RefreshKillTests.reap(pid, wait: true)
        return true
    }

    /// An authority with photos 1…`photos` (no bytes yet) and an album.
    static func authority(photos: Int) throws -> OfflineStore {
        let authority = try OfflineStore.create(at: tempDir() + "/auth", metadata: Array(MediaFixture.metadata.utf8))
        try authority.load(
            set: "Photos", entities: (1...photos).map { ["Id": .int(Int64($0)), "Name": .string("p\($0)")] })
        try authority.load(set: "Albums", entities: [["Id": .int(1), "Title": .string("A")]])
        return authority
    }

    @Test func aMediaRefreshKilledAtRandomInstantsConverges() async throws {
        let photos = RefreshKillTests.env("MEDIA_KILL_PHOTOS", 40)
        let kills = RefreshKillTests.env("MEDIA_KILLS", 12)
        let budget = Double(RefreshKillTests.env("MEDIA_KILL_SECONDS", 60))
        let authority = try MediaKillTests.authority(photos: photos)
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
                let wait = Int.random(in: 5...200, using: &random)
                if try await MediaKillTests.runKilled(args, logDir: logDir, after: wait) {
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

/// `offline-store flush` of a copy whose photos were replaced offline (`replaceStream`, in this
/// process between rounds), SIGKILLed at random instants while the PUTs go (`MEDIA_FLUSH_KILLS`,
/// default 10, within about `MEDIA_KILL_SECONDS`). After every kill `check` passes — each queued
/// replacement's file kept and whole — and the service holds for each photo bytes this copy
/// sent or the service's own, never a mix (a PUT cut off mid-body stores nothing). A last flush
/// to completion leaves every photo on the service equal to its last replacement here, the
/// queue empty and no file the queue or a record does not name.
@Suite(.soak, .checksStores, .serialized) struct MediaFlushKillTests {
    @Test func aMediaFlushKilledAtRandomInstantsLosesNothing() async throws {
        let photos = RefreshKillTests.env("MEDIA_KILL_PHOTOS", 40)
        let kills = RefreshKillTests.env("MEDIA_FLUSH_KILLS", 10)
        let budget = Double(RefreshKillTests.env("MEDIA_KILL_SECONDS", 60))
        let authority = try MediaKillTests.authority(photos: photos)
        for id in 1...photos {
            try await authority.putStream(
                "Photos(\(id))", contentType: "image/png", bytes: MediaFixture.random(1_000, seed: UInt64(id)))
        }
        var random = SeededRandom(seed: testSeed("MediaFlushKillTests"))
        // Every version of each photo: the service's first, and each this copy replaced it with.
        var versions: [Int: Set<String>] = [:]
        var last: [Int: String] = [:]
        for id in 1...photos {
            versions[id] = [try #require(try authority.streamInfo("Photos(\(id))")?.sha256)]
        }
        let logDir = tempDir() + "/logs"
        try FileManager.default.createDirectory(atPath: logDir, withIntermediateDirectories: true)
        try await withServer(authority.path) { _, server in
            let path = try {
                let copy = try MediaFixture.copy(of: server.url)
                return copy.path
            }()
            let refreshed = try await CLI.run(["refresh", "--store", path])
            #expect(refreshed.status == 0, "\(refreshed.stderr)")
            var killed = 0, completed = 0, round = 0
            let began = Date()
            while killed < kills && (Date().timeIntervalSince(began) < budget || killed < 3) {
                round += 1
                do {
                    let copy = try OfflineStore.open(at: path)
                    for _ in 0..<8 {
                        let id = Int.random(in: 1...photos, using: &random)
                        let bytes = MediaFixture.random(
                            Int.random(in: 100_000...600_000, using: &random), seed: UInt64(id * 1000 + round))
                        let info = try await copy.replaceStream("Photos(\(id))", contentType: "image/png", bytes: bytes)
                        let sha = try #require(info.sha256)
                        versions[id, default: []].insert(sha)
                        last[id] = sha
                    }
                }
                let wait = Int.random(in: 5...150, using: &random)
                if try await MediaKillTests.runKilled(["flush", "--store", path], logDir: logDir, after: wait) {
                    killed += 1
                } else {
                    completed += 1
                }
                let report = try OfflineStore.open(at: path, readOnly: true).check()
                #expect(report.isConsistent, "after kill \(killed): \(report)")
                for id in 1...photos {
                    let sha = try authority.streamInfo("Photos(\(id))")?.sha256 ?? ""
                    #expect(versions[id]?.contains(sha) == true, "Photos(\(id)) on the service: bytes no one sent")
                }
            }
            let done = try await CLI.run(["flush", "--store", path])
            #expect(done.status == 0, "\(done.stderr)")
            let store = try OfflineStore.open(at: path)
            #expect(try store.pendingRequestCount() == 0)
            for (id, sha) in last {
                #expect(try authority.streamInfo("Photos(\(id))")?.sha256 == sha, "Photos(\(id)): the last change lost")
                #expect(try store.streamInfo("Photos(\(id))")?.pendingUpload == false, "Photos(\(id))")
            }
            _ = try await MediaFixture.settle(store)
            let report = try store.check()
            let files = try FileManager.default.contentsOfDirectory(atPath: path + "/streams").count
            #expect(report.isConsistent && report.orphanStreamFiles == 0, "\(report), \(files) files")
            print(
                "MediaFlushKillTests: \(photos) photos, \(round) rounds, \(killed) killed, \(completed) completed before the kill"
            )
        }
    }
}
