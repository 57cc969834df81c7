#!/bin/sh
# Every snippet of the README and the DocC articles works against the package as built (`swift
# build` first):
# - every ```swift block compiles: scripts/doc-snippets/extract.py makes each the body of a
#   function (markers there say how a block is given its context), and swiftc type-checks them all
#   against the build's modules, as a program built with Swift 7's import rules. A compiler
#   error names the document and line of the snippet.
# - every ```sh block that uses `offline-store` runs: scripts/doc-snippets/run-shell.py runs each
#   in a temporary directory with the built tools on PATH (a served sample where a marker asks for
#   it), and a command that exits non-zero names the document and line.
# The build folder: BIN (the bin path) if set, else `swift build $SWIFT_BUILD_FLAGS --show-bin-path`
# (SWIFT_BUILD_FLAGS="--scratch-path .build-x" for a build folder other than .build).
set -e
cd "$(dirname "$0")/.."
# shellcheck disable=SC2086 # SWIFT_BUILD_FLAGS is a list of flags
BIN=${BIN:-$(swift build ${SWIFT_BUILD_FLAGS:-} --show-bin-path)}
SCRATCH=$(cd -P "$BIN/../.." && pwd)
DOCS="README.md Sources/OfflineStore/OfflineStore.docc/*.md Examples/EmbeddedService/README.md"
OUT="${TMPDIR:-/tmp}/offline-store-doc-snippets.swift"
# shellcheck disable=SC2086 # DOCS is a list of paths
python3 scripts/doc-snippets/extract.py $DOCS >"$OUT"
# The C modules the package's modules were built against: SwiftPM's generated module maps and the
# include directories of the C targets of its dependencies.
set --
for m in "$BIN"/*.build/module.modulemap; do [ -f "$m" ] && set -- "$@" -Xcc "-fmodule-map-file=$m"; done
for d in $(find "$SCRATCH/checkouts" -path '*/Sources/*' -name module.modulemap -not -path '*Benchmarks*' -not -path '*Tests*' -exec dirname {} \;); do
    set -- "$@" -I "$d"
done
# As a program built with Swift 7's defaults would be: members visible only through what a file
# imports (MemberImportVisibility), imports internal unless said otherwise.
swiftc -typecheck -swift-version 6 -enable-upcoming-feature MemberImportVisibility \
    -enable-upcoming-feature InternalImportsByDefault -I "$BIN/Modules" -I Sources/CLMDB "$@" "$OUT"
echo "doc-snippets: every snippet compiles"
# shellcheck disable=SC2086 # DOCS is a list of paths
python3 scripts/doc-snippets/run-shell.py "$BIN" $DOCS
echo "doc-snippets: every shell example runs"
