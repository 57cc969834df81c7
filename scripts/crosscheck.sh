#!/bin/sh
# Cross-check the query engine against odatapy (an independent OData V4 server in Python):
# every URL of scripts/crosscheck/fixtures/queries.txt is answered by both and the answers compared.
#
#   sh scripts/crosscheck.sh [run.py options]     e.g. --only 'Items/any' -v, --no-indexes, --keep
#
# The binary: $OFFLINE_STORE, else .build/debug/offline-store (built here with `swift build` if
# missing). Python: a venv in .venv-xcheck/ (git-ignored) with odatapy==5.3.0 from PyPI.
# The last line printed is "N passed, M failed[, K skipped]"; the exit status is non-zero on failure.
set -e
cd "$(dirname "$0")/.."
ROOT=$(pwd)
. scripts/odatapy-venv.sh

if [ -z "$OFFLINE_STORE" ]; then
    OFFLINE_STORE=$ROOT/.build/debug/offline-store
    if [ ! -x "$OFFLINE_STORE" ]; then
        sh scripts/setup.sh
        swift build --product offline-store
    fi
fi
export OFFLINE_STORE

exec "$VENV/bin/python" scripts/crosscheck/run.py "$@"
