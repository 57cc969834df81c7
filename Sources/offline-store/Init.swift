import ArgumentParser
import OfflineStore

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create a store from a $metadata document.",
        discussion: "Example: offline-store init --store s --metadata metadata.xml --config config.json")
    @OptionGroup var options: StoreOption
    @Option(help: "The service's CSDL $metadata document (V2 EDMX or V4).") var metadata: String
    @Option(help: "A JSON configuration: serviceRoot, definingRequests, indexes, durability.") var config: String?

    func run() throws {
        try runReportingErrors {
            var configuration = StoreConfiguration()
            if let config { configuration = try StoreConfiguration(json: try readFile(config)) }
            let store = try OfflineStore.create(at: options.store, metadata: try readFile(metadata), configuration: configuration)
            try output("created \(options.store): \(store.schema.serviceSetNames.count) entity sets")
        }
    }
}
