#!/bin/sh
# Fuzz what a hostile peer controls with libFuzzer: OData URLs, stored row bytes, JSON bodies,
# $metadata documents, JSON $batch documents (Fuzz/Targets/FuzzTargets.swift).
#
#   sh scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     default 60 s, every target
#
# Builds offline-store-fuzz with -sanitize=fuzzer,address (release, its own scratch directory),
# starts each target from the committed corpus (Fuzz/corpus/TARGET) and the generated seeds, and
# fails on the first crash, leak, timeout or sanitizer report; the input that did it is kept in
# Fuzz/crashes/ (git-ignored) — add it to Fuzz/corpus/TARGET/ once fixed, and FuzzCorpusTests
# replays it in every `swift test`. Prints a line per target: executions, coverage, corpus size.
set -e
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
[ $# -gt 0 ] && shift
TARGETS=${*:-url row json csdl batch}
sh scripts/setup.sh
swift build -c release --scratch-path .build-fuzz --product offline-store-fuzz \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING -Xswiftc -parse-as-library 2>&1 | grep -v "^\[" || true
BIN=$(swift build -c release --scratch-path .build-fuzz --show-bin-path)/offline-store-fuzz
[ -x "$BIN" ] || { echo "fuzz build failed"; exit 1; }
# The seeds come from a plain build of the same driver (it writes them; the fuzzing build cannot).
swift build --product offline-store-fuzz >/dev/null
SEEDS=$(mktemp -d)
trap 'rm -rf "$SEEDS"' EXIT
"$(swift build --show-bin-path)/offline-store-fuzz" --write-seeds "$SEEDS"
mkdir -p Fuzz/crashes
status=0
for t in $TARGETS; do
    WORK="$SEEDS/work-$t"
    mkdir -p "$WORK" "Fuzz/corpus/$t"
    cp "$SEEDS/$t"/* "$WORK"/ 2>/dev/null || true
    cp "Fuzz/corpus/$t"/* "$WORK"/ 2>/dev/null || true
    LOG="$SEEDS/$t.log"
    if FUZZ_TARGET=$t "$BIN" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
        -artifact_prefix="Fuzz/crashes/$t-" -print_final_stats=1 "$WORK" >"$LOG" 2>&1; then
        execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$LOG" | grep -o '[0-9]*$')
        cov=$(grep -o 'cov: [0-9]*' "$LOG" | tail -1 | grep -o '[0-9]*')
        echo "fuzz $t: ${SECONDS_EACH} s, ${execs:-?} executions, coverage ${cov:-?} edges, corpus $(ls "$WORK" | wc -l) inputs, 0 crashes"
    else
        echo "fuzz $t: FAILED — see below; the input is in Fuzz/crashes/"
        tail -60 "$LOG"
        status=1
    fi
done
exit $status
