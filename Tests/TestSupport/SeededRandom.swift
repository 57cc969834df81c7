import Foundation

/// A small SplitMix64 generator with a printed seed, so a failing random test can be replayed.
public struct SeededRandom: RandomNumberGenerator {
    public var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The seed for a random test: `TEST_SEED` (or `variable`) from the environment, else a fresh
/// one. Printed, with how to rerun.
public func testSeed(_ name: String, variable: String = "TEST_SEED") -> UInt64 {
    let env = ProcessInfo.processInfo.environment
    let seed = (env[variable] ?? env["TEST_SEED"]).flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64(UInt32.max))
    print("\(name): seed \(seed) (rerun with \(variable)=\(seed))")
    return seed
}
