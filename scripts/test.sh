#!/bin/sh
# The test command: installs what is missing, then runs every test.
set -e
cd "$(dirname "$0")/.."
sh scripts/setup.sh
swift build --build-tests
swift test --skip-build
# The benchmarks' package builds and runs (tiny size; `PerfTests/README.md` says how to measure).
sh scripts/perf-smoke.sh
