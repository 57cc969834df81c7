package import ArgumentParser
import Dispatch
import Foundation
import Synchronization

// What every verb of the command-line tool shares (the tool, the crash harness and the demo):
// the --store option, one clear error line, reading input files, temporary directories, and
// running async work from a synchronous verb.

/// `--store DIR`, shared by every verb.
package struct StoreOption: ParsableArguments {
    @Option(name: .long, help: "The store's directory.")
    package var store: String

    package init() {}
}

/// Runs a verb's body; any error becomes one clear line on stderr and exit code 1.
package func runReportingErrors(_ body: () throws -> Void) throws {
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
package func readFile(_ path: String) throws -> [UInt8] {
    let fd = path == "-" ? 0 : open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw CLIError("cannot read '\(path)': \(String(cString: strerror(errno)))") }
    defer { if fd != 0 { close(fd) } }
    var st = stat()
    if fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFDIR {
        throw CLIError("cannot read '\(path)': it is a directory")
    }
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

package struct CLIError: Error, CustomStringConvertible {
    package var description: String
    package init(_ d: String) { description = d }
}

/// A new directory under `TMPDIR` (else `/tmp`) made by `mkdtemp`: a name no one can guess
/// beforehand, created atomically with mode 0700.
package func makeTemporaryDirectory(prefix: String) throws -> String {
    let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    var template = Array((base.hasSuffix("/") ? base : base + "/").utf8) + Array((prefix + "XXXXXX").utf8) + [0]
    let made = template.withUnsafeMutableBufferPointer { buf in
        buf.withMemoryRebound(to: CChar.self) { mkdtemp($0.baseAddress!) != nil }
    }
    guard made else {
        throw CLIError("cannot create a temporary directory in '\(base)': \(String(cString: strerror(errno)))")
    }
    return String(decoding: template.dropLast(), as: UTF8.self)
}

/// Runs `body` on the concurrency pool and waits for it on this (synchronous) thread.
package func blocking(_ body: @escaping @Sendable () async throws -> Void) throws {
    let done = DispatchSemaphore(value: 0)
    let failure = Mutex<(any Error)?>(nil)
    Task {
        do { try await body() } catch { failure.withLock { $0 = error } }
        done.signal()
    }
    done.wait()
    if let error = failure.withLock({ $0 }) { throw error }
}
