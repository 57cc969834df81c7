import TestSupport
import Foundation
import Testing

/// `offline-store demo` as CI runs it: off a terminal, at a small `--size`. Its output must be
/// plain lines, every step in order, and what each step prints must agree with the others.
@Suite(.soak, .runsOffThePool) struct DemoTests {
    /// Business partners in the test's data set (`DEMO_TEST_SIZE` changes it).
    static let size = ProcessInfo.processInfo.environment["DEMO_TEST_SIZE"].flatMap(Int.init) ?? 40
    /// The demo's time limit (`DEMO_TEST_SECONDS` raises it).
    static let seconds = ProcessInfo.processInfo.environment["DEMO_TEST_SECONDS"].flatMap(Double.init) ?? 90

    /// The lines of each step (its header first), by step number; `0` is what comes before step 1,
    /// `14` the summary.
    static func sections(_ stdout: String) -> [Int: [String]] {
        var out: [Int: [String]] = [:]
        var current = 0
        for line in stdout.split(separator: "\n").map(String.init) {
            if line == "== summary" {
                current = 14
            } else if line.hasPrefix("== "), let n = Int(line.dropFirst(3).prefix { $0 != "/" }) {
                current = n
            }
            out[current, default: []].append(line)
        }
        return out
    }

    /// The integers in `line`, in order.
    static func numbers(_ line: String) -> [Int] {
        line.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
    }

    /// The first line of `lines` containing `text`, or "" (which then fails the checks on it).
    static func line(_ lines: [String]?, _ text: String) -> String {
        lines?.first { $0.contains(text) } ?? ""
    }

    @Test func demoTellsTheWholeStoryStepByStep() throws {
        let size = Self.size
        let r = try ChildProcess.run(["demo", "--size", String(size)], timeout: Self.seconds)
        #expect(!r.hung, "the demo took longer than \(Self.seconds) s")
        #expect(
            r.signal == nil && r.status == 0,
            "status \(r.status), signal \(String(describing: r.signal))\n\(r.stderr)\n\(r.stdout)")
        #expect(!r.stdout.contains("\u{1B}") && !r.stdout.contains("\r"), "off a terminal the output is plain lines")
        let s = Self.sections(r.stdout)
        let headers = r.stdout.split(separator: "\n").filter { $0.hasPrefix("== ") }.map {
            $0.split(separator: " ").prefix(2).joined(separator: " ")
        }
        #expect(headers == (1...13).map { "== \($0)/13" } + ["== summary"], "\(headers)")
        for n in 1...13 {
            #expect(s[n]?.last?.hasPrefix("   time: ") == true, "step \(n) ends with its time: \(s[n] ?? [])")
        }
        #expect(s[0]?.first?.contains("--size \(size)") == true)

        // 1. The server's data set, as --size scales it.
        let generated = [
            ("BusinessPartners", size), ("Products", max(size / 2, 20)), ("SalesOrders", size * 5),
            ("SalesOrderItems", size * 15),
        ]
        for (set, count) in generated {
            #expect(Self.line(s[1], "\(set): ").hasPrefix("   \(set): \(count) generated"), "\(s[1] ?? [])")
        }
        let us = Self.numbers(Self.line(s[1], "in the US")).first ?? -1
        #expect(us > 0 && us < size)
        #expect(Self.line(s[1], "serving ").contains(" at http://127.0.0.1:"))

        // 2. The lifecycle while opening and downloading, and what arrived.
        let states = (s[2] ?? []).filter { $0.hasPrefix("   state: ") }.map {
            String($0.dropFirst(10).prefix { $0 != " " && $0 != ":" })
        }
        #expect(states == ["opening", "initializing", "open", "downloading", "downloading", "open"], "\(s[2] ?? [])")
        #expect(Self.line(s[2], "state: downloading SG_Sales: ").contains(" entities, "))
        #expect(
            Self.line(s[2], "state: downloading SG_Product: ").hasPrefix(
                "   state: downloading SG_Product: \(max(size / 2, 20)) entities, "))
        #expect(
            Self.line(s[2], "   refresh: ").hasPrefix(
                "   refresh: refreshed 2 requests (SG_Sales: full, SG_Product: full)"))
        let local = Self.line(s[2], "local: ")
        #expect(
            local.contains("BusinessPartners \(us),") && local.contains("Products \(max(size / 2, 20)) "), "\(local)")

        // 3. findAll and findBy.
        #expect(Self.line(s[3], "findAll Products: ").contains(": \(max(size / 2, 20)) entities"))
        #expect(Self.line(s[3], "findBy BusinessPartners, index Country = 'US': ").contains(": \(us) entities"))

        // 4. An order's items with their products, and the plan.
        #expect(Self.line(s[4], "plan: ") != "")
        let items = Self.numbers(Self.line(s[4], " items of SalesOrders(")).first ?? 0
        #expect(items >= 1 && (s[4] ?? []).filter { $0.hasPrefix("     item ") }.count == items, "\(s[4] ?? [])")

        // 5. Six changes, six requests, with their tags.
        let requests = (s[5] ?? []).filter { $0.contains("→ request #") }.map { Self.numbers($0).last ?? -1 }
        #expect(requests == [1, 2, 3, 4, 5, 6], "\(s[5] ?? [])")
        #expect(
            ["[tag new-product]", "[tag price-change]", "[tag new-order]", "[tag drop-item]"].allSatisfy { tag in
                (s[5] ?? []).contains { $0.contains(tag) }
            })

        // 6. The queue before and after collapse: four more changes, no more requests.
        #expect(Self.line(s[6], "before: ") == "   before: 6 requests for 6 changes")
        #expect(Self.line(s[6], "merged into request #1") != "" && Self.line(s[6], "merged into request #2") != "")
        #expect(Self.line(s[6], "no request at all") != "")
        #expect(Self.line(s[6], "after: ") == "   after: 6 requests for 10 changes")
        #expect(Self.line(s[6], "#1 POST Products('DEMO-1') [new-product#rename]") != "", "\(s[6] ?? [])")
        #expect(Self.line(s[6], "#4 POST SalesOrderItems(").contains("after #"), "an item waits for its order")

        // 7. The flush sends them all.
        #expect(Self.line(s[7], "requests to send") == "   6 requests to send")
        #expect(Self.line(s[7], "state: uploading") == "   state: uploading: 6 requests sent", "\(s[7] ?? [])")
        #expect(
            Self.line(s[7], "   flush: ").hasPrefix("   flush: sent 6, succeeded 6, archived 0, left 0"),
            "\(s[7] ?? [])")
        #expect(
            Self.line(s[7], "on the server now: ").contains(
                "with 2 items, the deleted item gone, Products('DEMO-2') never sent"))

        // 8. Two pending changes (#7 went to the cancelled create: ids are never reused), and
        // another client's changes on the server.
        #expect((s[8] ?? []).filter { $0.contains("local, pending: ") }.count == 2)
        #expect(
            (s[8] ?? []).filter { $0.contains("another client: ") && ($0.hasSuffix("→ 204") || $0.hasSuffix("→ 200")) }
                .count == 2, "\(s[8] ?? [])")

        // 9. The refresh rebases one and retains the other.
        #expect(
            Self.line(s[9], "   refresh: ").contains("(SG_Sales: delta, SG_Product: delta)")
                && Self.line(s[9], "   refresh: ").contains(" 1 rebased"), "\(s[9] ?? [])")
        #expect(Self.line(s[9], "from the server, Price 19.99 from request #8, still pending") != "")
        #expect(Self.line(s[9], "deleted on the server, kept locally") != "")

        // 10. One success, one refusal in the ErrorArchive.
        #expect(Self.line(s[10], "   flush: ").hasPrefix("   flush: sent 2, succeeded 1, archived 1"), "\(s[10] ?? [])")
        #expect(
            Self.line(s[10], "ErrorArchive: request #9 PATCH Products(").contains("[rename-offline]: HTTP 404"),
            "\(s[10] ?? [])")

        // 11. Resolved, and the entity gone after the next refresh.
        #expect(
            Self.line(s[11], "resolveError(requestID: 9): dropped #9; ErrorArchive 0 entries, queue 0 requests") != "",
            "\(s[11] ?? [])")
        #expect(Self.line(s[11], "gone locally too, as on the server") != "")
        #expect(Self.line(s[11], "   refresh: ").contains(" 1 removed"), "\(s[11] ?? [])")

        // 12. The EventLog: two uploads, one download per refresh.
        #expect(Self.line(s[12], "2 uploads, 3 downloads") != "", "\(s[12] ?? [])")
        let events = (s[12] ?? []).filter { $0.hasPrefix("   #") }
        #expect(
            events.map { $0.split(separator: " ").dropFirst().prefix(2).joined(separator: " ") }
                == [
                    "Download succeeded,", "Upload succeeded,", "Download succeeded,", "Upload succeeded,",
                    "Download succeeded,",
                ], "\(events)")

        // 13. check, and the offline copy equal to what the server selects.
        #expect(Self.line(s[13], "offline store: ").hasPrefix("   offline store: ok"), "\(s[13] ?? [])")
        #expect(Self.line(s[13], "server store: ").hasPrefix("   server store: ok"))
        #expect((s[13] ?? []).filter { $0.hasSuffix("the same on both sides") }.count == 4)
        #expect(Self.line(s[13], "BusinessPartners: \(us) entities") != "")

        // The summary.
        #expect(Self.line(s[14], "changes: ") == "   changes: 10 made offline, 6 requests after collapse")
        #expect(
            Self.line(s[14], "   flush: ")
                == "   flush: 7 requests applied by the server, 1 refused and 1 resolved; 3 refreshes")
        #expect(s[14]?.last == "ok: the whole story ran")
    }

    /// A bad --size is refused with one clear line, before anything is made.
    @Test func demoRefusesABadSize() throws {
        let dir = tempDir()
        for size in ["3", "0", "200001"] {
            let r = try ChildProcess.run(["demo", "--size", size, "--store", dir + "/kept"], timeout: 30)
            #expect(r.status == 1 && r.stderr.contains("--size must be 10…200000"), "\(size): \(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: dir + "/kept"))
        }
    }
}
