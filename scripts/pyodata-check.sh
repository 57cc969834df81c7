#!/bin/sh
# Drive `offline-store serve` with SAP's own OData V2 client, pyodata (PyPI), over real HTTP on
# 127.0.0.1: scripts/pyodata-check/run.py says what it does. The service must be an offline store
# made from GWSAMPLE_BASIC's $metadata, served in its V2 dialect (Tests/OfflineStoreTests/SAP/
# PyODataServeTests.swift starts mock-sap, makes and serves the store, runs this, then flushes).
#
#   sh scripts/pyodata-check.sh --service http://127.0.0.1:PORT/
#   sh scripts/pyodata-check.sh --media --service URL --set S --key K --sha256 HEX --content-type T
#   sh scripts/pyodata-check.sh --operations --service URL --order ID --min ID
#
# --media runs scripts/pyodata-check/media.py instead: a media entity's $value read with pyodata;
# --operations runs scripts/pyodata-check/operations.py: function imports called with pyodata.
#
# Python: the SAP peers' venv, .venv-sap/ (git-ignored; scripts/mock-sap-venv.sh), given
# pyodata==1.12.1 and requests==2.34.2 from PyPI on first use. The last line printed is a JSON
# object {"passed":N,"failed":M,"changes":{…}}; the exit status is non-zero on failure.
set -e
CALLER=$(pwd)
cd "$(dirname "$0")/.."
ROOT=$(pwd)
. scripts/mock-sap-venv.sh
PYODATA_VERSION=1.12.1
REQUESTS_VERSION=2.34.2
if command -v flock >/dev/null 2>&1; then
    exec 8>"$SAP_VENV.lock"
    flock 8
fi
if ! "$SAP_VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('pyodata') != '$PYODATA_VERSION' or m.version('requests') != '$REQUESTS_VERSION')" 2>/dev/null; then
    "$SAP_VENV/bin/pip" install --quiet --disable-pip-version-check "pyodata==$PYODATA_VERSION" "requests==$REQUESTS_VERSION" >&2 \
        || { echo "pyodata-check: 'pip install pyodata==$PYODATA_VERSION requests==$REQUESTS_VERSION' failed" >&2; exit 1; }
fi
exec 8>&-
cd "$CALLER"
SCRIPT=run.py
if [ "${1:-}" = "--media" ]; then
    SCRIPT=media.py
    shift
elif [ "${1:-}" = "--operations" ]; then
    SCRIPT=operations.py
    shift
fi
if command -v timeout >/dev/null 2>&1; then
    exec timeout -k 10 170 "$SAP_VENV/bin/python" "$ROOT/scripts/pyodata-check/$SCRIPT" "$@"
fi
exec "$SAP_VENV/bin/python" "$ROOT/scripts/pyodata-check/$SCRIPT" "$@"
