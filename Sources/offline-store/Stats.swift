import ArgumentParser
import CommandSupport
import OfflineStore

struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Entity sets, counts, indexes and file size.",
        discussion: "Example: offline-store stats --store s")
    @OptionGroup var options: StoreOption

    func run() throws {
        try runReportingErrors {
            let stats = try OfflineStore.open(at: options.store, readOnly: true).stats()
            for s in stats.sets {
                try output("\(s.name): \(s.entities) entities")
                for i in s.indexes {
                    try output("  index \(i.name)\(i.automatic ? " (foreign key)" : ""): \(i.entries) entries")
                }
            }
            try output("file: \(stats.fileSize) bytes, map: \(stats.mapSize) bytes")
        }
    }
}
