// The engine micro-benchmark of README.md ("Compiled filters and JSON from row bytes"): OfflineStore's
// Storage and Query only (no SQLite, no NIO), per-thread CPU time. Built by run.sh against the
// release objects of a PerfTests build. Usage: main ROWS [filter|json] (the second loops 8 s, for perf).
import Foundation
import Storage
import Query

func now() -> UInt64 {
    var ts = timespec(); clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}
let n = Int(CommandLine.arguments.dropFirst().first ?? "100000")!
let dir = NSTemporaryDirectory() + "mb-\(UUID().uuidString)"
let store = try EntityStore.create(
    path: dir, metadata: Array(BenchSchema.metadata.utf8), configuration: StorageSettings())
defer { try? FileManager.default.removeItem(atPath: dir) }
var rng = SystemRandomNumberGenerator()
let currencies = ["EUR", "USD", "BRL", "JPY", "GBP", "CHF", "INR", "CNY", "AUD", "CAD"]
var rows: [Properties] = []
for i in 0..<n {
    var p = Properties(minimumCapacity: 13)
    p["SalesOrderID"] = .string(String(format: "%010d", i / 4)); p["ItemPosition"] = .int(Int64(i % 4 * 10))
    p["ProductID"] = .string("HT-\(1000 + i % 1000)")
    if i % 3 == 0 { p["Note"] = .string("note \(i) with \"quotes\"") }
    p["Quantity"] = .int(Int64.random(in: 1...50, using: &rng)); p["QuantityUnit"] = .string("EA")
    for k in ["NetAmount", "TaxAmount", "GrossAmount"] {
        p[k] = .decimal(EDMDecimal(significand: Int128(Int.random(in: 0...2_000_000, using: &rng)), scale: 3))
    }
    p["CurrencyCode"] = .string(currencies.randomElement(using: &rng)!)
    p["DeliveryDate"] = .date(EDMDate(days: Int32.random(in: 16_000...20_000, using: &rng)))
    p["ChangedAt"] = .dateTimeOffset(EDMDateTimeOffset(ticks: Int64.random(in: 0...(1 << 54), using: &rng)))
    p["ItemGUID"] = .guid(
        EDMGuid(
            high: UInt64.random(in: 0...UInt64.max, using: &rng), low: UInt64.random(in: 0...UInt64.max, using: &rng)))
    rows.append(p)
}
var at = 0
while at < n {
    _ = try store.load(set: "SalesOrderItems", entities: Array(rows[at..<min(n, at + 50_000)])); at += 50_000
}
rows = []
let engine = QueryEngine(store: store)
let url = "SalesOrderItems?$filter=CurrencyCode eq 'BRL' and NetAmount lt 5"
let set = try store.set("SalesOrderItems")
func median(_ body: () throws -> Void) rethrows -> Double {
    var s: [Double] = []
    for _ in 0..<5 { let t = now(); try body(); s.append(Double(now() - t) / Double(n)) }
    return s.sorted()[2]
}
var c1 = 0, c2 = 0, c3 = 0
let floor = try median {
    c3 = 0;
    try store.read { t in
        try set.scanEntities(t, lower: nil, upper: nil) { _, _ in
            c3 += 1; return true
        }
    }
}
let compiled = try median { c2 = try engine.count(url) }
var bytes = 0
let json = try median {
    bytes = 0; try engine.execute("SalesOrderItems", writeBytes: { bytes += $0.count })
}
let values = ValueJSON(schema: store.schema)
var bytes2 = 0
let valuePath = try median {
    bytes2 = 0
    try store.read { t in
        var out = JSONBuffer(capacity: 1 << 17)
        try set.scanEntities(t, lower: nil, upper: nil) { pk, row in
            let e = try EntityRef(set: set, row: row, primaryKey: pk)
            out.append(UInt8(ascii: "{"))
            for (i, p) in set.type.properties.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                out.appendString(p.name); out.append(UInt8(ascii: ":"))
                values.write(try e.value(at: i), type: p.type, to: &out)
            }
            out.append(UInt8(ascii: "}"))
            if out.count >= 1 << 16 { bytes2 += out.count; out.removeAll() }
            return true
        }
        bytes2 += out.count
    }
}
print("rows \(n), filter matches \(c2)")
if CommandLine.arguments.count > 2 {
    let mode = CommandLine.arguments[2]
    let start = now()
    while now() - start < 8_000_000_000 {
        if mode == "filter" {
            _ = try engine.count(url)
        } else {
            try engine.execute("SalesOrderItems", writeBytes: { bytes += $0.count })
        }
    }
}
print(String(format: "cursor floor (scanEntities, nothing done)  %6.0f ns/row", floor))
print(String(format: "filter, compiled (engine.count)           %6.0f ns/row", compiled))
print(String(format: "JSON, engine.execute (RowJSON)            %6.0f ns/row (%d bytes)", json, bytes))
print(String(format: "JSON, per-column Value path               %6.0f ns/row (%d bytes)", valuePath, bytes2))
