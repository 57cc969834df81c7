import ArgumentParser
import CommandSupport
import Foundation
import OfflineStore
import Storage
import Synchronization

struct Define: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add a defining request (a named read URL whose results refresh keeps), or give one a new URL.",
        discussion: """
            The URL reads a whole entity set with $filter, $select and $expand. On an open store, no \
            re-creation.
            Example: offline-store define --store s US_Partners "BusinessPartners?\\$filter=Country eq 'US'&\\$expand=SalesOrders"
            """)
    @OptionGroup var options: StoreOption
    @Argument(help: "The name: 1 to 128 letters, digits, '_', '-', '.'.") var name: String
    @Argument(help: "The read URL, relative to the service root.") var url: String
    @Flag(
        help:
            "A refresh also downloads the streams (media, Edm.Stream properties) of what it reads: new and changed ones."
    )
    var retrieveStreams = false

    func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store)
            let existed = store.definingRequests.first { $0.name == name }
            try store.define(name: name, url: url, retrieveStreams: retrieveStreams)
            // The sets the request reads whose creates may be applied twice.
            let read = url.prefix { $0 != "?" && $0 != "(" && $0 != "/" }
            if let warning = OfflineStore.createMarkerWarning(store.setsWithoutCreateMarker.filter { $0 == read }) {
                Output.note("offline-store: warning: " + Output.sanitized(warning, limit: 2_000) + "\n")
            }
            if let warning = OfflineStore.concurrencyWarning(store.setsWithoutConcurrencyControl.filter { $0 == read })
            {
                Output.note("offline-store: warning: " + Output.sanitized(warning, limit: 2_000) + "\n")
            }
            try output(
                existed == nil
                    ? "defined \(name)"
                    : existed?.url == url && existed?.retrieveStreams == retrieveStreams
                        ? "\(name) is already defined so" : "redefined \(name)")
        }
    }
}

struct Undefine: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove a defining request; entities only it held are deleted (not ones with pending local changes).",
        discussion: "Example: offline-store undefine --store s US_Partners")
    @OptionGroup var options: StoreOption
    @Argument(help: "The name.") var name: String

    func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store)
            let removed = try store.undefine(name: name)
            try output("undefined \(name): \(removed) entities removed")
        }
    }
}

struct Refresh: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Refresh the store from the service: run the defining requests, rebase and compact the request queue.",
        discussion: """
            Reads each defining request in pages (through its delta link when it has one), writes each page \
            in its own transaction and prints one line of summary with the time it took. Progress on \
            stderr: entities and pages received (of the service's count, once it has given it for \
            each request), the rate, the time elapsed and left.
            Example: offline-store refresh --store s --service http://127.0.0.1:8080/ --subset US_Partners
            """)
    @OptionGroup var options: StoreOption
    @Option(help: "The service root (default: the configuration's serviceRoot).") var service: String?
    @Option(help: "Only these defining requests, comma-separated.") var subset: String?
    @Option(help: "Entities per page asked of the service (Prefer: odata.maxpagesize; default 1000).") var pageSize:
        Int?
    @Option(name: .customLong("header"), help: "A header sent with every request, 'Name: value' (repeatable).")
    var headers: [String] = []
    @Flag(
        help:
            "Refresh nothing: read the service's $metadata and say whether (and how) it differs from the store's; exit 1 when it does."
    )
    var checkMetadata = false
    @Option(help: "With --check-metadata: write the service's $metadata to this file (for 'offline-store migrate').")
    var saveMetadata: String?

    func run() throws {
        try runReportingErrors { try redactingSecrets(checkMetadata ? metadataCheck : refresh) }
    }

    /// `--check-metadata`: the service's `$metadata` against the store's.
    func metadataCheck() throws {
        if subset != nil || pageSize != nil {
            throw CLIError("--check-metadata refreshes nothing: leave out --subset and --page-size")
        }
        if let service { try ServiceURL.check(service, option: "--service") }
        var hs: [(String, String)] = []
        for h in headers { hs.append(try FlushCommand.header(h)) }
        let store = try OfflineStore.open(at: options.store, readOnly: true)
        let (service, sendHeaders) = (self.service, hs)
        let found = Mutex<MetadataCheck?>(nil)
        try blocking {
            let c = try await store.checkMetadata(serviceRoot: service, headers: sendHeaders)
            found.withLock { $0 = c }
        }
        guard let check = found.withLock({ $0 }) else { return }
        if let saveMetadata {
            guard FileManager.default.createFile(atPath: saveMetadata, contents: Data(check.metadata)) else {
                throw CLIError("cannot write \(saveMetadata)")
            }
        }
        try output(check.description)
        if check.changed {
            let file = saveMetadata ?? "FILE"
            Output.note(
                "offline-store: to follow it: \(saveMetadata == nil ? "refresh --check-metadata --save-metadata FILE, then " : "")offline-store migrate --store \(options.store) --metadata \(file)\n"
            )
            throw ExitCode.failure
        }
    }

    /// Progress of the `requests` defining requests on `progress`: entities received and pages in
    /// all, and the request being read. Once every request has given the service's count of its
    /// collection (a full read asks on its first page), done and total are of top-level entities.
    static func progressLine(_ progress: ProgressReporter, requests: Int) -> @Sendable (RefreshProgress) -> Void {
        struct Seen { var received = 0, pages = 0, topLevel: Int?, expected: Int? }
        let seen = Mutex<[String: Seen]>([:])
        return { p in
            let all = seen.withLock { seen -> [Seen] in
                var s = seen[p.request] ?? Seen()
                (s.received, s.pages) = (p.received, p.pages)
                if let t = p.topLevel { (s.topLevel, s.expected) = (t, p.expected) }
                seen[p.request] = s
                return Array(seen.values)
            }
            let pages = all.reduce(0) { $0 + $1.pages }
            let detail = "\(pages) page\(pages == 1 ? "" : "s"); \(p.request): \(p.mode.rawValue)"
            if all.count == requests, all.allSatisfy({ $0.topLevel != nil && $0.expected != nil }) {
                progress.update(
                    done: all.reduce(0) { $0 + $1.topLevel! }, total: all.reduce(0) { $0 + $1.expected! },
                    detail: detail)
            } else {
                progress.update(done: all.reduce(0) { $0 + $1.received }, detail: detail)
            }
        }
    }

    func refresh() throws {
        if let pageSize, pageSize < 1 { throw CLIError("--page-size must be at least 1") }
        if let service { try ServiceURL.check(service, option: "--service") }
        var hs: [(String, String)] = []
        for h in headers { hs.append(try FlushCommand.header(h)) }  // checked as flush checks them
        let names: [String]? = subset.map { text in
            text.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        let store = try OfflineStore.open(at: options.store)
        let progress = try ProgressReporter("refresh", unit: "entities")
        let onProgress = Self.progressLine(progress, requests: names?.count ?? store.definingRequests.count)
        let (service, pageSize, sendHeaders) = (self.service, self.pageSize, hs)
        let report = Mutex<RefreshReport?>(nil)
        defer { progress.finish() }
        try blocking {
            let r = try await store.refresh(
                serviceRoot: service, subset: names, headers: sendHeaders, pageSize: pageSize, progress: onProgress)
            report.withLock { $0 = r }
        }
        progress.finish()
        guard let r = report.withLock({ $0 }) else { return }
        try output("\(r.description), in \(progress.elapsedText)")
        if r.skippedProperties > 0 {
            Output.note(
                "offline-store: warning: the service sent \(r.skippedProperties) values of properties this store's $metadata does not declare: its $metadata may have changed; 'offline-store refresh --store \(options.store) --check-metadata' compares them\n"
            )
        }
    }
}
