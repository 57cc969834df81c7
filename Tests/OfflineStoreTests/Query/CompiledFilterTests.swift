import Foundation
import Testing
import TestSupport
@testable import OfflineStore
@testable import Query
@testable import Storage

/// The compiled residual filter (`CompiledFilter`) against the interpreter (`ExpressionEvaluator`):
/// the same three-valued result on every row, for the differential test's random queries and for
/// comparisons of every type with edge values; and `RowJSON` (JSON straight from row bytes) against
/// the `Value` path it replaced, byte for byte.
@Suite(.checksStores, .runsOffThePool) struct CompiledFilterTests {
    /// Every row of `set` against `url`'s `$filter`, compiled and interpreted; returns how many
    /// filters had compiled nodes and how many rows were compared.
    static func compare(
        _ store: OfflineStore, _ url: String, _ tally: inout (filters: Int, compiled: Int, rows: Int)
    ) throws {
        let query: BoundQuery
        do { query = try store.queries.bind(url) } catch is QueryError { return }
        guard let filter = query.options.filter else { return }
        let set = try store.entities.set(query.path.entitySet)
        try store.entities.read { t in
            let evaluator = ExpressionEvaluator(navigator: Navigator(store: store.entities, t: t))
            let compiled = CompiledFilter(filter, set: set, evaluator: evaluator)
            tally.filters += 1
            if compiled.compiledNodes > 0 { tally.compiled += 1 }
            try set.scanEntities(t, lower: nil, upper: nil) { pk, row in
                let e = try EntityRef(set: set, row: row, primaryKey: pk)
                // The interpreter's answer and the compiled one: a truth value or an error's text.
                let expected: String, got: String
                do { expected = "\(CompiledFilter.truth(try evaluator.evaluate(filter, e)))" } catch {
                    expected = "error: \(error)"
                }
                do { got = "\(try compiled.truth(e))" } catch { got = "error: \(error)" }
                let matched: String
                do { matched = try compiled.matches(e) ? "yes" : "no" } catch { matched = "error: \(error)" }
                tally.rows += 1
                if got != expected || (matched == "yes") != (expected == "yes") {
                    let props = (try? e.properties()).map { "\($0)" } ?? "?"
                    Issue.record(
                        "\(url)\n\(filter)\ncompiled \(got) (matches: \(matched)), interpreted \(expected)\nrow \(props)"
                    )
                }
                return true
            }
        }
    }

    @Test func compiledFilterAgreesWithInterpreterOnRandomQueries() throws {
        var r = SeededRandom(seed: testSeed("compiledFilterAgreesWithInterpreterOnRandomQueries"))
        let store = try QueryDifferentialTests.makeStore(&r)
        var tally = (filters: 0, compiled: 0, rows: 0)
        let count = envInt("COMPILED_FILTER_QUERIES", 1_500)
        let deadline = Date().addingTimeInterval(Double(envInt("COMPILED_FILTER_SECONDS", 120)))
        for _ in 0..<count where Date() < deadline {
            try Self.compare(store, "SalesOrderItems?$filter=" + QueryDifferentialTests.itemPredicate(&r), &tally)
        }
        print("compiled filters: \(tally)")
        #expect(tally.filters >= min(count, 100))
        #expect(tally.compiled * 4 >= tally.filters * 3)  // most random filters have compiled nodes (functions do not)
        #expect(tally.rows > tally.filters * 50)
    }

    // MARK: Edge values of every type

    static let metadata = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:DataServices>
            <Schema Namespace="Mixed" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <EnumType Name="Color"><Member Name="Red" Value="1"/><Member Name="Green" Value="2"/><Member Name="Blue" Value="4"/></EnumType>
              <EntityType Name="Row">
                <Key><PropertyRef Name="ID"/></Key>
                <Property Name="ID" Type="Edm.Int64" Nullable="false"/>
                <Property Name="B" Type="Edm.Boolean"/>
                <Property Name="U8" Type="Edm.Byte"/>
                <Property Name="I8" Type="Edm.SByte"/>
                <Property Name="I16" Type="Edm.Int16"/>
                <Property Name="I32" Type="Edm.Int32"/>
                <Property Name="I64" Type="Edm.Int64"/>
                <Property Name="Dec" Type="Edm.Decimal"/>
                <Property Name="Dec3" Type="Edm.Decimal" Precision="16" Scale="3"/>
                <Property Name="Sgl" Type="Edm.Single"/>
                <Property Name="Dbl" Type="Edm.Double"/>
                <Property Name="Dt" Type="Edm.Date"/>
                <Property Name="Dto" Type="Edm.DateTimeOffset"/>
                <Property Name="Dur" Type="Edm.Duration"/>
                <Property Name="Tod" Type="Edm.TimeOfDay"/>
                <Property Name="G" Type="Edm.Guid"/>
                <Property Name="Str" Type="Edm.String"/>
                <Property Name="Col" Type="Mixed.Color"/>
              </EntityType>
              <EntityContainer Name="Container">
                <EntitySet Name="Rows" EntityType="Mixed.Row"/>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    /// JSON values by property; row `i` takes a random one.
    static let columns: [(String, [String])] = [
        ("B", ["true", "false"]),
        ("U8", ["0", "1", "127", "128", "255"]),
        ("I8", ["-128", "-1", "0", "1", "127"]),
        ("I16", ["-32768", "-1", "0", "7", "32767"]),
        ("I32", ["2147483647", "-2147483648", "0", "-1", "5"]),
        ("I64", ["9223372036854775807", "-9223372036854775808", "0", "1", "-1", "2147483648"]),
        (
            "Dec",
            [
                "99999999999999999999999999999999999999", "-99999999999999999999999999999999999999",
                "0.00000000000000000000000000000000000001", "1e30", "-1e-30", "0", "5", "5.000", "4.999", "-0.5",
                "12345678901234567890.5",
            ]
        ),
        ("Dec3", ["0", "5", "4.999", "5.001", "-5", "1234567890123.456", "-0.001"]),
        ("Sgl", ["3.4028235e38", "-3.4028235e38", "1.5", "0", "\"NaN\"", "\"INF\"", "\"-INF\"", "1e-45"]),
        (
            "Dbl",
            [
                "1.7976931348623157e308", "-1.7976931348623157e308", "5e-324", "\"INF\"", "\"-INF\"", "\"NaN\"", "0",
                "-0.0", "2.5",
            ]
        ),
        ("Dt", ["\"9999-12-31\"", "\"-9999-01-01\"", "\"0001-01-01\"", "\"1970-01-01\"", "\"2024-02-29\""]),
        (
            "Dto",
            [
                "\"9999-12-31T23:59:59.9999999Z\"", "\"-9999-01-01T00:00:00Z\"",
                "\"9999-12-31T23:59:59.9999999+14:00\"",
                "\"2024-02-29T12:00:00+05:30\"", "\"2024-02-29T06:30:00Z\"", "\"1970-01-01T00:00:00.1230000Z\"",
            ]
        ),
        (
            "Dur",
            ["\"PT922337203685.4775807S\"", "\"-PT922337203685.4775807S\"", "\"P10675199D\"", "\"PT0S\"", "\"PT1.5S\""]
        ),
        ("Tod", ["\"23:59:59.9999999\"", "\"00:00:00\"", "\"12:30:00.5\""]),
        (
            "G",
            [
                "\"00000000-0000-0000-0000-000000000000\"", "\"ffffffff-ffff-ffff-ffff-ffffffffffff\"",
                "\"7fffffff-0000-8000-0001-0123456789ab\"",
                "\"80000000-0000-0000-0000-000000000001\"",
            ]
        ),
        (
            "Str",
            [
                "\"\"", "\"x\"", "\"K\"", "\"\u{212A}\"", "\"é\"", "\"e\u{301}\"", "\"\\u001b[31mred\"",
                "\"a\\\"b\\\\c\"", "\"ÄÖ🙂\"",
                "\"" + String(repeating: "y", count: 300) + "\"", "\"HT-1001\"", "\"line\\nbreak\\t\"", "\"\\u007f\"",
            ]
        ),
        ("Col", ["\"Red\"", "\"Blue\"", "4", "3"]),
    ]

    /// Literals by property (OData URL syntax).
    static let literals: [String: [String]] = [
        "B": ["true", "false"],
        "U8": ["0", "128", "255", "256", "-1", "127.5"],
        "I8": ["-128", "0", "127", "-129", "0.5"],
        "I16": ["-32768", "7", "32767", "40000"],
        "I32": ["2147483647", "-2147483648", "0", "5", "2147483648", "4.5", "5.0", "1e3"],
        "I64": ["9223372036854775807", "-9223372036854775808", "0", "2147483648", "0.5", "1.0"],
        "Dec": [
            "5", "5.0", "4.999", "-0.5", "0", "99999999999999999999999999999999999999",
            "0.00000000000000000000000000000000000001",
            "1e30", "12345678901234567890.5", "1e-30",
        ],
        "Dec3": ["5", "4.999", "5.0001", "-5", "1234567890123.456", "0"],
        "Sgl": ["1.5", "0", "NaN", "INF", "-INF", "3.4028235e38", "1"],
        "Dbl": ["2.5", "0", "-0.0", "NaN", "INF", "-INF", "1.7976931348623157e308", "5e-324", "3"],
        "Dt": ["9999-12-31", "-9999-01-01", "2024-02-29", "1970-01-01"],
        "Dto": [
            "2024-02-29T06:30:00Z", "2024-02-29T12:00:00+05:30", "9999-12-31T23:59:59.9999999Z",
            "1970-01-01T00:00:00.123Z",
        ],
        "Dur": ["duration'PT0S'", "duration'PT1.5S'", "duration'P10675199D'"],
        "Tod": ["12:30:00.5", "00:00:00", "23:59:59.9999999"],
        "G": [
            "00000000-0000-0000-0000-000000000000", "7fffffff-0000-8000-0001-0123456789ab",
            "80000000-0000-0000-0000-000000000001",
        ],
        "Str": ["''", "'x'", "'K'", "'\u{212A}'", "'é'", "'e\u{301}'", "'HT-1001'", "'yy'", "'ÄÖ🙂'", "'a\"b\\c'"],
        "Col": ["Mixed.Color'Red'", "Mixed.Color'Blue'", "Mixed.Color'4'"],
    ]

    static func mixedStore(_ r: inout SeededRandom, rows: Int) throws -> OfflineStore {
        var texts: [String] = []
        for id in 0..<rows {
            var members = ["\"ID\":\(id)"]
            for (name, values) in columns where Int.random(in: 0..<6, using: &r) != 0 {
                members.append("\"\(name)\":\(values.randomElement(using: &r)!)")
            }
            texts.append("{" + members.joined(separator: ",") + "}")
        }
        let dir = TestScratch.directory("os-mixed")
        let store = try OfflineStore.create(at: dir, metadata: Array(metadata.utf8))
        _ = try store.load(set: "Rows", json: Array(("{\"value\":[" + texts.joined(separator: ",") + "]}").utf8))
        return store
    }

    @Test func compiledFilterAgreesWithInterpreterOnEdgeValues() throws {
        var r = SeededRandom(seed: testSeed("compiledFilterAgreesWithInterpreterOnEdgeValues"))
        let store = try Self.mixedStore(&r, rows: 120)
        var tally = (filters: 0, compiled: 0, rows: 0)
        let ops = ["eq", "ne", "gt", "ge", "lt", "le"]
        var predicates: [String] = []
        for (name, values) in Self.literals.sorted(by: { $0.key < $1.key }) {
            for v in values {
                for op in ops { predicates += ["\(name) \(op) \(v)", "\(v) \(op) \(name)"] }
                predicates.append("\(name) in (\(v),\(values[0]))")
            }
            predicates += [
                "\(name) eq null", "\(name) ne null", "not (\(name) eq null)", "\(name) eq \(name)",
                "\(name) lt \(name)",
            ]
        }
        let deadline = Date().addingTimeInterval(Double(envInt("COMPILED_FILTER_SECONDS", 120)))
        for p in predicates where Date() < deadline { try Self.compare(store, "Rows?$filter=" + p, &tally) }
        // Junctions of random pairs, with nulls on both sides of and/or/not.
        for _ in 0..<envInt("COMPILED_FILTER_QUERIES", 1_500) where Date() < deadline {
            let a = predicates.randomElement(using: &r)!, b = predicates.randomElement(using: &r)!
            let shape = [
                "(\(a)) and (\(b))", "(\(a)) or (\(b))", "not ((\(a)) and (\(b)))", "not ((\(a)) or not (\(b)))",
            ]
            try Self.compare(store, "Rows?$filter=" + shape.randomElement(using: &r)!, &tally)
        }
        print("edge-value filters: \(tally)")
        #expect(tally.filters > predicates.count / 2)
        #expect(tally.compiled * 10 >= tally.filters * 8)
    }

    // MARK: JSON from row bytes

    /// Every property of every row, written from its bytes (`RowJSON`) and from its decoded `Value`
    /// (`ValueJSON`, the path it replaced): the same bytes.
    static func compareJSON(_ store: OfflineStore, set name: String) throws -> Int {
        let set = try store.entities.set(name)
        let values = ValueJSON(schema: store.entities.schema)
        var compared = 0
        try store.entities.read { t in
            try set.scanEntities(t, lower: nil, upper: nil) { pk, row in
                let e = try EntityRef(set: set, row: row, primaryKey: pk)
                for (i, p) in set.type.properties.enumerated() {
                    var old = JSONBuffer(), new = JSONBuffer()
                    values.write(try e.value(at: i), type: p.type, to: &old)
                    let kind = RowJSON.kind(of: p.type)
                    if let raw = try e.rawBytes(at: i) {
                        if !RowJSON.write(kind, raw, to: &new) {
                            values.write(try e.value(at: i), type: p.type, to: &new)
                        }
                        if kind != .value { compared += 1 }
                    } else {
                        new.append("null")
                    }
                    #expect(new.string == old.string, "\(name).\(p.name)")
                }
                return true
            }
        }
        return compared
    }

    @Test func jsonFromRowBytesIsTheValuePathsJSON() throws {
        var r = SeededRandom(seed: testSeed("jsonFromRowBytesIsTheValuePathsJSON"))
        let mixed = try Self.mixedStore(&r, rows: 400)
        #expect(try Self.compareJSON(mixed, set: "Rows") > 3_000)
        let items = try QueryDifferentialTests.makeStore(&r)
        #expect(try Self.compareJSON(items, set: "SalesOrderItems") > 100)
        let edge = try EdgeStore.create()
        #expect(try Self.compareJSON(edge, set: "Things") > 50)
    }

    /// Decimals of every scale and sign through `appendDecimal`, against `EDMDecimal.description`.
    @Test func decimalDigitsAreTheDescription() {
        var r = SeededRandom(seed: testSeed("decimalDigitsAreTheDescription"))
        for _ in 0..<20_000 {
            let magnitude: Int128 =
                switch Int.random(in: 0..<4, using: &r) {
                case 0: Int128(Int.random(in: 0...9, using: &r))
                case 1: Int128(UInt64.random(in: 0...UInt64.max, using: &r))
                case 2: Int128(Int64.random(in: 0...999_999, using: &r))
                default:
                    Int128(UInt64.random(in: 0...UInt64.max, using: &r))
                        * Int128(UInt64.random(in: 1...1_000_000, using: &r))
                }
            let d = EDMDecimal(
                significand: Bool.random(using: &r) ? magnitude : -magnitude,
                scale: Int16.random(in: -5...40, using: &r))
            var out = JSONBuffer()
            out.appendDecimal(d)
            #expect(out.string == d.description)
        }
    }
}

private func envInt(_ name: String, _ fallback: Int) -> Int {
    ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? fallback
}
