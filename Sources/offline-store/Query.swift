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
            Example: offline-store query --store s --page-size 100 --all-pages "SalesOrders?\\$expand=Items" --format jsonl

            Without --page-size the whole answer is written, one valid document in any format: where
            its expansions would pass limits.maxExpandedEntities it is read in pages (the engine's
            next links) and joined. With --page-size one page is written; its next link is in the JSON
            (@odata.nextLink) and, for every format, on stderr; --all-pages follows the links and
            writes every page as one answer.
            """)
    @OptionGroup var options: StoreOption
    @Argument(help: "The request, e.g. 'BusinessPartners?$filter=Country eq '\\''US'\\''&$top=20'.") var url: String
    @Option(help: "json (OData V4), jsonl or table.") var format: String = "json"
    @Option(help: "Server-driven paging: at most this many entities, then an @odata.nextLink.") var pageSize: Int?
    @Flag(help: "Follow next links: every page of --page-size as one answer.") var allPages = false
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
            try Self.write(store, url, format: f, pageSize: pageSize, allPages: allPages || pageSize == nil)
        }
    }

    /// Writes the answer to `url` to stdout through `QueryOutput`: one page of `pageSize`, or,
    /// when `allPages`, every page joined. Without a page size the engine still pages where an
    /// answer's expansions would pass `limits.maxExpandedEntities` (a page ends before the entity
    /// that would pass them), so a large `$expand` is one valid document, never JSON cut by an
    /// error; a failure part-way ends the output validly, with the error.
    static func write(
        _ store: OfflineStore, _ url: String, format: QueryFormat, pageSize: Int?, allPages: Bool
    )
        throws
    {
        var output = QueryOutput(format: format) { bytes in try bytes.withUnsafeBytes { try Output.write($0, to: 1) } }
        var next: String? = url
        var page = 0
        do {
            while let current = next {
                output.begin(page: page)
                let summary = try store.query(
                    current, format: format, pageSize: pageSize ?? Int.max, writeBytes: { try output.feed($0) })
                next = summary.nextLink
                page += 1
                guard allPages else { break }
            }
        } catch {
            try output.fail(Output.sanitized("\(error)", limit: 2_000))
            throw error
        }
        if let link = next {
            Output.note("next page: \(Output.sanitized(link, limit: 2_000)) (--all-pages follows next links)\n")
        }
        try output.end()
    }
}
