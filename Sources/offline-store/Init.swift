import ArgumentParser
import CommandSupport
import OfflineStore

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create a store from a $metadata document.",
        discussion: """
            --config takes this store's JSON configuration, or SAP's offline application configuration file \
            (.ini: [endpoint] and [defining_request] sections); keys the store handles differently or not at all \
            are printed as warnings on stderr.
            Example: offline-store init --store s --metadata metadata.xml --config config.json
            """)
    @OptionGroup var options: StoreOption
    @Option(help: "The service's CSDL $metadata document (V2 EDMX or V4).") var metadata: String
    @Option(
        help:
            "A configuration file: JSON (serviceRoot, definingRequests, indexes, durability) or SAP's application configuration file (.ini)."
    ) var config: String?
    @Option(help: "With an .ini holding several [endpoint] sections: the one to use, by name (default: the first).")
    var endpoint: String?
    @Option(help: "The store's size cap: bytes, or with K, M or G (KiB, MiB, GiB); sets maxSizeBytes.") var maxSize:
        String?

    func run() throws {
        try runReportingErrors {
            var configuration = StoreConfiguration()
            let metadataBytes = try readFile(metadata)
            if let config {
                let bytes = try readFile(config)
                if StoreConfiguration.isINI(path: config, bytes: bytes) {
                    do {
                        let read = try StoreConfiguration.readINI(bytes, metadata: metadataBytes, endpoint: endpoint)
                        configuration = read.configuration
                        for w in read.warnings {
                            Output.note(
                                "offline-store: warning: " + Output.sanitized("\(config) \(w)", limit: 2_000) + "\n")
                        }
                    } catch let e as StoreConfiguration.INIError {
                        throw CLIError("\(config)\(e.line > 0 ? " line \(e.line)" : ""): \(e.message)")
                    }
                } else {
                    if endpoint != nil { throw CLIError("--endpoint is for an .ini configuration") }
                    configuration = try StoreConfiguration(json: bytes)
                }
            } else if endpoint != nil {
                throw CLIError("--endpoint is for an .ini configuration")
            }
            if let maxSize { configuration.maxSizeBytes = try parseSize(maxSize, zeroAllowed: false) }
            let store = try OfflineStore.create(
                at: options.store, metadata: metadataBytes, configuration: configuration)
            if let warning = OfflineStore.createMarkerWarning(store.setsWithoutCreateMarker) {
                Output.note("offline-store: warning: " + Output.sanitized(warning, limit: 2_000) + "\n")
            }
            if let warning = OfflineStore.concurrencyWarning(store.setsWithoutConcurrencyControl) {
                Output.note("offline-store: warning: " + Output.sanitized(warning, limit: 2_000) + "\n")
            }
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
