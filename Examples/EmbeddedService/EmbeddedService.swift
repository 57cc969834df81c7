import UnixSignals
import ArgumentParser
import Foundation
import Hummingbird
import Logging
import OfflineStore

/// A small HTTP service that embeds an offline store: it answers reads from the local copy and
/// queues writes, while a background task refreshes the copy from the OData service and flushes
/// the queue to it. Only the public API (`import OfflineStore`) is used: this is what a program
/// embedding the store writes.
@main
struct EmbeddedService: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "embedded-service",
        abstract: "Serves products from an offline store while a background task refreshes and flushes it.",
        discussion: """
            Opens the store in --store, or creates it from --metadata (with a defining request \
            "Products" reading the service's Products) when the directory is missing or empty. \
            Prints one line, "embedded-service at http://HOST:PORT/", once it listens. Stops on \
            SIGINT or SIGTERM, or after --lifetime seconds: the sync loop is cancelled (the store \
            stays consistent) and the requests in flight finish.
            Example: embedded-service --store s --metadata metadata.xml --service http://127.0.0.1:8080/ --interval 10
            """)

    @Option(help: "The offline store's directory.") var store: String
    @Option(help: "A $metadata file: creates the store when --store is missing or empty.") var metadata: String?
    @Option(help: "The OData service to refresh from and flush to (default: the store's configured serviceRoot).")
    var service: String?
    @Option(help: "Seconds between background rounds (refresh, then flush).") var interval: Double = 30
    @Option(help: "The address to bind (loopback by default).") var host = "127.0.0.1"
    @Option(help: "The port (0: a free one).") var port = 8080
    @Option(help: "Stop (as on SIGTERM) after this many seconds.") var lifetime: Double?
    @Option(help: "trace, debug, info, notice, warning, error or critical.") var logLevel = "info"

    func validate() throws {
        guard interval > 0 else { throw ValidationError("--interval must be a positive number of seconds") }
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0…65535") }
        if let lifetime, !(lifetime > 0) { throw ValidationError("--lifetime must be a positive number of seconds") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown log level '\(logLevel)'") }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in  // logs on stderr; stdout has the URL line
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "embedded-service")
        let store = try openOrCreate()
        guard service ?? store.configuration.serviceRoot != nil else {
            throw ValidationError("no --service and the store has no serviceRoot")
        }
        let products = try store.collection(Product.self, set: "Products")  // a type not fitting the schema throws here
        let prices = try store.collection(ProductPrice.self, set: "Products")
        // The library's sync loop: refresh then flush every --interval, longer waits while the
        // service is away, a clean stop on SIGTERM (the application's service group).
        let sync = SyncService(store: store, serviceRoot: service, interval: .seconds(interval), logger: logger)

        let router = Router()
        Routes(store: store, products: products, prices: prices, sync: sync).add(to: router)
        let (host, port) = (self.host, self.port)
        var app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "embedded-service"),
            onServerRunning: { channel in
                let url = "http://\(host):\(channel.localAddress?.port ?? port)/"
                FileHandle.standardOutput.write(Data("embedded-service at \(url)\n".utf8))
            },
            logger: logger)
        app.addServices(sync)
        if let lifetime {
            // Stopping by signal takes the same path as a SIGTERM from outside: a graceful shutdown.
            Task {
                try await Task.sleep(for: .seconds(lifetime)); kill(getpid(), SIGTERM)
            }
        }
        try await app.runService(gracefulShutdownSignals: [.sigterm, .sigint])
        logger.info("stopped", metadata: ["rounds": "\(sync.status.rounds)"])
    }

    /// Opens the store, or creates it from `--metadata` when its directory is missing or empty.
    func openOrCreate() throws -> OfflineStore {
        let contents = (try? FileManager.default.contentsOfDirectory(atPath: store)) ?? []
        guard contents.isEmpty else { return try OfflineStore.open(at: store) }
        guard let metadata else { throw ValidationError("\(store) holds no store: give --metadata to create one") }
        guard let bytes = FileManager.default.contents(atPath: metadata) else {
            throw ValidationError("cannot read \(metadata)")
        }
        var configuration = StoreConfiguration()
        configuration.serviceRoot = service
        configuration.definingRequests = [DefiningRequest(name: "Products", url: "Products")]
        return try OfflineStore.create(at: store, metadata: Array(bytes), configuration: configuration)
    }
}

/// A product as this service shows it: a `Codable` type over the `Products` entity set.
struct Product: Codable, Sendable {
    var ProductID: String
    var Name: String?
    var Category: String?
    var Price: Decimal?
    var CurrencyCode: String?
}

/// Only the key and the price: `update` with it queues a PATCH of the price alone.
struct ProductPrice: Codable, Sendable {
    var ProductID: String
    var Price: Decimal?
}
