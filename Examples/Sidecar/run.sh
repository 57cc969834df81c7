#!/bin/sh
# The offline store as a sidecar: a Python service (service.py, standard library only) reads and
# writes through `offline-store serve` on loopback; the sidecar queues the writes and syncs them
# to the back end every second, and the service keeps working while the back end is away.
#
#   sh Examples/Sidecar/run.sh
#
# The back end here is `offline-store serve` over the demo's server store (an authority store);
# in production it is your OData service (SAP Gateway, S/4HANA, any OData V4 or V2 service).
# Needs: a built offline-store ('swift build'; or OFFLINE_STORE=/path/to/offline-store), curl,
# python3. Exits 0 only if every step did what it should. KEEP=1 keeps the work directory.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OS=${OFFLINE_STORE:-}
if [ -z "$OS" ]; then
    OS="$(cd "$ROOT" && swift build --show-bin-path 2>/dev/null)/offline-store" || true
fi
[ -x "$OS" ] || { echo "run.sh: no offline-store at '$OS': run 'swift build' first, or set OFFLINE_STORE" >&2; exit 2; }
command -v curl > /dev/null || { echo "run.sh: needs curl" >&2; exit 2; }
command -v python3 > /dev/null || { echo "run.sh: needs python3" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sidecar-example.XXXXXX")
PIDS=""
cleanup() {
    status=$?
    for pid in $PIDS; do
        if kill "$pid" 2> /dev/null; then wait "$pid" 2> /dev/null || true; echo "stopped pid $pid"; fi
    done
    if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
    exit $status
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step() { printf '\n== %s\n' "$*"; }
fail() { echo "run.sh: FAILED: $*" >&2; exit 1; }
# start NAME ARGS...: runs the tool's serve in the background, waits for its URL, sets URL.
start() {
    name=$1; shift
    "$OS" serve "$@" > "$WORK/$name.out" 2> "$WORK/$name.err" &
    pid=$!
    PIDS="$PIDS $pid"
    i=0
    until grep -q " at http" "$WORK/$name.out" 2> /dev/null; do
        i=$((i + 1))
        [ $i -lt 400 ] && kill -0 "$pid" 2> /dev/null || { cat "$WORK/$name.err" >&2; fail "$name did not start"; }
        sleep 0.05
    done
    URL=$(sed -n 's/.* at \(http[^ ]*\).*/\1/p' "$WORK/$name.out" | head -n 1)
    eval "${name}_pid=$pid"
    echo "$name: $URL (pid $pid)"
}

step "1. the back end: an OData service on loopback (here the demo's server store)"
"$OS" demo --store "$WORK/demo" --size 40 > "$WORK/demo.log"
start backend --store "$WORK/demo/server" --port 0 --lifetime 300
BACKEND=$URL
PORT=$(echo "$BACKEND" | sed 's/.*:\([0-9]*\)\/$/\1/')

step "2. the sidecar: an offline store of the back end, refreshed, served with --sync-interval 1"
curl -sS -f -o "$WORK/metadata.xml" "$BACKEND\$metadata"
cat > "$WORK/config.json" << EOF2
{"serviceRoot": "$BACKEND",
 "definingRequests": [{"name": "P", "url": "Products"}]}
EOF2
"$OS" init --store "$WORK/side" --metadata "$WORK/metadata.xml" --config "$WORK/config.json"
"$OS" refresh --store "$WORK/side"
start sidecar --store "$WORK/side" --port 0 --lifetime 300 --sync-interval 1
SIDE=$URL

step "3. the service works through the sidecar: reads, and writes that are queued"
python3 "$HERE/service.py" work "$SIDE"

step "4. the back end goes away; the service keeps working"
kill "$backend_pid"; wait "$backend_pid" 2> /dev/null || true
echo "back end stopped"
# The sidecar's next sync finds no back end: logged, not fatal (a refused connection is reported
# in about a second: three quick retries, nothing sent).
i=0
until grep -q "refresh failed" "$WORK/sidecar.err"; do
    i=$((i + 1)); [ $i -lt 300 ] || fail "no failed sync in the sidecar's log after 30 s"; sleep 0.1
done
echo "the sidecar's log: $(grep "refresh failed" "$WORK/sidecar.err" | head -n 1 | sed 's/.*\(sync [0-9]* done\)/\1/' | cut -c1-160)…"
python3 "$HERE/service.py" away "$SIDE"

step "5. the back end comes back (same port); the sidecar's next syncs deliver the queue"
start backend --store "$WORK/demo/server" --port "$PORT" --lifetime 300
python3 "$HERE/service.py" synced "$SIDE" "$BACKEND"
echo "the sidecar's log: $(grep -c 'sync [0-9]* done' "$WORK/sidecar.err") syncs, $(grep -c 'refresh failed' "$WORK/sidecar.err") of them with the back end away"
grep "flush sent [1-9]" "$WORK/sidecar.err" | sed 's/.*\(sync [0-9]* done\)/\1/' | cut -c1-200

step "6. check both stores"
for pid in $PIDS; do kill "$pid" 2> /dev/null && wait "$pid" 2> /dev/null || true; done
PIDS=""
"$OS" check --store "$WORK/side" > /dev/null || fail "check of the sidecar's store"
"$OS" check --store "$WORK/demo/server" > /dev/null || fail "check of the back end's store"
echo "both stores pass check"
echo
echo "the sidecar example ran to the end"
