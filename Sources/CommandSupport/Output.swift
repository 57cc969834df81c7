import Foundation
import OfflineStore

/// Standard output and error written with `write(2)`, every failure an error.
///
/// `FileHandle.write` ends the process with a fatal error when a write fails (a full disk, a
/// closed pipe with SIGPIPE ignored, a closed descriptor); a tool must instead say so on stderr
/// and exit non-zero.
package enum Output {
    /// Writes all of `bytes` to `fd`, retrying short writes and `EINTR`.
    package static func write(_ bytes: UnsafeRawBufferPointer, to fd: Int32) throws {
        var offset = 0
        while offset < bytes.count {
            let n = Foundation.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                throw CLIError(
                    "cannot write to \(fd == 1 ? "standard output" : "standard error"): \(String(cString: strerror(errno)))"
                )
            }
            offset += n
        }
    }

    package static func write(_ text: String, to fd: Int32) throws {
        var text = text
        try text.withUTF8 { try write(UnsafeRawBufferPointer($0), to: fd) }
    }

    /// Progress and other notes on stderr; a failure to write them is not worth failing for.
    package static func note(_ text: String) {
        try? write(text, to: 2)
    }

    /// The one line a failed command prints: control characters escaped (an error must not carry
    /// terminal escapes out of its input) and the length bounded.
    package static func errorLine(_ error: Error) -> String {
        "offline-store: " + sanitized("\(error)", limit: 2_000) + "\n"
    }

    /// `text` with C0/C1 control characters other than tab written as `\u{…}`, cut to `limit`
    /// characters with a note of how much was left out.
    package static func sanitized(_ text: String, limit: Int) -> String {
        var out = ""
        var count = 0
        for scalar in text.unicodeScalars {
            if count >= limit {
                out += "… (\(text.unicodeScalars.count - count) more characters)"
                break
            }
            let v = scalar.value
            if v < 0x20 && v != 0x09 || (0x7F...0x9F).contains(v) {
                out += "\\u{" + String(v, radix: 16, uppercase: true) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
            count += 1
        }
        return out
    }
}

/// Writes a line to stdout; throws when it cannot be written.
package func output(_ s: String) throws {
    try Output.write(s + "\n", to: 1)
}
