import ArgumentParser
import CommandSupport
import OfflineStore

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create a store from a $metadata document.",
        discussion: "Example: offline-store init --store s --metadata metadata.xml --config config.json")
    @OptionGroup var options: StoreOption
    @Option(help: "The service's CSDL $metadata document (V2 EDMX or V4).") var metadata: String
    @Option(help: "A JSON configuration: serviceRoot, definingRequests, indexes, durability.") var config: String?
    @Option(help: "The store's size cap: bytes, or with K, M or G (KiB, MiB, GiB); sets maxSizeBytes.") var maxSize:
        String?

    func run() throws {
        try runReportingErrors {
            var configuration = StoreConfiguration()
            if let config { configuration = try StoreConfiguration(json: try readFile(config)) }
            if let maxSize { configuration.maxSizeBytes = try parseSize(maxSize, zeroAllowed: false) }
            let store = try OfflineStore.create(
                at: options.store, metadata: try readFile(metadata), configuration: configuration)
            try output("created \(options.store): \(store.schema.serviceSetNames.count) entity sets")
        }
    }
}

/// `--max-size`: bytes, or a number with K, M or G (KiB, MiB, GiB); 0 (no cap) where `zeroAllowed`.
func parseSize(_ text: String, zeroAllowed: Bool) throws -> Int {
    let units: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
    let unit = text.last.flatMap { units[Character($0.uppercased())] }
    let digits = unit == nil ? Substring(text) : text.dropLast()
    guard let n = Int(digits), n >= 0, case let (bytes, overflow) = n.multipliedReportingOverflow(by: unit ?? 1),
        !overflow,
        (bytes == 0 && zeroAllowed) || StoreConfiguration.maxSizeRange.contains(bytes)
    else {
        throw CLIError(
            "--max-size must be a size from 256K to 65536G (bytes, or a number with K, M or G)\(zeroAllowed ? ", or 0 to lift the cap" : ""), not '\(text)'"
        )
    }
    return bytes
}
