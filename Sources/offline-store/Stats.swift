import ArgumentParser
import CommandSupport
import OfflineStore

struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Entity sets, counts, indexes, the service's operations and file size.",
        discussion: "Example: offline-store stats --store s")
    @OptionGroup var options: StoreOption

    func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store, readOnly: true)
            let stats = try store.stats()
            for s in stats.sets {
                try output("\(s.name): \(s.entities) entities")
                for i in s.indexes {
                    try output("  index \(i.name)\(i.automatic ? " (foreign key)" : ""): \(i.entries) entries")
                }
            }
            // What the $metadata offers besides the sets (called through the service, not stored).
            for op in store.schema.operations { try output("operation \(op.signature), \(op.httpMethod)") }
            try output("file: \(stats.fileSize) bytes, map: \(stats.mapSize) bytes")
        }
    }
}
