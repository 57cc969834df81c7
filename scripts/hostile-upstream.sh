#!/bin/sh
# A hostile OData V4 upstream on 127.0.0.1, for the tests of what refresh and flush do when the
# service misbehaves (Tests/OfflineStoreTests/Sync/HostileUpstreamTests.swift):
#
#   sh scripts/hostile-upstream.sh --data SET=FILE [--data SET=FILE ...] --lifetime S [--pid-file FILE]
#
# Prints "hostile upstream serving at http://127.0.0.1:PORT" first (a free port), writes its PID
# to --pid-file, exits after --lifetime seconds or on SIGTERM. scripts/hostile-upstream/serve.py
# says which misbehaviour each service root (http://127.0.0.1:PORT/MODE/) has. Python 3's standard
# library only: no venv.
set -e
exec python3 "$(dirname "$0")/hostile-upstream/serve.py" "$@"
