import Foundation
import FuzzTargets
import Testing

/// The fuzz targets on their seeds and on the committed corpus (`Fuzz/corpus/TARGET/`, where
/// inputs that once crashed are kept): every input returns. A crash here is a regression of a
/// bug the fuzzer found. `scripts/fuzz.sh` runs the targets under libFuzzer.
struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus").path

    @Test(arguments: FuzzTargets.names)
    func everyCorpusInputReturns(target: String) async throws {
        var inputs = FuzzTargets.seeds()[target] ?? []
        let dir = Self.corpus + "/" + target
        for file in (try? FileManager.default.contentsOfDirectory(atPath: dir))?.sorted() ?? [] {
            inputs.append([UInt8](FileManager.default.contents(atPath: dir + "/" + file) ?? Data()))
        }
        #expect(!inputs.isEmpty)
        for input in inputs { await FuzzTargets.run(target, input) }
    }
}

/// The serve target reaches `serve`'s handling, not just its refusals: its seeds are answered as
/// a client would be (reads 200, a create 201, a conflicting create 409, a batch 200, multipart 415).
struct FuzzServeTargetTests {
    @Test func seedsAreAnsweredAsAClientWouldBe() async throws {
        func status(_ request: String) async -> Int? { await FuzzTargets.serve(Array(request.utf8))?.status }
        #expect(await status("GET /\n\n") == 200)
        #expect(await status("GET /$metadata\nAccept: application/xml\n\n") == 200)
        #expect(await status("GET /Products?$top=2\r\nAccept: application/json\r\n\r\n") == 200)
        #expect(await status("GET /Nowhere\n\n") == 404)
        #expect(await status("POST /$batch\nContent-Type: multipart/mixed;boundary=b\n\n--b--") == 415)
        #expect(await status("BAD /\n\n") == 405)
        #expect(await status("B(D /\n\n") == nil)
        // The store is shared with the corpus test (one per process): a create under a key of its own.
        let seeds = try #require(FuzzTargets.seeds()["serve"])
        let create = try #require(seeds.map { String(decoding: $0, as: UTF8.self) }.first { $0.hasPrefix("POST /Products\n") && $0.contains("FZ-1") })
        let key = "FZ-T1"
        #expect(await status(create.replacingOccurrences(of: "FZ-1", with: key)) == 201)
        #expect(await status(create.replacingOccurrences(of: "FZ-1", with: key)) == 409)
        #expect(await status("PATCH /Products('\(key)')\nContent-Type: application/json\nIf-Match: *\n\n{\"Name\":\"n\"}") == 204)
        let batch = try #require(await FuzzTargets.serve(seeds.first { String(decoding: $0, as: UTF8.self).hasPrefix("POST /$batch\nContent-Type: application/json") }!))
        #expect(batch.status == 200)
        #expect(String(decoding: batch.body, as: UTF8.self).contains("\"responses\""))
    }
}
