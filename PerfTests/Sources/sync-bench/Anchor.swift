import AsyncHTTPClient
import Foundation
import Glibc
import NIOCore
import NIOHTTP1

// The anchors: the same HTTP requests as flush and refresh send, by a bare AsyncHTTPClient loop —
// no store, no parsing beyond finding the next link and checking statuses. Each runs in a child
// process of its own (`sync-bench anchor-flush|anchor-read …`), so its peak memory is its own; it
// times its loop itself and prints one line, `anchor: requests=… items=… seconds=… cpu=… maxrss_kib=…`.

/// What an anchor child prints, parsed by the parent.
struct AnchorResult {
    var requests: Int
    var items: Int
    var seconds: Double
    var cpuSeconds: Double
    var peakRSSMiB: Double

    init(requests: Int, items: Int, seconds: Double, cpuSeconds: Double, peakRSSMiB: Double) {
        (self.requests, self.items, self.seconds, self.cpuSeconds, self.peakRSSMiB) = (
            requests, items, seconds, cpuSeconds, peakRSSMiB
        )
    }

    init(line: String) throws {
        guard let l = line.split(separator: "\n").last(where: { $0.hasPrefix("anchor: ") }) else {
            throw BenchError("the anchor printed no result: \(line.prefix(300))")
        }
        var f: [String: String] = [:]
        for part in l.dropFirst(8).split(separator: " ") {
            let kv = part.split(separator: "=", maxSplits: 1)
            if kv.count == 2 { f[String(kv[0])] = String(kv[1]) }
        }
        guard let r = f["requests"].flatMap(Int.init), let i = f["items"].flatMap(Int.init),
            let s = f["seconds"].flatMap(Double.init),
            let c = f["cpu"].flatMap(Double.init), let m = f["maxrss_kib"].flatMap(Double.init)
        else { throw BenchError("cannot read the anchor's line: \(l)") }
        self.init(requests: r, items: i, seconds: s, cpuSeconds: c, peakRSSMiB: m / 1024)
    }

    var line: String {
        "anchor: requests=\(requests) items=\(items) seconds=\(seconds) cpu=\(cpuSeconds) maxrss_kib=\(Int(peakRSSMiB * 1024))"
    }
}

func selfCPUSeconds() -> Double {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    return seconds(u.ru_utime) + seconds(u.ru_stime)
}

func selfPeakRSSMiB() -> Double {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    return Double(u.ru_maxrss) / 1024
}

enum Anchor {
    static func client() -> HTTPClient {
        HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: .init(redirectConfiguration: .disallow, timeout: .init(connect: .seconds(10))))
    }

    /// One request as flush's `HTTPTransport` sends it: `OData-Version`, `Accept`, the body's type.
    static func request(
        _ url: String, method: HTTPMethod = .GET, headers: [(String, String)] = [], body: [UInt8]? = nil
    ) -> HTTPClientRequest {
        var r = HTTPClientRequest(url: url)
        r.method = method
        r.headers.add(name: "OData-Version", value: "4.0")
        r.headers.add(name: "Accept", value: "application/json")
        for (k, v) in headers { r.headers.replaceOrAdd(name: k, value: v) }
        if let body {
            r.headers.add(name: "Content-Type", value: "application/json")
            r.body = .bytes(ByteBuffer(bytes: body))
        }
        return r
    }

    static func fetch(_ client: HTTPClient, _ r: HTTPClientRequest) async throws -> (Int, ByteBuffer) {
        let response = try await client.execute(r, timeout: .seconds(300))
        let body = try await response.body.collect(upTo: 1 << 30)
        return (Int(response.status.code), body)
    }

    /// `anchor-flush SERVICE BATCH FILE`: FILE has one `$batch` request object per line (as flush
    /// writes them: id, method, url, headers, body); sends them BATCH at a time, one round trip
    /// after another, as flush does, and checks every answer is 2xx.
    static func flush(service: String, batch: Int, file: String) async throws {
        let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n").map { Array($0.utf8) }
        let client = client()
        do {
            let cpu0 = selfCPUSeconds()
            let start = DispatchTime.now().uptimeNanoseconds
            var i = 0, trips = 0
            while i < lines.count {
                var body: [UInt8] = Array(#"{"requests":["#.utf8)
                let end = min(i + batch, lines.count)
                for k in i..<end {
                    if k > i { body.append(UInt8(ascii: ",")) }
                    body.append(contentsOf: lines[k])
                }
                body.append(contentsOf: "]}".utf8)
                let (status, answer) = try await fetch(client, request(service + "$batch", method: .POST, body: body))
                guard status == 200 else {
                    throw BenchError("$batch answered \(status): \(String(buffer: answer).prefix(300))")
                }
                let statuses = Self.statuses(answer)
                guard statuses.count == end - i, statuses.allSatisfy({ (200..<300).contains($0) }) else {
                    throw BenchError(
                        "$batch of \(end - i): statuses \(statuses.prefix(10)): \(String(buffer: answer).prefix(400))")
                }
                i = end
                trips += 1
            }
            let secs = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            print(
                AnchorResult(
                    requests: trips, items: lines.count, seconds: secs, cpuSeconds: selfCPUSeconds() - cpu0,
                    peakRSSMiB: selfPeakRSSMiB()
                ).line)
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }

    /// The numbers after `"status":` in a `$batch` answer.
    static func statuses(_ b: ByteBuffer) -> [Int] {
        let needle = Array(#""status":"#.utf8)
        var out: [Int] = []
        b.withUnsafeReadableBytes { raw in
            let p = raw.bindMemory(to: UInt8.self)
            var i = 0
            while i + needle.count < p.count {
                if p[i] == needle[0], (0..<needle.count).allSatisfy({ p[i + $0] == needle[$0] }) {
                    var j = i + needle.count, n = 0
                    while j < p.count, p[j] >= 48, p[j] <= 57 { n = n * 10 + Int(p[j] - 48); j += 1 }
                    out.append(n)
                    i = j
                } else {
                    i += 1
                }
            }
        }
        return out
    }

    /// `anchor-read URL PAGESIZE [DELTAFILE]`: GETs URL with `Prefer: odata.maxpagesize=N,
    /// odata.track-changes` and follows `@odata.nextLink` to the end, as refresh reads a defining
    /// request; counts the entities (their `@odata.etag` or `@removed` members). With DELTAFILE, the
    /// last page's `@odata.deltaLink` is written there.
    static func read(url first: String, pageSize: Int, deltaFile: String?) async throws {
        let client = client()
        do {
            let cpu0 = selfCPUSeconds()
            let start = DispatchTime.now().uptimeNanoseconds
            var next: String? = first
            var pages = 0, items = 0
            var delta: String?
            while let url = next {
                let (status, body) = try await fetch(
                    client, request(url, headers: [("Prefer", "odata.maxpagesize=\(pageSize), odata.track-changes")]))
                guard status == 200 else {
                    throw BenchError("GET \(url): \(status): \(String(buffer: body).prefix(300))")
                }
                pages += 1
                items += count(#""@odata.etag":"#, in: body) + count(#""@removed":"#, in: body)
                next = link(#""@odata.nextLink":""#, in: body)
                if next == nil { delta = link(#""@odata.deltaLink":""#, in: body) }
            }
            let secs = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            if let deltaFile {
                guard let delta else { throw BenchError("the last page of \(first) has no @odata.deltaLink") }
                try delta.write(toFile: deltaFile, atomically: true, encoding: .utf8)
            }
            print(
                AnchorResult(
                    requests: pages, items: items, seconds: secs, cpuSeconds: selfCPUSeconds() - cpu0,
                    peakRSSMiB: selfPeakRSSMiB()
                ).line)
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }

    static func count(_ needle: String, in b: ByteBuffer) -> Int {
        let n = Array(needle.utf8)
        return b.withUnsafeReadableBytes { raw -> Int in
            let p = raw.bindMemory(to: UInt8.self)
            guard p.count >= n.count else { return 0 }
            var c = 0, i = 0
            let last = p.count - n.count
            while i <= last {
                // memchr for the first byte, then compare the rest.
                guard let hit = memchr(p.baseAddress! + i, Int32(n[0]), last - i + 1) else { break }
                i = UnsafePointer<UInt8>(hit.assumingMemoryBound(to: UInt8.self)) - p.baseAddress!
                if memcmp(p.baseAddress! + i, n, n.count) == 0 { c += 1; i += n.count } else { i += 1 }
            }
            return c
        }
    }

    /// The string value after `needle` (which ends with the opening quote), searched from the end:
    /// the links come after the `value` array. JSON's `\/` is undone.
    static func link(_ needle: String, in b: ByteBuffer) -> String? {
        let tail =
            b.getString(at: b.readerIndex + max(0, b.readableBytes - 4096), length: min(4096, b.readableBytes)) ?? ""
        guard let r = tail.range(of: needle, options: .backwards) else { return nil }
        let rest = tail[r.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return nil }
        return rest[..<end].replacingOccurrences(of: "\\/", with: "/")
    }
}
