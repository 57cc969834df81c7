import Foundation
import Testing
import TestSupport
@testable import OfflineStore
@testable import Query
import Samples
import Storage

/// The `.sort` strategy's external merge sort (`ExternalSort`): many small runs, merged in more
/// than one pass, must give what one in-memory sort gives; and its scratch file must never be seen
/// nor outlive the query.
@Suite(.checksStores, .runsOffThePool) struct ExternalSortTests {
    /// 2,000 items whose sort properties repeat a lot (few distinct values, some nulls), with a
    /// covering index.
    static func makeStore(_ r: inout SeededRandom) throws -> OfflineStore {
        var config = SampleData.configuration
        config.indexes["SalesOrderItems", default: []] += ["ProductID, Quantity INCLUDE NetAmount, DeliveryDate"]
        let dir = TestScratch.directory("os-xsort")
        let store = try OfflineStore.create(at: dir, metadata: Array(SampleData.metadata.utf8), configuration: config)
        func maybe(_ v: Value, _ r: inout SeededRandom) -> Value { Int.random(in: 0..<10, using: &r) == 0 ? .null : v }
        let orders: [Properties] = (0..<200).map { ["SalesOrderID": .string("SO\($0)")] }
        try store.load(set: "SalesOrders", entities: orders)
        var items: [Properties] = []
        for i in 0..<2_000 {
            items.append([
                "SalesOrderID": .string("SO\(i / 10)"), "ItemPosition": .int(Int64(i % 10 * 10)),
                "ProductID": maybe(.string("HT-\(1000 + Int.random(in: 0..<6, using: &r))"), &r),
                "Quantity": maybe(.int(Int64.random(in: -2...4, using: &r)), &r),
                "NetAmount": maybe(
                    .decimal(EDMDecimal(significand: Int128(Int.random(in: 0...20, using: &r) * 250), scale: 3)), &r),
                "DeliveryDate": maybe(.date(EDMDate(days: Int32.random(in: 18_000...18_005, using: &r))), &r),
            ])
        }
        try store.load(set: "SalesOrderItems", entities: items.shuffled(using: &r))
        return store
    }

    /// Sorts that spill hundreds of runs of 7 (merged 64 at a time, then once more) answer exactly
    /// as the in-memory sort: JSON and entities, ascending and descending, several keys, `$skip`
    /// and server-driven pages (`$top` and an early stop), covering plans.
    @Test func manyRunsAgreeWithTheInMemorySort() throws {
        var r = SeededRandom(seed: testSeed("manyRunsAgreeWithTheInMemorySort"))
        let store = try Self.makeStore(&r)
        let urls = [
            "SalesOrderItems?$orderby=NetAmount",
            "SalesOrderItems?$orderby=NetAmount desc",
            "SalesOrderItems?$orderby=Quantity desc,NetAmount,DeliveryDate desc&$skip=37",
            "SalesOrderItems?$orderby=ProductID,NetAmount desc&$skip=5",
            "SalesOrderItems?$orderby=DeliveryDate desc,SalesOrderID desc",
            "SalesOrderItems?$orderby=NetAmount,ItemPosition desc&$skip=1990",
            "SalesOrderItems?$filter=Quantity ge 0&$orderby=NetAmount desc,Quantity",
            // Covering: the index entries carry NetAmount and DeliveryDate; no row is read.
            "SalesOrderItems?$filter=ProductID lt 'HT-1004'&$select=NetAmount,DeliveryDate&$orderby=NetAmount desc,DeliveryDate",
            "SalesOrderItems?$filter=ProductID ge 'HT-1002'&$select=Quantity,NetAmount&$orderby=NetAmount&$skip=3",
        ]
        var covering = 0
        for url in urls {
            let plan = try store.explain(url)
            #expect(plan.contains("sort on the $orderby key"), "\(url)\n\(plan)")
            if plan.contains("covering") { covering += 1 }
            let spilled = QueryEngine(store: store.entities, memorySortLimit: 7)
            let inMemory = QueryEngine(store: store.entities, memorySortLimit: 200_000)
            var (a, b) = ("", "")
            try spilled.execute(url) { a += $0 }
            try inMemory.execute(url) { b += $0 }
            #expect(a == b, "\(url)")
            let rows = try spilled.entities(url)
            #expect(rows == (try inMemory.entities(url)), "\(url)")
            #expect(rows.count > 64 * 7 || url.contains("$skip=1990"), "\(url): \(rows.count) rows")
            // Server-driven paging: a page is a `$skip` and a `$top` of the sort, which stops early.
            for token in [0, 150, 1_800] {
                let page = token == 0 ? url : Paging.nextLink(url, offset: token)
                (a, b) = ("", "")
                try spilled.execute(page, pageSize: 150) { a += $0 }
                try inMemory.execute(page, pageSize: 150) { b += $0 }
                #expect(a == b, "\(page)")
            }
        }
        #expect(covering == 2, "the covering plans were not chosen")
    }

    /// The scratch file is unlinked as soon as it is made: the scratch directory is empty while a
    /// spilled sort streams, after it, after one stopped early, and after one whose consumer threw
    /// midway — and no descriptor of the process still points into it.
    @Test func scratchFileLeavesNothing() throws {
        var r = SeededRandom(seed: testSeed("scratchFileLeavesNothing"))
        let store = try Self.makeStore(&r)
        let scratch = TestScratch.directory("os-xsort-scratch")
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let engine = QueryEngine(store: store.entities, memorySortLimit: 7, scratchDirectory: scratch)
        func empty() -> Bool { (try? FileManager.default.contentsOfDirectory(atPath: scratch))?.isEmpty == true }
        /// Descriptors whose target is in the scratch directory (an unlinked file reads "… (deleted)").
        func open() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).compactMap {
                try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)
            }.filter { $0.hasPrefix(scratch + "/") }
        }
        var openWhileStreaming: [Int] = []
        try engine.execute("SalesOrderItems?$orderby=NetAmount desc") { (_: String) in
            #expect(empty(), "a scratch file is visible")
            openWhileStreaming.append(open().count)
        }
        // Open (once) while the merge streams; closed before the last chunk, written after the sort.
        #expect(openWhileStreaming.count > 2 && openWhileStreaming.first == 1 && openWhileStreaming.last == 0)
        #expect(empty() && open().isEmpty)
        #expect(try engine.entities("SalesOrderItems?$orderby=Quantity&$top=1200").count == 1_200)
        #expect(empty() && open().isEmpty)
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try engine.execute("SalesOrderItems?$orderby=DeliveryDate,NetAmount desc") { (_: String) in throw Stop() }
        }
        #expect(empty() && open().isEmpty, "\(open())")
    }

    /// `ExternalSort` itself: random keys (some larger than a run reader's buffer, many equal in
    /// their first 8 bytes), 5 records a run, 3 runs merged at a time: every record comes back in
    /// bytewise key order with its primary key and row, and a stop is honoured.
    @Test func externalSortOrdersRecordsAsBytes() throws {
        var r = SeededRandom(seed: testSeed("externalSortOrdersRecordsAsBytes"))
        let scratch = TestScratch.directory("os-xsort-unit")
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        // The rows: 16 bytes each in one buffer that outlives the sorts (a record keeps its row's address).
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: 500 * 16, alignment: 1)
        defer { storage.deallocate() }
        let rows = (0..<500).map { i in
            let text = Array("row \(i)".utf8)
            let row = UnsafeMutableRawBufferPointer(rebasing: storage[(i * 16)..<(i * 16 + text.count)])
            row.copyBytes(from: text)
            return UnsafeRawBufferPointer(row)
        }
        let keys: [[UInt8]] = (0..<500).map { i in
            let common = [UInt8](
                repeating: UInt8(Int.random(in: 0...2, using: &r)), count: Int.random(in: 0...12, using: &r))
            let tail = (0..<Int.random(in: 0...6, using: &r)).map { _ in UInt8.random(in: 0...3, using: &r) }
            return common + tail + (i % 97 == 0 ? [UInt8](repeating: 7, count: 200_000) : [])
        }
        let pks = (0..<500).map { i in withUnsafeBytes(of: UInt32(i).bigEndian) { Array($0) } }
        let expected = (0..<500).sorted { a, b in (keys[a] + pks[a]).lexicographicallyPrecedes(keys[b] + pks[b]) }
        // Runs of 5 records (or 4 KiB), merged 3 at a time; then everything in memory.
        for (entries, bytes) in [(5, 4_096), (1_000, 1 << 30)] {
            let sort = ExternalSort(entryLimit: entries, byteLimit: bytes, fanIn: 3, scratchDirectory: scratch)
            for i in 0..<500 {
                try pks[i].withUnsafeBytes { pk in
                    try sort.add(primaryKey: pk, row: rows[i]) { $0.append(contentsOf: keys[i]) }
                }
            }
            var order: [Int] = []
            try sort.inOrder { record in
                let i = Int(UInt32(bigEndian: record.primaryKey.loadUnaligned(as: UInt32.self)))
                #expect(Array(record.key) == keys[i] + pks[i])
                #expect(record.row.baseAddress == rows[i].baseAddress && record.row.count == rows[i].count)
                order.append(i)
                return order.count < 450
            }
            #expect(order == Array(expected.prefix(450)), "\(entries) entries a run")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch).isEmpty)
    }
}
