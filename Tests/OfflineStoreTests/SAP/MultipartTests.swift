import TestSupport
import Foundation
import Testing
@testable import Multipart
import Sync

/// The V2 `$batch` encoder and parser (the `Multipart` module), without a server: change sets per
/// atomicity group and per lone modifying request, `Content-ID`s, and answers read part by part —
/// a change set applied, a change set rolled back (one error part for all its members), a GET.
@Suite(.runsOffThePool) struct MultipartTests {
    static let requests = [
        Multipart.Request(method: "GET", url: "ProductSet('A')"),
        Multipart.Request(
            method: "POST", url: "ProductSet", body: Array(#"{"ProductID":"B"}"#.utf8), group: "t1", id: "2"),
        Multipart.Request(
            method: "MERGE", url: "ProductSet('C')", headers: [("If-Match", "W/\"1\"")], body: Array("{}".utf8),
            group: "t1", id: "3"),
        Multipart.Request(method: "DELETE", url: "ProductSet('D')", id: "4"),
    ]

    @Test func encodesChangeSetsContentIDsAndRetrieveParts() throws {
        #expect(
            Multipart.units(Self.requests) == [
                .init(requests: [0], isChangeSet: false), .init(requests: [1, 2], isChangeSet: true),
                .init(requests: [3], isChangeSet: true),
            ])
        let text = String(decoding: Multipart.encode(Self.requests, boundary: "batch_x"), as: UTF8.self)
        #expect(text.hasPrefix("--batch_x\r\nContent-Type: application/http\r\n"))
        #expect(text.contains("GET ProductSet('A') HTTP/1.1\r\n"))
        #expect(text.contains("Content-Type: multipart/mixed; boundary=changeset_batch_x_2\r\n"))
        #expect(text.contains("Content-ID: 2\r\n\r\nPOST ProductSet HTTP/1.1\r\n"))
        #expect(text.contains("Content-Length: 17\r\n\r\n{\"ProductID\":\"B\"}\r\n--changeset_batch_x_2\r\n"))
        #expect(text.contains("MERGE ProductSet('C') HTTP/1.1\r\nIf-Match: W/\"1\"\r\n"))
        #expect(text.contains("--changeset_batch_x_2--\r\n"))
        #expect(text.contains("Content-ID: 4\r\n\r\nDELETE ProductSet('D') HTTP/1.1\r\n"))
        #expect(text.hasSuffix("--batch_x--\r\n"))
        // The encoder's output parses back into the same units.
        let parts = try Multipart.parts(Array(text.utf8), boundary: "batch_x")
        #expect(parts.count == 3)
        #expect(try Multipart.parts(parts[1].body, boundary: "changeset_batch_x_2").count == 2)
    }

    static func answer(_ lineEnd: String) -> [UInt8] {
        let lines = [
            "preamble, ignored",
            "--b1",
            "Content-Type: application/http",
            "",
            "HTTP/1.1 200 OK",
            "Content-Type: application/json",
            "",
            #"{"d":{"ProductID":"A"}}"#,
            "--b1",
            "Content-Type: multipart/mixed; boundary=\"cs 1\"",
            "",
            "--cs 1",
            "Content-Type: application/http",
            "",
            "HTTP/1.1 201 Created",
            "ETag: W/\"2\"",
            "",
            #"{"d":{"ProductID":"B"}}"#,
            "--cs 1",
            "Content-Type: application/http",
            "",
            "HTTP/1.1 204 No Content",
            "",
            "",
            "--cs 1--",
            "--b1",
            "Content-Type: application/http",
            "",
            "HTTP/1.1 404 Not Found",
            "Content-Type: application/json",
            "",
            #"{"error":{"code":"X","message":{"lang":"en","value":"--b1 is not a delimiter here"}}}"#,
            "--b1--",
            "epilogue, ignored",
        ]
        return Array(lines.joined(separator: lineEnd).utf8)
    }

    @Test(arguments: ["\r\n", "\n"]) func readsEachAnswerAndMapsItToItsRequest(lineEnd: String) throws {
        let answers = try Multipart.answers(Self.answer(lineEnd), contentType: "multipart/mixed; boundary=b1")
        let responses = try Multipart.responses(for: Self.requests, answers)
        #expect(responses.map(\.status) == [200, 201, 204, 404])
        #expect(String(decoding: responses[0].body, as: UTF8.self) == #"{"d":{"ProductID":"A"}}"#)
        #expect(responses[1].header("ETag") == "W/\"2\"")
        #expect(responses[2].body.isEmpty)
        #expect(ServiceMessage.parse(responses[3].body)?.message == "--b1 is not a delimiter here")
    }

    @Test func aRolledBackChangeSetAnswersEachMemberWithItsError() throws {
        let body = Array(
            "--b\r\nContent-Type: application/http\r\n\r\nHTTP/1.1 200 OK\r\n\r\n{}\r\n--b\r\nContent-Type: application/http\r\n\r\nHTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\n\r\n{\"error\":{\"code\":\"C\",\"message\":{\"value\":\"exists\"}}}\r\n--b\r\nContent-Type: application/http\r\n\r\nHTTP/1.1 412 Precondition Failed\r\n\r\n\r\n--b--\r\n"
                .utf8)
        let responses = try Multipart.responses(
            for: Self.requests, try Multipart.answers(body, contentType: "multipart/mixed;boundary=b"))
        #expect(responses.map(\.status) == [200, 409, 409, 412])
    }

    @Test func badAnswersAreClearErrors() throws {
        // No close delimiter; not multipart; a part that is not an HTTP response; too few parts;
        // a change set answered with the wrong count.
        #expect(throws: MultipartError.self) {
            try Multipart.answers(
                Array("--b\r\n\r\nHTTP/1.1 200 OK\r\n\r\n".utf8), contentType: "multipart/mixed; boundary=b")
        }
        #expect(throws: MultipartError.self) { try Multipart.answers([], contentType: "application/json") }
        #expect(throws: MultipartError.self) {
            try Multipart.answers(Array("--b\r\n\r\nhello\r\n--b--".utf8), contentType: "multipart/mixed; boundary=b")
        }
        let one = try Multipart.answers(
            Array("--b\r\n\r\nHTTP/1.1 200 OK\r\n\r\n\r\n--b--".utf8), contentType: "multipart/mixed; boundary=b")
        #expect(throws: MultipartError.self) { try Multipart.responses(for: Self.requests, one) }
        let twoInOne = Array(
            "--b\r\n\r\nHTTP/1.1 200 OK\r\n\r\n\r\n--b\r\nContent-Type: multipart/mixed; boundary=c\r\n\r\n--c\r\n\r\nHTTP/1.1 201 Created\r\n\r\n\r\n--c--\r\n--b\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n\r\n--b--"
                .utf8)
        #expect(throws: MultipartError.self) {
            try Multipart.responses(
                for: Self.requests, try Multipart.answers(twoInOne, contentType: "multipart/mixed; boundary=b"))
        }
        #expect(Multipart.boundary(ofContentType: "multipart/mixed; boundary=\"a b\"") == "a b")
        #expect(Multipart.boundary(ofContentType: "multipart/mixed") == nil)
        #expect(
            Multipart.boundary(ofContentType: "multipart/mixed; boundary=" + String(repeating: "x", count: 71)) == nil)
    }

    /// Issue 37, F16: a proxy that answers a batch's parts in another order than sent. Responses
    /// that name their requests (Content-ID) are mapped by it inside a change set; a response that
    /// names a request of another change set makes the whole answer unmappable — nothing of it is
    /// taken as another request's answer.
    @Test func answersNamingOtherRequestsAreRefusedAndPermutedMembersMappedByContentID() throws {
        func part(_ id: String, _ status: String) -> String {
            "Content-Type: application/http\r\nContent-ID: \(id)\r\n\r\nHTTP/1.1 \(status)\r\n\r\n\r\n"
        }
        let lone = [
            Multipart.Request(method: "POST", url: "ProductSet", body: Array("{}".utf8), id: "1"),
            Multipart.Request(method: "DELETE", url: "ProductSet('D')", id: "2"),
        ]
        // Two change sets of one, answered in reverse.
        let reversed = Array(
            ("--b\r\nContent-Type: multipart/mixed; boundary=c2\r\n\r\n--c2\r\n" + part("2", "204 No Content")
                + "--c2--\r\n"
                + "--b\r\nContent-Type: multipart/mixed; boundary=c1\r\n\r\n--c1\r\n" + part("1", "201 Created")
                + "--c1--\r\n--b--\r\n").utf8)
        #expect(throws: MultipartError.self) {
            try Multipart.responses(
                for: lone, try Multipart.answers(reversed, contentType: "multipart/mixed; boundary=b"))
        }
        // One change set of two, its members answered in reverse: mapped by Content-ID.
        let grouped = lone.map { r in
            var r = r
            r.group = "g"
            return r
        }
        let permuted = Array(
            ("--b\r\nContent-Type: multipart/mixed; boundary=c\r\n\r\n--c\r\n" + part("2", "204 No Content") + "--c\r\n"
                + part("1", "201 Created") + "--c--\r\n--b--\r\n").utf8)
        let mapped = try Multipart.responses(
            for: grouped, try Multipart.answers(permuted, contentType: "multipart/mixed; boundary=b"))
        #expect(mapped.map(\.status) == [201, 204])
    }
}
