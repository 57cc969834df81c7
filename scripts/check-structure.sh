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
for f in $(grep -rlE '^\s*(@testable |@_exported |@preconcurrency )*((public|package|internal) )?import CLMDB' Sources Fuzz Examples --include=*.swift || true); do
    case "$f" in Sources/LMDB/*) ;; *) say "$f imports CLMDB; only Sources/LMDB may" ;; esac
done
for f in $(grep -rlE '^\s*(@testable |@_exported |@preconcurrency )*((public|package|internal) )?import CLMDB' Tests --include=*.swift || true); do
    case "$f" in */CrashTestTests.swift) ;; *) say "$f imports CLMDB; tests use LMDB's names (LMDBError.mapFull.code)" ;; esac
done
# Layering: a module imports only modules below it.
check_layer() {  # dir, forbidden imports…
    dir=$1; shift
    for m in "$@"; do
        hits=$(grep -rlE "^\s*(@testable |@_exported |@preconcurrency )*((public|package|internal) )?import $m\$" "Sources/$dir" --include=*.swift || true)
        [ -z "$hits" ] || say "Sources/$dir imports $m: $(echo $hits | tr '\n' ' ')"
    done
}
check_layer LMDB Storage Query Queue Sync Served Remote OfflineStore Server
check_layer Storage Query Queue Sync Served Remote OfflineStore Server
check_layer Query Queue Sync Served Remote OfflineStore Server
check_layer Queue Sync Served Remote OfflineStore Server
check_layer Served Query Queue Sync Remote OfflineStore Server
check_layer Sync Served Remote OfflineStore Server
# multipart/mixed depends on nothing of ours; the server reads a $batch without the HTTP client.
check_layer Multipart LMDB Storage Query Queue Sync Served Remote OfflineStore Server
check_layer Server Remote
# One room for the wire (docs/design.md, "Flush, step by step"): flush and refresh speak OData —
# changes, answers, pages — and Remote's dialects write them as V4 or V2. No version test, header
# name, V2 envelope or URL encoding in them; and the flush stays readable in one sitting.
wire=$(grep -nE 'schema\.version|__metadata|MERGE|inlinecount|Repeatability-|If-Match|percentEncod' Sources/Sync/Flush*.swift Sources/Sync/Refresh*.swift || true)
[ -z "$wire" ] || say "the wire leaks into flush or refresh (it belongs in Sources/Remote's dialects): $wire"
for f in Sources/Sync/Flush*.swift Sources/Sync/Refresh*.swift; do
    n=$(wc -l < "$f")
    [ "$n" -lt 600 ] || say "$f has $n lines: split it by concern (Flush+Concern.swift), under 600"
done
# The example embeds the store through the public product only.
for f in $(grep -rlE '^\s*(@testable |@_exported |@preconcurrency )*((public|package|internal) )?import (LMDB|Storage|Query|Queue|Sync|Served|Remote)$' Examples --include=*.swift || true); do
    say "$f imports an internal module; examples use the OfflineStore product only"
done
# One door: a program imports OfflineStore; the engine's machinery (environment, transactions,
# cursors, codecs, entity store, query engine, queue, sync) is `package`. What may stay `public` in
# the modules below the facade are the values a program holds, which the facade re-exports by
# typealias: EDM values, the schema, configuration, reports, errors, and the reports of flush,
# refresh and load, a prepared query and the rows it hands out (ResultRow), the schema's operations
# (ServiceOperation and its Kind, Parameter and TypeName: not `Operation`, which Foundation names), the parts
# of a configuration each role owns (StorageSettings, SyncSettings with its DefiningRequest, Timeouts, …,
# ServedSettings: StoreConfiguration.storage, .sync, .served). A new public type below
# the facade fails here until it is argued into this list.
PUBLIC_TYPES=" Kind ServiceOperation SyncSettings StorageSettings ServedSettings Parameter TypeName AuthenticationError Authentication AuthorizedRequest CSDLError ChangeOptions CheckInterrupted CheckProgress ConflictPolicy ConflictResolution ComplexType DataFileError DefiningRequest Durability EDMDate
 EDMDateTimeOffset EDMDecimal EDMDuration EDMGuid EDMPrimitive EDMTimeOfDay Element EntityError EntitySet EntityType
 EnumType EnvironmentError FlushReport IndexStats IntegrityReport Iterator JSONError LMDBError LoadError LoadProgress
 LocalChange Message Mode NavigationProperty NewEntity ODataVersion PreparedQuery Properties Property QueryError QueryFormat
 QueryLimits ReferentialConstraint RefreshError RefreshProgress RefreshReport Request RequestAuthorizer ResultOptions ResultRow ResultSummary Schema SecretSource
 SetStats StoreStats StreamIfMatch StringInterpolation Timeouts TypeRef Value ValueBound _EDMTextCodable "
PUBLIC_TYPES=" $(echo $PUBLIC_TYPES) "
MACHINERY="Sources/LMDB Sources/Storage Sources/Query Sources/Queue Sources/Sync Sources/Served Sources/Remote"
for name in $(grep -rhoE '^\s*public ((final |indirect )?(struct|enum|class|protocol|typealias|actor)) [A-Za-z0-9_]+' $MACHINERY --include=*.swift | awk '{print $NF}' | sort -u); do
    case "$PUBLIC_TYPES" in *" $name "*) ;; *) say "public type '$name' below the facade: make it package, or add it to PUBLIC_TYPES with its reason" ;; esac
done
for f in $(grep -rlE '^\s*public (extension|func|var|let|static|init)' $MACHINERY --include=*.swift || true); do
    grep -qE '^\s*public ((final |indirect )?(struct|enum|class|protocol|typealias)) ' "$f" || grep -qE '^extension (Value|Properties|EDM|Schema|TypeRef|EntityType|Property|SyncSettings|StorageSettings|ServedSettings|QueryLimits|IntegrityReport|LMDBError|JSONError|QueryError)' "$f" \
        || say "$f declares public members but no public value type: machinery is package"
done
# Every edge declared, none unused, and the design's copy of the graph current.
sh scripts/module-graph.sh --check || fail=1
[ $fail -eq 0 ] && echo "check-structure: module walls hold"
exit $fail
