import ArgumentParser
import CommandSupport
import OfflineStore

struct Update: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Change an entity offline (PATCH merge, or PUT replace with --replace) and queue the request.",
        discussion: "Example: offline-store update --store s \"Products('HT-9')\" '{\"Price\":12.50}' --tag reprice")
    @OptionGroup var options: StoreOption
    @Argument(help: "The entity: Products('HT-1000') or SalesOrderItems(SalesOrderID='05',ItemPosition=10).")
    var entity: String
    @Argument(
        help: "The changes (or, with --replace, the whole entity) as an OData JSON object, or - for standard input.")
    var json: String
    @Flag(help: "Replace the entity (PUT): properties left out become null.") var replace = false
    @OptionGroup var change: ChangeFlags

    func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store)
            let (set, key) = try store.parseEntityPath(entity)
            let props = try store.properties(set: set, json: try jsonArgument(json))
            let receipt =
                replace
                ? try store.replace(set: set, key: key, entity: props, options: change.options)
                : try store.update(set: set, key: key, changes: props, options: change.options)
            try output(describe(receipt, store: store, set: set))
        }
    }
}
