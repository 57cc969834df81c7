import TestSupport
import Testing
import Query

/// Runs the ported OASIS ABNF cases (see `ABNFTestCases.swift`).
@Suite(.runsOffThePool) struct ABNFTests {
    @Test(arguments: abnfCases)
    func abnfCase(_ c: ABNFCase) {
        let result = parseError(c.url)
        switch c.outcome {
        case .parses, .lenient:
            #expect(result == "ok", "\(c.name): \(c.url)")
        case .fails, .unsupported:
            #expect(result != "ok", "\(c.name): \(c.url)")
        }
    }

    @Test func sampleIsMeaningful() {
        let parses = abnfCases.filter { if case .parses = $0.outcome { true } else { false } }.count
        let fails = abnfCases.filter { if case .fails = $0.outcome { true } else { false } }.count
        #expect(abnfCases.count >= 200)
        #expect(parses >= 150)
        #expect(fails >= 25)
    }
}
