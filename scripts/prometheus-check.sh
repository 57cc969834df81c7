#!/bin/sh
# Parse a Prometheus text-format scrape with the reference Python client's parser
# (`prometheus_client.parser.text_string_to_metric_families`, PyPI `prometheus-client`), as a
# Prometheus server would read it:
#
#   sh scripts/prometheus-check.sh http://127.0.0.1:PORT/metrics
#
# Prints one JSON object: {"families": {name: {"type": T, "samples": N}}}; exits non-zero when
# the scrape fails or does not parse. Python: the odatapy venv (scripts/odatapy-venv.sh), given
# prometheus-client from PyPI on first use.
set -e
URL=$1
[ -n "$URL" ] || { echo "usage: prometheus-check.sh URL" >&2; exit 2; }
cd "$(dirname "$0")/.."
. scripts/odatapy-venv.sh
PROMETHEUS_CLIENT_VERSION=0.26.0
if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('prometheus-client') != '$PROMETHEUS_CLIENT_VERSION')" 2>/dev/null; then
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "prometheus-client==$PROMETHEUS_CLIENT_VERSION" >&2 \
        || { echo "prometheus-check: 'pip install prometheus-client==$PROMETHEUS_CLIENT_VERSION' failed" >&2; exit 1; }
fi
exec "$VENV/bin/python" - "$URL" <<'PY'
import json
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

with urllib.request.urlopen(sys.argv[1], timeout=30) as response:
    text = response.read().decode("utf-8")
families = {}
for family in text_string_to_metric_families(text):
    families[family.name] = {"type": family.type, "samples": len(family.samples)}
print(json.dumps({"families": families}, sort_keys=True))
PY
