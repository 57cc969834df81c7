import Foundation
import ArgumentParser
import CommandSupport
import OfflineStore
import Storage

struct QueueCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queue", abstract: "Print the request queue (the RequestQueue set) as OData JSON, oldest first.",
        discussion: """
            With --history, the outcome record instead (the RequestHistory set): what became of each request that \
            left the queue or was refused — applied, found applied, in doubt, refused, given up, undone, cancelled, \
            merged — with the key the service gave, its status, ETag and message, newest first (the configuration's \
            requestHistory bounds how many are kept: 10,000).
            Filter them like any set: offline-store query --store s "RequestQueue?\\$filter=CustomTag eq 'x'"
            offline-store query --store s "RequestHistory?\\$filter=Outcome eq 'in doubt'"
            Example: offline-store queue --store s --history
            """)
    @OptionGroup var options: StoreOption
    @Flag(help: "Print the outcome record (RequestHistory), newest first.") var history = false

    func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store, readOnly: true)
            let url = history ? "RequestHistory?$orderby=RequestID desc" : "RequestQueue?$orderby=RequestID"
            try store.query(url, writeBytes: { try Output.write($0, to: 1) })
            try output("")
        }
    }
}

struct Errors: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the ErrorArchive (requests the service refused) as OData JSON, retry or resolve entries.",
        discussion: """
            Retrying sends the refused request again, unchanged, with those that waited for it (the next flush sends them).
            Resolving gives the change up: the request and those that depend on it leave the queue and the entities get the service's image back.
            To fix the data and send it again, change the entity (update): the change merges into the refused request.
            A conflict (412: the entity changed on the service first) keeps the service's version: --show prints the
            three side by side; retrying keeps yours, resolving takes theirs, an update merges — each against the service's version.
            Example: offline-store errors --store s --retry 12
            """)
    @OptionGroup var options: StoreOption
    @Option(help: "Resolve the entry of this request id.") var resolve: Int64?
    @Flag(help: "Resolve every entry.") var resolveAll = false
    @Option(help: "Send the request of this id again, unchanged, on the next flush.") var retry: Int64?
    @Option(help: "Show the entry of this request id; a conflict's three versions side by side.") var show: Int64?

    func run() throws {
        try runReportingErrors {
            if let show {
                guard retry == nil, resolve == nil, !resolveAll else { throw CLIError("give --show alone") }
                let store = try OfflineStore.open(at: options.store, readOnly: true)
                try output(try Self.describe(show, store: store))
                return
            }
            if let retry {
                guard resolve == nil, !resolveAll else { throw CLIError("give --retry or --resolve, not both") }
                let store = try OfflineStore.open(at: options.store)
                let revived = try store.retryError(requestID: retry)
                try output("pending again: requests \(revived.map(String.init).joined(separator: ", "))")
                return
            }
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

extension Errors {
    /// ErrorArchive entry `id` for a person: the request, the service's answer and, for a
    /// conflict, each property's three versions (base, mine, theirs), differences marked `*`.
    static func describe(_ id: Int64, store: OfflineStore) throws -> String {
        guard let row = try store.get(set: "ErrorArchive", key: [.int(id)]) else {
            throw CLIError("the ErrorArchive has no entry for request \(id)")
        }
        func text(_ name: String) -> String {
            switch row[name] {
            case .string(let s)?: s
            case .int(let i)?: String(i)
            default: ""
            }
        }
        var lines = [
            "request \(id): \(text("RequestMethod")) \(text("RequestURL"))",
            "refused: \(text("HTTPStatusCode")) \(text("Code")) \(text("Message"))",
        ]
        if !text("CausedBy").isEmpty { lines.append("caused by request \(text("CausedBy"))") }
        guard let c = try store.conflict(requestID: id) else { return lines.joined(separator: "\n") }
        lines.append(
            c.server == nil
                ? "a conflict: the entity is gone from the service"
                : "a conflict: the entity changed on the service (ETag \(c.serverETag ?? "none"))")
        let set = try store.entities.set(c.entitySet)
        func show(_ v: Value?) -> String {
            guard let v, !v.isNull else { return "null" }
            if case .string(let s) = v { return s }
            return EntitySetHandle.literal(v)
        }
        var rows = [("", "base", "mine", "theirs")]
        for p in set.type.properties {
            let marked = c.differences.contains(p.name) ? "* " : "  "
            rows.append((marked + p.name, show(c.base?[p.name]), show(c.local?[p.name]), show(c.server?[p.name])))
        }
        let w = (0..<3).map { i in
            rows.map { r in [r.0, r.1, r.2][i].count }.max() ?? 0
        }
        for r in rows {
            lines.append(
                [
                    r.0.padding(toLength: w[0], withPad: " ", startingAt: 0),
                    String(r.1.prefix(40)).padding(toLength: min(w[1], 40), withPad: " ", startingAt: 0),
                    String(r.2.prefix(40)).padding(toLength: min(w[2], 40), withPad: " ", startingAt: 0),
                    String(r.3.prefix(40)),
                ].joined(separator: "  "))
        }
        lines.append(
            "keep mine: offline-store errors --retry \(id); take theirs: --resolve \(id); merge: offline-store update, then flush"
        )
        return lines.joined(separator: "\n")
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
