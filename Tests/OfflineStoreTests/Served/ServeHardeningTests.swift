import TestSupport
import AsyncHTTPClient
import Foundation
import NIOHTTP1
import Testing
@testable import OfflineStore
import Samples

/// `offline-store serve` against a hostile client, over raw sockets where a client library would
/// hide the misbehaviour (issue 22, findings 12–17): timeouts (header, request, idle, write), the
/// end of an HTTP/1.0 exchange, links never built from the client's `Host`, a malformed chunked
/// body (400, not 500), the bound on a `$batch`'s answers. Each case is bounded by a count and a
/// time; the slow ones are in `ServeHardeningSoakTests`.
@Suite(.checksStores) struct ServeHardeningTests {
    /// Short timeouts, so a test sees them expire in seconds.
    static let quick = [
        "--header-timeout", "1", "--request-timeout", "2", "--idle-timeout", "3", "--write-timeout", "2",
    ]

    // MARK: 12. timeouts

    /// A connection that says nothing, says half a head, trickles its head a byte at a time
    /// (slowloris), or stops between requests is closed within its timeout; a head or body that
    /// is late gets 408 before the close.
    @Test func silentAndSlowClientsAreClosedWithinTheirTimeouts() async throws {
        try await withServer(try ServeTests.sampleStore(), extra: Self.quick) { _, server in
            // Say nothing: the idle timeout (2 s).
            let silent = try RawConnection(server.url)
            // Half a head, then nothing: the header timeout (1 s), with 408.
            let half = try RawConnection(server.url)
            await half.send("GET /Products HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: appl")
            // One request answered, then nothing: idle again.
            let kept = try RawConnection(server.url)
            await kept.send("GET /$metadata HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let first = try await kept.response()
            #expect(first.status == 200)
            let start = Date()
            // Slowloris: a byte of a head every 150 ms, forever (here: until closed, at most 10 s).
            let loris = try RawConnection(server.url)
            let head =
                Array("GET /Products HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ".utf8) + Array(repeating: 97, count: 200)
            var sent = 0
            while sent < head.count, Date().timeIntervalSince(start) < 10 {
                guard await loris.send([head[sent]]) else { break }
                sent += 1
                loris.drain()
                if loris.closed { break }
                try await Task.sleep(nanoseconds: 150_000_000)
            }
            let lorisClosedAfter = Date().timeIntervalSince(start)
            #expect(await loris.waitClosed(within: 5), "a slowloris head is still open after \(lorisClosedAfter) s")
            // Generous: the test's own sleeps stretch on a loaded machine (7.8 s seen in CI).
            #expect(lorisClosedAfter < 20, "slowloris closed after \(lorisClosedAfter) s with a 1 s header timeout")
            #expect(sent < head.count, "the whole slow head was accepted (\(sent) bytes)")

            for (name, c) in [("silent", silent), ("half head", half), ("idle keep-alive", kept)] {
                #expect(await c.waitClosed(within: 8), "\(name): still open \(Date().timeIntervalSince(start)) s later")
            }
            #expect(String(decoding: half.received, as: UTF8.self).hasPrefix("HTTP/1.1 408"))
            #expect(Date().timeIntervalSince(start) < 12)
            // Still serving.
            let after = try RawConnection(server.url)
            await after.send("GET /$metadata HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(try await after.response().status == 200)
        }
    }

    /// A body that never arrives, arrives in part, trickles, or a chunked body with no last chunk:
    /// 408 and closed within the request timeout; nothing written.
    @Test func aBodyThatDoesNotArriveIsAnswered408AndClosed() async throws {
        let dir = try await ServeTests.sampleStore()
        let before = try OfflineStore.open(at: dir, readOnly: true).count(set: "Products")
        try await withServer(dir, extra: Self.quick) { _, server in
            let entity = #"{"ProductID":"HX-1","Name":"x","Category":"c","Price":1,"CurrencyCode":"EUR"}"#
            let head =
                "POST /Products HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            var cases: [(String, RawConnection)] = []
            let none = try RawConnection(server.url)
            await none.send(head + "Content-Length: \(entity.utf8.count)\r\n\r\n")
            cases.append(("no body", none))
            let part = try RawConnection(server.url)
            await part.send(head + "Content-Length: \(entity.utf8.count)\r\n\r\n" + entity.prefix(10))
            cases.append(("part of the body", part))
            let chunked = try RawConnection(server.url)
            await chunked.send(head + "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"Pro\r\n")
            cases.append(("chunked, no last chunk", chunked))
            let trickle = try RawConnection(server.url)
            await trickle.send(head + "Content-Length: \(entity.utf8.count)\r\n\r\n")
            cases.append(("a byte every 200 ms", trickle))
            // The trickle takes 77 × 0.3 s = 23 s to finish its body, far past the 2 s request
            // timeout; the bound (20 s) is loose because a loaded CI machine delayed the close to
            // 10.1 s once (at 12d1f41), yet below the 23 s a server without the timeout would need.
            let start = Date()
            for byte in entity.utf8 {
                guard await trickle.send([byte]) else { break }
                trickle.drain()
                if trickle.closed || Date().timeIntervalSince(start) > 20 { break }
                try await Task.sleep(nanoseconds: 300_000_000)
            }
            for (name, c) in cases {
                #expect(
                    await c.waitClosed(within: 20), "\(name): still open \(Date().timeIntervalSince(start)) s later")
                #expect(
                    String(decoding: c.received, as: UTF8.self).hasPrefix("HTTP/1.1 408"),
                    "\(name): \(String(decoding: c.received.prefix(200), as: UTF8.self))")
            }
            #expect(Date().timeIntervalSince(start) < 20, "closed after \(Date().timeIntervalSince(start)) s")
        }
        #expect(try OfflineStore.open(at: dir, readOnly: true).count(set: "Products") == before)
    }

    /// HTTP/1.0 without keep-alive and `Connection: close` end after the answer; HTTP/1.0 with
    /// keep-alive and HTTP/1.1 stay open for the next request (within the idle timeout).
    @Test func theConnectionEndsAfterTheAnswerWhenTheClientAsksIt() async throws {
        // An idle timeout far above the bound below: the close is the answer's, not idleness.
        try await withServer(try ServeTests.sampleStore(), extra: ["--idle-timeout", "60"]) { _, server in
            for request in [
                "GET /$metadata HTTP/1.0\r\n\r\n",
                "GET /Products HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n",
                "GET /Products('HT-1000') HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                "DELETE /Products('NOPE') HTTP/1.0\r\n\r\n",
            ] {
                let c = try RawConnection(server.url)
                await c.send(request)
                let start = Date()
                #expect(await c.waitClosed(within: 20), "'\(request.prefix(40))' still open after its answer")
                let took = Date().timeIntervalSince(start)
                #expect(took < 20, "closed after \(took) s")  // the idle timeout is 60 s: the close is the answer's
                let text = String(decoding: c.received, as: UTF8.self)
                #expect(text.hasPrefix("HTTP/1.1 200") || text.hasPrefix("HTTP/1.1 404"), "\(text.prefix(100))")
            }
            for (version, extra) in [("HTTP/1.0", "Connection: keep-alive\r\n"), ("HTTP/1.1", "")] {
                let c = try RawConnection(server.url)
                for _ in 0..<3 {
                    await c.send("GET /$metadata \(version)\r\nHost: 127.0.0.1\r\n\(extra)\r\n")
                    #expect(try await c.response().status == 200)
                    try await Task.sleep(nanoseconds: 300_000_000)
                    c.drain()
                    #expect(!c.closed, "\(version) \(extra) closed between requests")
                }
            }
        }
    }

    /// A slow but honest client within the timeouts is served whole: a head in three pieces, a
    /// body in three, keep-alive pauses shorter than the idle timeout.
    @Test func aSlowHonestClientWithinTheTimeoutsIsServed() async throws {
        // Timeouts far above the pauses: the pauses are Task.sleeps on the test's cooperative
        // pool, which other suites' synchronous work stretches (a CI run at d574cc3 saw 0.9 s of
        // pauses outlast a 6 s request timeout). The other tests prove the timeouts fire.
        let extra = ["--header-timeout", "60", "--request-timeout", "120", "--idle-timeout", "180"]
        try await withServer(try ServeTests.sampleStore(), extra: extra) { _, server in
            let c = try RawConnection(server.url)
            let body = #"{"ProductID":"HX-2","Name":"slow","Category":"c","Price":2,"CurrencyCode":"EUR"}"#
            let request =
                "POST /Products HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
                + body
            let bytes = Array(request.utf8)
            for piece in stride(from: 0, to: bytes.count, by: bytes.count / 5 + 1) {
                await c.send(Array(bytes[piece..<min(bytes.count, piece + bytes.count / 5 + 1)]))
                try await Task.sleep(nanoseconds: 150_000_000)
            }
            let created = try await c.response()
            #expect(created.status == 201, "\(created.text)")
            try await Task.sleep(nanoseconds: 2_000_000_000)
            await c.send("GET /Products('HX-2') HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let read = try await c.response()
            #expect(read.status == 200 && read.object["Name"] as? String == "slow")
        }
    }

    /// The defaults are finite, and `serve --help` names every timeout and limit.
    @Test(.runsOffThePool) func defaultsAreBoundedAndDocumented() throws {
        let help = try CLI.run(["serve", "--help"]).stdout
        for option in [
            "--header-timeout", "--request-timeout", "--idle-timeout", "--write-timeout", "--public-url",
            "--max-batch-response", "--query-threads", "--max-batch-writes", "--max-streams-per-client",
        ] {
            #expect(help.contains(option), "serve --help does not name \(option)")
        }
        for bad in [
            ["--header-timeout", "0"], ["--write-timeout", "-1"], ["--idle-timeout", "nan"],
            ["--public-url", "http://evil\"/"], ["--public-url", "ftp://x/"], ["--public-url", "http://h/a/../b/"],
            ["--query-threads", "0"], ["--max-batch-response", "0"], ["--max-batch-writes", "0"],
            ["--max-streams-per-client", "0"],
        ] {
            let run = try CLI.run(["serve", "--store", tempDir() + "/none"] + bad)
            #expect(run.status != 0, "serve accepted \(bad)")
        }
    }

    // MARK: 13. write timeout

    /// A client that asks for a large answer and never reads it is disconnected after the write
    /// timeout; the server goes on answering others meanwhile.
    @Test func aClientThatStopsReadingIsDisconnected() async throws {
        try await withServer(try ServeTests.sampleStore(items: 60_000), extra: Self.quick) { http, server in
            let stuck = try RawConnection(server.url)
            await stuck.send("GET /SalesOrderItems HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let start = Date()
            // Others are served while it hangs.
            #expect(try await http.get("$metadata").status == 200)
            // Wait past the write timeout (2 s) without reading a byte, then see the end.
            try await Task.sleep(nanoseconds: 5_000_000_000)
            var total = 0
            var closed = false
            while Date().timeIntervalSince(start) < 60 {  // a loaded CI machine took longer than 20 s
                stuck.drain()
                total += stuck.received.count
                if stuck.closed { closed = true; break }
                try await Task.sleep(nanoseconds: 20_000_000)
            }
            let all = try await http.get("SalesOrderItems/$count")
            #expect(closed, "the stuck connection is still open after \(Date().timeIntervalSince(start)) s")
            #expect(all.status == 200)
            #expect(total < 60_000 * 100, "the whole answer (\(total) bytes) was sent: the client was not stuck")
        }
    }

    // MARK: 14. $batch answers

    /// The answers of a `$batch` are bounded: 400 reads of a large answer take at most
    /// `--max-batch-response` bytes; past it each read answers 507 inside the batch, and so does
    /// the write among them, which is not applied (write answers count against the bound too,
    /// `ServeLoadLimitTests`); the server's memory stays bounded.
    @Test func aBatchsAnswersAreBounded() async throws {
        let dir = try await ServeTests.sampleStore(items: 6_000)
        func batch(_ url: String, write id: String) -> String {
            var requests = (0..<400).map { #"{"id":"r\#($0)","method":"GET","url":"\#(url)"}"# }
            requests.insert(
                #"{"id":"w","method":"POST","url":"Products","body":{"ProductID":"\#(id)","Name":"b","Category":"c","Price":1,"CurrencyCode":"EUR"}}"#,
                at: 200)
            return #"{"requests":["# + requests.joined(separator: ",") + "]}"
        }
        try await withServer(dir, extra: ["--max-batch-response", "1M"]) { http, server in
            let body = batch("SalesOrderItems?$top=500", write: "HB-1")
            #expect(body.utf8.count < 30_000)
            let start = Date()
            let reply = try await http.send(.POST, "$batch", body: body)
            let took = Date().timeIntervalSince(start)
            #expect(reply.status == 200)
            #expect(reply.body.count < 1_200_000, "the batch's answers took \(reply.body.count) bytes")
            let responses = reply.object["responses"] as? [[String: Any]] ?? []
            #expect(responses.count == 401)
            let statuses = responses.map { $0["status"] as? Int ?? 0 }
            let ok = statuses.filter { $0 == 200 }.count
            #expect(ok >= 3 && ok < 20 && statuses.filter { $0 == 507 }.count == 401 - ok, "statuses: \(statuses)")
            #expect(Array(statuses.prefix(ok)) == Array(repeating: 200, count: ok), "a read after a 507 answered")
            #expect(responses.first { $0["id"] as? String == "w" }?["status"] as? Int == 507)
            #expect(try await http.get("Products('HB-1')").status == 404, "a write past the bound was applied")
            let message = ((responses.last?["body"] as? [String: Any])?["error"] as? [String: Any])?["message"]
            #expect((message as? String)?.contains("outside the batch") == true, "\(message ?? "")")
            // Reads after the first 507 do not run: 0.2 s on a quiet machine. When each ran up to
            // the bound, this batch took 45 s in a loaded CI run (and the full reads below 7 s on
            // a quiet machine, 0.6 s now). A loaded CI run still took 21 s with the fix (the full
            // reads 45 s): the bound is only one on a hang.
            print("batch of 400 reads past a 1M bound: \(reply.body.count) bytes in \(took) s")
            #expect(took < 180, "the batch took \(took) s")
            _ = server
        }
        // 400 full reads of 1.2 MB each (480 MB collected whole before the bound), twice, with the
        // default limit (16 MiB): the server's peak memory stays bounded.
        try await withServer(dir) { http, server in
            let before = peakMemoryKiB(server.pid) ?? 0
            for n in 0..<2 {
                let start = Date()
                let r = try await http.send(.POST, "$batch", body: batch("SalesOrderItems", write: "HB-\(n + 2)"))
                #expect(r.status == 200 && r.body.count <= (16 << 20) + 1_000_000, "\(r.body.count) bytes")
                print("batch of 400 full reads: \(r.body.count) bytes in \(Date().timeIntervalSince(start)) s")
            }
            let after = peakMemoryKiB(server.pid) ?? 0
            #expect(after - before < 200 * 1024, "the server's peak grew \((after - before) / 1024) MiB")
            print("batch peak memory: \(before / 1024) → \(after / 1024) MiB")
        }
    }

    // MARK: 16. Host

    /// Links, `@odata.context`, `Location` and `OData-EntityId` never carry the client's `Host`:
    /// a well-formed foreign one is ignored (the bound address is named), a malformed one is 400.
    @Test func linksNeverComeFromTheHostHeader() async throws {
        let dir = try await ServeTests.sampleStore()
        try await withServer(dir, extra: ["--page-size", "2"]) { _, server in
            let root = server.url
            for host in ["evil.example:666", "evil.example", "10.0.0.1:80", "[::1]:8080", "localhost"] {
                for target in ["/", "/Products", "/Products('HT-1000')", "/Products?$top=1"] {
                    let c = try RawConnection(server.url)
                    await c.send("GET \(target) HTTP/1.1\r\nHost: \(host)\r\n\r\n")
                    let r = try await c.response()
                    #expect(r.status == 200, "\(host) \(target): \(r.status)")
                    #expect(!r.text.contains(host) || host == "localhost", "\(host) \(target): \(r.text.prefix(300))")
                    #expect(
                        (r.object["@odata.context"] as? String)?.hasPrefix(root) == true,
                        "\(host) \(target): \(r.object["@odata.context"] ?? "none")")
                    if let next = r.object["@odata.nextLink"] as? String {
                        #expect(next.hasPrefix(root), "\(host): next link \(next)")
                    }
                }
                let c = try RawConnection(server.url)
                let id = "HH-\(UUID().uuidString.prefix(7))"
                let body = #"{"ProductID":"\#(id)","Name":"h","Category":"c","Price":1,"CurrencyCode":"EUR"}"#
                await c.send(
                    "POST /Products HTTP/1.1\r\nHost: \(host)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
                )
                let created = try await c.response()
                #expect(created.status == 201)
                #expect(created.header("Location") == root + "Products('\(id)')", "\(created.header("Location") ?? "")")
            }
            for host in [
                "evil\".example", "a/../b", "x/y", "h:99999", "h:", ":80", "h h", "[::1", "h:8o", "e\\vil", "h?x",
                "h#x",
                "user@h", "%2e%2e",
            ] {
                let c = try RawConnection(server.url)
                await c.send("GET /Products HTTP/1.1\r\nHost: \(host)\r\n\r\n")
                let r = try await c.response()
                #expect(r.status == 400, "Host '\(host)' answered \(r.status)")
                #expect(!r.text.contains("@odata.context"))
            }
        }
        // A $batch may name its URLs absolutely, by the name the client reached the service by.
        try await withServer(dir) { http, server in
            let port = URL(string: server.url)!.port!
            let body =
                #"{"requests":[{"id":"1","method":"GET","url":"http://localhost:\#(port)/Products('HT-1000')"},"#
                + #"{"id":"2","method":"GET","url":"\#(server.url)Products('HT-1001')"}]}"#
            let reply = try await http.send(.POST, "$batch", body: body)
            let statuses = (reply.object["responses"] as? [[String: Any]])?.map { $0["status"] as? Int ?? 0 }
            #expect(statuses == [200, 200], "\(reply.text.prefix(400))")
        }
        // A configured public URL is named whatever Host says.
        try await withServer(dir, extra: ["--public-url", "https://data.example/odata/v1"]) { _, server in
            let c = try RawConnection(server.url)
            await c.send("GET /Products?$top=1 HTTP/1.1\r\nHost: evil.example:666\r\n\r\n")
            let r = try await c.response()
            #expect(r.object["@odata.context"] as? String == "https://data.example/odata/v1/$metadata#Products")
        }
    }

    // MARK: 17. malformed chunked bodies

    /// Every malformed chunked body answers 400 (a client error, never 500) and closes the
    /// connection; nothing is written; a well-formed chunked body still creates.
    @Test func aMalformedChunkedBodyIs400() async throws {
        let dir = try await ServeTests.sampleStore()
        let before = try OfflineStore.open(at: dir, readOnly: true).count(set: "Products")
        try await withServer(dir) { _, server in
            let head =
                "POST /Products HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            let bodies = [
                "zz\r\n{}\r\n0\r\n\r\n",  // not hex
                "5\r\n{\"a\":1}\r\n0\r\n\r\n",  // longer than its size
                "2\r\n{}XX0\r\n\r\n",  // no CRLF after the data
                "ffffffffffffffffffff\r\n{}\r\n0\r\n\r\n",  // size overflows
                "-2\r\n{}\r\n0\r\n\r\n",  // negative
                "2 x\r\n{}\r\n0\r\n\r\n",  // space in the size
                "\r\n{}\r\n0\r\n\r\n",  // empty size line
                "2\n{}\n0\n\n",  // bare LF
            ]
            for body in bodies {
                let c = try RawConnection(server.url)
                await c.send(head + body)
                let r = try await c.response(within: 10)
                #expect(r.status == 400, "\(body.debugDescription): \(r.status) \(r.text.prefix(200))")
                #expect(await c.waitClosed(within: 5), "\(body.debugDescription): the connection stays open")
            }
            // Both Content-Length and chunked (a smuggling shape): refused too.
            let both = try RawConnection(server.url)
            await both.send(
                "POST /Products HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
            )
            let r = try await both.response(within: 10)
            #expect(r.status == 400)
            let good = try RawConnection(server.url)
            let entity = #"{"ProductID":"HC-1","Name":"c","Category":"c","Price":1,"CurrencyCode":"EUR"}"#
            let n = entity.utf8.count
            await good.send(
                head + String(n / 2, radix: 16) + "\r\n" + entity.prefix(n / 2) + "\r\n"
                    + String(n - n / 2, radix: 16) + "\r\n" + entity.dropFirst(n / 2) + "\r\n0\r\n\r\n")
            #expect(try await good.response().status == 201)
        }
        #expect(try OfflineStore.open(at: dir, readOnly: true).count(set: "Products") == before + 1)
    }
}
