import Foundation
import Testing
import TestSupport
@testable import OfflineStore
@testable import Query
import Storage

/// Extreme values in every numeric query option, every function argument position and every
/// arithmetic operand, generated from tables, run through the engine over `EdgeStore`'s extreme
/// rows: each request must answer valid JSON or throw a `QueryError` whose message is short and has
/// no control characters — never trap, never another error type.
///
/// A trap kills the whole test process, so a regression shows as a crashed run, not as a failed
/// expectation. To be sure the cases really ran (and were not all refused by the binder before
/// reaching the evaluator), each test counts its cases, how many answered and how many were
/// refused, prints them, and expects both to be many.
@Suite(.soak, .checksStores, .runsOffThePool) struct HostileQueryPropertyTests {
    /// Literal operands by kind: the bounds of each type, one past them, and values that overflow
    /// when combined.
    static let literals: [(kind: String, values: [String])] = [
        (
            "int",
            [
                "9223372036854775807", "-9223372036854775808", "9223372036854775807L", "2147483647", "-2147483648",
                "1", "-1", "0", "9223372036854775808", "-9223372036854775809", "18446744073709551616",
            ]
        ),
        (
            "decimal",
            [
                "1e300M", "-9.9e-300M", "1234567890123456789012345678901234567890",
                "0.1234567890123456789012345678901234567890",
                "99999999999999999999999999999999999999M", "-85070591730234615865843651857942052864", "1e400M",
                "1e-400M",
                "1e-9223372036854775808M", "0.0", "-0.0M",
            ]
        ),
        (
            "double",
            [
                "1e300", "-9.9e-300", "INF", "-INF", "NaN", "1.7976931348623157e308", "-1.7976931348623157e308",
                "5e-324", "1e309", "-0.0d",
            ]
        ),
        ("date", ["9999-12-31", "-9999-01-01", "0001-01-01", "2000-02-29"]),
        (
            "dto",
            [
                "9999-12-31T23:59:59.9999999Z", "-9999-01-01T00:00:00Z", "9999-12-31T23:59:59.9999999+14:00",
                "-9999-01-01T00:00:00-14:59", "maxdatetime()", "mindatetime()", "now()",
            ]
        ),
        (
            "duration",
            [
                "duration'P999999999999D'", "duration'P10675199DT2H48M5.4775807S'",
                "duration'-P10675199DT2H48M5.4775807S'",
                "duration'PT922337203685.4775807S'", "duration'-PT922337203685.4775807S'",
                "duration'PT922337203685.9999999S'",
                "duration'PT0S'", "duration'P1D'", "-duration'PT922337203685.4775807S'",
            ]
        ),
        ("time", ["23:59:59.9999999", "00:00"]),
        ("string", ["''", "'x'", "'" + String(repeating: "z", count: 300) + "'"]),
        ("null", ["null"]),
    ]

    /// Stored operands by kind (`EdgeStore` puts the extremes in them).
    static let properties: [(kind: String, values: [String])] = [
        ("int", ["I64", "I32", "ID"]), ("decimal", ["Dec"]), ("double", ["Dbl"]), ("date", ["Dt"]), ("dto", ["Dto"]),
        ("duration", ["Dur"]), ("time", ["Tod"]), ("string", ["Str"]),
    ]

    static var operands: [String] { (literals + properties).flatMap(\.values) }

    /// Outcomes of a batch of requests.
    struct Tally: CustomStringConvertible {
        var cases = 0, answered = 0, refused = 0
        var description: String { "\(cases) cases: \(answered) answered, \(refused) refused with a QueryError" }
    }

    /// Runs one request; records an issue if it fails with anything but a clean `QueryError`, or
    /// answers something that is not JSON.
    static func run(_ engine: QueryEngine, _ url: String, pageSize: Int? = nil, _ tally: inout Tally) {
        tally.cases += 1
        var out: [UInt8] = []
        do {
            try engine.execute(url, pageSize: pageSize, writeBytes: { out.append(contentsOf: $0) })
            tally.answered += 1
            do { _ = try JSON.parse(out) } catch { Issue.record("not JSON (\(error)) for \(url.prefix(200))") }
        } catch let e as QueryError {
            tally.refused += 1
            let text = e.description
            if text.unicodeScalars.count > 400
                || text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            {
                Issue.record("unsafe message for \(url.prefix(200)): \(text.prefix(500))")
            }
        } catch {
            Issue.record("\(type(of: error)) escaped for \(url.prefix(200)): \(error)")
        }
    }

    @Test func numericQueryOptionsTakeExtremeValues() throws {
        let store = try EdgeStore.create()
        let engine = store.queries
        let numbers = [
            "0", "1", "-1", "2", "9223372036854775807", "9223372036854775806", "9223372036854775808",
            "-9223372036854775808", "2147483647", "-2147483648", "18446744073709551616", "1e3", "007", "", " 1", "abc",
            "+5",
        ]
        let options = [
            "$top=N", "$skip=N", "$skiptoken=N", "$top=N&$skip=9223372036854775800", "$skip=N&$top=100",
            "$expand=Children($top=N)", "$expand=Children($skip=N)", "$expand=Children($top=N;$skip=N)",
            "$expand=Children($levels=N)", "$expand=Parent($expand=Children($top=N;$skip=N;$orderby=I64 desc))",
        ]
        let orders = ["", "&$orderby=I64", "&$orderby=ID", "&$orderby=ID desc", "&$orderby=Dec desc,Str"]
        let pageSizes: [Int?] = [nil, 1, 2, .max, .max - 1, 0, -1, .min]
        var tally = Tally()
        for option in options {
            for n in numbers {
                for order in orders {
                    for pageSize in pageSizes {
                        let url = "Things?" + option.replacingOccurrences(of: "N", with: n) + order
                        Self.run(engine, url, pageSize: pageSize, &tally)
                        // Follow one next link, as a client would.
                        if let pageSize, pageSize > 0, pageSize < 3 {
                            var text = ""
                            if (try? engine.execute(url, pageSize: pageSize, write: { text += $0 })) != nil,
                                case .string(let next)? = try? JSON.parse(text)["@odata.nextLink"]
                            {
                                Self.run(engine, next, pageSize: pageSize, &tally)
                            }
                        }
                    }
                }
            }
        }
        print("numeric options: \(tally)")
        #expect(tally.cases >= options.count * numbers.count * orders.count * pageSizes.count)
        #expect(tally.answered > tally.cases / 4 && tally.refused > tally.cases / 4, "\(tally)")
        #expect(try store.check().isConsistent)
    }

    /// Built-in functions by argument kinds (what the binder accepts at each position).
    static let functions: [(name: String, kinds: [String])] = [
        ("substring", ["string", "int"]), ("substring", ["string", "int", "int"]), ("indexof", ["string", "string"]),
        ("length", ["string"]), ("concat", ["string", "string"]), ("contains", ["string", "string"]),
        ("startswith", ["string", "string"]), ("endswith", ["string", "string"]), ("tolower", ["string"]),
        ("trim", ["string"]),
        ("year", ["date"]), ("month", ["dto"]), ("day", ["date"]), ("hour", ["dto"]), ("minute", ["time"]),
        ("second", ["dto"]),
        ("fractionalseconds", ["dto"]), ("totaloffsetminutes", ["dto"]), ("date", ["dto"]), ("time", ["dto"]),
        ("totalseconds", ["duration"]), ("round", ["decimal"]), ("floor", ["double"]), ("ceiling", ["decimal"]),
        ("round", ["int"]),
    ]

    static let castTargets = [
        "Edm.Int64", "Edm.Int32", "Edm.Int16", "Edm.Byte", "Edm.SByte", "Edm.Decimal", "Edm.Double", "Edm.Single",
        "Edm.String", "Edm.Date", "Edm.DateTimeOffset", "Edm.Duration", "Edm.TimeOfDay", "Edm.Boolean", "Edm.Guid",
    ]

    /// A well-typed stored argument for a position of `kind`.
    static func typical(_ kind: String) -> String {
        properties.first { $0.kind == kind }?.values.first ?? "1"
    }

    @Test func everyFunctionArgumentTakesExtremeValues() throws {
        let store = try EdgeStore.create()
        let engine = store.queries
        var tally = Tally()
        var calls: [String] = []
        for (name, kinds) in Self.functions {
            for position in kinds.indices {
                for value in Self.operands {
                    var args = kinds.map(Self.typical)
                    args[position] = value
                    calls.append("\(name)(\(args.joined(separator: ",")))")
                }
            }
        }
        for target in Self.castTargets {
            for value in Self.operands { calls.append("cast(\(value),\(target))") }
        }
        // Strings that cast reads as literals of the target type, at their bounds.
        for text in [
            "'9223372036854775808'", "'-9223372036854775809'", "'1e-9223372036854775808'", "'PT922337203685.9999999S'",
            "'/Date(-9223372036854775808)/'", "'/Date(1--9223372036854775808)/'", "'10000-01-01'",
            "'-9999-01-01T00:00:00Z'",
        ] {
            for target in Self.castTargets { calls.append("cast(\(text),\(target))") }
        }
        for call in calls {
            Self.run(engine, "Things?$filter=\(call) ne null", &tally)
            Self.run(engine, "Things?$orderby=\(call),ID&$select=ID", &tally)
        }
        print("function arguments: \(tally)")
        #expect(tally.cases == 2 * calls.count)
        #expect(tally.answered > tally.cases / 4 && tally.refused > tally.cases / 10, "\(tally)")
        #expect(try store.check().isConsistent)
    }

    @Test func everyArithmeticOperandTakesExtremeValues() throws {
        let store = try EdgeStore.create()
        let engine = store.queries
        var r = SeededRandom(seed: testSeed("everyArithmeticOperandTakesExtremeValues"))
        var tally = Tally()
        let operands = Self.operands
        for op in ["add", "sub", "mul", "div", "divby", "mod"] {
            for a in operands {
                for b in operands {
                    Self.run(engine, "Things?$filter=(\(a) \(op) \(b)) eq null&$select=ID", &tally)
                    // $orderby evaluates the same expressions with the same rule; a seeded sample.
                    if Int.random(in: 0..<8, using: &r) == 0 {
                        Self.run(engine, "Things?$orderby=\(a) \(op) \(b),ID&$select=ID", &tally)
                    }
                }
            }
        }
        for a in operands {
            Self.run(engine, "Things?$filter=-(\(a)) ne null&$select=ID", &tally)
            Self.run(engine, "Things?$filter=-(-(\(a))) ne null&$select=ID", &tally)
        }
        // Chains of operators, where a first result near a bound meets a second operand.
        let ops = ["add", "sub", "mul", "div", "mod"]
        for _ in 0..<1_500 {
            let e = (0..<3).map { _ in operands.randomElement(using: &r)! }
            let o = (0..<2).map { _ in ops.randomElement(using: &r)! }
            Self.run(
                engine,
                "Things?$filter=((\(e[0]) \(o[0]) \(e[1])) \(o[1]) \(e[2])) gt \(operands.randomElement(using: &r)!)&$select=ID",
                &tally)
        }
        print("arithmetic operands: \(tally)")
        #expect(tally.cases >= 6 * operands.count * operands.count + 1_500)
        #expect(tally.answered > tally.cases / 10 && tally.refused > tally.cases / 10, "\(tally)")
        #expect(try store.check().isConsistent)
    }
}
