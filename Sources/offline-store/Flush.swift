import ArgumentParser
import CommandSupport
import Foundation
import OfflineStore
import Storage
import Synchronization

struct FlushCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "flush",
        abstract: "Upload the request queue to the service, in $batch round trips, and print a one-line summary.",
        discussion: """
            Sends the pending requests in request-id order (only those of --category if given), each with its \
            Repeatability-Request-ID, If-Match from the ETag the store holds, and its custom headers; applies \
            each answer (new keys, ETags); moves refused requests (4xx) and their dependents to the ErrorArchive. \
            A 5xx or a lost connection stops it with the queue intact: run it again.
            Exit status: 0 when the flush ran to the end and nothing was refused; 1 when it stopped (5xx, no \
            answer) or requests were archived ('offline-store errors' lists them), or on an error. \
            Progress on stderr: requests sent of those queued, the rate, the time elapsed and left.
            Example: offline-store flush --store s --service http://127.0.0.1:8080/ --header 'Authorization: Basic dXNlcjpwdw=='
            """)
    @OptionGroup var options: StoreOption
    @Option(help: "The service root URL (default: serviceRoot of the store's configuration).") var service: String?
    @Option(help: "Only the requests of this upload category.") var category: String?
    @Option(help: "Requests per $batch round trip.") var batchSize = 50
    @Option(name: .customLong("header"), help: "A header for every request, 'Name: value' (repeatable).") var headers:
        [String] = []
    @Flag(help: .hidden) var noReconcile = false

    func run() throws {
        try runReportingErrors { try redactingSecrets(flush) }
    }

    private func flush() throws {
        let parsed = try headers.map(Self.header)
        guard batchSize >= 1 else { throw CLIError("--batch-size must be at least 1") }
        if let service { try ServiceURL.check(service, option: "--service") }
        let store = try OfflineStore.open(at: options.store)
        let (service, category, batchSize, reconcile) = (service, category, batchSize, !noReconcile)
        // The whole queue when no category is given: what a flush that runs to the end sends.
        let total = category == nil ? try store.pendingRequestCount() : nil
        let progress = try ProgressReporter("flush", unit: "requests")
        defer { progress.finish() }
        let result = Mutex<FlushReport?>(nil)
        try blocking {
            let report = try await store.flush(
                serviceRoot: service, category: category, batchSize: batchSize, headers: parsed,
                reconcile: reconcile,
                progress: { r in
                    progress.update(
                        done: r.sent, total: total, detail: "\(r.succeeded) succeeded, \(r.archived) archived")
                })
            result.withLock { $0 = report }
        }
        progress.finish()
        let report = result.withLock { $0 }!
        try output("flush: \(report), in \(progress.elapsedText)")
        // Each create that may have been applied twice, on stderr: a person must look.
        for line in report.inDoubt { Output.note("flush: in doubt: \(line)\n") }
        // Each refusal, and the service's messages, on stderr: what was refused, and how to see it.
        for line in report.refused {
            let id = line.dropFirst("request ".count).prefix { $0.isNumber }
            Output.note(
                "flush: refused: \(OfflineStore.redacted(line)) — offline-store errors --store \(options.store) --show \(id)\n"
            )
        }
        for line in report.messages { Output.note("flush: message: \(OfflineStore.redacted(line))\n") }
        if report.stopped != nil || report.archived > 0 { throw ExitCode.failure }
    }

    /// `Name: value` → (Name, value).
    static func header(_ text: String) throws -> (String, String) {
        guard let colon = text.firstIndex(of: ":") else { throw CLIError("--header '\(text)' is not 'Name: value'") }
        let name = text[..<colon].trimmingCharacters(in: .whitespaces)
        let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        let token = CharacterSet(
            charactersIn: "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        guard !name.isEmpty, name.unicodeScalars.allSatisfy(token.contains) else {
            throw CLIError("--header '\(text)': '\(name)' is not a header name")
        }
        guard !value.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F }) else {
            throw CLIError("--header '\(name)': the value has a control character")
        }
        return (name, value)
    }
}

/// Runs `body` (a verb that talks to the service); an error leaves it as its text without the
/// configured secrets (`OfflineStore.redacted`: a service may repeat them in its error), for
/// `runReportingErrors` to print. The report it prints is scrubbed by flush and refresh already.
func redactingSecrets(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let e as ExitCode {
        throw e
    } catch {
        throw CLIError(OfflineStore.redacted("\(error)"))
    }
}

struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the EventLog (the last 100 uploads and downloads) as OData JSON, oldest first.",
        discussion: "Example: offline-store events --store s")
    @OptionGroup var options: StoreOption

    func run() throws {
        try runReportingErrors {
            let store = try OfflineStore.open(at: options.store, readOnly: true)
            try store.query("EventLog?$orderby=EventID", writeBytes: { try Output.write($0, to: 1) })
            try output("")
        }
    }
}
