import AsyncHTTPClient
import Foundation
import TestSupport
import NIOHTTP1
import Multipart
import Testing
@testable import OfflineStore

/// The multipart `$batch` of `offline-store serve` (OData V4 §11.7, V2 [MS-ODATA] §2.2.7.6), over
/// HTTP against a real server: reads and change sets answered in order, a failing change set
/// applying nothing and answering one error part, `$<Content-ID>` within a change set only, every
/// malformed body refused whole with a clear 400, a V2-style body with LF line ends, a repeated
/// batch replayed, the answer budget, and a client nobody here wrote (Python's requests, with the
/// standard library's MIME parser reading the answer). The answers' bytes are checked, not only
/// their parse by the `Multipart` module.
@Suite(.checksStores) struct MultipartBatchServeTests {
    /// `lines` joined with CRLF, ending with one.
    static func crlf(_ lines: [String]) -> String { lines.joined(separator: "\r\n") + "\r\n" }

    /// An `application/http` part's lines: MIME headers (`Content-ID` when given), the request
    /// line, the request's headers, and its body.
    static func request(
        _ method: String, _ url: String, contentID: String? = nil, headers: [String] = [], body: String? = nil
    ) -> [String] {
        var lines = ["Content-Type: application/http", "Content-Transfer-Encoding: binary"]
        if let contentID { lines.append("Content-ID: \(contentID)") }
        lines += ["", "\(method) \(url) HTTP/1.1"] + headers
        if body != nil { lines.append("Content-Type: application/json") }
        lines += ["", body ?? ""]
        return lines
    }

    /// A batch with `boundary` of `units`: each a top-level request's lines, or (`changeSet`) the
    /// requests of a change set.
    enum Unit {
        case request([String])
        case changeSet(String, [[String]])
    }

    static func batch(_ units: [Unit], boundary: String = "batch_b1") -> String {
        var lines: [String] = []
        for unit in units {
            lines.append("--\(boundary)")
            switch unit {
            case .request(let r): lines += r
            case .changeSet(let inner, let requests):
                lines += ["Content-Type: multipart/mixed; boundary=\(inner)", ""]
                for r in requests { lines += ["--\(inner)"] + r }
                lines.append("--\(inner)--")
            }
        }
        lines.append("--\(boundary)--")
        return crlf(lines)
    }

    static func post(
        _ http: HTTP, _ body: String, boundary: String = "batch_b1", headers: [(String, String)] = []
    )
        async throws -> HTTP.Reply
    {
        try await http.send(
            .POST, "$batch", body: body,
            headers: [("Content-Type", "multipart/mixed; boundary=\(boundary)")] + headers)
    }

    /// The answer's boundary, from its Content-Type, and its top-level parts as raw text (what
    /// lies between the `--boundary` lines), checking the envelope's bytes on the way.
    static func parts(_ reply: HTTP.Reply) throws -> (boundary: String, parts: [String]) {
        let type = try #require(reply.header("Content-Type"))
        #expect(type.hasPrefix("multipart/mixed; boundary=batch_"), "\(type)")
        let boundary = String(type.dropFirst("multipart/mixed; boundary=".count))
        #expect(boundary == boundary.lowercased(), "odatapy's client lower-cases the boundary it reads")
        let text = reply.text
        #expect(text.hasPrefix("--\(boundary)\r\n"), "\(text.prefix(200))")
        #expect(text.hasSuffix("\r\n--\(boundary)--\r\n"), "\(text.suffix(200))")
        var parts = text.components(separatedBy: "\r\n--\(boundary)")
        parts[0].removeFirst("--\(boundary)".count)
        #expect(parts.removeLast() == "--\r\n")
        // Each after its delimiter's CRLF (one Character in Swift).
        return (boundary, parts.map { $0.hasPrefix("\r\n") ? String($0.dropFirst()) : "missing CRLF: " + $0 })
    }

    static func count(_ store: String) throws -> Int {
        try OfflineStore.open(at: store, readOnly: true).count(set: "Products")
    }

    @Test func readsAndAChangeSetAreAnsweredInOrder() async throws {
        let store = try await ServeTests.sampleStore()
        let before = try Self.count(store)
        try await withServer(store) { http, _ in
            let body = Self.batch([
                .request(
                    Self.request("GET", "Products('HT-1000')?$select=Name", headers: ["Accept: application/json"])),
                .changeSet(
                    "changeset_c1",
                    [
                        Self.request("POST", "Products", contentID: "1", body: #"{"ProductID":"M-1","Name":"one"}"#),
                        Self.request("PATCH", "$1", contentID: "2", body: #"{"Name":"one, changed"}"#),
                    ]),
                .request(Self.request("GET", "Products('M-1')?$select=Name")),
                // `$1` names a create of another change set: refused, nothing applied.
                .changeSet("changeset_c2", [Self.request("DELETE", "$1", contentID: "1")]),
                .request(Self.request("GET", "Products/$count")),
            ])
            let reply = try await Self.post(http, body, headers: [("Accept", "multipart/mixed")])
            #expect(reply.status == 200, "\(reply.text)")
            #expect(reply.header("OData-Version") == "4.0")
            let (_, parts) = try Self.parts(reply)
            try #require(parts.count == 5, "\(reply.text)")
            let read =
                "Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: application/json;odata.metadata=minimal\r\nContent-Length: "
            #expect(parts[0].hasPrefix(read), "\(parts[0])")
            #expect(parts[0].contains(#""Name":"#))
            // The change set: a nested multipart with a response per request, Content-IDs echoed.
            let nested = parts[1]
            #expect(nested.hasPrefix("Content-Type: multipart/mixed; boundary=changeset_"), "\(nested)")
            let inner = String(
                nested.dropFirst("Content-Type: multipart/mixed; boundary=".count).prefix { $0 != "\r\n" })
            #expect(nested.hasSuffix("\r\n--\(inner)--"), "\(nested)")
            #expect(
                nested.contains(
                    "--\(inner)\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\nContent-ID: 1\r\n\r\nHTTP/1.1 201 Created\r\n"
                ), "\(nested)")
            #expect(
                nested.contains(
                    "--\(inner)\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\nContent-ID: 2\r\n\r\nHTTP/1.1 204 No Content\r\n"
                ), "\(nested)")
            #expect(nested.contains("Location: \(http.base)Products('M-1')\r\n"), "\(nested)")
            #expect(parts[2].hasPrefix(read) && parts[2].contains("one, changed"), "the read sees the change set")
            #expect(
                parts[3].hasPrefix(
                    "Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\nContent-ID: 1\r\n\r\nHTTP/1.1 400 Bad Request\r\n"
                ), "\(parts[3])")
            #expect(parts[3].contains("names no earlier request"), "\(parts[3])")
            #expect(
                parts[4].hasPrefix(
                    read.replacingOccurrences(of: "application/json;odata.metadata=minimal", with: "text/plain")))
            #expect(parts[4].hasSuffix("\r\n\r\n\(before + 1)"), "\(parts[4])")

            // The same answer through the parser flush uses.
            let answers = try Multipart.answers(reply.body, contentType: reply.header("Content-Type") ?? "")
            let statuses = answers.map { a -> [Int] in
                switch a {
                case .single(let r): [r.status]
                case .changeSet(let rs): rs.map(\.status)
                }
            }
            #expect(statuses == [[200], [201, 204], [200], [400], [200]])

            let after = try await http.get("Products('M-1')")
            #expect(after.status == 200 && after.object["Name"] as? String == "one, changed")
        }
        #expect(try Self.count(store) == before + 1)
    }

    @Test func aFailingChangeSetAppliesNothingAndAnswersOneErrorPart() async throws {
        let store = try await ServeTests.sampleStore()
        let before = try Self.count(store)
        try await withServer(store) { http, _ in
            let etag = try #require(try await http.get("Products('HT-1001')").header("ETag"))
            let body = Self.batch([
                .changeSet(
                    "cs_a",
                    [
                        Self.request("POST", "Products", contentID: "a", body: #"{"ProductID":"M-2"}"#),
                        Self.request("POST", "Products", contentID: "b", body: #"{"ProductID":"HT-1000"}"#),
                    ]),
                .changeSet(
                    "cs_b",
                    [
                        Self.request("PATCH", "Products('HT-1001')", contentID: "c", body: #"{"Name":"new"}"#),
                        Self.request(
                            "PATCH", "Products('HT-1002')", contentID: "d",
                            headers: [#"If-Match: W/"0123456789abcdef""#],
                            body: #"{"Name":"stale"}"#),
                    ]),
                .request(Self.request("GET", "Products('M-2')")),
            ])
            let reply = try await Self.post(http, body)
            #expect(reply.status == 200, "\(reply.text)")
            let (_, parts) = try Self.parts(reply)
            try #require(parts.count == 3, "\(reply.text)")
            #expect(!reply.text.contains("changeset_"), "a failed change set answers one part, not a nested multipart")
            #expect(
                parts[0].hasPrefix(
                    "Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\nContent-ID: b\r\n\r\nHTTP/1.1 409 Conflict\r\nContent-Type: application/json;odata.metadata=minimal\r\n"
                ), "\(parts[0])")
            #expect(parts[0].contains(#"{"error":{"code":"#), "\(parts[0])")
            #expect(parts[1].contains("Content-ID: d\r\n\r\nHTTP/1.1 412 Precondition Failed\r\n"), "\(parts[1])")
            #expect(parts[2].contains("HTTP/1.1 404 Not Found\r\n"), "M-2 was never created: \(parts[2])")

            #expect(try await http.get("Products('M-2')").status == 404)
            let unchanged = try await http.get("Products('HT-1001')")
            #expect(unchanged.header("ETag") == etag && unchanged.object["Name"] as? String != "new")
        }
        #expect(try Self.count(store) == before)
    }

    @Test func malformedBatchesAreRefusedWholeAndChangeNothing() async throws {
        let store = try await ServeTests.sampleStore()
        let before = try Self.count(store)
        try await withServer(store) { http, _ in
            let create = Self.request("POST", "Products", contentID: "1", body: #"{"ProductID":"M-9"}"#)
            let createSet = Unit.changeSet("cs", [create])
            func refused(
                _ body: String, contentType: String = "multipart/mixed; boundary=batch_b1",
                headers: [(String, String)] = [], status: Int = 400, _ says: String,
                sourceLocation: SourceLocation = #_sourceLocation
            ) async throws {
                let reply = try await http.send(
                    .POST, "$batch", body: body, headers: [("Content-Type", contentType)] + headers)
                #expect(reply.status == status, "\(reply.text)", sourceLocation: sourceLocation)
                let message = ((reply.object["error"] as? [String: Any])?["message"] as? String) ?? ""
                #expect(message.contains(says), "\(reply.text)", sourceLocation: sourceLocation)
            }
            let good = Self.batch([createSet])
            try await refused(good, contentType: "multipart/mixed", "without a boundary")
            try await refused(
                good, contentType: "multipart/mixed; boundary=" + String(repeating: "b", count: 71),
                "without a boundary of 1 to 70 characters")
            try await refused(
                Self.batch([createSet], boundary: "a{b"), contentType: "multipart/mixed; boundary=\"a{b\"",
                "does not allow")
            try await refused(String(good.dropLast("--batch_b1--\r\n".count)), "close delimiter")
            try await refused(good, headers: [("Accept", "application/json")], status: 406, "multipart/mixed")

            var notHTTP = create
            notHTTP[0] = "Content-Type: application/json"
            try await refused(
                Self.batch([createSet, .request(notHTTP)]), "part 2 of the $batch is not application/http")
            try await refused(Self.batch([createSet, .request(Array(create.dropFirst()))]), "is not application/http")
            var base64 = create
            base64[1] = "Content-Transfer-Encoding: base64"
            try await refused(Self.batch([createSet, .changeSet("c2", [base64])]), "base64")
            for line in ["POST Products", "POST Products HTTP/1.1 extra", "POST  HTTP/1.1", "POST Products HTCPCP/1.0"]
            {
                var bad = create
                bad[4] = line
                try await refused(Self.batch([createSet, .changeSet("c2", [bad])]), "malformed request line")
            }
            // MERGE is V2's PATCH; a method no OData version has is refused.
            var copy = create
            copy[4] = "COPY Products('HT-1000') HTTP/1.1"
            try await refused(
                Self.batch([createSet, .changeSet("c2", [copy])]), "'COPY' is not one this service takes")
            var long = create
            long[long.count - 3] = "Content-Length: 999"
            try await refused(Self.batch([createSet, .changeSet("c2", [long])]), "Content-Length: 999")

            // Change sets: no change set inside, no reads, Content-IDs unique within.
            let nested = Self.crlf(
                [
                    "--batch_b1", "Content-Type: multipart/mixed; boundary=outer", "", "--outer",
                    "Content-Type: multipart/mixed; boundary=inner", "", "--inner",
                ] + create
                    + ["--inner--", "--outer--", "--batch_b1--"])
            try await refused(nested, "a change set cannot hold another")
            try await refused(
                Self.batch([.changeSet("cs", [create, Self.request("GET", "Products('HT-1000')")])]),
                "a change set holds only changes")
            try await refused(
                Self.batch([.changeSet("cs", [create, Self.request("DELETE", "Products('HT-1000')", contentID: "1")])]),
                "Content-ID '1' appears twice")

            // At most 1,000 parts in the batch and in a change set; 1,000 are served.
            let read = Unit.request(Self.request("GET", "Products('HT-1000')?$select=ProductID"))
            try await refused(
                Self.batch([createSet] + Array(repeating: read, count: 1_000)), "more than 1000 parts")
            let deletes = (0..<1_001).map { Self.request("DELETE", "Products('HT-1000')", contentID: "d\($0)") }
            try await refused(
                Self.batch([.changeSet("cs", [create] + deletes.dropFirst())]),
                "the change set in part 1 of the $batch cannot be read: more than 1000 parts")
            let thousand = try await Self.post(http, Self.batch(Array(repeating: read, count: 1_000)))
            #expect(thousand.status == 200)
            #expect(try Self.parts(thousand).parts.count == 1_000)

            #expect(try await http.get("Products('M-9')").status == 404)
            #expect(try await http.get("Products('HT-1000')").status == 200)
        }
        #expect(try Self.count(store) == before)
    }

    /// What a V2 client (SAPUI5's ODataModel, Gateway's own samples) sends: GUID boundaries, a
    /// preamble and an epilogue, LF line ends, absolute URLs, the Content-ID inside the request.
    @Test func aV2StyleBodyWithLFLineEndsIsServed() async throws {
        let store = try await ServeTests.sampleStore()
        let before = try Self.count(store)
        try await withServer(store) { http, _ in
            let b = "batch_36522ad7-fc75-4b56-8c71-56071383e77b"
            let c = "changeset_77162fcd-b8da-41ac-a9f8-9357efbbd621"
            let body = [
                "This is a V2 batch; the preamble is ignored.",
                "--\(b)",
                "Content-Type: application/http",
                "Content-Transfer-Encoding: binary",
                "",
                "GET Products('HT-1000')?$select=Name HTTP/1.1",
                "sap-contextid-accept: header",
                "Accept: application/json",
                "MaxDataServiceVersion: 2.0",
                "",
                "",
                "--\(b)",
                "Content-Type: multipart/mixed; boundary=\(c)",
                "",
                "--\(c)",
                "Content-Type: application/http",
                "Content-Transfer-Encoding: binary",
                "",
                "POST \(http.base)Products HTTP/1.1",
                "Content-ID: id-1",
                "Content-Type: application/json",
                "Content-Length: 35",
                "",
                #"{"ProductID":"V2-1","Name":"from"}"# + "\n",
                "--\(c)",
                "Content-Type: application/http",
                "Content-Transfer-Encoding: binary",
                "",
                "PATCH $id-1 HTTP/1.1",
                "Content-ID: id-2",
                "Content-Type: application/json",
                "",
                #"{"Name":"V2"}"#,
                "--\(c)--",
                "",
                "--\(b)--",
                "the epilogue, ignored",
            ].joined(separator: "\n")
            let reply = try await Self.post(http, body, boundary: b)
            #expect(reply.status == 200, "\(reply.text)")
            let (_, parts) = try Self.parts(reply)
            try #require(parts.count == 2, "\(reply.text)")
            #expect(parts[0].contains("\r\n\r\nHTTP/1.1 200 OK\r\n"), "\(parts[0])")
            #expect(parts[1].contains("Content-ID: id-1\r\n\r\nHTTP/1.1 201 Created\r\n"), "\(parts[1])")
            #expect(parts[1].contains("Content-ID: id-2\r\n\r\nHTTP/1.1 204 No Content\r\n"), "\(parts[1])")
            let read = try await http.get("Products('V2-1')")
            #expect(read.status == 200 && read.object["Name"] as? String == "V2")
        }
        #expect(try Self.count(store) == before + 1)
    }

    @Test func aRepeatedBatchIsReplayedAndTheAnswerBudgetHolds() async throws {
        let store = try await ServeTests.sampleStore(items: 3_000)
        let before = try Self.count(store)
        try await withServer(store, extra: ["--max-batch-response", "256K"]) { http, _ in
            let body = Self.batch([
                .changeSet(
                    "cs",
                    [Self.request("POST", "Products", contentID: "1", body: #"{"ProductID":"R-1","Name":"once"}"#)]),
                .request(Self.request("GET", "Products/$count")),
                .request(Self.request("GET", "SalesOrderItems")),
            ])
            let id = [("Repeatability-Request-ID", UUID().uuidString)]
            let first = try await Self.post(http, body, headers: id)
            let second = try await Self.post(http, body, headers: id)
            #expect(first.header("Repeatability-Result") == "accepted")
            #expect(second.header("Repeatability-Result") == "replayed", "\(second.text)")
            for reply in [first, second] {
                #expect(reply.status == 200, "\(reply.text)")
                let parts = try Self.parts(reply).parts
                try #require(parts.count == 3)
                #expect(parts[0].contains("Content-ID: 1\r\n\r\nHTTP/1.1 201 Created\r\n"), "\(parts[0])")
                #expect(parts[1].hasSuffix("\r\n\r\n\(before + 1)"), "\(parts[1])")
                #expect(
                    parts[2].contains("HTTP/1.1 507 Insufficient Storage\r\n"),
                    "past 256K of answers: \(parts[2].prefix(300))")
            }
        }
        #expect(try Self.count(store) == before + 1)
    }

    /// Whether `python3` with `requests` is installed (the client of the next test).
    static let pythonRequests: Bool = {
        guard
            let pid = try? ChildProcess.spawn(
                "/usr/bin/env", ["python3", "-c", "import requests"], stdout: "/dev/null", stderr: "/dev/null")
        else { return false }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        return status == 0
    }()

    /// Python's `requests` posts a hand-written batch; Python's own MIME parser (`email`) reads
    /// the answer, so the envelope is checked by a parser nobody here wrote.
    @Test(.enabled(if: pythonRequests, "needs python3 with requests")) func anIndependentClientReadsTheAnswer()
        async throws
    {
        let store = try await ServeTests.sampleStore()
        let before = try Self.count(store)
        try await withServer(store) { http, _ in
            let script = #"""
                import email, json, sys, requests
                crlf = "\r\n"
                body = crlf.join([
                    "--b", "Content-Type: application/http", "Content-Transfer-Encoding: binary", "",
                    "GET Products('HT-1000')?$select=Name HTTP/1.1", "Accept: application/json", "", "",
                    "--b", "Content-Type: multipart/mixed; boundary=cs", "",
                    "--cs", "Content-Type: application/http", "Content-Transfer-Encoding: binary", "Content-ID: 1", "",
                    "POST Products HTTP/1.1", "Content-Type: application/json", "", '{"ProductID":"PY-1","Name":"py"}',
                    "--cs", "Content-Type: application/http", "Content-Transfer-Encoding: binary", "Content-ID: 2", "",
                    "PATCH $1 HTTP/1.1", "Content-Type: application/json", "", '{"Name":"python"}',
                    "--cs--", "--b--", ""])
                r = requests.post(sys.argv[1] + "$batch", data=body.encode(),
                                  headers={"Content-Type": "multipart/mixed; boundary=b", "Accept": "multipart/mixed"})
                message = email.message_from_bytes(
                    b"Content-Type: " + r.headers["Content-Type"].encode() + b"\r\n\r\n" + r.content)
                def status(part):
                    return int(part.get_payload().split(" ", 2)[1])
                out = []
                for part in message.get_payload():
                    if part.is_multipart():
                        out.append([[p["Content-ID"], status(p)] for p in part.get_payload()])
                    else:
                        out.append(status(part))
                print(json.dumps({"status": r.status_code, "multipart": message.is_multipart(),
                                  "defects": len(message.defects), "parts": out}))
                """#
            let dir = TestScratch.directory("mp-py")
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let pid = try ChildProcess.spawn(
                "/usr/bin/env", ["python3", "-c", script, http.base], stdout: dir + "/out", stderr: dir + "/err")
            var status: Int32 = 0
            let start = Date()
            while waitpid(pid, &status, WNOHANG) == 0 {
                if Date().timeIntervalSince(start) > 60 {
                    kill(pid, SIGKILL)
                    waitpid(pid, &status, 0)
                    break
                }
                try await Task.sleep(nanoseconds: 20_000_000)
            }
            let out = (try? String(contentsOfFile: dir + "/out", encoding: .utf8)) ?? ""
            let err = (try? String(contentsOfFile: dir + "/err", encoding: .utf8)) ?? ""
            #expect(status == 0, "\(err)")
            let result = try #require(
                try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any], "\(out) \(err)")
            #expect(result["status"] as? Int == 200 && result["multipart"] as? Bool == true, "\(out)")
            #expect(result["defects"] as? Int == 0, "\(out)")
            let parts = try #require(result["parts"] as? [Any], "\(out)")
            #expect(parts.count == 2)
            #expect(parts.first as? Int == 200, "\(out)")
            let changeSet = parts.last as? [[Any]]
            #expect(changeSet?.map { $0[0] as? String } == ["1", "2"], "\(out)")
            #expect(changeSet?.map { $0[1] as? Int } == [201, 204], "\(out)")
            #expect(try await http.get("Products('PY-1')").object["Name"] as? String == "python")
        }
        #expect(try Self.count(store) == before + 1)
    }
}
