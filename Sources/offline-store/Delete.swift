import ArgumentParser
import CommandSupport
import OfflineStore

struct Delete: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete an entity offline and queue the request.",
        discussion: "Example: offline-store delete --store s \"Products('HT-9')\" --tag cleanup")
    @OptionGroup var options: StoreOption
    @Argument(help: "The entity: Products('HT-1000').") var entity: String
    @OptionGroup var change: ChangeFlags

    func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store)
            let (set, key) = try store.parseEntityPath(entity)
            try output(describe(try store.delete(set: set, key: key, options: change.options), store: store, set: set))
        }
    }
}
