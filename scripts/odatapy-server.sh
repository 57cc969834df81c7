#!/bin/sh
# odatapy (an independent OData V4 server in Python, from PyPI) as a *writable* service on
# 127.0.0.1, for the sync tests against a service that is not ours (SyncODataPyTests):
#
#   sh scripts/odatapy-server.sh --metadata FILE [--data SET=FILE ...] --state FILE --lifetime S \
#       [--pid-file FILE] [--port P] [--exit-after-writes N]
#
# Prints "odatapy serving at http://127.0.0.1:PORT/" first (a free port unless --port), writes its
# PID to --pid-file, exits after --lifetime seconds or on SIGTERM. Its state (entities, ETags, and
# the log of applied writes, the server-side count of a test) is kept in --state, written after
# every write before the answer goes out, and loaded instead of --data when the file exists: a
# server stopped and started again with the same --state has the same data.
# scripts/odatapy-server/serve.py says what it does and which odatapy deviations it works around.
#
# Python: the venv of the cross-check (.venv-xcheck/, or $CROSSCHECK_VENV), made and given
# odatapy==5.3.0 from PyPI on first use. Relative paths are taken from the caller's directory.
set -e
CALLER=$(pwd)
cd "$(dirname "$0")/.."
ROOT=$(pwd)
. scripts/odatapy-venv.sh
cd "$CALLER"
exec "$VENV/bin/python" "$ROOT/scripts/odatapy-server/serve.py" "$@"
