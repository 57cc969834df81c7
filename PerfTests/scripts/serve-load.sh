#!/usr/bin/env bash
# Load test of `offline-store serve` with wrk on loopback, anchored on Hummingbird's hello world in
# the same run. See PerfTests/README.md, "Served endpoint under load".
#
#   PerfTests/scripts/serve-load.sh [--quick|--tiny] [--duration S] [--rounds R] [--rows N] [--connections C]
#                                   [--threads T] [--scratch DIR] [--no-build] [--debug] [--keep DIR]
#
# Builds offline-store and PerfTests' hello-server in release; makes a store (the EPM demo, then
# N/100 Products, N/4 SalesOrders and N SalesOrderItems generated, so ~100 items per product);
# serves it and the hello world on free loopback ports; runs wrk (--latency) against
#   hello world               GET /hello (also once through the Lua client the reads use)
#   point read by key         GET /SalesOrderItems(SalesOrderID='…',ItemPosition=…), every key, shuffled
#   filtered query, ~100 rows GET /SalesOrderItems?$filter=ProductID eq '…' (ProductID's index), every product
#   10,000-row response       GET /SalesOrderItems?$top=10000
#   writes, C connections     POST /Products, a new key per request, durable (group-committed)
#   writes, 1 connection      the same, one at a time: one commit (and its fsyncs) per write
# then serves the same data as an OFFLINE store (a defining request makes it one: writes are queued
# for flush, entity and request in one transaction) beside the hello world again, and runs the point
# reads and both write workloads against it: requests/s over the hello world and over the authority.
# and prints requests/s, p50, p99 and the ratio to the hello world. It fails if any response is not
# the expected status (200; 201 for the POSTs), if wrk reports socket errors, if the store's count
# of new Products differs from the 201s counted (plus any request wrk sent but stopped listening to
# that the server applied), or if `offline-store check` finds the store inconsistent.
# Also measures the disk's synchronous write rate (dd oflag=dsync, 4 KiB) beside the writes, and,
# when `perf stat` can, counts the server's fdatasync calls during each write run.
#
# The hello world and the point reads take turns, --rounds times (default 3): the point reads' ratio is
# the median of the rounds' ratios.
# --quick: 2 s a workload, 1 round, 20,000 rows (a smoke run). Default: 10 s a workload, 100,000 rows.
# --tiny: 1 s a workload, 1 round, 2,000 rows; with --debug (debug builds: the root package's .build
# and PerfTests' .build-perf) it is CI's smoke run (scripts/perf-smoke.sh): that it runs, not figures.
# --scratch: the build directory name (default .build-serve-load, in the root package and PerfTests).
# --no-build: use the binaries already in --scratch. --keep DIR: make the store and logs in DIR, keep them.
set -euo pipefail

duration=10
rounds=3
rows=100000
connections=64
threads=2
scratch=.build-serve-load
build=1
debug=0
keep=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) duration=2; rows=20000; rounds=1 ;;
        --tiny) duration=1; rows=2000; rounds=1 ;;
        --debug) debug=1 ;;
        --duration) duration="$2"; shift ;;
        --rows) rows="$2"; shift ;;
        --rounds) rounds="$2"; shift ;;
        --connections) connections="$2"; shift ;;
        --threads) threads="$2"; shift ;;
        --scratch) scratch="$2"; shift ;;
        --no-build) build=0 ;;
        --keep) keep="$2"; shift ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "serve-load: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
if [ "$threads" -gt 9 ]; then echo "serve-load: at most 9 threads (post.lua's keys)" >&2; exit 2; fi

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
lua="$here/serve-load"

# --- what the run needs: LMDB (scripts/setup.sh), wrk
sh "$repo/scripts/setup.sh"
if ! command -v wrk >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq wrk >/dev/null
fi

# --- release binaries (debug ones with --debug)
if [ "$debug" = 1 ]; then
    if [ "$build" = 1 ]; then
        (cd "$repo" && swift build --product offline-store)
        (cd "$repo/PerfTests" && swift build --scratch-path .build-perf --product hello-server)
    fi
    store_bin="$repo/.build/debug/offline-store"
    hello_bin="$repo/PerfTests/.build-perf/debug/hello-server"
else
    if [ "$build" = 1 ]; then
        (cd "$repo" && swift build -c release --scratch-path "$scratch" --product offline-store)
        (cd "$repo/PerfTests" && swift build -c release --scratch-path "$scratch" --product hello-server)
    fi
    store_bin="$repo/$scratch/release/offline-store"
    hello_bin="$repo/PerfTests/$scratch/release/hello-server"
fi
[ -x "$store_bin" ] && [ -x "$hello_bin" ] || { echo "serve-load: missing $store_bin or $hello_bin" >&2; exit 1; }

if [ -n "$keep" ]; then
    mkdir -p "$keep"; work="$(cd "$keep" && pwd)"
else
    work="$(mktemp -d "${TMPDIR:-/tmp}/serve-load.XXXXXX")"
fi
store="$work/store"
store_pid=""; hello_pid=""
cleanup() {
    for pid in $store_pid $hello_pid ${offline_pid:-}; do kill -TERM "$pid" 2>/dev/null || true; done
    [ -z "$keep" ] && rm -rf "$work"
    return 0
}
trap cleanup EXIT

os() { "$store_bin" "$@"; }
fail() { echo "serve-load: FAILED: $*" >&2; exit 1; }

# --- the store
echo "== store: $store ($rows SalesOrderItems)"
rm -rf "$store" "$work/demo"
# demo keeps its two stores in DIR/server and DIR/offline; the served one is the load test's.
os demo --store "$work/demo" >"$work/demo.log"
mv "$work/demo/server" "$store"
os generate --store "$store" --set Products --count $((rows / 100)) --seed 11
os generate --store "$store" --set SalesOrders --count $((rows / 4)) --seed 12
os generate --store "$store" --set SalesOrderItems --count "$rows" --seed 13
items=$(os query --store "$store" 'SalesOrderItems/$count')
products=$(os query --store "$store" 'Products/$count')
echo "   $items SalesOrderItems, $products Products"
os query --store "$store" --explain "SalesOrderItems?\$filter=ProductID eq 'X'" | sed 's/^/   filter plan: /'

# Every item's key, as a path; every product, as a filter.
os query --store "$store" --format jsonl 'SalesOrderItems?$select=SalesOrderID,ItemPosition' \
    | sed -n 's/.*"SalesOrderID":"\([^"]*\)","ItemPosition":\([0-9]*\).*/\/SalesOrderItems(SalesOrderID='"'"'\1'"'"',ItemPosition=\2)/p' >"$work/keys.txt"
os query --store "$store" --format jsonl 'Products?$select=ProductID' \
    | sed -n 's/.*"ProductID":"\([^"]*\)".*/\/SalesOrderItems?$filter=ProductID%20eq%20'"'"'\1'"'"'/p' >"$work/filters.txt"
[ "$(wc -l <"$work/keys.txt")" -eq "$items" ] || fail "keys.txt has $(wc -l <"$work/keys.txt") keys, the set $items items"
[ "$(wc -l <"$work/filters.txt")" -eq "$products" ] || fail "filters.txt has $(wc -l <"$work/filters.txt") products, the set $products"
# Rows per filter: every product's count would take long; 20 spread over the list, and the mean.
sample_counts=$(awk -v n="$products" 'NR % int(n / 20 + 1) == 1' "$work/filters.txt" | while read -r p; do
    id=${p##*%20eq%20}; os query --store "$store" "SalesOrderItems/\$count?\$filter=ProductID eq $id"; echo; done | tr '\n' ' ')
echo "   rows per filter: mean $((items / products)) (items / products); a sample of 20: $sample_counts"

products_before=$products
# The same data as an offline store (a defining request makes it one): its serve queues every write
# for flush instead of applying it as the authority (issue 23). Copied before any server opens it.
offline="$work/offline"
cp -r "$store" "$offline"
os define --store "$offline" P Products >/dev/null

# --- servers
lifetime=$((duration * (2 * rounds + 6) + 120))
start_server() {  # name, command...: starts it, waits for its "… at http://HOST:PORT/" line
    local name="$1"; shift
    "$@" >"$work/$name.out" 2>"$work/$name.err" &
    local pid=$!
    for _ in $(seq 1 200); do
        grep -q "http://" "$work/$name.out" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || { cat "$work/$name.err" >&2; fail "$name did not start"; }
        sleep 0.05
    done
    local url; url=$(grep -o 'http://[^ ]*' "$work/$name.out" | head -1)
    [ -n "$url" ] || fail "$name printed no address"
    eval "${name}_pid=$pid; ${name}_url=${url%/}"
}
start_server hello "$hello_bin" 0 "$lifetime"
start_server store "$store_bin" serve --store "$store" --port 0 --lifetime "$lifetime"
echo "== hello world at $hello_url (pid $hello_pid), store at $store_url (pid $store_pid)"

# Each endpoint once, checked, before the load.
check_get() {  # url, expected status, [grep pattern, expected count]
    local code; code=$(curl -s -o "$work/probe.body" -w '%{http_code}' "$1")
    [ "$code" = "$2" ] || fail "GET $1: $code, expected $2: $(head -c 300 "$work/probe.body")"
    if [ $# -ge 4 ]; then
        local n; n=$(grep -o "$3" "$work/probe.body" | wc -l)
        [ "$n" -eq "$4" ] || fail "GET $1: $n of $3, expected $4"
    fi
}
check_get "$hello_url/hello" 200
check_get "$store_url$(head -1 "$work/keys.txt")" 200 '"ItemPosition"' 1
check_get "$store_url$(head -1 "$work/filters.txt")" 200
check_get "$store_url/SalesOrderItems?\$top=10000" 200 '"ItemPosition"' $((items < 10000 ? items : 10000))
top_bytes=$(wc -c <"$work/probe.body")

# --- the disk's synchronous write rate: 4 KiB writes, each synced (O_DSYNC), on the store's file system
dd_count=$((duration * 100))
dd_out=$(LC_ALL=C dd if=/dev/zero of="$work/dsync.tmp" bs=4k count="$dd_count" oflag=dsync 2>&1 | tail -1)
rm -f "$work/dsync.tmp"
dd_secs=$(echo "$dd_out" | sed -n 's/.*copied, \([0-9.e+-]*\) s,.*/\1/p')
dsync_rate=$(awk -v n="$dd_count" -v s="$dd_secs" 'BEGIN { printf "%.0f", n / s }')

# --- wrk
to_ms() {  # wrk's "1.23ms", "456.00us", "1.05s", "2.00m" → milliseconds
    awk -v v="$1" 'BEGIN { n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
        if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000
        printf "%.2f", n }'
}
declare -A rps p50 p99 count conns syncs all cpu
clk_tck=$(getconf CLK_TCK)
# Count the server's fdatasync calls during the writes, if perf can (a kernel tracepoint: no overhead to speak of).
count_syncs=0
if command -v perf >/dev/null 2>&1 && perf stat -e syscalls:sys_enter_fdatasync true >/dev/null 2>&1; then count_syncs=1; fi
run_wrk() {  # name, connections, threads, url, [lua script]
    local name="$1" c="$2" t="$3" url="$4" script="${5:-}"
    local out="$work/wrk-$name.txt"
    echo "== wrk $name: -t$t -c$c -d${duration}s $url${script:+ (-s $(basename "$script"))}"
    # The server wrk loads, by its URL: its CPU time (user + system) over the run, per request answered.
    local pid=$store_pid
    [ "${url#"$hello_url"}" != "$url" ] && pid=$hello_pid
    [ -n "${offline_url:-}" ] && [ "${url#"$offline_url"}" != "$url" ] && pid=$offline_pid
    local perf_pid=""
    if [ "$count_syncs" = 1 ] && [ "${name#*post}" != "$name" ]; then
        # fdatasync calls of the server while wrk runs: LMDB syncs once per commit.
        perf stat -x, -e syscalls:sys_enter_fdatasync -p "$pid" -o "$work/perf-$name.txt" >/dev/null 2>&1 &
        perf_pid=$!
        sleep 0.2
    fi
    local ticks0; ticks0=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
    wrk -t"$t" -c"$c" -d"${duration}s" --timeout 10s --latency ${script:+-s "$script"} "$url" >"$out" 2>&1 || { cat "$out"; fail "wrk $name"; }
    local ticks1; ticks1=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
    if [ -n "$perf_pid" ]; then
        sleep 0.2; kill -INT "$perf_pid"; wait "$perf_pid" || true
        syncs[$name]=$(awk -F, '/fdatasync/ { print $1 }' "$work/perf-$name.txt")
    fi
    sed 's/^/   /' "$out" | grep -v "^   post-unanswered" || true
    rps[$name]=$(awk '/^Requests\/sec:/ { print $2 }' "$out")
    p50[$name]=$(to_ms "$(awk '$1 == "50%" { print $2 }' "$out")")
    p99[$name]=$(to_ms "$(awk '$1 == "99%" { print $2 }' "$out")")
    count[$name]=$(awk '/requests in/ { print $1 }' "$out")
    conns[$name]=$c
    cpu[$name]=$(awk -v d=$((ticks1 - ticks0)) -v hz="$clk_tck" -v n="${count[$name]}" 'BEGIN { printf "%.0f", n ? d * 1e6 / hz / n : 0 }')
    local bad; bad=$(awk '/Non-2xx or 3xx responses:/ { print $5 }' "$out")
    [ -z "$bad" ] || fail "wrk $name: $bad responses not 2xx"
    ! grep -q "Socket errors" "$out" || fail "wrk $name: $(grep 'Socket errors' "$out")"
    [ -n "${rps[$name]}" ] && [ "${count[$name]}" -gt 0 ] || fail "wrk $name: no requests"
}
# The anchor and the point reads take turns, --rounds times: on a shared machine the rate drifts
# by tens of percent within a minute, so each round's ratio compares neighbours in time. The
# table shows the median round of each (by requests/s) and the median of the rounds' ratios.
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratios=()
for r in $(seq 1 "$rounds"); do
    run_wrk "hello.$r" "$connections" "$threads" "$hello_url/hello"
    PATHS_FILE="$work/keys.txt" run_wrk "point.$r" "$connections" "$threads" "$store_url" "$lua/paths.lua"
    ratios+=("$(awk -v a="${rps[point.$r]}" -v b="${rps[hello.$r]}" 'BEGIN { print a / b }')")
done
for name in hello point; do  # the median round (the lower middle one for an even count) stands for the rounds
    list=(); for r in $(seq 1 "$rounds"); do list+=("${rps[$name.$r]}"); done
    m=$(printf '%s\n' "${list[@]}" | sort -g | sed -n "$(( (rounds + 1) / 2 ))p")
    for r in $(seq 1 "$rounds"); do
        if [ "${rps[$name.$r]}" = "$m" ]; then
            rps[$name]=$m; p50[$name]=${p50[$name.$r]}; p99[$name]=${p99[$name.$r]}; cpu[$name]=${cpu[$name.$r]}
            conns[$name]=$connections; break
        fi
    done
    all[$name]=$(for r in $(seq 1 "$rounds"); do printf '%.0f ' "${rps[$name.$r]}"; done)
done
ratio_point=$(median "${ratios[@]}")
echo /hello >"$work/hello.txt"  # the hello world through the Lua client the reads use (it costs wrk CPU too)
PATHS_FILE="$work/hello.txt" run_wrk hellolua "$connections" "$threads" "$hello_url" "$lua/paths.lua"
PATHS_FILE="$work/filters.txt" run_wrk filter "$connections" "$threads" "$store_url" "$lua/paths.lua"
# A smoke run's second (--tiny, a debug server) is shorter than 64 concurrent 10,000-row answers
# take (about 0.6 s for 8 of them): 4 connections there, so that some answers complete.
top_connections=$connections
[ "$duration" -le 1 ] && top_connections=4
run_wrk top10k "$top_connections" "$threads" "$store_url/SalesOrderItems?\$top=10000"
RUN=A run_wrk post "$connections" "$threads" "$store_url" "$lua/post.lua"
RUN=B run_wrk post1 1 1 "$store_url" "$lua/post.lua"

# --- stop the servers (graceful: requests in flight finish), then check the store
for pid in $hello_pid $store_pid; do kill -TERM "$pid"; done
wait "$hello_pid" || fail "hello-server exited with $?"
wait "$store_pid" || fail "offline-store serve exited with $?"
store_pid=""; hello_pid=""

created201=0; other=0; unanswered=(); applied_unanswered=0
for name in post post1; do
    line=$(grep '^post-summary:' "$work/wrk-$name.txt") || fail "wrk $name: no post-summary"
    c=$(echo "$line" | sed 's/.*created201=\([0-9]*\).*/\1/'); o=$(echo "$line" | sed 's/.*other=\([0-9]*\).*/\1/')
    [ "$c" -eq "${count[$name]}" ] || fail "wrk $name: $c 201s of ${count[$name]} responses"
    created201=$((created201 + c)); other=$((other + o))
    while read -r k; do unanswered+=("$k"); done < <(sed -n 's/^post-unanswered: //p' "$work/wrk-$name.txt")
done
[ "$other" -eq 0 ] || fail "$other POST responses were not 201 with the key sent"
for k in ${unanswered[@]+"${unanswered[@]}"}; do
    if os get --store "$store" "Products('$k')" >/dev/null 2>&1; then applied_unanswered=$((applied_unanswered + 1)); fi
done
products_after=$(os query --store "$store" 'Products/$count')
new=$((products_after - products_before))
echo "== writes: $new new Products in the store; $created201 responses 201; ${#unanswered[@]} requests unanswered when wrk stopped, $applied_unanswered of them applied"
[ "$new" -eq $((created201 + applied_unanswered)) ] || fail "the store has $new new Products, the 201s and applied unanswered requests say $((created201 + applied_unanswered))"
os check --store "$store" | sed 's/^/   check: /'

# --- the offline store's serve: point reads, and writes queued (entity, indexes and request in one
# durable transaction), against the hello world again in the same phase
offline_pid=""
start_server hello "$hello_bin" 0 "$lifetime"
start_server offline "$store_bin" serve --store "$offline" --port 0 --lifetime "$lifetime"
echo "== offline store at $offline_url (pid $offline_pid): writes are queued for flush"
check_get "$offline_url$(head -1 "$work/keys.txt")" 200 '"ItemPosition"' 1
run_wrk ohello "$connections" "$threads" "$hello_url/hello"
PATHS_FILE="$work/keys.txt" run_wrk opoint "$connections" "$threads" "$offline_url" "$lua/paths.lua"
RUN=C run_wrk opost "$connections" "$threads" "$offline_url" "$lua/post.lua"
RUN=D run_wrk opost1 1 1 "$offline_url" "$lua/post.lua"
for pid in $hello_pid $offline_pid; do kill -TERM "$pid"; done
wait "$hello_pid" || fail "hello-server exited with $?"
wait "$offline_pid" || fail "offline-store serve (offline) exited with $?"
offline_pid=""; hello_pid=""
ocreated=0; ounanswered=0; oapplied=0
for name in opost opost1; do
    line=$(grep '^post-summary:' "$work/wrk-$name.txt") || fail "wrk $name: no post-summary"
    c=$(echo "$line" | sed 's/.*created201=\([0-9]*\).*/\1/'); o=$(echo "$line" | sed 's/.*other=\([0-9]*\).*/\1/')
    [ "$o" -eq 0 ] || fail "wrk $name: $o POST responses were not 201 with the key sent"
    ocreated=$((ocreated + c))
    while read -r k; do
        ounanswered=$((ounanswered + 1))
        if os get --store "$offline" "Products('$k')" >/dev/null 2>&1; then oapplied=$((oapplied + 1)); fi
    done < <(sed -n 's/^post-unanswered: //p' "$work/wrk-$name.txt")
done
onew=$(( $(os query --store "$offline" 'Products/$count') - products_before ))
oqueued=$(os query --store "$offline" 'RequestQueue/$count')
echo "== offline writes: $onew new Products, $oqueued requests queued; $ocreated responses 201; $ounanswered unanswered when wrk stopped, $oapplied of them applied"
[ "$onew" -eq $((ocreated + oapplied)) ] || fail "the offline store has $onew new Products, the 201s and applied unanswered requests say $((ocreated + oapplied))"
[ "$oqueued" -eq "$onew" ] || fail "the offline store queued $oqueued requests for $onew creates"
os check --store "$offline" | sed 's/^/   check: /'

# --- the table
commit=$(cd "$repo" && git rev-parse --short HEAD)$(cd "$repo" && git diff --quiet HEAD -- Sources PerfTests || echo "+changes")
echo
echo "Served endpoint under load: commit $commit, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, wrk -t$threads -d${duration}s --latency on loopback"
echo "store: $items SalesOrderItems, $products_before Products; load average after: $(uptime | sed 's/.*load average: //')"
echo
printf '%-34s %5s %11s %10s %10s %8s %12s\n' workload conns requests/s "p50 ms" "p99 ms" ×hello "server µs/req"
# ×hello: over the hello world's median round; for the point reads, the median of the rounds' ratios.
printf '%.0s-' $(seq 1 97); echo
label() {
    case "$1" in
        hello) echo "hello world (Hummingbird)" ;;
        hellolua) echo "hello world, Lua client" ;;
        point) echo "point read by key" ;;
        filter) echo "filtered query, ~$((items / products)) rows" ;;
        top10k) echo "10,000-row JSON ($((top_bytes / 1024)) KiB)" ;;
        post) echo "POST create, durable" ;;
        post1) echo "POST create, durable, 1 connection" ;;
        ohello) echo "hello world (offline phase)" ;;
        opoint) echo "offline: point read by key" ;;
        opost) echo "offline: POST create, queued, durable" ;;
        opost1) echo "offline: POST queued, 1 connection" ;;
    esac
}
for name in hello hellolua point filter top10k post post1; do
    ratio=$(awk -v a="${rps[$name]}" -v b="${rps[hello]}" 'BEGIN { print a / b }')
    [ "$name" = point ] && ratio=$ratio_point
    printf '%-34s %5s %11s %10s %10s %8s %12s\n' "$(label "$name")" "${conns[$name]}" "$(printf '%.0f' "${rps[$name]}")" \
        "${p50[$name]}" "${p99[$name]}" "$(awk -v r="$ratio" 'BEGIN { printf (r < 0.1 ? "%.3f" : "%.2f"), r }')" "${cpu[$name]}"
done
echo
echo "The offline store's serve (writes go through the request queue), the hello world again beside it:"
printf '%-34s %5s %11s %10s %10s %8s %12s %12s\n' workload conns requests/s "p50 ms" "p99 ms" ×hello "server µs/req" ×authority
printf '%.0s-' $(seq 1 110); echo
for pair in ohello:hello opoint:point opost:post opost1:post1; do
    name=${pair%%:*}; twin=${pair##*:}
    printf '%-34s %5s %11s %10s %10s %8s %12s %12s\n' "$(label "$name")" "${conns[$name]}" "$(printf '%.0f' "${rps[$name]}")" \
        "${p50[$name]}" "${p99[$name]}" "$(awk -v a="${rps[$name]}" -v b="${rps[ohello]}" 'BEGIN { printf "%.2f", a / b }')" \
        "${cpu[$name]}" "$(awk -v a="${rps[$name]}" -v b="${rps[$twin]}" 'BEGIN { printf "%.2f", a / b }')"
done
echo "×authority: over the same workload against the authority store's serve, earlier in this run"
echo "server µs/req: the server process's CPU time (user + system) during the run over the requests answered"
if [ "$rounds" -gt 1 ]; then echo "$rounds rounds, requests/s: hello world ${all[hello]}; point reads ${all[point]}; ratios $(printf '%.2f ' "${ratios[@]}")"; fi
echo "10,000-row JSON: $(awk -v r="${rps[top10k]}" 'BEGIN { printf "%.0f", r * 10000 }') rows/s, $(awk -v r="${rps[top10k]}" -v b="$top_bytes" 'BEGIN { printf "%.0f", r * b / 1048576 }') MiB/s"
echo
group=$(awk -v a="${rps[post]}" -v b="${rps[post1]}" 'BEGIN { printf "%.1f", a / b }')
over_dd=$(awk -v a="${rps[post]}" -v b="$dsync_rate" 'BEGIN { printf "%.1f", a / b }')
echo "disk: $dsync_rate synchronous 4 KiB writes/s (dd oflag=dsync); 1 connection: $(printf '%.0f' "${rps[post1]}") durable writes/s (one commit each)"
for name in post post1; do
    [ -n "${syncs[$name]:-}" ] && [ "${syncs[$name]}" -gt 0 ] 2>/dev/null || continue
    echo "$(label "$name"): ${count[$name]} writes answered, ${syncs[$name]} fdatasync calls: $(awk -v a="${count[$name]}" -v b="${syncs[$name]}" 'BEGIN { printf "%.1f", a / b }') writes per fsync"
done
echo "targets:"
if awk -v r="$ratio_point" 'BEGIN { exit !(r >= 0.5) }'; then m=met; else m=missed; fi
echo "  $m  point reads ≥ 50% of hello world: $(awk -v r="$ratio_point" 'BEGIN { printf "%.0f%%", r * 100 }')"
per_sync=""
if [ -n "${syncs[post]:-}" ] && [ "${syncs[post]}" -gt 0 ] 2>/dev/null; then
    per_sync=$(awk -v a="${count[post]}" -v b="${syncs[post]}" 'BEGIN { printf "%.1f", a / b }')
fi
# Met when writes share commits: ≥ 5 writes per fdatasync (counted), else (perf unavailable) ≥ 5× one connection's rate.
if awk -v p="${per_sync:-0}" -v g="$group" 'BEGIN { exit !(p != 0 ? p >= 5 : g >= 5) }'; then m=met; else m=missed; fi
echo "  $m  writes group-committed (≥ 5 writes per commit): ${per_sync:+$per_sync writes per fdatasync; }$connections connections ${group}× 1 connection's writes/s, ${over_dd}× the disk's dsync writes/s"
echo "every response as expected; the store's new Products match the 201s; check passed"
