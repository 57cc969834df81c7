#!/bin/sh
# Every Swift snippet of the README and the DocC articles compiles against the package as built
# (`swift build` first): scripts/doc-snippets/extract.py makes each ```swift block the body of a
# function (markers there say how a block is given its context), and swiftc type-checks them all
# against .build/debug's modules, as a program built with Swift 7's import rules. A compiler error names the document and line of the snippet.
set -e
cd "$(dirname "$0")/.."
BIN=$(swift build --show-bin-path)
OUT="${TMPDIR:-/tmp}/offline-store-doc-snippets.swift"
python3 scripts/doc-snippets/extract.py README.md Sources/OfflineStore/OfflineStore.docc/*.md >"$OUT"
# The C modules the package's modules were built against: SwiftPM's generated module maps and the
# include directories of the C targets of its dependencies.
set --
for m in "$BIN"/*.build/module.modulemap; do [ -f "$m" ] && set -- "$@" -Xcc "-fmodule-map-file=$m"; done
for d in $(find .build/checkouts -path '*/Sources/*' -name module.modulemap -not -path '*Benchmarks*' -not -path '*Tests*' -exec dirname {} \;); do
    set -- "$@" -I "$d"
done
# As a program built with Swift 7's defaults would be: members visible only through what a file
# imports (MemberImportVisibility), imports internal unless said otherwise.
swiftc -typecheck -swift-version 6 -enable-upcoming-feature MemberImportVisibility \
    -enable-upcoming-feature InternalImportsByDefault -I "$BIN/Modules" -I Sources/CLMDB "$@" "$OUT"
echo "doc-snippets: every snippet compiles"
