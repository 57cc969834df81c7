#!/bin/sh
# Fuzz what a hostile peer controls with libFuzzer: OData URLs, stored row bytes, JSON bodies,
# $metadata documents, JSON $batch documents, and serve's request handling — method, target,
# headers, body, $batch — with no socket (Fuzz/Targets/FuzzTargets.swift).
#
#   sh scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     default 60 s, every target
#
# Builds offline-store-fuzz instrumented for libFuzzer in its own scratch folder (.build-fuzz;
# FUZZ_SCRATCH to change), starts each target from the committed corpus (Fuzz/corpus/TARGET) and
# the generated seeds (and what earlier runs in the same scratch folder found), and prints a line per target: executions, coverage (edges, features),
# corpus size, crashes. Fails on a crash (a trap or a signal), a timeout (an input running over
# FUZZ_TIMEOUT s, default 10) or an input taking over 4 GiB: the input is kept in Fuzz/crashes/ (git-ignored);
# `FUZZ_TARGET=TARGET .build-fuzz/debug/offline-store-fuzz FILE` replays it (so does a plain
# build: `offline-store-fuzz TARGET FILE`). Once fixed, add it to Fuzz/corpus/TARGET/ and
# FuzzCorpusTests replays it in every `swift test`.
#
# The build: a debug build whose Swift code is compiled with -sanitize=fuzzer (coverage counters,
# PC tables, comparison tracing) and linked with libFuzzer's no-main runtime — the driver keeps its
# own main (FuzzDriver.swift says why). Debug, without AddressSanitizer: the debug standard
# library traps on out-of-bounds unsafe-buffer access, which is where a Swift parser could go
# wrong, and a cold debug build costs a fraction of a release or ASan build (DocC: "Bad input and hostile environments", Fuzzing).
set -e
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
[ $# -gt 0 ] && shift
TARGETS=${*:-url row json csdl batch serve}
SCRATCH=${FUZZ_SCRATCH:-.build-fuzz}
sh scripts/setup.sh
RT=$(dirname "$(command -v swiftc)")/../lib/clang
RT=$(ls -d "$RT"/*/lib/linux 2>/dev/null | tail -1)
[ -f "$RT/libclang_rt.fuzzer_no_main-x86_64.a" ] || { echo "fuzz: libclang_rt.fuzzer_no_main-x86_64.a not found under the toolchain's lib/clang"; exit 1; }
build() {
    swift build --scratch-path "$SCRATCH" --product offline-store-fuzz "$@" \
        -Xswiftc -Xfrontend -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING \
        -Xlinker "$RT/libclang_rt.fuzzer_no_main-x86_64.a" -Xlinker -lstdc++ -Xlinker -lm
}
start=$(date +%s)
build 2>&1 | grep -E "error|warning: .*\.swift|Compiling|Build" | grep -v "^\[" || true
BIN=$(build --show-bin-path)/offline-store-fuzz
[ -x "$BIN" ] || { echo "fuzz: the build failed"; exit 1; }
echo "fuzz: built in $(( $(date +%s) - start )) s"
WORKDIR=$(mktemp -d)
trap 'rm -rf "$WORKDIR"' EXIT
"$BIN" --write-seeds "$WORKDIR/seeds"
mkdir -p Fuzz/crashes
status=0
for t in $TARGETS; do
    # The working corpus stays in the scratch folder: a later local run goes on from it.
    CORPUS="$SCRATCH/corpus/$t"
    mkdir -p "$CORPUS"
    cp "$WORKDIR/seeds/$t"/* "$CORPUS"/ 2>/dev/null || true
    cp "Fuzz/corpus/$t"/* "$CORPUS"/ 2>/dev/null || true
    LOG="$WORKDIR/$t.log"
    # SWIFT_BACKTRACE=enable=no: a Swift trap (SIGILL) reaches libFuzzer's handler, which saves
    # the input, instead of the Swift runtime's backtracer, which does not.
    # TMPDIR: the serve target's store goes there, removed with it even after a crash.
    if TMPDIR="$WORKDIR" SWIFT_BACKTRACE=enable=no FUZZ_TARGET=$t "$BIN" -max_total_time="$SECONDS_EACH" -timeout="${FUZZ_TIMEOUT:-10}" \
        -rss_limit_mb=4096 -max_len=65536 -artifact_prefix="Fuzz/crashes/$t-" -print_final_stats=1 "$CORPUS" >"$LOG" 2>&1; then
        crashes=0
    else
        crashes=1
    fi
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$LOG" | grep -o '[0-9]*$' || true)
    cov=$(grep -o 'cov: [0-9]*' "$LOG" | tail -1 | grep -o '[0-9]*' || true)
    ft=$(grep -o 'ft: [0-9]*' "$LOG" | tail -1 | grep -o '[0-9]*' || true)
    echo "fuzz $t: ${SECONDS_EACH} s, ${execs:-?} executions, coverage ${cov:-?} edges ${ft:-?} features, corpus $(ls "$CORPUS" | wc -l) inputs, $crashes crashes"
    if [ $crashes -ne 0 ]; then
        echo "fuzz $t: FAILED — the input is in Fuzz/crashes/ ($(ls -t Fuzz/crashes/ | head -1)); the log's end:"
        tail -60 "$LOG"
        status=1
    fi
done
exit $status
