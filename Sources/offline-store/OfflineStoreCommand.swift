import ArgumentParser
import Foundation
import OfflineStore

@main
struct OfflineStoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "offline-store",
        abstract: "An embedded offline OData store: LMDB underneath, OData URLs on top.",
        subcommands: [Init.self, Load.self, Get.self, QueryCommand.self, Check.self, Stats.self, Generate.self, Demo.self])
}

/// `--store DIR`, shared by every verb.
struct StoreOption: ParsableArguments {
    @Option(name: .long, help: "The store's directory.")
    var store: String
}

/// Runs a verb's body; any error becomes one clear line on stderr and exit code 1.
func runReportingErrors(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let e as ExitCode {
        throw e
    } catch {
        FileHandle.standardError.write(Data("offline-store: \(error)\n".utf8))
        throw ExitCode.failure
    }
}

/// Reads a whole file, or fails with its name.
func readFile(_ path: String) throws -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: path) else {
        throw CLIError("cannot read '\(path)'")
    }
    return Array(data)
}

struct CLIError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// Writes text to stdout.
func output(_ s: String) {
    FileHandle.standardOutput.write(Data((s + "\n").utf8))
}
