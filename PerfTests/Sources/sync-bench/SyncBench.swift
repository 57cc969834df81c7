import AsyncHTTPClient
import Foundation
import Glibc
import NIOCore
import OfflineStore
import Samples

/// One measured line of the table.
struct Line {
    var label: String
    /// Batch size (flush) or page size (refresh).
    var size: String
    /// Round trips (flush) or pages (refresh); nil where the client does not say.
    var trips: Int?
    /// Requests (flush) or entities (refresh).
    var items: Int
    var seconds: Double
    var clientCPU: Double
    var clientPeakMiB: Double
    /// The client's peak anonymous memory (nil: not sampled, the anchors).
    var clientAnonMiB: Double? = nil
    var serverCPU: Double
    var serverPeakMiB: Double
    /// Followed by its anchor in the table (else its ratios are printed above the table).
    var anchored = true
    var rate: Double { Double(items) / seconds }
}

struct SyncBench {
    let o: Options
    let me: String
    init(_ o: Options) {
        self.o = o
        var buf = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buf, buf.count - 1)
        me = n > 0 ? String(decoding: buf[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : CommandLine.arguments[0]
    }

    @discardableResult
    func os(_ args: String..., in dir: String) throws -> ChildRun { try runChild([o.binary] + args, in: dir) }

    func run() async throws {
        let work: String
        if let d = o.dir {
            try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
            work = (d as NSString).standardizingPath
            guard (try FileManager.default.contentsOfDirectory(atPath: work)).isEmpty else {
                throw BenchError("--dir \(d) is not empty")
            }
        } else {
            var template = Array(
                "\(ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp")/sync-bench.XXXXXX".utf8CString)
            guard let made = mkdtemp(&template) else { throw BenchError("mkdtemp failed") }
            work = String(cString: made)
        }
        defer { if !o.keep { try? FileManager.default.removeItem(atPath: work) } }
        let metadata = work + "/metadata.xml", config = work + "/config.json"
        try SampleData.metadata.write(toFile: metadata, atomically: true, encoding: .utf8)
        try
            #"{"indexes":{"BusinessPartners":["Country","CompanyName"],"Products":["Category, Price DESC"],"SalesOrderItems":["Quantity DESC, ProductID"]}}"#
            .write(toFile: config, atomically: true, encoding: .utf8)

        let doFlush = o.only != "refresh", doRefresh = o.only != "flush"
        let products = doFlush ? max(o.changes, 100) : 100
        let items = doRefresh ? o.entities : 0
        print(
            "sync-bench (\(o.mode)): \(doFlush ? "\(o.changes) changes a flush" : "no flush"), \(doRefresh ? "\(items) entities refreshed, \(o.delta) in the delta, pages of \(o.pageSize)" : "no refresh")"
        )
        print(
            "machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(loadAverage()); offline-store: \(o.binary)"
        )

        // The served store.
        let served = work + "/served"
        var t0 = DispatchTime.now().uptimeNanoseconds
        _ = try os("init", "--store", served, "--metadata", metadata, "--config", config, in: work)
        _ = try os(
            "generate", "--store", served, "--set", "BusinessPartners", "--count", "100", "--seed", "1", in: work)
        _ = try os(
            "generate", "--store", served, "--set", "Products", "--count", String(products), "--seed", "2", in: work)
        if items > 0 {
            try os(
                "generate", "--store", served, "--set", "SalesOrders", "--count", String(max(1, items / 4)), "--seed",
                "3", in: work)
            try os(
                "generate", "--store", served, "--set", "SalesOrderItems", "--count", String(items), "--seed", "4",
                in: work)
        }
        print(
            "served store: 100 BusinessPartners, \(products) Products\(items > 0 ? ", \(max(1, items / 4)) SalesOrders, \(items) SalesOrderItems" : "") generated in \(fmt(elapsed(t0), 1)) s"
        )
        let lifetime = 300 + o.changes / 10 + o.entities / 200
        let server = try Server(binary: o.binary, store: served, lifetime: lifetime, dir: work)
        print("serving at \(server.url) (pid \(server.pid), --lifetime \(lifetime))")
        let client = Anchor.client()
        do {
            var lines: [Line] = []
            if doFlush {
                lines += try await flush(server: server, client: client, work: work, metadata: metadata, config: config)
            }
            if doRefresh {
                lines += try await refresh(
                    server: server, client: client, work: work, metadata: metadata, config: config, served: served)
            }
            try await client.shutdown()
            try server.stop()
            t0 = DispatchTime.now().uptimeNanoseconds
            if o.check {
                for store in (doFlush ? ["flush"] : []) + (doRefresh ? ["refresh", "expand"] : []) {
                    let r = try os("check", "--store", work + "/" + store, in: work)
                    print("check \(store): \(r.stdout.split(separator: "\n").first ?? "")")
                }
                try os("check", "--store", served, in: work)
                print("check served: passed (\(fmt(elapsed(t0), 1)) s for the checks)")
            }
            table(lines)
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    // MARK: Flush

    static func product(_ prefix: String, _ i: Int) -> Properties {
        [
            "ProductID": .string(prefix + String(repeating: "0", count: max(0, 7 - String(i).count)) + String(i)),
            "Name": .string("Bench \(prefix) \(i)"), "Category": .string(i % 2 == 0 ? "Notebooks" : "Tablets"),
            "Price": .decimal(EDMDecimal(Int64(100 + i % 900))), "CurrencyCode": .string("EUR"),
            "WeightMeasure": .double(Double(i % 7) * 0.5),
        ]
    }

    static func patch(_ run: Int, _ i: Int) -> Properties {
        ["Price": .decimal(EDMDecimal(Int64(run * 1_000 + i % 1_000))), "Name": .string("Changed \(run) \(i)")]
    }

    func flush(
        server: Server, client: HTTPClient, work: String, metadata: String, config: String
    ) async throws -> [Line] {
        let store = work + "/flush"
        _ = try os("init", "--store", store, "--metadata", metadata, "--config", config, in: work)
        _ = try os("define", "--store", store, "Products", "Products", in: work)
        let r = try os("refresh", "--store", store, "--service", server.url, in: work)
        print("flush store: \(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) (\(fmt(r.wallSeconds, 2)) s)")
        let half = o.changes / 2
        var keys = try await productETags(server: server, client: client).keys.sorted()
        guard keys.count >= 2 * half else {
            throw BenchError("the service has \(keys.count) Products, \(2 * half) needed")
        }
        keys = Array(keys.prefix(2 * half))
        let flushKeys = Array(keys.prefix(half)), anchorKeys = Array(keys.suffix(half))
        var lines: [Line] = []
        for (round, batch) in [1, 100].enumerated() {
            let (fp, ap) = (round == 0 ? "A" : "B", round == 0 ? "C" : "D")
            // The local changes, made with the library, then the flush as a child process.
            let bodies = try await queue(store: store, prefix: fp, keys: flushKeys, run: round + 1)
            server.resetPeak()
            let cpu0 = server.cpuSeconds()
            let f = try runChild(
                [o.binary, "flush", "--store", store, "--service", server.url, "--batch-size", String(batch)], in: work)
            let serverCPU = server.cpuSeconds() - cpu0, serverPeak = server.peakMiB()
            let out = f.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            guard out.hasPrefix("flush: sent \(o.changes), succeeded \(o.changes), archived 0, left 0, round trips "),
                // "… round trips N, in S s": the count, before the time the verb took.
                let trips = Int(out.split(separator: "round trips ").last?.prefix(while: \.isNumber) ?? "")
            else { throw BenchError("flush --batch-size \(batch): \(out)") }
            lines.append(
                Line(
                    label: "flush (offline-store flush)", size: String(batch), trips: trips, items: o.changes,
                    seconds: f.wallSeconds,
                    clientCPU: f.cpuSeconds, clientPeakMiB: f.peakRSSMiB, clientAnonMiB: f.peakAnonMiB,
                    serverCPU: serverCPU, serverPeakMiB: serverPeak))
            // The anchor: the same requests for other keys, as flush writes them into a $batch.
            let etags = try await productETags(server: server, client: client)
            let file = work + "/anchor-\(batch).jsonl"
            try anchorRequests(store: store, prefix: ap, keys: anchorKeys, etags: etags, run: round + 1, expect: bodies)
                .write(toFile: file, atomically: true, encoding: .utf8)
            let c1 = server.cpuSeconds()
            server.resetPeak()
            let a = try runChild([me, "anchor-flush", server.url, String(batch), file], in: work)
            let anchor = try AnchorResult(line: a.stdout)
            lines.append(
                Line(
                    label: "anchor: same $batch POSTs, bare AsyncHTTPClient", size: String(batch),
                    trips: anchor.requests, items: anchor.items,
                    seconds: anchor.seconds, clientCPU: anchor.cpuSeconds, clientPeakMiB: anchor.peakRSSMiB,
                    serverCPU: server.cpuSeconds() - c1, serverPeakMiB: server.peakMiB()))
            print(
                String(
                    format: "flush --batch-size %d: %.2f s, %.0f requests/s; anchor %.2f s, %.0f requests/s", batch,
                    f.wallSeconds,
                    lines[lines.count - 2].rate, anchor.seconds, lines[lines.count - 1].rate))
        }
        // Every create arrived once: the service's Products are the generated ones and 4 × half new ones.
        let (status, body) = try await Anchor.fetch(client, Anchor.request(server.url + "Products?$top=0&$count=true"))
        let json = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
        let count = json?["@odata.count"] as? Int ?? -1
        let expected = max(o.changes, 100) + 4 * half
        guard status == 200, count == expected else {
            throw BenchError("the service has \(count) Products, expected \(expected)")
        }
        print("service: \(count) Products, as expected (every create arrived once)")
        return lines
    }

    /// Queues half creates and half PATCHes (interleaved) in the store; returns the bodies of the first
    /// create and the first PATCH as the queue recorded them.
    func queue(
        store path: String, prefix: String, keys: [String], run: Int
    ) async throws -> (create: String, update: String) {
        let store = try OfflineStore.open(at: path)
        var changes: [OfflineStore.Change] = []
        for (i, key) in keys.enumerated() {
            changes.append(.create(set: "Products", entity: Self.product(prefix, i)))
            changes.append(.update(set: "Products", key: [.string(key)], changes: Self.patch(run, i)))
        }
        var i = 0
        while i < changes.count {
            _ = try await store.apply(Array(changes[i..<min(i + 5_000, changes.count)]))
            i += 5_000
        }
        guard try store.pendingRequestCount() == changes.count else {
            throw BenchError("\(try store.pendingRequestCount()) requests queued, \(changes.count) made")
        }
        let first = try store.entities("RequestQueue?$orderby=RequestID&$top=2")
        guard first.count == 2, case .string(let c)? = first[0]["Body"], case .string(let u)? = first[1]["Body"] else {
            throw BenchError("cannot read the queue's first records")
        }
        return (c, u)
    }

    /// The service's Products: key → ETag.
    func productETags(server: Server, client: HTTPClient) async throws -> [String: String] {
        var out: [String: String] = [:]
        var next: String? = server.url + "Products?$select=ProductID"
        while let url = next {
            let (status, body) = try await Anchor.fetch(
                client, Anchor.request(url, headers: [("Prefer", "odata.maxpagesize=10000")]))
            guard status == 200,
                let json = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any],
                let value = json["value"] as? [[String: Any]]
            else { throw BenchError("GET \(url): \(status)") }
            for e in value { if let k = e["ProductID"] as? String, let t = e["@odata.etag"] as? String { out[k] = t } }
            next = json["@odata.nextLink"] as? String
        }
        return out
    }

    /// The anchor's `$batch` request objects, one a line, as flush writes them (`HTTPTransport.batch`,
    /// `Flush.request`): the same bodies (checked against the queue's), Repeatability-Request-ID,
    /// Repeatability-First-Sent, Prefer on creates, If-Match with the service's ETag on PATCHes.
    func anchorRequests(
        store path: String, prefix: String, keys: [String], etags: [String: String], run: Int,
        expect: (create: String, update: String)
    ) throws -> String {
        let store = try OfflineStore.open(at: path, readOnly: true)
        let firstSent = imfDate()
        func q(_ s: String) -> String {
            var o = "\""
            for ch in s.unicodeScalars {
                switch ch {
                case "\"": o += "\\\""
                case "\\": o += "\\\\"
                default: o.unicodeScalars.append(ch)
                }
            }
            return o + "\""
        }
        var out = ""
        var id = 0
        for (i, key) in keys.enumerated() {
            let create = try store.json(set: "Products", entity: Self.product(prefix, i))
            let update = try store.json(
                set: "Products", entity: Self.patch(run, i), select: Set(Self.patch(run, i).keys))
            if i == 0 {
                // The same shape as the queue's: only the new key differs.
                let flushPrefix = expect.create.contains("\"A0000000\"") ? "A" : "B"
                guard
                    create.replacingOccurrences(of: "\"\(prefix)0000000\"", with: "\"\(flushPrefix)0000000\"")
                        .replacingOccurrences(of: "Bench \(prefix) 0", with: "Bench \(flushPrefix) 0") == expect.create,
                    update == expect.update
                else {
                    throw BenchError(
                        "the anchor's bodies differ from flush's: \(create) / \(expect.create); \(update) / \(expect.update)"
                    )
                }
            }
            guard let etag = etags[key] else { throw BenchError("no ETag for Products('\(key)')") }
            id += 1
            out +=
                #"{"id":"\#(id)","method":"POST","url":"Products","headers":{"Repeatability-Request-ID":"\#(UUID().uuidString.lowercased())","#
                + #""Repeatability-First-Sent":"\#(firstSent)","Prefer":"return=representation","Content-Type":"application/json"},"body":\#(create)}"#
                + "\n"
            id += 1
            let url = "Products('\(key.replacingOccurrences(of: "'", with: "''"))')".addingPercentEncoding(
                withAllowedCharacters: .urlPathAllowed)!
            out +=
                #"{"id":"\#(id)","method":"PATCH","url":\#(q(url)),"headers":{"Repeatability-Request-ID":"\#(UUID().uuidString.lowercased())","#
                + #""Repeatability-First-Sent":"\#(firstSent)","If-Match":\#(q(etag)),"Content-Type":"application/json"},"body":\#(update)}"#
                + "\n"
        }
        return out
    }

    // MARK: Refresh

    func refresh(
        server: Server, client: HTTPClient, work: String, metadata: String, config: String, served: String
    ) async throws -> [Line] {
        let store = work + "/refresh"
        _ = try os("init", "--store", store, "--metadata", metadata, "--config", config, in: work)
        _ = try os("define", "--store", store, "Items", "SalesOrderItems", in: work)
        var lines: [Line] = []
        let page = String(o.pageSize)
        let deltaFile = work + "/delta-link.txt"

        // The anchor's full read first (it also keeps the delta link), then the refresh.
        var c0 = server.cpuSeconds()
        server.resetPeak()
        var a = try runChild([me, "anchor-read", server.url + "SalesOrderItems", page, deltaFile], in: work)
        var anchor = try AnchorResult(line: a.stdout)
        guard anchor.items == o.entities else {
            throw BenchError("the anchor read \(anchor.items) entities, the service has \(o.entities)")
        }
        let anchorFull = Line(
            label: "anchor: same GETs, bare AsyncHTTPClient", size: page, trips: anchor.requests, items: anchor.items,
            seconds: anchor.seconds,
            clientCPU: anchor.cpuSeconds, clientPeakMiB: anchor.peakRSSMiB, serverCPU: server.cpuSeconds() - c0,
            serverPeakMiB: server.peakMiB())

        /// A refresh of `store` from the served store, timed: it must be a `mode` read of `expected`
        /// entities.
        func timedRefresh(_ store: String, label: String, mode: String, expected: Int) throws -> Line {
            let c0 = server.cpuSeconds()
            server.resetPeak()
            let r = try runChild(
                [o.binary, "refresh", "--store", store, "--service", server.url, "--page-size", page], in: work)
            let received = try Self.received(r.stdout, mode: mode)
            guard received == expected else {
                throw BenchError("the \(mode) refresh received \(received) entities, not \(expected): \(r.stdout)")
            }
            return Line(
                label: label, size: page, trips: nil, items: received,
                seconds: r.wallSeconds, clientCPU: r.cpuSeconds, clientPeakMiB: r.peakRSSMiB,
                clientAnonMiB: r.peakAnonMiB, serverCPU: server.cpuSeconds() - c0, serverPeakMiB: server.peakMiB())
        }
        let full = try timedRefresh(
            store, label: "refresh, full (offline-store refresh)", mode: "full", expected: o.entities)
        lines.append(full)
        lines.append(anchorFull)
        print(
            String(
                format:
                    "refresh, full: %.2f s, %.0f entities/s, peak %.1f MiB (anonymous %.1f MiB); anchor %.2f s, %.0f entities/s",
                full.seconds, full.rate, full.clientPeakMiB, full.clientAnonMiB ?? 0,
                anchorFull.seconds, anchorFull.rate))

        // K changes on the service, then the delta refresh and the anchor's delta read.
        try await changeItems(server: server, client: client)
        let delta = try timedRefresh(
            store, label: "refresh, delta (offline-store refresh)", mode: "delta", expected: o.delta)
        lines.append(delta)
        let link = try String(contentsOfFile: deltaFile, encoding: .utf8)
        c0 = server.cpuSeconds()
        server.resetPeak()
        a = try runChild([me, "anchor-read", link.hasPrefix("http") ? link : server.url + link, page], in: work)
        anchor = try AnchorResult(line: a.stdout)
        guard anchor.items == o.delta else {
            throw BenchError("the anchor's delta read \(anchor.items) entities, \(o.delta) changed")
        }
        lines.append(
            Line(
                label: "anchor: same delta GET, bare AsyncHTTPClient", size: page, trips: anchor.requests,
                items: anchor.items, seconds: anchor.seconds,
                clientCPU: anchor.cpuSeconds, clientPeakMiB: anchor.peakRSSMiB, serverCPU: server.cpuSeconds() - c0,
                serverPeakMiB: server.peakMiB()))
        print(
            String(
                format: "refresh, delta: %.2f s, %.0f entities/s; anchor %.3f s", delta.seconds, delta.rate,
                anchor.seconds))
        let count = try os("query", "--store", store, "SalesOrderItems/$count", in: work).stdout.trimmingCharacters(
            in: .whitespacesAndNewlines)
        guard Int(count) == o.entities else {
            throw BenchError("the refreshed store has \(count) SalesOrderItems, the service \(o.entities)")
        }
        // The same full read into a store whose configuration writes it in groups of 50,000 rows
        // (`refreshGroupRows`): fewer commits, more memory, a longer wait for a local write.
        let large = work + "/refresh-groups-50000", largeConfig = work + "/config-groups-50000.json"
        let configText = try String(contentsOfFile: config, encoding: .utf8)
        guard configText.hasSuffix("}") else { throw BenchError("the configuration is not an object: \(configText)") }
        try (configText.dropLast() + #","refreshGroupRows":50000}"#).write(
            toFile: largeConfig, atomically: true, encoding: .utf8)
        _ = try os("init", "--store", large, "--metadata", metadata, "--config", largeConfig, in: work)
        _ = try os("define", "--store", large, "Items", "SalesOrderItems", in: work)
        let largeLine = try timedRefresh(
            large, label: "refresh, full, refreshGroupRows 50000", mode: "full", expected: o.entities)
        lines.append(largeLine)
        lines += try imports(
            served: served, work: work, metadata: metadata, config: config, refresh: lines[0], large: largeLine)
        return lines
            + (try await expandRefresh(server: server, client: client, work: work, metadata: metadata, config: config))
    }

    /// A defining request with `$expand` — the demo's `SG_Sales` over every BusinessPartner:
    /// `BusinessPartners?$expand=SalesOrders($expand=Items)`, all the served store's partners,
    /// orders and items — read in full (pages of as many partners as keep a page under serve's
    /// 100,000 expanded entities), then 10 items changed on the service and the refresh again: a delta
    /// that must bring the 10 items and not the tree. The client must then hold every item, the
    /// changed ones with their new quantity.
    func expandRefresh(
        server: Server, client: HTTPClient, work: String, metadata: String, config: String
    ) async throws -> [Line] {
        let store = work + "/expand"
        let url = "BusinessPartners?$expand=SalesOrders($expand=Items)"
        _ = try os("init", "--store", store, "--metadata", metadata, "--config", config, in: work)
        _ = try os("define", "--store", store, "Sales", url, in: work)
        let tree = 100 + max(1, o.entities / 4) + o.entities  // at most
        // Partners a page: under serve's 100,000 expanded entities (80,000, with room for the spread).
        let page = String(max(1, 80_000 / max(1, (tree - 100) / 100)))
        func refresh(_ mode: String) throws -> (Line, Int) {
            let c0 = server.cpuSeconds()
            server.resetPeak()
            let r = try runChild(
                [o.binary, "refresh", "--store", store, "--service", server.url, "--page-size", page], in: work)
            let received = try Self.received(r.stdout, mode: mode, request: "Sales")
            return (
                Line(
                    label: "refresh with $expand, \(mode)", size: page, trips: nil,
                    items: received, seconds: r.wallSeconds, clientCPU: r.cpuSeconds, clientPeakMiB: r.peakRSSMiB,
                    clientAnonMiB: r.peakAnonMiB, serverCPU: server.cpuSeconds() - c0, serverPeakMiB: server.peakMiB(),
                    anchored: false), received
            )
        }
        let (full, all) = try refresh("full")
        let held = try ["BusinessPartners", "SalesOrders", "SalesOrderItems"].map {
            Int(try os("query", "--store", store, "\($0)/$count", in: work).stdout.filter(\.isNumber)) ?? -1
        }
        guard all == held.reduce(0, +), held[0] == 100 else {
            throw BenchError("the full read of \(url) received \(all); the client holds \(held)")
        }
        // 10 items of the tree (every partner's orders are in it; an order of no partner is not), from the middle.
        let changes = 10
        let keys = try os(
            "query", "--store", store,
            "SalesOrderItems?$select=SalesOrderID,ItemPosition&$top=\(changes)&$skip=\(held[2] / 2)", in: work
        ).stdout
        guard let json = try JSONSerialization.jsonObject(with: Data(keys.utf8)) as? [String: Any],
            let value = json["value"] as? [[String: Any]], value.count == changes
        else { throw BenchError("cannot read \(changes) item keys of the client: \(keys.prefix(200))") }
        try await changeItems(server: server, client: client, keys: value, quantity: 7_000)
        let (delta, moved) = try refresh("delta")
        guard moved == changes else {
            throw BenchError("the delta of \(url) after \(changes) changes received \(moved) entities")
        }
        let changed = try os(
            "query", "--store", store, "SalesOrderItems/$count?$filter=Quantity ge 7000 and Quantity lt 7010", in: work
        ).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        guard Int(changed) == changes else {
            throw BenchError("the client holds \(changed) changed items, not \(changes)")
        }
        let items = try os("query", "--store", store, "SalesOrderItems/$count", in: work).stdout
        guard Int(items.trimmingCharacters(in: .whitespacesAndNewlines)) == held[2] else {
            throw BenchError("the client holds \(items) items after the delta, \(held[2]) before")
        }
        print(
            String(
                format:
                    "refresh of %@: full %.2f s (%d entities), delta after %d changes %.3f s (%d entities): %.0f× faster, %.0f× fewer entities",
                url, full.seconds, all, changes, delta.seconds, moved, full.seconds / delta.seconds,
                Double(all) / Double(moved)))
        return [full, delta]
    }

    /// The refresh's targets: the same entities as one JSON file (what `offline-store query`
    /// writes from the served store), imported by `offline-store load` into a new store with the
    /// same metadata and indexes, and by SQLite (the `sqlite3` shell: a `WITHOUT ROWID` table
    /// with the same key and indexes, one `INSERT … SELECT … FROM json_each(readfile(…))` in
    /// one transaction, synchronous FULL); each in a child process, timed whole.
    func imports(
        served: String, work: String, metadata: String, config: String, refresh: Line, large: Line
    ) throws -> [Line] {
        let file = work + "/items.json"
        try os("query", "--store", served, "SalesOrderItems", in: work)  // its output is child.out
        try FileManager.default.moveItem(atPath: work + "/child.out", toPath: file)
        let size = (try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0
        let loaded = work + "/loaded"
        _ = try os("init", "--store", loaded, "--metadata", metadata, "--config", config, in: work)
        let l = try runChild([o.binary, "load", "--store", loaded, "--set", "SalesOrderItems", file], in: work)
        guard l.stdout.contains("loaded \(o.entities) entities") else { throw BenchError("load printed: \(l.stdout)") }
        var lines = [
            Line(
                label: "load of the same JSON (offline-store load)", size: "-", trips: nil, items: o.entities,
                seconds: l.wallSeconds, clientCPU: l.cpuSeconds, clientPeakMiB: l.peakRSSMiB,
                clientAnonMiB: l.peakAnonMiB, serverCPU: 0, serverPeakMiB: 0, anchored: false)
        ]
        // `load` committing as often as the refresh does (its groups: `Refresher.groupRows`), in a
        // store of its own: what the refresh's bounded transactions cost, apart from the network.
        let batched = work + "/loaded-batched"
        _ = try os("init", "--store", batched, "--metadata", metadata, "--config", config, in: work)
        let b = try runChild(
            [o.binary, "load", "--store", batched, "--set", "SalesOrderItems", "--batch", "5000", file], in: work)
        guard b.stdout.contains("loaded \(o.entities) entities") else { throw BenchError("load printed: \(b.stdout)") }
        lines.append(
            Line(
                label: "load, a commit every 5,000 (--batch 5000)", size: "-", trips: nil, items: o.entities,
                seconds: b.wallSeconds, clientCPU: b.cpuSeconds, clientPeakMiB: b.peakRSSMiB,
                clientAnonMiB: b.peakAnonMiB, serverCPU: 0, serverPeakMiB: 0, anchored: false))
        var sqliteLine = "SQLite: sqlite3 not found, not run"
        if let sqlite = ["/usr/bin/sqlite3", "/usr/local/bin/sqlite3"].first(where: {
            FileManager.default.isExecutableFile(atPath: $0)
        }) {
            let script = work + "/import.sql"
            try Self.sqliteImport(file: file).write(toFile: script, atomically: true, encoding: .utf8)
            let r = try runChild([sqlite, work + "/items.sqlite", ".read " + script], in: work)
            guard Int(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == o.entities else {
                throw BenchError("the SQLite import counted \(r.stdout), expected \(o.entities)")
            }
            lines.append(
                Line(
                    label: "SQLite imports the same JSON (sqlite3)", size: "-", trips: nil, items: o.entities,
                    seconds: r.wallSeconds, clientCPU: r.cpuSeconds, clientPeakMiB: r.peakRSSMiB,
                    clientAnonMiB: r.peakAnonMiB, serverCPU: 0, serverPeakMiB: 0, anchored: false))
            sqliteLine = String(format: "refresh ÷ SQLite import %.2f", refresh.seconds / r.wallSeconds)
        }
        print(
            String(
                format:
                    "refresh vs import of the same %.0f MiB of JSON: refresh %.2f s (%.1f µs an entity), load %.2f s (%.1f µs); refresh ÷ load %.2f (target: at most 1.5); refresh ÷ load --batch 5000 %.2f; %@",
                Double(size) / 1_048_576, refresh.seconds, refresh.seconds * 1e6 / Double(o.entities), l.wallSeconds,
                l.wallSeconds * 1e6 / Double(o.entities), refresh.seconds / l.wallSeconds,
                refresh.seconds / b.wallSeconds,
                sqliteLine))
        print(
            String(
                format:
                    "refresh with refreshGroupRows 50000: %.2f s (%.1f µs an entity, anonymous %.1f MiB); ÷ load %.2f (target: at most 1.5)",
                large.seconds, large.seconds * 1e6 / Double(o.entities), large.clientAnonMiB ?? 0,
                large.seconds / l.wallSeconds))
        return lines
    }

    /// The SQLite import: the demo's SalesOrderItems as SQLite would hold them (decimals as
    /// thousandths, dates as text), the key and the two indexes the served store has.
    static func sqliteImport(file: String) -> String {
        """
        PRAGMA synchronous = FULL;
        CREATE TABLE SalesOrderItems (SalesOrderID TEXT NOT NULL, ItemPosition INTEGER NOT NULL, ProductID TEXT,
          Quantity INTEGER, NetAmount INTEGER, CurrencyCode TEXT, DeliveryDate TEXT,
          PRIMARY KEY (SalesOrderID, ItemPosition)) WITHOUT ROWID;
        CREATE INDEX ByProduct ON SalesOrderItems (ProductID);
        CREATE INDEX ByQuantity ON SalesOrderItems (Quantity DESC, ProductID);
        BEGIN;
        INSERT INTO SalesOrderItems SELECT json_extract(value, '$.SalesOrderID'), json_extract(value, '$.ItemPosition'),
          json_extract(value, '$.ProductID'), json_extract(value, '$.Quantity'),
          CAST(round(json_extract(value, '$.NetAmount') * 1000) AS INTEGER), json_extract(value, '$.CurrencyCode'),
          json_extract(value, '$.DeliveryDate')
          FROM json_each(readfile('\(file)'), '$.value');
        COMMIT;
        SELECT count(*) FROM SalesOrderItems;
        """
    }

    static func received(_ out: String, mode: String, request: String = "Items") throws -> Int {
        guard out.contains("(\(request): \(mode))"),
            let r = out.range(of: #"[0-9]+ received"#, options: .regularExpression),
            let n = Int(out[r].split(separator: " ")[0])
        else { throw BenchError("refresh printed: \(out)") }
        return n
    }

    /// `--delta` PATCHes of SalesOrderItems on the service, in `$batch`es of 100 (untimed).
    func changeItems(
        server: Server, client: HTTPClient, keys: [[String: Any]]? = nil, quantity: Int = 9_000
    )
        async throws
    {
        var value = keys ?? []
        if keys == nil {
            let (status, body) = try await Anchor.fetch(
                client, Anchor.request(server.url + "SalesOrderItems?$select=SalesOrderID,ItemPosition&$top=\(o.delta)")
            )
            guard status == 200,
                let json = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any],
                let read = json["value"] as? [[String: Any]], read.count == o.delta
            else { throw BenchError("cannot read \(o.delta) item keys: \(status)") }
            value = read
        }
        var i = 0
        while i < value.count {
            var parts: [String] = []
            for (k, e) in value[i..<min(i + 100, value.count)].enumerated() {
                guard let so = e["SalesOrderID"] as? String, let pos = e["ItemPosition"] as? Int else {
                    throw BenchError("an item without its key")
                }
                let url = "SalesOrderItems(SalesOrderID='\(so)',ItemPosition=\(pos))".addingPercentEncoding(
                    withAllowedCharacters: .urlPathAllowed)!
                parts.append(
                    #"{"id":"\#(k + 1)","method":"PATCH","url":"\#(url)","headers":{"Content-Type":"application/json"},"body":{"Quantity":\#(quantity + k)}}"#
                )
            }
            let (s, answer) = try await Anchor.fetch(
                client,
                Anchor.request(
                    server.url + "$batch", method: .POST,
                    body: Array(#"{"requests":[\#(parts.joined(separator: ","))]}"#.utf8)))
            let statuses = Anchor.statuses(answer)
            guard s == 200, statuses.count == parts.count, statuses.allSatisfy({ (200..<300).contains($0) }) else {
                throw BenchError("PATCH of items: \(s) \(String(buffer: answer).prefix(300))")
            }
            i += 100
        }
    }

    // MARK: Output

    func table(_ lines: [Line]) {
        print("")
        print(
            "Flush and refresh throughput: \(ProcessInfo.processInfo.activeProcessorCount) cores, load average after: \(loadAverage())"
        )
        let widths = [46, 6, 7, 9, 8, 10, 8, 10, 8, 9, 10, 8]
        func row(_ cells: [String]) -> String {
            zip(cells, widths).enumerated().map { i, cw in
                let (c, w) = cw
                let pad = String(repeating: " ", count: max(0, w - c.count))
                return i == 0 ? c + pad : pad + c
            }.joined(separator: " ")
        }
        print(
            row([
                "what", "size", "trips", "items", "wall s", "items/s", "×anchor", "cli µs/it", "cli MiB", "cli anon",
                "srv µs/it", "srv MiB",
            ]))
        print(String(repeating: "-", count: widths.reduce(0, +) + widths.count - 1))
        for (i, l) in lines.enumerated() {
            // Each measured line is followed by its anchor; the imports have none (their ratios are printed above).
            let ratio =
                l.label.hasPrefix("anchor")
                ? "1" : !l.anchored ? "-" : (i + 1 < lines.count ? fmt(l.rate / lines[i + 1].rate, 2) : "")
            print(
                row([
                    l.label, l.size, l.trips.map(String.init) ?? "-", String(l.items), fmt(l.seconds, 2),
                    fmt(l.rate, 0), ratio,
                    fmt(l.clientCPU * 1e6 / Double(l.items), 1), fmt(l.clientPeakMiB, 1),
                    l.clientAnonMiB.map { fmt($0, 1) } ?? "-",
                    fmt(l.serverCPU * 1e6 / Double(l.items), 1), fmt(l.serverPeakMiB, 1),
                ]))
        }
        print(
            "items: requests (flush: N/2 creates + N/2 PATCHes) or entities (refresh); size: batch size or page size; trips: round trips or pages"
        )
        print(
            "cli: the client process: CPU µs per item and peak resident MiB (with the store's mapped pages) from wait4, peak anonymous MiB (RssAnon, sampled); the anchors time and measure their own loop"
        )
        print("srv: the server process over the same span (CPU from /proc/PID/stat, VmHWM after a reset)")
    }
}

func elapsed(_ t0: UInt64) -> Double { Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9 }
func fmt(_ v: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", v) }
func loadAverage() -> String {
    ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "").split(separator: " ").prefix(3).joined(
        separator: " ")
}

/// An IMF-fixdate of now (RFC 9110), as flush sends Repeatability-First-Sent.
func imfDate() -> String {
    let f = DateFormatter()
    f.locale = Locale(identifier: "en_US_POSIX")
    f.timeZone = TimeZone(identifier: "GMT")
    f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    return f.string(from: Date())
}
