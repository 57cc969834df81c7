import LMDB
import ArgumentParser
import Foundation
import OfflineStore

@main
struct OfflineStoreCommand: ParsableCommand {
    static func main() {
        // Started with a standard descriptor closed, the tool's own files must not take it.
        do { try StandardDescriptors.reserve() } catch { Output.note(Output.errorLine(error)); Foundation.exit(1) }
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch {
            exit(withError: error)
        }
    }

    static let configuration = CommandConfiguration(
        commandName: "offline-store",
        abstract: "An embedded offline OData store: LMDB underneath, OData URLs on top.",
        subcommands: [Init.self, Load.self, Get.self, QueryCommand.self, Create.self, Update.self, Delete.self, QueueCommand.self, Errors.self, Undo.self, Define.self, Undefine.self, Refresh.self, FlushCommand.self, Events.self, Check.self, Stats.self, Generate.self, Serve.self, Demo.self, CrashTest.self, ChangeWorker.self, CrashWorker.self])
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
        Output.note(Output.errorLine(error))
        throw ExitCode.failure
    }
}

/// Reads a whole file — a regular file, a pipe, `/dev/stdin`, or `-` for standard input — or
/// fails with its name and the reason.
func readFile(_ path: String) throws -> [UInt8] {
    let fd = path == "-" ? 0 : open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw CLIError("cannot read '\(path)': \(String(cString: strerror(errno)))") }
    defer { if fd != 0 { close(fd) } }
    var st = stat()
    if fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFDIR { throw CLIError("cannot read '\(path)': it is a directory") }
    var out: [UInt8] = []
    if st.st_mode & S_IFMT == S_IFREG { out.reserveCapacity(Int(st.st_size)) }
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            throw CLIError("cannot read '\(path)': \(String(cString: strerror(errno)))")
        }
        if n == 0 { return out }
        out.append(contentsOf: chunk[0..<n])
    }
}

struct CLIError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// A new directory under `TMPDIR` (else `/tmp`) made by `mkdtemp`: a name no one can guess
/// beforehand, created atomically with mode 0700.
func makeTemporaryDirectory(prefix: String) throws -> String {
    let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    var template = Array((base.hasSuffix("/") ? base : base + "/").utf8) + Array((prefix + "XXXXXX").utf8) + [0]
    let made = template.withUnsafeMutableBufferPointer { buf in
        buf.withMemoryRebound(to: CChar.self) { mkdtemp($0.baseAddress!) != nil }
    }
    guard made else { throw CLIError("cannot create a temporary directory in '\(base)': \(String(cString: strerror(errno)))") }
    return String(decoding: template.dropLast(), as: UTF8.self)
}
