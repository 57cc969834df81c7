#!/bin/sh
# Links scripts/engine-microbench/main.swift against the release-built LMDB, Storage (with the
# swift-crypto it hashes streams with) and Query of a PerfTests scratch directory (its first
# modules to build) and runs it. From PerfTests/:
#   sh scripts/engine-microbench/run.sh .build-scan 100000
# CONFIG=debug links the debug build's objects instead (CI's perf smoke: that it links and runs,
# not figures): CONFIG=debug sh scripts/engine-microbench/run.sh .build-perf 2000
set -eu
scratch=${1:-.build-perf}
rows=${2:-100000}
R="$scratch/x86_64-unknown-linux-gnu/${CONFIG:-release}"
here=$(dirname "$0")
swiftc -O -g -package-name "$(basename "$(cd .. && pwd)" | tr 'A-Z' 'a-z' | tr -c 'a-z0-9\n' '_')" -I "$R/Modules" \
  -Xcc -fmodule-map-file=../Sources/CLMDB/module.modulemap "$here/main.swift" Sources/offline-store-bench/BenchSchema.swift \
  "$R"/LMDB.build/*.o "$R"/Storage.build/*.o "$R"/Query.build/*.o "$R"/HeapModule.build/*.o "$R"/InternalCollectionsUtilities.build/*.o \
  "$R"/Crypto.build/*.o "$R"/CryptoBoringWrapper.build/*.o "$R"/CCryptoBoringSSLShims.build/*.o \
  $(find "$R" -path "*XKCP*" -name "*.o") \
  $(find "$R"/CCryptoBoringSSL.build -name '*.o') \
  -llmdb -lstdc++ -o "$scratch/engine-microbench"
"$scratch/engine-microbench" "$rows" ${3:-}
