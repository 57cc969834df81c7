import ArgumentParser
import CommandSupport
import OfflineStore

struct QueueCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queue", abstract: "Print the request queue (the RequestQueue set) as OData JSON, oldest first.",
        discussion: """
            Filter it like any set: offline-store query --store s "RequestQueue?\\$filter=CustomTag eq 'x'"
            Example: offline-store queue --store s
            """)
    @OptionGroup var options: StoreOption

    func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store, readOnly: true)
            try store.query("RequestQueue?$orderby=RequestID", writeBytes: { try Output.write($0, to: 1) })
            try output("")
        }
    }
}

struct Errors: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the ErrorArchive (requests the service refused) as OData JSON, or resolve entries.",
        discussion:
            "Resolving gives the change up: the request and those that depend on it leave the queue and the entities get the service's image back.\nExample: offline-store errors --store s --resolve 12"
    )
    @OptionGroup var options: StoreOption
    @Option(help: "Resolve the entry of this request id.") var resolve: Int64?
    @Flag(help: "Resolve every entry.") var resolveAll = false

    func run() throws {
        try runReportingErrors {
            if resolve != nil || resolveAll {
                let store = try OfflineStore.open(at: options.store)
                let dropped = try resolveAll ? store.resolveAllErrors() : store.resolveError(requestID: resolve!)
                try output("dropped requests \(dropped.map(String.init).joined(separator: ", "))")
                return
            }
            let store = try OfflineStore.open(at: options.store, readOnly: true)
            try store.query("ErrorArchive?$orderby=RequestID", writeBytes: { try Output.write($0, to: 1) })
            try output("")
        }
    }
}

struct Undo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Drop an entity's pending changes and restore it as the service last sent it.",
        discussion: "Example: offline-store undo --store s \"Products('HT-9')\"")
    @OptionGroup var options: StoreOption
    @Argument(help: "The entity: Products('HT-1000').") var entity: String

    func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store)
            let (set, key) = try store.parseEntityPath(entity)
            let dropped = try store.undo(set: set, key: key)
            try output(
                dropped.isEmpty
                    ? "\(entity) has no pending changes"
                    : "dropped requests \(dropped.map(String.init).joined(separator: ", "))")
        }
    }
}
