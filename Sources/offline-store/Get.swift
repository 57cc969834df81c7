import ArgumentParser
import CommandSupport
import OfflineStore

struct Get: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print one entity as OData JSON: 'Set(key)'.",
        discussion:
            "Example: offline-store get --store s \"SalesOrderItems(SalesOrderID='0500000001',ItemPosition=10)\"")
    @OptionGroup var options: StoreOption
    @Argument(help: "The entity: Products('HT-1000') or SalesOrderItems(SalesOrderID='05',ItemPosition=10).")
    var entity: String

    func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store, readOnly: true)
            let (set, key) = try store.parseEntityPath(entity)
            guard let e = try store.get(set: set, key: key) else { throw CLIError("\(entity) does not exist") }
            try output(try store.json(set: set, entity: e))
        }
    }
}
