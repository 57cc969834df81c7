#!/bin/sh
# The house's walls, checked (docs/design.md, "Modules"): only the LMDB module imports the C
# library (tests reach it directly in one place: CrashTestTests reads LMDB's reader table with
# mdb_reader_list, independently of the wrapper it checks); Storage imports no module above it;
# Queue knows nothing of Sync, Remote or the served role; the facade's product is the only
# library a program imports besides Samples.
set -e
cd "$(dirname "$0")/.."
fail=0
say() { echo "check-structure: $*" >&2; fail=1; }
for f in $(grep -rlE '^\s*(@testable )?import CLMDB' Sources Fuzz Examples --include=*.swift || true); do
    case "$f" in Sources/LMDB/*) ;; *) say "$f imports CLMDB; only Sources/LMDB may" ;; esac
done
for f in $(grep -rlE '^\s*(@testable )?import CLMDB' Tests --include=*.swift || true); do
    case "$f" in */CrashTestTests.swift) ;; *) say "$f imports CLMDB; tests use LMDB's names (LMDBError.mapFull.code)" ;; esac
done
# Layering: a module imports only modules below it.
check_layer() {  # dir, forbidden imports…
    dir=$1; shift
    for m in "$@"; do
        hits=$(grep -rlE "^\s*(@testable )?import $m\$" "Sources/$dir" --include=*.swift || true)
        [ -z "$hits" ] || say "Sources/$dir imports $m: $(echo $hits | tr '\n' ' ')"
    done
}
check_layer LMDB Storage Query Queue Sync Served Remote OfflineStore Server
check_layer Storage Query Queue Sync Served Remote OfflineStore Server
check_layer Query Queue Sync Served Remote OfflineStore Server
check_layer Queue Sync Served Remote OfflineStore Server
check_layer Served Query Queue Sync Remote OfflineStore Server
check_layer Sync Served Remote OfflineStore Server
# The example embeds the store through the public product only.
for f in $(grep -rlE '^\s*import (LMDB|Storage|Query|Queue|Sync|Served|Remote)$' Examples --include=*.swift || true); do
    say "$f imports an internal module; examples use the OfflineStore product only"
done
[ $fail -eq 0 ] && echo "check-structure: module walls hold"
exit $fail
