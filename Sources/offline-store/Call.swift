import ArgumentParser
import CommandSupport
import OfflineStore
import Synchronization

struct Call: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Call a service operation offline: queue an action, or answer a function mapped to a local query.",
        discussion: """
            An action (V4 Action, V2 function import called with POST) is queued in order with the \
            changes before and after it; flush calls it. A function (V4 Function, V2 GET import) is \
            answered from the store when the configuration's localFunctions maps it.
            Example: offline-store call --store s Lib.Renew '{"Days":30}' --on "Books(1)"
            """)
    @OptionGroup var options: StoreOption
    @Argument(help: "The operation: its name as $metadata has it (Lib.Renew, ReleaseSalesOrder).") var operation: String
    @Argument(help: "The parameters as an OData JSON object, or - for standard input.") var json: String = "{}"
    @Option(help: "The entity a bound operation is called on: Books(1).") var on: String?
    @Flag(help: "Send a function to the service now and print its answer (it needs the service).") var online = false
    @OptionGroup var change: ChangeFlags

    func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store)
            let binding = try on.map { try store.parseEntityPath($0) }
            let parameters = try store.operationParameters(operation, on: binding?.set, json: try jsonArgument(json))
            if online {
                let answer = Mutex<String>("")
                let (operation, set, key) = (operation, binding?.set, binding?.key)
                try blocking {
                    let text = try await store.callOnline(operation, on: set, key: key, parameters: parameters)
                    answer.withLock { $0 = text }
                }
                try output(answer.withLock { $0 })
                return
            }
            switch try store.call(
                operation, on: binding?.set, key: binding?.key, parameters: parameters, options: change.options)
            {
            case .queued(let id):
                try output("request \(id) queued: \(operation)\(on.map { " on \($0)" } ?? "")")
            case .answered(let set, let entities):
                // The answer's entities, one OData JSON object a line, as the local query gave them.
                for e in entities { try output(try store.json(set: set, entity: e)) }
            }
        }
    }
}
