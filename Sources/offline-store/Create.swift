import Foundation
import ArgumentParser
import CommandSupport
import OfflineStore

struct Create: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create an entity offline: it is stored and its request queued, in one durable transaction.",
        discussion:
            "Example: offline-store create --store s Products '{\"ProductID\":\"HT-9\",\"Name\":\"Pen\"}' --tag new-pen"
    )
    @OptionGroup var options: StoreOption
    @Argument(help: "The entity set.") var set: String
    @Argument(
        help:
            "The entity as an OData JSON object (or - to read it from standard input). Related entities inline (\"Items\": [{…}]) make a deep insert: created together, sent as one POST."
    ) var json: String
    @OptionGroup var change: ChangeFlags

    func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store)
            let entity = try store.newEntity(set: set, json: try jsonArgument(json))
            if entity.related.isEmpty {
                let receipt = try store.create(set: set, entity: entity.properties, options: change.options)
                try output(describe(receipt, store: store, set: set))
            } else {
                let receipts = try store.create(set: set, deep: entity, options: change.options)
                let ids = receipts.compactMap(\.requestID).map(String.init).joined(separator: ", ")
                try output("requests \(ids) queued (a deep insert of \(receipts.count) entities)")
            }
        }
    }
}

/// `--tag`, `--header`, `--transaction`, `--category`, `--non-mergeable`: what a change carries.
struct ChangeFlags: ParsableArguments {
    @Option(help: "A custom tag kept with the request.") var tag: String?
    @Option(help: "A header sent with the request, as Name:Value (repeatable).") var header: [String] = []
    @Option(help: "A transaction id: requests with the same one go to the service as one change set.") var transaction:
        String?
    @Option(help: "An upload category: flush can be limited to one.") var category: String?
    @Flag(help: "Never merge this request with another.") var nonMergeable = false

    var options: ChangeOptions {
        get throws {
            var headers: [String: String] = [:]
            for h in header {
                guard let colon = h.firstIndex(of: ":"), colon != h.startIndex else {
                    throw CLIError("--header must be Name:Value, got '\(h)'")
                }
                headers[String(h[..<colon])] = String(h[h.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
            }
            return ChangeOptions(
                customTag: tag, customHeaders: headers, transactionID: transaction, uploadCategory: category,
                nonMergeable: nonMergeable)
        }
    }
}

/// A JSON argument's bytes: the text itself, or standard input for `-`.
func jsonArgument(_ text: String) throws -> [UInt8] {
    text == "-" ? try readFile("-") : Array(text.utf8)
}

/// One line saying which request now carries the change.
func describe(_ receipt: OfflineStore.ChangeReceipt, store: OfflineStore, set: String) throws -> String {
    guard let id = receipt.requestID else { return "queued nothing: the change cancelled a pending create" }
    return "request \(id) queued"
}
