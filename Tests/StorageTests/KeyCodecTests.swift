import Testing
@testable import Storage

/// Orders values the way OData orders them, for comparing with the encoding.
func valueLess(_ a: Value, _ b: Value) -> Bool {
    switch (a, b) {
    case (.null, .null): return false
    case (.null, _): return true
    case (_, .null): return false
    case (.int(let x), .int(let y)): return x < y
    case (.bool(let x), .bool(let y)): return !x && y
    case (.double(let x), .double(let y)):
        if x.isNaN { return false }
        if y.isNaN { return true }
        return x < y
    case (.decimal(let x), .decimal(let y)): return x < y
    case (.string(let x), .string(let y)): return x.utf8.lexicographicallyPrecedes(y.utf8)
    case (.date(let x), .date(let y)): return x < y
    case (.dateTimeOffset(let x), .dateTimeOffset(let y)): return x < y
    case (.guid(let x), .guid(let y)): return x < y
    case (.binary(let x), .binary(let y)): return x.lexicographicallyPrecedes(y)
    default: fatalError("not comparable: \(a) \(b)")
    }
}

func valueEqual(_ a: Value, _ b: Value) -> Bool { !valueLess(a, b) && !valueLess(b, a) }

@Suite(.runsOffThePool) struct KeyCodecTests {
    static func randomValue(kind: Int, _ r: inout SeededRandom) -> Value {
        if Int.random(in: 0..<12, using: &r) == 0 { return .null }
        switch kind {
        case 0:
            let edges: [Int64] = [.min, .min + 1, -1, 0, 1, .max - 1, .max, -256, 255]
            return .int(
                Bool.random(using: &r) ? edges.randomElement(using: &r)! : Int64.random(in: -1000...1000, using: &r))
        case 1:
            let edges: [Double] = [
                .nan, -.nan, .infinity, -.infinity, 0, -0.0, .leastNonzeroMagnitude, -.leastNonzeroMagnitude,
                .greatestFiniteMagnitude, 1.5, -1.5,
            ]
            return .double(
                Bool.random(using: &r) ? edges.randomElement(using: &r)! : Double.random(in: -1e6...1e6, using: &r))
        case 2:
            let sig = Int128(Int64.random(in: -1_000_000...1_000_000, using: &r))
            return .decimal(EDMDecimal(significand: sig, scale: Int16.random(in: -3...6, using: &r)))
        case 3:
            let alphabet: [String] = ["", "a", "b", "\0", "é", "ß", "中", "😀", "A", "z", "\u{7F}", "\u{01}", "\u{FF}"]
            let n = Int.random(in: 0...4, using: &r)
            return .string((0..<n).map { _ in alphabet.randomElement(using: &r)! }.joined())
        case 4: return .bool(Bool.random(using: &r))
        case 5: return .date(EDMDate(days: Int32.random(in: -800_000...800_000, using: &r)))
        case 6:
            return .dateTimeOffset(
                EDMDateTimeOffset(
                    ticks: Int64.random(in: -1 << 60...1 << 60, using: &r),
                    offsetMinutes: Int16.random(in: -600...600, using: &r)))
        case 7:
            return .guid(
                EDMGuid(
                    high: UInt64.random(in: 0...3, using: &r) << 62 | UInt64.random(in: 0...9, using: &r), low: r.next()
                ))
        default:
            let n = Int.random(in: 0...4, using: &r)
            return .binary((0..<n).map { _ in [0, 1, 0xFF, 0xFE, 7].randomElement(using: &r)! })
        }
    }

    @Test func encodingOrderEqualsValueOrder() throws {
        var r = SeededRandom(seed: testSeed("encodingOrderEqualsValueOrder"))
        for _ in 0..<20_000 {
            let kind = Int.random(in: 0...8, using: &r)
            let a = Self.randomValue(kind: kind, &r), b = Self.randomValue(kind: kind, &r)
            for desc in [false, true] {
                let ea = try KeyCodec.encode([a], descending: [desc]), eb = try KeyCodec.encode([b], descending: [desc])
                let bytesLess = ea.lexicographicallyPrecedes(eb)
                let expected = desc ? valueLess(b, a) : valueLess(a, b)
                #expect(bytesLess == expected, "\(a) vs \(b) desc=\(desc)")
                #expect((ea == eb) == valueEqual(a, b), "\(a) vs \(b) equality")
            }
        }
    }

    @Test func compositeTuplesOrderLexicographically() throws {
        var r = SeededRandom(seed: testSeed("compositeTuplesOrderLexicographically"))
        for _ in 0..<5_000 {
            let a = [Self.randomValue(kind: 3, &r), Self.randomValue(kind: 0, &r)]
            let b = [Self.randomValue(kind: 3, &r), Self.randomValue(kind: 0, &r)]
            let desc = [Bool.random(using: &r), Bool.random(using: &r)]
            let ea = try KeyCodec.encode(a, descending: desc), eb = try KeyCodec.encode(b, descending: desc)
            var expected = false
            for i in 0..<2 {
                let (x, y) = desc[i] ? (b[i], a[i]) : (a[i], b[i])
                if valueLess(x, y) { expected = true; break }
                if valueLess(y, x) { expected = false; break }
            }
            #expect(ea.lexicographicallyPrecedes(eb) == expected, "\(a) vs \(b) \(desc)")
        }
    }

    @Test func decodeRoundTrips() throws {
        var r = SeededRandom(seed: testSeed("decodeRoundTrips"))
        for _ in 0..<5_000 {
            let values = (0..<3).map { _ in Self.randomValue(kind: Int.random(in: 0...8, using: &r), &r) }
            let desc = (0..<3).map { _ in Bool.random(using: &r) }
            let bytes = try KeyCodec.encode(values, descending: desc)
            let (decoded, length) = try bytes.withUnsafeBytes { try KeyCodec.decode($0, count: 3, descending: desc) }
            #expect(length == bytes.count)
            #expect(
                try bytes.withUnsafeBytes { try KeyCodec.tupleLength($0, count: 3, descending: desc) } == bytes.count)
            for (v, d) in zip(values, decoded) {
                if case .double(let x) = v, x.isNaN {
                    #expect({ if case .double(let y) = d { y.isNaN } else { false } }()); continue
                }
                #expect(valueEqual(v, d), "\(v) decoded as \(d)")
            }
        }
    }

    @Test func corruptKeysThrowNeverCrash() throws {
        var r = SeededRandom(seed: testSeed("corruptKeysThrowNeverCrash"))
        for _ in 0..<20_000 {
            let n = Int.random(in: 0...24, using: &r)
            let bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &r) }
            _ = try? bytes.withUnsafeBytes { try KeyCodec.decode($0, count: 2, descending: [Bool.random(using: &r)]) }
        }
    }

    @Test func stringsWithZeroBytesStayOrdered() throws {
        let words = ["", "\0", "\0\0", "a", "a\0", "a\0b", "a\u{01}", "ab", "b"]
        let encoded = try words.map { try KeyCodec.encode([.string($0)]) }
        #expect(encoded == encoded.sorted { $0.lexicographicallyPrecedes($1) })
    }

    @Test func decimalsEqualAtAnyScale() throws {
        #expect(
            try KeyCodec.encode([.decimal(EDMDecimal("1249.000")!)]) == KeyCodec.encode([.decimal(EDMDecimal("1249")!)])
        )
        #expect(
            try KeyCodec.encode([.decimal(EDMDecimal("-0.120")!)]) == KeyCodec.encode([.decimal(EDMDecimal("-0.12")!)]))
    }

    /// Stored index keys hold decimals: the encoding (digits made without a `String`) is byte for
    /// byte the one built from `digitsAndExponent`, for significands of any width up to 38 digits.
    @Test func decimalBytesAreTheDigitsOfTheValue() throws {
        func reference(_ d: EDMDecimal) -> [UInt8] {
            if d.isZero { return [0x31] }
            let negative = d.significand < 0
            let (digits, exponent) = d.digitsAndExponent
            let e = UInt16(clamping: exponent + 0x8000)
            let flip: UInt8 = negative ? 0xFF : 0
            return [negative ? 0x30 : 0x32, UInt8(e >> 8) ^ flip, UInt8(e & 0xFF) ^ flip]
                + digits.map { ($0 + 1) ^ flip } + [flip]
        }
        var r = SeededRandom(seed: testSeed("decimalBytesAreTheDigitsOfTheValue"))
        func power(_ n: Int) -> Int128 { (0..<n).reduce(1) { p, _ in p * 10 } }
        let limit = power(38) - 1
        let edges: [Int128] = [
            0, 1, -1, 10, -10, 1000, Int128(UInt64.max), -Int128(UInt64.max), Int128(UInt64.max) + 1, limit, -limit,
        ]
        for i in 0..<5_000 {
            let significand: Int128 =
                i < edges.count
                ? edges[i]
                : [
                    Int128(Int64.random(in: -1_000_000...1_000_000, using: &r)),
                    Int128(Int64.random(in: .min ... .max, using: &r)),
                    Int128.random(in: -limit...limit, using: &r),
                    Int128.random(in: 0...9, using: &r) * power(Int.random(in: 0...37, using: &r)),
                ][i % 4]
            let d = EDMDecimal(significand: significand, scale: Int16.random(in: -40...40, using: &r))
            #expect(try KeyCodec.encode([.decimal(d)]) == reference(d), "\(d)")
        }
    }
}
