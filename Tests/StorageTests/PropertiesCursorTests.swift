import Testing
import TestSupport
@testable import Storage

/// `Properties.value(_:cursor:)`, which validation and encoding walk a type's properties with: it
/// finds what the subscript finds, whatever the order of the properties, extra names or gaps.
@Suite(.runsOffThePool) struct PropertiesCursorTests {
    @Test func aWalkFindsWhatTheSubscriptFinds() {
        var r = SeededRandom(seed: testSeed("aWalkFindsWhatTheSubscriptFinds"))
        let declared = (0..<14).map { "P\($0)" }
        for round in 0..<5_000 {
            // Some declared names left out, some extra ones, in declaration order or shuffled a little.
            var names = declared.filter { _ in Int.random(in: 0..<5, using: &r) != 0 }
            for _ in 0..<Int.random(in: 0...2, using: &r) {
                names.insert("X\(round)-\(names.count)", at: Int.random(in: 0...names.count, using: &r))
            }
            switch round % 4 {
            case 0: break
            // one moved to the end
            case 1: if let i = names.indices.randomElement(using: &r) { names.append(names.remove(at: i)) }
            case 2: names.shuffle(using: &r)
            default: names.reverse()
            }
            var p = Properties()
            for (i, n) in names.enumerated() { p.appendNew(n, .int(Int64(i))) }
            var cursor = 0
            for name in declared {
                #expect(p.value(name, cursor: &cursor) == p[name], "\(names), \(name)")
                #expect(cursor >= 0 && cursor <= names.count)
            }
        }
    }
}
