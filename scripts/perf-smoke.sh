#!/bin/sh
# Builds PerfTests (raw LMDB, OfflineStore and SQLite/GRDB side by side) and runs the benchmark once
# at a tiny size: a smoke test that it builds and runs, not a measurement. The table goes to a log;
# the JSON goes to a temporary file, so PerfTests/results/latest.json keeps the last real run.
set -e
cd "$(dirname "$0")/.."
sh scripts/setup.sh
if ! pkg-config --exists sqlite3 2>/dev/null; then  # GRDB links the system SQLite
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq libsqlite3-dev >/dev/null
fi
# The offline-store executable, for the load through the CLI (found at .build/debug by the benchmark).
swift build --product offline-store
cd PerfTests
LOG="${TMPDIR:-/tmp}/offline-store-perf-smoke.log"
JSON="${TMPDIR:-/tmp}/offline-store-perf-smoke.json"
swift build --scratch-path .build-perf --product offline-store-bench
if .build-perf/debug/offline-store-bench --tiny --json "$JSON" >"$LOG" 2>&1; then
    grep -E "^(OfflineStore PerfTests|point read by key \(|full scan \()" "$LOG" || true
    echo "perf-smoke: PerfTests built and ran all workloads for all three contestants (table: $LOG)"
else
    cat "$LOG"
    echo "perf-smoke: the benchmark failed" >&2
    exit 1
fi
