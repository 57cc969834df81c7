import Foundation
import Glibc
import LMDB
import Storage

/// A file in `TMPDIR` (else `/tmp`) that is unlinked as soon as it is made: it holds a large input
/// — standard input that must be read twice, a service's answer too large to keep in memory —
/// and leaves nothing behind, whatever ends the process. Written once, in order, then read
/// (`LoadInput(temporary:)`) from any offset.
package final class TemporaryFile: @unchecked Sendable {
    // @unchecked: written by one task (`append`), then handed over whole by `finish`.
    let fd: Int32
    private(set) var size = 0
    private var finished = false
    let what: String

    /// - Parameter what: what it holds, for errors ("the answer of GET Products").
    package init(holding what: String) throws {
        let dir = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        do { fd = try ScratchFile.create(in: dir, prefix: "offline-store-") } catch {
            throw EntityError.badInput(
                "cannot make a temporary file in \(dir) for \(what): \(String(cString: strerror(error.errno)))")
        }
        self.what = what
    }

    deinit { if !finished { close(fd) } }

    /// Appends bytes; throws on a write error (a full disk).
    package func append(_ bytes: UnsafeRawBufferPointer) throws {
        var done = 0
        while done < bytes.count {
            let w = Glibc.write(fd, bytes.baseAddress! + done, bytes.count - done)
            if w < 0 {
                if errno == EINTR { continue }
                throw EntityError.badInput(
                    "cannot write \(what) to a temporary file: \(String(cString: strerror(errno)))")
            }
            done += w
        }
        size += bytes.count
    }

    package func append(_ bytes: [UInt8]) throws { try bytes.withUnsafeBytes { try append($0) } }

    /// The file, to read; it is closed when the input goes.
    package func finish() -> LoadInput {
        let (fd, size) = take()
        return LoadInput(temporary: fd, size: size)
    }

    /// Its descriptor, which the caller now closes, and its size.
    func take() -> (fd: Int32, size: Int) {
        finished = true
        return (fd, size)
    }
}
