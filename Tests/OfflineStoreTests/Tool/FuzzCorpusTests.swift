import Foundation
import FuzzTargets
import Testing

/// The fuzz targets on their seeds and on the committed corpus (`Fuzz/corpus/TARGET/`, where
/// inputs that once crashed are kept): every input returns. A crash here is a regression of a
/// bug the fuzzer found. `scripts/fuzz.sh` runs the targets under libFuzzer.
struct FuzzCorpusTests {
    static let corpus = repositoryRoot + "/Fuzz/corpus"

    @Test(arguments: FuzzTargets.names)
    func everyCorpusInputReturns(target: String) async throws {
        var inputs = FuzzTargets.seeds()[target] ?? []
        let dir = Self.corpus + "/" + target
        // Every target has a committed corpus: a missing directory is a broken test, not an empty corpus.
        let files = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        #expect(!files.isEmpty, "no committed corpus in \(dir)")
        for file in files {
            inputs.append([UInt8](FileManager.default.contents(atPath: dir + "/" + file) ?? Data()))
        }
        #expect(!inputs.isEmpty)
        for input in inputs { await FuzzTargets.run(target, input) }
    }
}

/// The serve target reaches `serve`'s handling, not just its refusals: its seeds are answered as
/// a client would be (reads 200, a create 201, a conflicting create 409, a JSON and a multipart batch 200).
struct FuzzServeTargetTests {
    @Test func seedsAreAnsweredAsAClientWouldBe() async throws {
        func status(_ request: String) async -> Int? { await FuzzTargets.serve(Array(request.utf8))?.status }
        #expect(await status("GET /\n\n") == 200)
        #expect(await status("GET /$metadata\nAccept: application/xml\n\n") == 200)
        #expect(await status("GET /Products?$top=2\r\nAccept: application/json\r\n\r\n") == 200)
        #expect(await status("GET /Nowhere\n\n") == 404)
        #expect(await status("POST /$batch\nContent-Type: multipart/mixed;boundary=b\n\n--b--") == 200)
        #expect(await status("BAD /\n\n") == 405)
        #expect(await status("B(D /\n\n") == nil)
        // The store is shared with the corpus test (one per process): a create under a key of its own.
        let seeds = try #require(FuzzTargets.seeds()["serve"])
        let create = try #require(
            seeds.map { String(decoding: $0, as: UTF8.self) }.first {
                $0.hasPrefix("POST /Products\n") && $0.contains("FZ-1")
            })
        let key = "FZ-T1"
        #expect(await status(create.replacingOccurrences(of: "FZ-1", with: key)) == 201)
        #expect(await status(create.replacingOccurrences(of: "FZ-1", with: key)) == 409)
        #expect(
            await status("PATCH /Products('\(key)')\nContent-Type: application/json\nIf-Match: *\n\n{\"Name\":\"n\"}")
                == 204)
        let batch = try #require(
            await FuzzTargets.serve(
                seeds.first {
                    String(decoding: $0, as: UTF8.self).hasPrefix("POST /$batch\nContent-Type: application/json")
                }!))
        #expect(batch.status == 200)
        #expect(String(decoding: batch.body, as: UTF8.self).contains("\"responses\""))
        // The multipart seed, under a key of its own: applied once, then refused as one 409 part.
        let multipart = try #require(
            seeds.map { String(decoding: $0, as: UTF8.self) }.first { $0.contains("boundary=b\n\n--b\r\n") }
        )
        .replacingOccurrences(of: "FZ-M", with: "FZ-T2")
        let first = try #require(await FuzzTargets.serve(Array(multipart.utf8)))
        let firstText = String(decoding: first.body, as: UTF8.self)
        #expect(first.status == 200 && firstText.contains("HTTP/1.1 201 Created\r\n"), "\(firstText)")
        #expect(firstText.contains("HTTP/1.1 204 No Content\r\n"), "\(firstText)")
        let again = String(decoding: try #require(await FuzzTargets.serve(Array(multipart.utf8))).body, as: UTF8.self)
        #expect(again.contains("HTTP/1.1 409 Conflict\r\n") && !again.contains("changeset_"), "\(again)")
    }
}

/// The `Prefer` header, which the serve fuzzer crashed the server with (`Prefer: gdata.maxpagesize=1,=`:
/// an empty preference split into nothing): every header made of its pieces is answered, and a
/// page size among them is honoured.
struct PreferHeaderTests {
    @Test func everyHeaderOfItsPiecesIsAnswered() async {
        let pieces = [",", "=", ";", " ", "\"", "odata.maxpagesize", "1", "return", "x"]
        var headers: [String] = [""]
        for _ in 0..<3 { headers = headers.flatMap { h in pieces.map { h + $0 } } }
        headers += [",=", "=,", ";;", "=;=", "odata.maxpagesize=1,=", "odata.maxpagesize=;", "return=;representation"]
        var answered = 0
        for header in headers {
            let reply = await FuzzTargets.serve(Array("GET /Products?$top=3\nPrefer: \(header)\n\n".utf8))
            #expect(reply?.status == 200, "Prefer: \(header)")
            if reply?.status == 200 { answered += 1 }
        }
        #expect(answered == headers.count)
        // The other headers split the same way: Accept, and a batch request's Content-Type.
        for header in headers {
            let reply = await FuzzTargets.serve(Array("GET /Products?$top=1\nAccept: \(header)\n\n".utf8))
            #expect(reply != nil && reply!.status != 500, "Accept: \(header)")
        }
        for type in [";", ";x", "=", ",", ";;", " ; "] {
            let batch =
                #"{"requests":[{"id":"1","method":"PATCH","url":"Products('HT-1000')","headers":{"Content-Type":"\#(type)"},"body":{}}]}"#
            let reply = await FuzzTargets.serve(Array("POST /$batch\nContent-Type: application/json\n\n\(batch)".utf8))
            #expect(reply?.status == 200, "batch Content-Type \(type)")
        }
        let paged = await FuzzTargets.serve(Array("GET /Products\nPrefer: =, odata.maxpagesize=1 ;x\n\n".utf8))
        #expect(
            paged.map { String(decoding: $0.body, as: UTF8.self).contains("@odata.nextLink") } == true,
            "a page size after an empty preference is honoured")
    }
}
