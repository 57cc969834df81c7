import Testing
@testable import Storage
import TestSupport

/// The value types at their bounds: parsing and arithmetic on text from a URL or a payload return
/// nil (or throw) instead of trapping.
@Suite(.runsOffThePool) struct ValueEdgeTests {
    @Test func decimalExponentsAtIntBounds() {
        #expect(EDMDecimal("1e-9223372036854775808") == nil)  // abs(Int.min) trapped
        #expect(EDMDecimal("1e9223372036854775807") == nil)
        #expect(EDMDecimal("1e99999999999999999999") == nil)
        #expect(EDMDecimal("1e400")?.scale == -400)
        #expect(EDMDecimal("1e401") == nil)
    }

    /// The digit count validation uses is the length of `digitsAndExponent`'s digits, with its
    /// exponent: at powers of ten and one below them, at Int128's bounds, and at random.
    @Test func digitCountsAgreeWithTheDigits() {
        var r = SeededRandom(seed: testSeed("digitCountsAgreeWithTheDigits"))
        var significands: [Int128] = [0, 1, -1, 9, 10, Int128.max, Int128.min, Int128.min + 1]
        var p: Int128 = 1
        for _ in 0..<38 { p *= 10; significands += [p, p - 1, p + 1, -p, -(p - 1)] }
        for _ in 0..<2_000 {
            significands.append(
                Int128(bitPattern: UInt128(r.next()) << UInt128.random(in: 0...64, using: &r) | UInt128(r.next())))
        }
        for s in significands {
            for scale in [Int16(0), 3, -5, 40, Int16.random(in: -100...100, using: &r)] {
                let d = EDMDecimal(significand: s, scale: scale)
                let (digits, exponent) = d.digitsAndExponent
                let counted = d.digitCountAndExponent
                #expect(counted.count == digits.count && counted.exponent == exponent, "\(d)")
            }
        }
    }

    @Test func durationsAtTheTickBounds() {
        #expect(EDMDuration("PT922337203685.4775807S")?.ticks == .max)
        #expect(EDMDuration("-PT922337203685.4775807S")?.ticks == -.max)
        #expect(EDMDuration("PT922337203685.4775808S") == nil)
        #expect(EDMDuration("PT922337203685.9999999S") == nil)  // seconds plus fraction trapped
        #expect(EDMDuration("P10675199DT2H48M5.4775807S")?.ticks == .max)
        #expect(EDMDuration("P10675199DT2H48M5.4775808S") == nil)
        #expect(EDMDuration("P999999999999999999D") == nil)
    }

    @Test func decimalArithmeticStaysWithin38Digits() {
        let half = EDMDecimal("-85070591730234615865843651857942052864")!  // -2^126
        #expect(EDMDecimal.adding(half, half) == nil)  // -2^127 = Int128.min, 39 digits: negating it trapped
        let nines = EDMDecimal("99999999999999999999999999999999999999")!
        #expect(EDMDecimal.adding(nines, EDMDecimal(1)) == EDMDecimal("1e38"))  // one significant digit
        #expect(EDMDecimal.adding(nines, EDMDecimal("0.5")!) == nil)
        #expect(EDMDecimal.multiplying(nines, EDMDecimal(3)) == nil)
        #expect(EDMDecimal.multiplying(nines, EDMDecimal(10)) != nil)
        // Scales far apart: aligning subtracted two Int16 scales and could overflow.
        let tiny = EDMDecimal(significand: 1, scale: 32_000), vast = EDMDecimal(significand: 1, scale: -32_000)
        #expect(EDMDecimal.adding(tiny, vast) == nil)
        #expect(EDMDecimal.multiplying(tiny, tiny) == nil)  // scale past 32,000
        #expect(EDMDecimal.multiplying(vast, EDMDecimal(significand: 2, scale: -768)) == nil)
    }

    @Test func roundingFractionsSmallerThan10ToThe38() {
        let small = EDMDecimal(significand: 5, scale: 39), negative = EDMDecimal(significand: -5, scale: 39)
        #expect(small.rounded(.up) == EDMDecimal(1))
        #expect(negative.rounded(.down) == EDMDecimal(-1))
        #expect(small.rounded(.down) == EDMDecimal(0))
        #expect(small.rounded(.toNearestOrAwayFromZero) == EDMDecimal(0))
        #expect(EDMDecimal("2.5")!.rounded(.toNearestOrAwayFromZero) == EDMDecimal(3))
        #expect(EDMDecimal("-2.5")!.rounded(.toNearestOrAwayFromZero) == EDMDecimal(-3))
    }

    @Test func v2DatesAtInt64Bounds() {
        #expect(ValueJSON.v2Date("/Date(-9223372036854775808)/") == nil)  // abs(Int64.min) trapped
        #expect(ValueJSON.v2Date("/Date(1--9223372036854775808)/") == nil)  // -(Int.min) trapped
        #expect(ValueJSON.v2Date("/Date(9223372036854775807)/") == nil)
        #expect(ValueJSON.v2Date("/Date(1349222400000+0120)/")?.offsetMinutes == 120)
        #expect(ValueJSON.v2Date("/Date(1349222400000-0060)/")?.offsetMinutes == -60)
    }
}
