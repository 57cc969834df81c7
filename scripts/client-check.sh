#!/bin/sh
# Drive `offline-store serve` with an independent OData V4 client: odatapy's (from PyPI), over real
# HTTP on 127.0.0.1. It reflects $metadata, queries, reads by key, creates, updates, replaces,
# deletes, sends JSON $batches, meets 404/405/409/412, and follows server-driven paging; then
# `offline-store check` must pass on the store. scripts/client-check/README.md says more.
#
#   sh scripts/client-check.sh [run.py options]     e.g. --keep, -v
#
# The binary: $OFFLINE_STORE, else .build/debug/offline-store (built here with `swift build` if
# missing). Python: the venv of the cross-check, .venv-xcheck/ (git-ignored), with
# odatapy[client]==5.3.0 (odatapy and httpx) from PyPI.
# The last line printed is "N passed, M failed[, K expected failures]"; the exit status is non-zero
# on failure.
set -e
cd "$(dirname "$0")/.."
ROOT=$(pwd)
ODATAPY_EXTRA=client . scripts/odatapy-venv.sh

if [ -z "$OFFLINE_STORE" ]; then
    OFFLINE_STORE=$ROOT/.build/debug/offline-store
    if [ ! -x "$OFFLINE_STORE" ]; then
        sh scripts/setup.sh
        swift build --product offline-store
    fi
fi
export OFFLINE_STORE

# run.py stops its servers itself (SIGTERM, then SIGKILL), also when it is interrupted; each server
# was started with --lifetime 120, so none outlives a run that is killed outright. `timeout`
# bounds the whole run.
if command -v timeout >/dev/null 2>&1; then
    exec timeout -k 10 110 "$VENV/bin/python" scripts/client-check/run.py "$@"
fi
exec "$VENV/bin/python" scripts/client-check/run.py "$@"
