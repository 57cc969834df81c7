#!/bin/sh
# The suites of a tier, as one `swift test --filter` regex, read from the suites' own traits
# (`@Suite(.soak …)`, `@Suite(.external …)`, Tests/OfflineStoreTests/Support/Tiers.swift), so the
# list cannot fall behind the code:
#   TEST_TIER=soak swift test --filter "$(sh scripts/tier-filter.sh soak)"
#   TEST_TIER=external swift test --filter "$(sh scripts/tier-filter.sh external)"
set -e
cd "$(dirname "$0")/.."
case "${1:-}" in
soak | external) ;;
*) echo "usage: sh scripts/tier-filter.sh soak|external" >&2; exit 2 ;;
esac
names=$(grep -rhoE "@Suite\([^)]*\.$1\b[^)]*\) *(final )?(struct|class|enum) [A-Za-z0-9_]+" Tests --include=*.swift |
    awk '{print $NF}' | sort -u)
[ -n "$names" ] || { echo "tier-filter: no suite carries .$1" >&2; exit 1; }
# Anchored on the suite's name as a component of the test id (OfflineStoreTests.NAME/…).
echo "\\.($(echo $names | tr ' ' '|'))/"
