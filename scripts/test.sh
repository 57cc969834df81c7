#!/bin/sh
# The test command: installs what is missing, then runs every test — the Swift test suites, then the
# cross-check of the query engine against odatapy (an independent OData V4 server, from PyPI).
set -e
cd "$(dirname "$0")/.."
sh scripts/setup.sh
swift build --build-tests
swift test --skip-build
OFFLINE_STORE="$(swift build --show-bin-path)/offline-store" sh scripts/crosscheck.sh
