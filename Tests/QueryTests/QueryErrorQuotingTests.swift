import TestSupport
import Testing
@testable import Query

/// QueryError quotes every value interpolated into its message; nothing else is changed.
@Suite(.runsOffThePool) struct QueryErrorQuotingTests {
    @Test func interpolatedValuesAreCutAndEscaped() {
        let long = String(repeating: "9", count: 100_000)
        let e = QueryError("invalid number literal '\(long)'", option: "$filter", column: 3)
        #expect(e.message == "invalid number literal '" + String(repeating: "9", count: 40) + "…'")
        let esc = QueryError("unknown property '\("a\u{1B}[31mb")'", option: "$fil\u{7}ter", column: nil)
        #expect(esc.description == "unknown property 'a\\u001B[31mb' in $fil\\u0007ter")
        #expect(QueryError.quoting("\u{202E}\u{200B}\u{2029}😀") == "\\u202E\\u200B\\u2029😀")
        #expect(QueryError.quoting("x", limit: 0) == "…")
        // Literal text is kept whole, however long.
        let fixed = QueryError(
            "a message of more than forty characters, written by the engine", option: nil, column: nil)
        #expect(fixed.message == "a message of more than forty characters, written by the engine")
    }

    @Test func parserErrorsQuoteWhatTheyEcho() {
        let name = String(repeating: "x", count: 10_000)
        #expect(parseError("Set?$filter=\(name)(1)").count < 120)
        #expect(parseError("Set?$filter=a eq duration'P\(String(repeating: "9", count: 5_000))D'").count < 120)
        #expect(parseError("Set?$filter=a eq \u{1B}").contains("\\u001B"))
        #expect(parseError("Set?$\u{1B}x=1") == "unknown system query option $\\u001Bx")
    }

    @Test func skipTokensAndFormats() throws {
        #expect(try Paging.offset(skipToken: nil) == 0)
        #expect(try Paging.offset(skipToken: "42") == 42)
        #expect(try Paging.offset(skipToken: "9223372036854775807") == .max)
        for bad in ["", "-1", "x", "1.5", "9223372036854775808", "٣"] {
            #expect(throws: QueryError.self) { try Paging.offset(skipToken: bad) }
        }
        #expect(Paging.sum(.max, 1) == .max && Paging.sum(.max - 1, 1) == .max && Paging.sum(2, 3) == 5)
        #expect(throws: QueryError.self) { try Paging.check(pageSize: 0) }
        try Paging.check(pageSize: 1)
        try QueryEngine.checkFormat("application/json;odata.metadata=minimal")
        #expect(throws: QueryError.self) { try QueryEngine.checkFormat("xml") }
    }
}
