import Foundation
import Samples
import Synchronization
import Testing
import TestSupport
@testable import OfflineStore
@testable import Storage

/// `load` from a file streams it: the entity objects are found a chunk at a time, whatever the
/// chunk boundaries, with the same entities and the same errors as parsing the whole document.
@Suite(.soak, .checksStores, .runsOffThePool) struct LoadStreamTests {
    static let chunkSizes = [1, 2, 3, 5, 7, 16, 64, 1 << 20]

    /// The objects a stream emits, parsed; or the error it threw.
    static func stream(_ text: String, chunkSize: Int) -> Result<[JSON], JSONError> {
        stream(Array(text.utf8), chunkSize: chunkSize)
    }

    static func stream(_ bytes: [UInt8], chunkSize: Int) -> Result<[JSON], JSONError> {
        var out: [JSON] = []
        do {
            try EntityObjectStream(bytes: bytes, chunkSize: chunkSize).forEach { out.append(try $0.parse()) }
            return .success(out)
        } catch let e as JSONError {
            return .failure(e)
        } catch {
            return .failure(JSONError(message: "\(error)", offset: -1, line: -1, column: -1))
        }
    }

    @Test func everyShapeGivesItsEntitiesWhateverTheChunks() throws {
        let a = #"{"ProductID":"A","Tags":[1,{"x":"]}"}],"S":"a\"}\\"}"#
        let b = #"{"ProductID":"B"}"#
        let cases: [(String, [String])] = [
            (
                #"{"@odata.context":"$metadata#Products","@odata.count":2,"value":[\#(a),\#(b)],"@odata.nextLink":"x"}"#,
                [a, b]
            ),
            ("{\n  \"value\" : [\n    \(a) ,\n\t\(b)\n  ]\n}\n", [a, b]),
            (#"{"d":{"results":[\#(a),\#(b)],"__count":"2"}}"#, [a, b]),
            (#"{"d":{"__count":"2","results":[\#(b)]}}"#, [b]),
            (#"{"d":[\#(a),\#(b)]}"#, [a, b]),
            (#"{"d":\#(a)}"#, [a]),
            ("[\(a),\(b)]", [a, b]),
            (a, [a]),
            ("\(a)\n\(b)\n", [a, b]),
            ("\(a)\n\n  \r\n\(b)", [a, b]),
            (#"{"value":[]}"#, []),
            (#"{"value":"not an array"}"#, [#"{"value":"not an array"}"#]),
            ("[]", []),
            ("\u{FEFF}{\"value\":[\(b)]}", [b]),
        ]
        for (text, expected) in cases {
            let want = try expected.map { try JSON.parse($0) }
            for size in Self.chunkSizes {
                #expect(Self.stream(text, chunkSize: size) == .success(want), "\(text.debugDescription), chunk \(size)")
            }
        }
    }

    /// The error of a bad document is where parsing it whole puts it.
    @Test func errorsHaveTheirLineAndColumnWhateverTheChunks() throws {
        let cases = [
            "{\"value\":[\n{\"ProductID\":\"A\"},\n{\"ProductID\":\"B\",}\n]}",
            "{\"value\":[\n{\"ProductID\":\"A\"}\n{\"ProductID\":\"B\"}]}",
            "{\"value\":[{\"ProductID\":\"A\"}]}\n{",
            "{\"value\":[{\"ProductID\":\"A\"}",
            "{\"@odata.count\":12x,\"value\":[]}",
            "{\"value\":[{\"ProductID\":\"A\"}]",
            "{\"value\":[{\"ProductID\":\"A\"}]]",
            "{\"value\" [] }",
            "{\"value\":[{\"Name\":\"a\nb\"}]}",
            "{\"value\":[{\"Name\":\"ab}]}",
            "{\"d\":{\"results\":[{}],}}",
            "{value:[]}",
            "",
            "  \n ",
            "[{\"a\":1},]",
            "[{\"a\":1}}",
        ]
        for text in cases {
            let whole: JSONError
            do {
                _ = try JSON.parse(text)
                Issue.record("\(text.debugDescription) parses")
                continue
            } catch {
                whole = error
            }
            for size in Self.chunkSizes {
                guard case .failure(let e) = Self.stream(text, chunkSize: size) else {
                    Issue.record("no error for \(text.debugDescription), chunk \(size)")
                    continue
                }
                #expect(
                    e.line == whole.line && e.column == whole.column && e.offset == whole.offset,
                    "\(text.debugDescription), chunk \(size): streamed \(e), whole \(whole)")
            }
        }
        // JSON lines: the second line's error is on line 2.
        guard case .failure(let second) = Self.stream("{\"ProductID\":\"A\"}\n{\"ProductID\":", chunkSize: 4) else {
            Issue.record("bad JSON lines accepted")
            return
        }
        #expect(second.line == 2 && second.column == 14, "\(second)")
        guard case .failure(let utf8) = Self.stream([0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x3A, 0x31, 0x7D], chunkSize: 3)
        else {
            Issue.record("invalid UTF-8 accepted")
            return
        }
        #expect(utf8.message.contains("invalid UTF-8"), "\(utf8)")
    }

    /// Random documents, cut and damaged at random: the stream succeeds exactly when parsing
    /// the whole document does, with the same entities, and fails on the same line.
    @Test func differentialAgainstParsingTheWholeDocument() throws {
        var r = SeededRandom(seed: testSeed("LoadStreamTests.differential"))
        func below(_ n: Int) -> Int { Int.random(in: 0..<n, using: &r) }
        func value(_ depth: Int) -> String {
            switch below(depth > 2 ? 5 : 8) {
            case 0: return "null"
            case 1: return below(2) == 0 ? "true" : "false"
            case 2: return ["0", "-1.5e3", "12345678901234567890", "3.25"][below(4)]
            case 3, 4: return ["\"\"", "\"a\\\"b\"", "\"}]\"", "\"\\u00e9\\n\"", "\"ü\"", "\"[{\""][below(6)]
            case 5: return "[" + (0..<below(4)).map { _ in value(depth + 1) }.joined(separator: ",") + "]"
            default: return object(depth + 1)
            }
        }
        func object(_ depth: Int) -> String {
            let spaces = [" ", "", "\n", "\t", "\r\n  "]
            return "{"
                + (0..<below(4)).map { i in "\"k\(i)\"\(spaces[below(5)]):\(spaces[below(5)])\(value(depth))" }
                .joined(separator: "," + spaces[below(5)]) + "}"
        }
        var agreed = 0, failedBoth = 0
        for _ in 0..<600 {
            let entities = (0..<below(6)).map { _ in object(1) }
            var text: String
            switch below(3) {
            case 0: text = "{\"@odata.context\":\"x\",\n\"value\":[\n" + entities.joined(separator: ",\n") + "]}"
            case 1: text = "{\"d\":{\"results\":[" + entities.joined(separator: ",") + "]}}"
            default: text = "[" + entities.joined(separator: " , ") + "]"
            }
            var bytes = Array(text.utf8)
            switch below(4) {
            case 0: bytes = Array(bytes.prefix(below(bytes.count + 1)))
            case 1:
                bytes[below(bytes.count)] =
                    [UInt8(ascii: "}"), UInt8(ascii: "]"), UInt8(ascii: ","), UInt8(ascii: "\""), 0x0A, 0xFF][below(6)]
            default: break
            }
            let whole: Result<[JSON], JSONError>
            do {
                let doc = try JSON.parse(bytes)
                // The shapes `load` reads.
                if case .array(let a)? = doc["value"] {
                    whole = .success(a)
                } else if case .array(let a)? = doc["d"]?["results"] {
                    whole = .success(a)
                } else if let d = doc["d"], case .object = d {
                    whole = .success([d])
                } else if case .array(let a) = doc {
                    whole = .success(a)
                } else {
                    whole = .success([doc])
                }
            } catch {
                whole = .failure(error)
            }
            let size = [1, 3, 17, 4096][below(4)]
            let streamed = Self.stream(bytes, chunkSize: size)
            switch (whole, streamed) {
            case (.success(let w), .success(let s)):
                #expect(w == s, "\(String(decoding: bytes, as: UTF8.self).debugDescription)")
                agreed += 1
            case (.failure(let w), .failure(let s)):
                #expect(
                    w.line == s.line && w.column == s.column,
                    "\(String(decoding: bytes, as: UTF8.self).debugDescription): whole \(w), streamed \(s)")
                failedBoth += 1
            default:
                Issue.record(
                    "whole \(whole), streamed \(streamed): \(String(decoding: bytes, as: UTF8.self).debugDescription)")
            }
        }
        #expect(agreed > 200 && failedBoth > 100, "\(agreed) agreed, \(failedBoth) failed both")
    }

    // MARK: Loading files

    static func products(_ range: Range<Int>, bad: Int? = nil) -> String {
        "{\"@odata.context\":\"$metadata#Products\",\"value\":[\n"
            + range.map { i in
                i == bad
                    ? "{\"ProductID\":\"P\(i)\",\"Price\":\"cheap\"}"
                    : "{\"ProductID\":\"P\(i)\",\"Category\":\"C\(i % 7)\",\"Price\":\(i % 997).5}"
            }.joined(separator: ",\n") + "\n]}"
    }

    @Test func aFileLoadsAllOrNothingAndInBatches() throws {
        let store = try LoadTests().sampleStore()
        let dir = tempDir()
        try write(Self.products(0..<5_000, bad: 4_321), to: dir + "/bad.json")
        #expect {
            try store.load(set: "Products", file: dir + "/bad.json")
        } throws: { error in
            "\(error)".contains("entity 4322 of the input (line 4323)")
                && "\(error)".contains("'Price': expected Edm.Decimal")
        }
        #expect(try store.count(set: "Products") == 0)

        let seen = Mutex<[LoadProgress]>([])
        #expect {
            try store.load(set: "Products", file: dir + "/bad.json", batchSize: 1_000) { p in
                seen.withLock { $0.append(p) }
            }
        } throws: { error in
            guard let e = error as? LoadError else { return false }
            return e.committed == 4_000 && "\(e)".contains("the 4000 entities before it were committed")
        }
        #expect(try store.count(set: "Products") == 4_000)
        #expect(seen.withLock { $0.map(\.committed) } == [1_000, 2_000, 3_000, 4_000])
        #expect(try store.check().isConsistent)

        try write(Self.products(0..<5_000), to: dir + "/good.json")
        let progress = Mutex<[LoadProgress]>([])
        #expect(
            try store.load(set: "Products", file: dir + "/good.json") { p in progress.withLock { $0.append(p) } }
                == 5_000)
        #expect(try store.count(set: "Products") == 5_000)
        #expect(try store.get(set: "Products", key: [.string("P4321")])?["Price"] == .decimal(EDMDecimal("333.5")!))
        let last = try #require(progress.withLock { $0.last })
        let size = try FileManager.default.attributesOfItem(atPath: dir + "/good.json")[.size] as? Int
        #expect(last.entities == 5_000 && last.committed == 5_000 && last.inputBytes == size)
        #expect(progress.withLock { $0.map(\.entities) } == progress.withLock { $0.map(\.entities) }.sorted())
        #expect(try store.check().isConsistent)
        #expect(throws: EntityError.unknownEntitySet("Nope")) { try store.load(set: "Nope", file: dir + "/good.json") }
        #expect(throws: EntityError.self) { try store.load(set: "Products", file: dir + "/missing.json") }
        #expect(throws: EntityError.self) { try store.load(set: "Products", file: dir) }
        #expect(throws: EntityError.self) { try store.load(set: "Products", file: dir + "/good.json", batchSize: 0) }
    }

    /// Expanded children stay in the batch of their parent.
    @Test func batchesKeepAnEntityWithItsChildren() throws {
        let store = try LoadTests().sampleStore()
        let dir = tempDir()
        let orders = (0..<30).map { o in
            "{\"SalesOrderID\":\"SO\(o)\",\"Items\":["
                + (0..<(o % 4)).map { "{\"ItemPosition\":\($0 + 1)}" }.joined(separator: ",") + "]}"
        }
        try write(
            "{\"value\":[" + orders.joined(separator: ",")
                + ",{\"SalesOrderID\":\"SO99\",\"Items\":[{\"ItemPosition\":\"x\"}]}]}", to: dir + "/o.json")
        var committed = 0
        #expect {
            try store.load(set: "SalesOrders", file: dir + "/o.json", batchSize: 7)
        } throws: { error in
            committed = (error as? LoadError)?.committed ?? -1
            return "\(error)".contains("ItemPosition")
        }
        let orderCount = try store.count(set: "SalesOrders")
        let itemCount = try store.count(set: "SalesOrderItems")
        #expect(orderCount + itemCount == committed)
        // Every order stored has all its items.
        for o in 0..<orderCount {
            let items = try store.entities("SalesOrderItems?$filter=SalesOrderID eq 'SO\(o)'")
            #expect(items.count == o % 4, "SO\(o)")
        }
        #expect(orderCount < 30 && orderCount > 20, "\(orderCount) orders committed")
        #expect(try store.check().isConsistent)
    }

    /// The writer runs the body again after the map grows: the input is read again from its
    /// start, so a pipe is first copied to a temporary file. With a batch size a pipe is read once.
    @Test func aGrownMapRereadsTheInputAndPipesAreCopiedFirst() throws {
        let dir = tempDir()
        try write(Self.products(0..<20_000), to: dir + "/p.json")
        let small = try LoadTests().sampleStore(mapSize: 1 << 16)
        #expect(try small.load(set: "Products", file: dir + "/p.json") == 20_000)
        #expect(small.entities.environment.mapSize > 1 << 16, "the map grew, so the body ran more than once")
        #expect(try small.count(set: "Products") == 20_000)
        #expect(try small.check().isConsistent)

        for batch in [nil, 3_000] as [Int?] {
            let store = try LoadTests().sampleStore(mapSize: 1 << 16)
            let fifo = dir + "/fifo-\(batch ?? 0)"
            #expect(mkfifo(fifo, 0o600) == 0)
            let text = Array(Self.products(0..<20_000).utf8)
            let writer = Thread {
                let fd = open(fifo, O_WRONLY)
                var done = 0
                while done < text.count {
                    let n = text.withUnsafeBytes {
                        Glibc.write(fd, $0.baseAddress! + done, min(4096, text.count - done))
                    }
                    if n <= 0 { break }
                    done += n
                }
                close(fd)
            }
            writer.start()
            #expect(try store.load(set: "Products", file: fifo, batchSize: batch) == 20_000)
            #expect(try store.count(set: "Products") == 20_000)
            #expect(store.entities.environment.mapSize > 1 << 16)
            #expect(try store.check().isConsistent)
        }
    }

    /// `load --batch` holds a chunk of the file and a few batches, whatever the file's size: the
    /// peak anonymous memory (RssAnon: not the mapped store) of loading three times the rows is
    /// about the same.
    @Test func aBatchedLoadRunsInMemoryFlatInTheFileSize() throws {
        let dir = tempDir()
        try write(SampleData.metadata, to: dir + "/m.xml")
        var peaks: [Int: Int] = [:]
        for rows in [40_000, 120_000] {
            let store = dir + "/s\(rows)"
            #expect(try CLI.run(["init", "--store", store, "--metadata", dir + "/m.xml"]).status == 0)
            try write(Self.products(0..<rows), to: dir + "/p\(rows).json")
            let p = Process()
            p.executableURL = URL(fileURLWithPath: CLI.executable)
            p.arguments = ["load", "--store", store, "--set", "Products", "--batch", "2000", dir + "/p\(rows).json"]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            var peakKB = 0
            while p.isRunning {
                if let text = try? String(contentsOfFile: "/proc/\(p.processIdentifier)/status", encoding: .utf8),
                    let line = text.split(separator: "\n").first(where: { $0.hasPrefix("RssAnon:") }),
                    let kb = Int(line.split(separator: " ").dropFirst().first ?? "")
                {
                    peakKB = max(peakKB, kb)
                }
                usleep(2_000)
            }
            #expect(p.terminationStatus == 0)
            #expect(try OfflineStore.open(at: store).count(set: "Products") == rows)
            peaks[rows] = peakKB
        }
        let small = peaks[40_000] ?? 0, large = peaks[120_000] ?? 0
        let fileBytes = (try FileManager.default.attributesOfItem(atPath: dir + "/p120000.json")[.size] as? Int) ?? 0
        print(
            "LoadStreamTests: peak RssAnon of load --batch 2000: \(small / 1024) MiB for 40,000 rows, \(large / 1024) MiB for 120,000 (a \(fileBytes >> 20) MiB file)"
        )
        #expect(small > 0 && large > 0)
        #expect(large < small + 6 * 1024, "peak RssAnon \(large) kB for 120,000 rows against \(small) kB for 40,000")
    }
}
