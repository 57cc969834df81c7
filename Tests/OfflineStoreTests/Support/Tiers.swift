import Testing
import TestSupport

extension Trait where Self == ConditionTrait {
    /// A suite of the soak tier (kill, fault, process and long property tests): runs with
    /// `TEST_TIER=soak` or `TEST_TIER=all` (TESTING.md).
    static var soak: Self { .enabled(if: TestTier.runs(.soak), "soak tier: runs with TEST_TIER=soak or TEST_TIER=all") }
    /// A suite of the external tier (needs a peer from PyPI): runs with `TEST_TIER=external` or `all`.
    static var external: Self {
        .enabled(if: TestTier.runs(.external), "external tier: runs with TEST_TIER=external or TEST_TIER=all")
    }
}
