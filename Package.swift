// swift-tools-version:6.0
import PackageDescription

// Swift 6, and walls the compiler keeps: a module's imports are its own business unless it says
// `public import` (its public API shows that module's types), and a member is visible only in a
// file that imports its module (as Hummingbird builds).
let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "OfflineStore",
    products: [
        .library(name: "OfflineStore", targets: ["OfflineStore"]),
        // Sample data and the synthetic-entity generator, for the tool, the tests and PerfTests.
        .library(name: "Samples", targets: ["Samples"]),
        .executable(name: "offline-store", targets: ["offline-store"]),
        .executable(name: "embedded-service", targets: ["embedded-service"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        // SyncService, a swift-service-lifecycle Service, and the store's swift-metrics (Hummingbird
        // builds on the same packages).
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // `serve --metrics`: the store's swift-metrics in Prometheus' text format.
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // `swift package generate-documentation --target OfflineStore` (the DocC catalog in Sources/OfflineStore).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]
        ),
        // The only module that imports CLMDB: environment, transactions, cursors, the writer thread.
        .target(name: "LMDB", dependencies: ["CLMDB"], swiftSettings: strict),
        // Crypto: the SHA-256 of every stored stream (swift-crypto is in the graph already, through
        // AsyncHTTPClient's swift-certificates).
        .target(name: "Storage", dependencies: ["LMDB", .product(name: "Crypto", package: "swift-crypto")],
                swiftSettings: strict),
        .target(name: "Query", dependencies: ["LMDB", "Storage", .product(name: "HeapModule", package: "swift-collections")],
                swiftSettings: strict),
        // The durable request queue: records, collapse, error archive, undo, local keys, compaction.
        .target(name: "Queue", dependencies: ["LMDB", "Storage", "Query"], swiftSettings: strict),
        // The served role's durable state: the change log and the repeatability records, with their check.
        .target(name: "Served", dependencies: ["LMDB", "Storage"], swiftSettings: strict),
        // Talking to a service: flush, refresh, membership, server ETags, the Backend protocol.
        .target(name: "Sync", dependencies: ["LMDB", "Storage", "Query", "Queue"], swiftSettings: strict),
        // multipart/mixed reading and writing (V2 $batch), shared by Remote and Server; depends on nothing.
        .target(name: "Multipart", swiftSettings: strict),
        .target(name: "Remote", dependencies: ["Queue", "Sync", "Storage", "Multipart",
                                              .product(name: "AsyncHTTPClient", package: "async-http-client")], swiftSettings: strict),
        .target(name: "OfflineStore", dependencies: ["LMDB", "Storage", "Query", "Queue", "Served", "Sync", "Remote",
                                                    .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                                                    .product(name: "Metrics", package: "swift-metrics"),
                                                    .product(name: "Logging", package: "swift-log")], swiftSettings: strict),
        .target(name: "Samples", dependencies: ["OfflineStore", "Storage"], swiftSettings: strict),
        .target(name: "Server", dependencies: [
            "OfflineStore", "LMDB", "Served", "Storage", "Query",
            // Multipart: a client's multipart $batch (the module Remote writes SAP's with).
            "Multipart",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Metrics", package: "swift-metrics"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ], swiftSettings: strict),
        // What the tool's verbs share: --store, error lines, input files, Output.
        .target(name: "CommandSupport", dependencies: [
            "OfflineStore", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ], swiftSettings: strict),
        // `crashtest` and its hidden workers: SIGKILL at random instants, then verify.
        .target(name: "CrashHarness", dependencies: [
            "CommandSupport", "OfflineStore", "Samples", "LMDB",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ], swiftSettings: strict),
        // `demo`: the whole offline story, through the public API and a plain HTTP client.
        .target(name: "Demo", dependencies: [
            "CommandSupport", "OfflineStore", "Samples", "Server", "Storage",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: strict),
        .executableTarget(
            name: "offline-store",
            dependencies: [
                "CommandSupport", "CrashHarness", "Demo",
                "OfflineStore", "Samples", "Server", "LMDB", "Storage",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strict
        ),
        // Examples/EmbeddedService: a Hummingbird service embedding the store, through the public product only.
        .executableTarget(
            name: "embedded-service",
            dependencies: [
                "OfflineStore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/EmbeddedService",
            exclude: ["README.md"],
            swiftSettings: strict
        ),
        // The inputs a hostile peer controls, for libFuzzer (scripts/fuzz.sh) and the corpus test.
        .target(name: "FuzzTargets", dependencies: ["OfflineStore", "Storage", "Query", "Samples", "Server"], path: "Fuzz/Targets", swiftSettings: strict),
        // libFuzzer's LLVMFuzzerRunDriver, declared for the driver (defined only in the fuzzing build's link).
        .target(name: "CLibFuzzer", path: "Fuzz/CLibFuzzer"),
        .executableTarget(name: "offline-store-fuzz", dependencies: ["FuzzTargets", "CLibFuzzer"], path: "Fuzz/Driver", swiftSettings: strict),
        .target(name: "TestSupport", path: "Tests/TestSupport", swiftSettings: strict),
        .testTarget(name: "StorageTests", dependencies: ["LMDB", "Storage", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "QueryTests", dependencies: ["LMDB", "Query", "Storage", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "OfflineStoreTests", dependencies: ["OfflineStore", "Samples", "Queue", "Served", "Server", "Sync", "Remote", "Multipart", "LMDB", "Storage", "Query", "CLMDB", "offline-store", "embedded-service", "TestSupport", "FuzzTargets",
                                                               .product(name: "AsyncHTTPClient", package: "async-http-client"),
                                                               .product(name: "ArgumentParser", package: "swift-argument-parser"),
                                                               .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                                                               .product(name: "MetricsTestKit", package: "swift-metrics"),
                                                               .product(name: "Crypto", package: "swift-crypto"),
                                                               .product(name: "Metrics", package: "swift-metrics"),
                                                               .product(name: "Logging", package: "swift-log")], exclude: ["Fixtures"],  // stores made by earlier builds (FormatFixtureTests reads them by path)
            swiftSettings: strict),
    ]
)
