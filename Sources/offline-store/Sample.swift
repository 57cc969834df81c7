import ArgumentParser
import CommandSupport
import Foundation
import OfflineStore
import Samples

/// The built-in EPM sample as a store or as files: the service, the `$metadata` and the data that
/// the documentation's examples use (`Products('HT-1000')` is one of its products).
struct SampleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sample",
        abstract: "The built-in EPM sample as a store, or as files: what the documentation's examples use.",
        discussion: """
            The sample is an OData V4 $metadata with four entity sets and their data: 16 \
            BusinessPartners, 24 Products (HT-1000 to HT-1023), 40 SalesOrders and 100 SalesOrderItems. \
            --store creates a store holding it, with the sample's indexes; serve it with `offline-store \
            serve` to have a service to try the examples against. --files writes metadata.xml and one \
            OData JSON file per set (Products.json, ...) into a directory, for `init` and `load`; it \
            refuses to overwrite a file.
            Example: offline-store sample --store server --files .
            """)
    @Option(help: "Create a store holding the sample in this directory (as init does: not where a store is).")
    var store: String?
    @Option(help: "Write metadata.xml and one JSON file per entity set (Products.json, ...) into this directory.")
    var files: String?

    func validate() throws {
        guard store != nil || files != nil else { throw ValidationError("give --store DIR, --files DIR, or both") }
    }

    func run() throws {
        try runReportingErrors {
            if let files { try writeFiles(into: files) }
            if let store { try createStore(at: store) }
        }
    }

    /// The files --files writes: `metadata.xml`, then one `SET.json` per entity set.
    static var sampleFiles: [(name: String, text: String)] {
        [("metadata.xml", SampleData.metadata)] + SampleData.setsInLoadOrder.map { ($0 + ".json", SampleData.json($0)) }
    }

    func writeFiles(into directory: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw CLIError("--files '\(directory)' is not a directory") }
        } else {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                // Foundation's text says little ("The file doesn't exist"): the system's reason, from
                // the first directory of the path that could not be made.
                var missing = directory
                while case let parent = (missing as NSString).deletingLastPathComponent, !parent.isEmpty,
                    parent != missing, !FileManager.default.fileExists(atPath: parent)
                {
                    missing = parent
                }
                let reason = mkdir(missing, 0o777) == 0 ? error.localizedDescription : String(cString: strerror(errno))
                throw CLIError("cannot create '\(missing)': \(reason)")
            }
        }
        let paths = Self.sampleFiles.map { (directory as NSString).appendingPathComponent($0.name) }
        // Nothing written when one of them is there already: a user's file is never replaced.
        if let existing = paths.first(where: { FileManager.default.fileExists(atPath: $0) }) {
            throw CLIError("'\(existing)' exists; give a directory without the sample's files")
        }
        for (path, file) in zip(paths, Self.sampleFiles) {
            guard FileManager.default.createFile(atPath: path, contents: Data(file.text.utf8)) else {
                throw CLIError("cannot write '\(path)': \(String(cString: strerror(errno)))")
            }
        }
        try output("wrote \(paths.joined(separator: ", "))")
    }

    func createStore(at path: String) throws {
        let store = try OfflineStore.create(
            at: path, metadata: Array(SampleData.metadata.utf8), configuration: SampleData.configuration)
        var counts: [String] = []
        for set in SampleData.setsInLoadOrder {
            _ = try store.load(set: set, json: Array(SampleData.json(set).utf8))
            counts.append("\(set) \(try store.count(set: set))")
        }
        let ids = try store.entities("Products?$orderby=ProductID&$select=ProductID").compactMap {
            if case .string(let id)? = $0["ProductID"] { id } else { nil }
        }
        try output(
            "created \(path): the EPM sample, \(counts.joined(separator: ", "))"
                + (ids.isEmpty ? "" : " (Products \(ids.first!) to \(ids.last!))"))
    }
}
