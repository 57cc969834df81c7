import ArgumentParser
import CommandSupport
import Foundation
import OfflineStore

struct QueryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Answer an OData URL from the store: $filter, $orderby, $top, $skip, $select, $expand, $count.",
        discussion: """
            Example: offline-store query --store s "BusinessPartners?\\$filter=Country eq 'US'&\\$orderby=CompanyName&\\$top=20" --format table
            Example: offline-store query --store s --explain "SalesOrderItems?\\$filter=Quantity ge 5"
            """)
    @OptionGroup var options: StoreOption
    @Argument(help: "The request, e.g. 'BusinessPartners?$filter=Country eq '\\''US'\\''&$top=20'.") var url: String
    @Option(help: "json (OData V4), jsonl or table.") var format: String = "json"
    @Option(help: "Server-driven paging: at most this many entities, then an @odata.nextLink.") var pageSize: Int?
    @Flag(help: "Print the chosen plan instead of the result.") var explain = false

    func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store, readOnly: true)
            if explain {
                try output(try store.explain(url))
                return
            }
            guard let f = QueryFormat(rawValue: format) else {
                throw CLIError("unknown format '\(format)' (json, jsonl or table)")
            }
            try store.query(url, format: f, pageSize: pageSize, writeBytes: { chunk in try Output.write(chunk, to: 1) })
        }
    }
}
