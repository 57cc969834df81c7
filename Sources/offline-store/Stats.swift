import ArgumentParser
import OfflineStore

struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Entity sets, counts, indexes and file size.")
    @OptionGroup var options: StoreOption

    func run() throws {
        try runReportingErrors {
            let stats = try OfflineStore.open(at: options.store).stats()
            for s in stats.sets {
                output("\(s.name): \(s.entities) entities")
                for i in s.indexes { output("  index \(i.name)\(i.automatic ? " (foreign key)" : ""): \(i.entries) entries") }
            }
            output("file: \(stats.fileSize) bytes, map: \(stats.mapSize) bytes")
        }
    }
}
