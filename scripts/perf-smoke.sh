#!/bin/sh
# Builds PerfTests (raw LMDB, OfflineStore and SQLite/GRDB side by side) and runs the benchmark once
# at a tiny size, then engine-microbench, serve-load.sh and sync-bench.sh likewise: a smoke test that they build and
# run, not a measurement (observe-bench too). The table goes to a log;
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
# The other PerfTests scripts, tiny and in debug builds (sharing .build and .build-perf), so that
# none can rot unseen: engine-microbench (a developer's probe, linked here against the debug
# objects the bench build just made), serve-load (wrk against serve, authority and offline, and
# the hello world; installs wrk if missing) and sync-bench (flush and refresh against their
# bare-client anchors, load and SQLite importing the same JSON, a delta with $expand).
MLOG="${TMPDIR:-/tmp}/offline-store-perf-smoke-engine-microbench.log"
if CONFIG=debug sh scripts/engine-microbench/run.sh .build-perf 2000 >"$MLOG" 2>&1; then
    echo "perf-smoke: PerfTests/scripts/engine-microbench/run.sh (debug objects, 2,000 rows) ran (log: $MLOG)"
else
    tail -n 30 "$MLOG"
    echo "perf-smoke: PerfTests/scripts/engine-microbench/run.sh failed" >&2
    exit 1
fi
OLOG="${TMPDIR:-/tmp}/offline-store-perf-smoke-observe-bench.log"
swift build --scratch-path .build-perf --product observe-bench
if .build-perf/debug/observe-bench --tiny >"$OLOG" 2>&1 &&
    .build-perf/debug/observe-bench --tiny --distinct --observers 0,10 >>"$OLOG" 2>&1; then
    echo "perf-smoke: observe-bench --tiny, and --distinct, ran (log: $OLOG)"
else
    cat "$OLOG"
    echo "perf-smoke: observe-bench failed" >&2
    exit 1
fi
cd ..
for script in serve-load sync-bench; do
    SLOG="${TMPDIR:-/tmp}/offline-store-perf-smoke-$script.log"
    if bash "PerfTests/scripts/$script.sh" --debug --tiny >"$SLOG" 2>&1; then
        echo "perf-smoke: PerfTests/scripts/$script.sh --debug --tiny ran (log: $SLOG)"
    else
        tail -n 60 "$SLOG"
        echo "perf-smoke: PerfTests/scripts/$script.sh failed" >&2
        exit 1
    fi
done
