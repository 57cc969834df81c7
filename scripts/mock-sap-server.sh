#!/bin/sh
# mock-sap (PyPI, an independent SAP Gateway V2 / S/4HANA V4 RAP endpoint) on 127.0.0.1, for the
# tests of refresh and flush against SAP-shaped services (Tests/OfflineStoreTests/SAP):
#
#   sh scripts/mock-sap-server.sh --lifetime S [--pid-file FILE] [--port P] [--db FILE]
#       [--require-if-match] [--no-csrf] [--auth USER:PASSWORD] [--oauth ID:SECRET]
#       [--token-ttl S] [--seed N] [--clock YYYY-MM-DDTHH:MM] [--slow-ms MS] [--latency-ms MS]
#
# Prints "mock-sap serving at http://127.0.0.1:PORT" first (a free port unless --port), writes its
# PID to --pid-file, exits after --lifetime seconds or on SIGTERM. --db keeps its data in a SQLite
# file, so a server stopped and started again on it has the same data (a kill test's count).
#
# Python: the venv .venv-sap/ (or $MOCK_SAP_VENV), made and given mock-sap==0.22.0 from PyPI on
# first use. Relative paths are taken from the caller's directory.
set -e
CALLER=$(pwd)
cd "$(dirname "$0")/.."
ROOT=$(pwd)
. scripts/mock-sap-venv.sh
cd "$CALLER"
exec "$SAP_VENV/bin/python" "$ROOT/scripts/mock-sap-server/serve.py" "$@"
