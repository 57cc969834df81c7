#!/usr/bin/env bash
# Flush and refresh throughput of offline-store against `offline-store serve` on loopback, each
# anchored on the same requests sent by a bare AsyncHTTPClient loop in the same run.
# See PerfTests/README.md, "Flush and refresh throughput".
#
#   PerfTests/scripts/sync-bench.sh [--scratch DIR] [--no-build] [--debug] [sync-bench options…]
#
# --debug: debug builds (the root package's .build and PerfTests' .build-perf, which
# scripts/perf-smoke.sh builds anyway): for CI's smoke run with --tiny, not for figures.
# Builds offline-store (root package) and sync-bench (PerfTests) in release with --scratch (default
# .build-sync-bench in each package), then runs sync-bench with the rest of the arguments:
#   (none)   2,000 changes a flush, 100,000 entities refreshed, a delta of 1,000   (~1 minute);
#            the refresh beside `load` and SQLite (sqlite3 shell, installed if missing) importing
#            the same JSON, and a refresh of BusinessPartners?$expand=SalesOrders($expand=Items)
#            in full and by delta after 10 changes
#   --full   20,000 changes, 1,000,000 entities, a delta of 10,000                  (what README quotes)
#   --tiny   200 changes, 5,000 entities, a delta of 100
#   --changes N --entities M --delta K --page-size P --only flush|refresh --dir DIR --keep --no-check
set -euo pipefail

scratch=.build-sync-bench
build=1
debug=0
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --scratch) scratch="$2"; shift ;;
        --no-build) build=0 ;;
        --debug) debug=1 ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) args+=("$1") ;;
    esac
    shift
done

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
sh "$repo/scripts/setup.sh"
# The sqlite3 shell, for SQLite's import of the JSON the refresh is measured against.
if ! command -v sqlite3 >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq sqlite3 >/dev/null
fi
if [ "$debug" = 1 ]; then
    if [ "$build" = 1 ]; then
        (cd "$repo" && swift build --product offline-store)
        (cd "$repo/PerfTests" && swift build --scratch-path .build-perf --product sync-bench)
    fi
    store_bin="$repo/.build/debug/offline-store"
    bench_bin="$repo/PerfTests/.build-perf/debug/sync-bench"
else
    if [ "$build" = 1 ]; then
        (cd "$repo" && swift build -c release --scratch-path "$scratch" --product offline-store)
        (cd "$repo/PerfTests" && swift build -c release --scratch-path "$scratch" --product sync-bench)
    fi
    store_bin="$repo/$scratch/release/offline-store"
    bench_bin="$repo/PerfTests/$scratch/release/sync-bench"
fi
[ -x "$store_bin" ] && [ -x "$bench_bin" ] || { echo "sync-bench: missing $store_bin or $bench_bin" >&2; exit 1; }
echo "commit $(cd "$repo" && git rev-parse --short HEAD)$(cd "$repo" && git diff --quiet HEAD -- Sources PerfTests || echo "+changes"), $(date -u '+%Y-%m-%d %H:%M UTC')"
exec "$bench_bin" --offline-store "$store_bin" ${args[@]+"${args[@]}"}
