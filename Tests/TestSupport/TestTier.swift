import Foundation

/// The test tiers (TESTING.md). `swift test` with no environment runs the **fast** tier; the
/// environment variable `TEST_TIER` names others: `soak` (kill, fault, process and long property
/// tests), `external` (tests that need a peer from PyPI, such as odatapy), a comma-separated list
/// of them, or `all`. `sh scripts/test.sh` (CI) runs `TEST_TIER=all`.
public enum TestTier: String, CaseIterable, Sendable {
    case fast, soak, external

    /// The tiers this run includes: `TEST_TIER` (default `fast`). A suite of a tier not included
    /// is skipped, and says which setting runs it.
    public static let selected: Set<TestTier> = {
        let text = ProcessInfo.processInfo.environment["TEST_TIER"] ?? "fast"
        if text == "all" { return Set(allCases) }
        let names = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let tiers = Set(names.compactMap(TestTier.init(rawValue:)))
        precondition(
            tiers.count == names.count,
            "TEST_TIER=\(text): expected fast, soak, external, a comma-separated list of them, or all")
        return tiers
    }()

    /// Whether this run includes `tier`.
    public static func runs(_ tier: TestTier) -> Bool { selected.contains(tier) }
}
