// swift-tools-version:6.0
// Benchmarks, side by side: raw LMDB (the physical limit), OfflineStore, and SQLite through GRDB.
// Its own package so that a plain `swift test` at the root never builds GRDB. See README.md.
import PackageDescription

let package = Package(
    name: "PerfTests",
    dependencies: [
        .package(name: "OfflineStore", path: ".."),
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        // The hello-world anchor of the served-endpoint load test (the root package's version).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // The bare client of sync-bench's anchors (the root package's version).
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
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
        // Hummingbird 2's hello world: the anchor of scripts/serve-load.sh (the framework's ceiling).
        .executableTarget(
            name: "hello-server",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // What live queries cost the writes of a store, and how soon a commit reaches one
        // (README.md, "Live queries").
        .executableTarget(
            name: "observe-bench",
            dependencies: [
                .product(name: "OfflineStore", package: "OfflineStore"),
                .product(name: "Samples", package: "OfflineStore"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Flush and refresh throughput against `offline-store serve`, anchored on a bare
        // AsyncHTTPClient loop (README.md, "Flush and refresh throughput").
        .executableTarget(
            name: "sync-bench",
            dependencies: [
                .product(name: "OfflineStore", package: "OfflineStore"),
                .product(name: "Samples", package: "OfflineStore"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
