import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore
import Samples

#if canImport(Glibc)
import Glibc
#endif

/// `serve` under load (issue 37, F9, F10 and F11): live queries beside `$metadata`, writes beside
/// hundreds of streams that never read, and the memory of the largest `$batch` of creates it
/// takes. Each prints what it measured and is bounded by its knobs (counts and seconds,
/// TESTING.md). Every figure is timed on threads of the test's own with blocking sockets, so it
/// is the server's, not the wait of a test task for the test process's concurrency pool.
@Suite(.soak, .serialized, .checksStores) struct ServeLoadSoakTests {
    static func knob(_ name: String, _ value: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? value
    }

    static let item = "SalesOrderItems(SalesOrderID='0500000001',ItemPosition=10)"

    /// F9: four clients keep the same four full scans (no index, a tiny answer) live — as
    /// Server-Sent Events, re-run on every `PATCH` (one each 0.3 s) — or, the control, repeat
    /// them as plain GETs beside the same PATCHes, while `GET $metadata` is timed (every 0.1 s
    /// on a thread of the test's). Live, its median and 90th percentile stay within twice the
    /// control's (with 20 ms for the timer's noise), and it is answered at least half as often:
    /// the live queries run on the query threads, as plain GETs do, not on Swift's concurrency
    /// pool (where the median was 3.1–4.3 s against 5–7 ms at 300,000 entities; at 150,000 here
    /// the 90th percentile was 1.8 s against 15 ms, and a PATCH waited 3.7 s).
    @Test func liveQueriesDoNotStarveMetadata() async throws {
        let items = Self.knob("SERVE_LIVE_SCAN_ITEMS", 150_000)
        let seconds = Double(Self.knob("SERVE_LIVE_SCAN_SECONDS", 12))
        let dir = try await ServeTests.sampleStore(items: items)
        let scans = (1...4).map { "SalesOrderItems?$filter=contains(CurrencyCode,'ZZ\($0)')%20or%20Quantity%20lt%200" }
        var figures: [String: (median: Double, p90: Double, count: Int)] = [:]
        for mode in ["plain GETs", "live queries"] {
            try await withServer(dir) { http, server in
                let t0 = Date()
                #expect(try await http.get(scans[0]).status == 200)
                let oneScan = Date().timeIntervalSince(t0)
                let stopAt = Date().addingTimeInterval(seconds)
                // Each PATCH gives the item a new negative quantity, which every scan's result holds:
                // each run of a live query has a new result to send. (It toggled the item in and
                // out of the results; runs that came an even number of PATCHes apart sent nothing,
                // and a CI run counted [1, 2, 2, 2] events for a dozen runs.)
                let patches = Task {
                    await onAThread {
                        blockingLoop(server.url, until: stopAt, pause: 0.3) { n in
                            ("PATCH", Self.item, #"{"Quantity":\#(-1 - n)}"#)
                        }
                    }
                }
                var streams: [RawConnection] = []
                var scanners: [Task<Int, Never>] = []
                if mode == "live queries" {
                    for scan in scans {
                        let c = try RawConnection(server.url)
                        await c.send("GET /\(scan) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
                        streams.append(c)
                    }
                } else {
                    for scan in scans {
                        scanners.append(
                            Task {
                                await onAThread {
                                    blockingLoop(server.url, until: stopAt, pause: 0) { _ in ("GET", scan, nil) }.count
                                }
                            })
                    }
                }
                // Readers that keep up, so the streams are never held back by their clients.
                let reading = Task {
                    while Date() < stopAt {
                        for c in streams { c.drain() }
                        try? await Task.sleep(nanoseconds: 50_000_000)
                    }
                }
                try await Task.sleep(nanoseconds: UInt64(min(1.0, oneScan) * 1e9))
                var times = await timeRequestsOnAThread(
                    server.url, paths: ["$metadata"], until: stopAt.addingTimeInterval(-0.5), pause: 0.1)
                let written = await patches.value
                var scanned = 0
                for s in scanners { scanned += await s.value }
                await reading.value
                let events = streams.map {
                    String(decoding: $0.received, as: UTF8.self).components(separatedBy: "event: result").count - 1
                }
                #expect(!times.contains { $0 == nil }, "\(times.filter { $0 == nil }.count) $metadata requests failed")
                var short = times.compactMap { $0 }
                short.sort()
                times = []
                let median = short.isEmpty ? .infinity : short[short.count / 2]
                let p90 = short.isEmpty ? .infinity : short[short.count * 9 / 10]
                figures[mode] = (median, p90, short.count)
                print(
                    "F9 \(mode), \(items) items: one scan alone \(oneScan) s; \(written.count) PATCHes (max \(written.map(\.seconds).max() ?? 0) s); plain scans \(scanned); stream events \(events); $metadata \(short.count)×: median \(median) s, 90th percentile \(p90) s, max \(short.last ?? 0) s"
                )
                #expect(written.allSatisfy { $0.status == 204 }, "\(written.filter { $0.status != 204 }.prefix(3))")
                #expect(written.count >= 10, "\(written.count) PATCHes")
                if mode == "live queries" {
                    #expect(
                        events.allSatisfy { $0 >= 4 }, "the live queries ran too seldom: \(events)")
                } else {
                    #expect(scanned >= 4)
                }
            }
        }
        // Starved, most requests are still quick and a few wait seconds for a run to end (the
        // median hid it: 2 ms, the 90th percentile 1.8 s): the median and the 90th percentile
        // are bounded, and the count, which the slow ones drag down.
        let control = figures["plain GETs"] ?? (0, 0, 0)
        let live = figures["live queries"] ?? (.infinity, .infinity, 0)
        #expect(
            live.median <= 2 * control.median + 0.02 && live.p90 <= 2 * control.p90 + 0.02,
            "$metadata beside live queries: median \(live.median) s, 90th percentile \(live.p90) s; beside GETs \(control.median) s, \(control.p90) s"
        )
        #expect(live.count * 2 >= control.count, "$metadata answered \(live.count) times, \(control.count) beside GETs")
    }

    /// F10: one client PATCHes an entity of a ~400 KB live result as fast as it is answered,
    /// for `SERVE_FANOUT_SECONDS` (10) alone — the control — and then beside
    /// `SERVE_FANOUT_STREAMS` (300) streams of that result whose clients never read (15 each from
    /// 20 loopback addresses, within the per-client bound). With them it still writes at a
    /// quarter of the control's rate or more (issue 37's bound), and no PATCH waits a second (it
    /// was 2–5 PATCHes in 15 s, the worst 16 s: each stream copied and reformatted the result on
    /// Swift's concurrency pool). Beside 30 streams that read every event the bound is an eighth:
    /// there the test's own reader thread shares the two cores, and the measured share moved from
    /// 20% (CI, 2026-11-28) to 55%; starvation, which this guards against, was under 1%.
    @Test func streamsThatNeverReadDoNotStopWrites() async throws {
        let count = Self.knob("SERVE_FANOUT_STREAMS", 300)
        let seconds = Double(Self.knob("SERVE_FANOUT_SECONDS", 10))
        let dir = try await ServeTests.sampleStore(items: 3_000)
        try await withServer(dir) { http, server in
            let live = "SalesOrderItems?$select=ProductID"
            let size = try await http.get(live).body.count
            #expect(size > 300_000 && size < 1 << 20, "the result is \(size) bytes")
            func patching() async -> [(status: Int, seconds: Double)] {
                let stopAt = Date().addingTimeInterval(seconds)
                return await onAThread {
                    blockingLoop(server.url, until: stopAt, pause: 0) { n in
                        ("PATCH", Self.item, #"{"Quantity":\#(n % 50 + 1)}"#)
                    }
                }
            }
            let control = await patching()
            var streams: [RawConnection] = []
            for n in 0..<count {
                let c = try RawConnection(server.url, from: "127.0.0.\(n % 20 + 2)")
                await c.send("GET /\(live) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
                streams.append(c)
            }
            // Each has its answer's head (one read of at most 512 bytes; never another).
            var heads = 0
            let start = Date()
            var pending = streams
            while !pending.isEmpty, Date().timeIntervalSince(start) < 60 {
                pending = pending.filter { c in
                    guard let head = c.peek(512) else { return true }
                    if head.starts(with: Array("HTTP/1.1 200".utf8)) { heads += 1 }
                    return false
                }
                try await Task.sleep(nanoseconds: 20_000_000)
            }
            let opened = Date().timeIntervalSince(start)
            let loaded = await patching()
            let memory = peakMemoryKiB(server.pid) ?? 0
            let worst = loaded.map(\.seconds).max() ?? 0
            let times = loaded.map(\.seconds).sorted()
            let (median, p99) = times.isEmpty ? (0, 0) : (times[times.count / 2], times[times.count * 99 / 100])
            print(
                "F10 \(count) streams of \(size) bytes that never read (heads in \(opened) s): \(loaded.count) PATCHes in \(seconds) s (median \(median) s, 99th percentile \(p99) s, max \(worst) s); alone \(control.count) (max \(control.map(\.seconds).max() ?? 0) s); serve VmHWM \(memory >> 10) MiB"
            )
            #expect(heads == count, "\(heads) of \(count) streams answered 200")
            #expect(control.count >= 20, "the control wrote \(control.count) times")
            #expect(loaded.allSatisfy { $0.status == 204 }, "\(loaded.filter { $0.status != 204 }.prefix(3))")
            #expect(
                loaded.count * 4 >= control.count, "\(loaded.count) PATCHes beside the streams, \(control.count) alone")
            #expect(worst < 1, "a PATCH beside the streams took \(worst) s")
            streams.removeAll()

            // `SERVE_FANOUT_READERS` (30) clients that read every event, on a thread of the
            // test's (printed, and held to the same bounds: it was 16–35 PATCHes in 15 s, the
            // worst 2.9 s).
            let readers = try (0..<Self.knob("SERVE_FANOUT_READERS", 30)).map { n in
                try RawConnection(server.url, from: "127.0.1.\(n % 20 + 2)")
            }
            for c in readers {
                await c.send("GET /\(live) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
            }
            let readUntil = Date().addingTimeInterval(seconds + 1)
            let reading = Task { await onAThread { readAndDrop(readers, until: readUntil) } }
            let read = await patching()
            let (bytes, events) = await reading.value
            let readWorst = read.map(\.seconds).max() ?? 0
            print(
                "F10 \(readers.count) streams that read: \(read.count) PATCHes in \(seconds) s (max \(readWorst) s); they read \(bytes >> 20) MiB, \(events) events"
            )
            #expect(events >= readers.count, "\(events) events reached \(readers.count) readers")
            #expect(read.count * 8 >= control.count, "\(read.count) PATCHes beside the readers, \(control.count) alone")
            #expect(readWorst < 1, "a PATCH beside the readers took \(readWorst) s")
        }
    }

    /// Streams that end while their live query publishes a result (found by the test above, one
    /// run in three or four): a stream's end took the live queries' lock from inside the
    /// concurrency runtime's lock of the task being cancelled, while a publish, holding the live
    /// queries' lock, waited for that task's lock to resume it — both of the pool's threads
    /// stopped, and `serve` answered nothing more, not even SIGTERM. `SERVE_CHURN_ROUNDS` (10)
    /// rounds: 300 streams of a 400 KB result that never read, while a writer changes it, closed
    /// at once as 30 others join; after each, `$metadata` and a PATCH must be answered within 5 s
    /// (timed on a thread of the test's, with socket timeouts).
    @Test func streamsEndingWhileResultsArePublishedDoNotStopTheServer() async throws {
        let rounds = Self.knob("SERVE_CHURN_ROUNDS", 10)
        try await withServer(try ServeTests.sampleStore(items: 3_000)) { http, server in
            let path = "SalesOrderItems?$select=ProductID"
            func open(_ count: Int, from network: String) async throws -> [RawConnection] {
                var streams: [RawConnection] = []
                for n in 0..<count {
                    let c = try RawConnection(server.url, from: "\(network).\(n % 20 + 2)")
                    await c.send("GET /\(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
                    streams.append(c)
                }
                return streams
            }
            func patch(for seconds: Double) async -> [(status: Int, seconds: Double)] {
                let stopAt = Date().addingTimeInterval(seconds)
                return await onAThread {
                    blockingLoop(server.url, until: stopAt, pause: 0) { n in
                        ("PATCH", Self.item, #"{"Quantity":\#(n % 50 + 1)}"#)
                    }
                }
            }
            for round in 0..<rounds {
                // 300 streams that never read, their writes blocked, while the result changes.
                var stuck = try await open(300, from: "127.0.\(round % 2 * 2 + 2)")
                _ = await patch(for: 1)
                // All closed at once; 30 others join the same live query at once, and the result
                // changes under them.
                stuck.removeAll()
                let joining = try await open(30, from: "127.0.\(round % 2 * 2 + 3)")
                let written = await patch(for: 0.5)
                let answered = await onAThread { () -> [Int] in
                    [
                        blockingRequest(server.url, "GET", "$metadata", body: nil, timeout: 5),
                        blockingRequest(server.url, "PATCH", Self.item, body: #"{"Quantity":7}"#, timeout: 5),
                    ]
                }
                let worst = written.map(\.seconds).max() ?? 0
                #expect(
                    answered == [200, 204] && worst < 5,
                    "round \(round): \(answered), a PATCH \(worst) s; \(server.diagnosis())")
                guard answered == [200, 204] else { return }
                _ = joining
            }
            print("F10 churn: \(rounds) rounds of 300 streams closed while 30 joined; served after each")
            #expect(try await http.get("$metadata").status == 200)
        }
    }

    /// F11: `serve`'s memory for the largest `$batch` of creates it takes — `--max-batch-writes`
    /// (10,000 by default) tiny creates in change sets of 1,000 — read from /proc (VmHWM, the
    /// peak; RssAnon, its anonymous memory after) and printed; and a batch of ten times as many is
    /// refused 413 before anything runs, for far less (it grew serve by 342–372 MiB, and answered
    /// 53 MB past the 16M answer bound). A JSON batch of a million reads is refused too (no answer
    /// within 600 s before), after its body is parsed: the figure is printed.
    @Test func theLargestBatchOfCreatesTakesBoundedMemory() async throws {
        let limit = Self.knob("SERVE_BATCH_WRITES", 10_000)
        let dir = try await ServeTests.sampleStore()
        let before = try OfflineStore.open(at: dir, readOnly: true).count(set: "Products")
        let extra = limit == 10_000 ? [] : ["--max-batch-writes", String(limit)]
        try await withServer(dir, extra: extra) { http, server in
            func batch(_ creates: Int, tag: String) -> String {
                var units: [MultipartBatchServeTests.Unit] = []
                for start in stride(from: 0, to: creates, by: 1_000) {
                    units.append(
                        .changeSet(
                            "cs\(start)",
                            (start..<min(creates, start + 1_000)).map { n in
                                MultipartBatchServeTests.request(
                                    "POST", "Products", contentID: "\(n)",
                                    body: #"{"ProductID":"\#(tag)\#(n)","Name":"b"}"#)
                            }))
                }
                return MultipartBatchServeTests.batch(units)
            }
            let (hwm0, anon0) = (peakMemoryKiB(server.pid) ?? 0, anonymousMemoryKiB(server.pid) ?? 0)
            let largest = batch(limit, tag: "A")
            var start = Date()
            let reply = try await MultipartBatchServeTests.post(http, largest)
            let took = Date().timeIntervalSince(start)
            let (hwm1, anon1) = (peakMemoryKiB(server.pid) ?? 0, anonymousMemoryKiB(server.pid) ?? 0)
            #expect(reply.status == 200, "\(reply.text.prefix(500))")
            let created = reply.text.components(separatedBy: "HTTP/1.1 201 Created").count - 1
            #expect(created == limit, "\(created) of \(limit) creates answered 201")
            #expect(reply.body.count <= 16 << 20)
            let tenTimes = batch(limit * 10, tag: "B")
            start = Date()
            let refused = try await MultipartBatchServeTests.post(http, tenTimes)
            let refusedTook = Date().timeIntervalSince(start)
            let (hwm2, anon2) = (peakMemoryKiB(server.pid) ?? 0, anonymousMemoryKiB(server.pid) ?? 0)
            #expect(refused.status == 413, "\(refused.status) \(refused.text.prefix(300))")
            #expect(refused.text.contains("--max-batch-writes"), "\(refused.text.prefix(300))")
            print(
                "F11 serve before: VmHWM \(hwm0 >> 10) MiB, RssAnon \(anon0 >> 10) MiB; a $batch of \(limit) creates (\(largest.utf8.count) bytes, answer \(reply.body.count) bytes, \(took) s): VmHWM \(hwm1 >> 10) MiB (+\((hwm1 - hwm0) >> 10)), RssAnon \(anon1 >> 10) MiB; one of \(limit * 10) (\(tenTimes.utf8.count) bytes) refused \(refused.status) in \(refusedTook) s: VmHWM \(hwm2 >> 10) MiB (+\((hwm2 - hwm1) >> 10)), RssAnon \(anon2 >> 10) MiB"
            )
            #expect(hwm1 - hwm0 < 128 << 10, "the largest batch grew serve by \((hwm1 - hwm0) >> 10) MiB")
            #expect(hwm2 - hwm1 < 64 << 10, "the refused batch grew serve by \((hwm2 - hwm1) >> 10) MiB")

            // A JSON batch of a million reads (55 MB): refused (more than 1,000 reads), but only
            // once its body is parsed whole — the JSON form's cost, which its count cannot bound.
            let reads = Self.knob("SERVE_BATCH_READS", 1_000_000)
            let json =
                #"{"requests":["#
                + (0..<reads).map { #"{"id":"\#($0)","method":"GET","url":"Products/$count"}"# }.joined(separator: ",")
                + "]}"
            start = Date()
            let readsRefused = try await http.send(.POST, "$batch", body: json)
            let readsTook = Date().timeIntervalSince(start)
            let hwm3 = peakMemoryKiB(server.pid) ?? 0
            print(
                "F11 a JSON $batch of \(reads) reads (\(json.utf8.count) bytes) refused \(readsRefused.status) in \(readsTook) s: VmHWM \(hwm3 >> 10) MiB (+\((hwm3 - hwm2) >> 10))"
            )
            #expect(readsRefused.status == 413, "\(readsRefused.status) \(readsRefused.text.prefix(300))")
            #expect(readsTook < 60, "a million reads were refused after \(readsTook) s (before: no answer in 600 s)")
        }
        #expect(try OfflineStore.open(at: dir, readOnly: true).count(set: "Products") == before + limit)
    }
}

/// `body`'s value, run on a thread of its own: a loop of blocking requests must not hold a
/// thread of the test process's concurrency pool (two on two cores), which the test's own tasks
/// need.
func onAThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { (done: CheckedContinuation<T, Never>) in
        Thread { done.resume(returning: body()) }.start()
    }
}

/// Reads what `streams` bring until `deadline`, dropping it: the bytes read, and the events
/// among them (`event: result` lines).
func readAndDrop(_ streams: [RawConnection], until deadline: Date) -> (bytes: Int, events: Int) {
    var buffer = [UInt8](repeating: 0, count: 1 << 20)
    let marker = Array("event: result".utf8)
    var (bytes, events) = (0, 0)
    while Date() < deadline {
        var idle = true
        for c in streams {
            let n = buffer.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            guard n > 0 else { continue }
            idle = false
            bytes += n
            var i = 0
            while i + marker.count <= n {
                if buffer[i] == marker[0], Array(buffer[i..<i + marker.count]) == marker { events += 1 }
                i += 1
            }
        }
        if idle { usleep(2_000) }
    }
    return (bytes, events)
}

/// A server process's anonymous memory now (`RssAnon`) in KiB, from /proc.
func anonymousMemoryKiB(_ pid: pid_t) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    for line in status.split(separator: "\n") where line.hasPrefix("RssAnon:") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    }
    return nil
}

/// Sends the request `next(n)` gives (method, path, body) again and again until `deadline`, one
/// at a time on a blocking socket each (`Connection: close`), pausing `pause` seconds between
/// them, on the calling thread: each one's status (0 when it failed) and time.
func blockingLoop(
    _ url: String, until deadline: Date, pause: Double, _ next: (Int) -> (String, String, String?)
) -> [(status: Int, seconds: Double)] {
    var out: [(status: Int, seconds: Double)] = []
    var n = 0
    while Date() < deadline {
        let (method, path, body) = next(n)
        n += 1
        let start = Date()
        let status = blockingRequest(url, method, path, body: body)
        out.append((status, Date().timeIntervalSince(start)))
        if pause > 0 { Thread.sleep(forTimeInterval: pause) }
    }
    return out
}

/// One request on a blocking socket (`timeout` seconds to receive): its status, 0 when it failed.
func blockingRequest(_ url: String, _ method: String, _ path: String, body: String?, timeout seconds: Int = 30) -> Int {
    guard let s = try? RawConnection.connected(url) else { return 0 }
    defer { Glibc.close(s) }
    var timeout = timeval(tv_sec: seconds, tv_usec: 0)
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var head = "\(method) /\(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    if let body { head += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
    let request = Array((head + "\r\n" + (body ?? "")).utf8)
    guard request.withUnsafeBytes({ Glibc.send(s, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count
    else { return 0 }
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let n = buffer.withUnsafeMutableBytes { recv(s, $0.baseAddress, $0.count, 0) }
        if n <= 0 { break }
        received += buffer[..<n]
    }
    let line = String(decoding: received.prefix(32), as: UTF8.self).split(separator: " ")
    return line.count >= 2 ? Int(line[1]) ?? 0 : 0
}
