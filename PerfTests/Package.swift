// swift-tools-version:6.0
// Benchmarks, side by side: raw LMDB (the physical limit), OfflineStore, and SQLite through GRDB.
// Its own package so that a plain `swift test` at the root never builds GRDB. See README.md.
import PackageDescription

let package = Package(
    name: "PerfTests",
    dependencies: [
        .package(name: "OfflineStore", path: ".."),
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
    ],
    targets: [
        // LMDB's C API for the raw contestant (the root package's CLMDB is not a product).
        .systemLibrary(name: "CLMDBBench", pkgConfig: "lmdb", providers: [.apt(["liblmdb-dev"])]),
        .executableTarget(
            name: "offline-store-bench",
            dependencies: [
                .product(name: "OfflineStore", package: "OfflineStore"),
                .product(name: "Samples", package: "OfflineStore"),  // the data generator
                .product(name: "GRDB", package: "GRDB.swift"),
                "CLMDBBench",
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
