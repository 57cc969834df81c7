#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// Keeps the store's files off descriptors 0, 1 and 2.
///
/// A process started with standard input, output or error closed (cron jobs, daemons, supervisors
/// do this) hands the next `open` the lowest free descriptor. If that is LMDB's `data.mdb`, the
/// program's own output — a `print`, a log line — is written over the database's pages. SQLite
/// guards against the same thing. Before the store opens a file, every closed standard descriptor
/// is taken by `/dev/null`, so output to it is discarded instead.
package enum StandardDescriptors {
    private static let lock = Mutex(())

    /// Opens `/dev/null` on each of descriptors 0–2 that is closed (`fcntl(F_GETFD)` fails with
    /// `EBADF`). Cheap when all three are open: three `fcntl` calls.
    ///
    /// - Throws: `StorageSystemError` when `/dev/null` cannot be opened and a standard descriptor
    ///   is free — opening a store then would risk it, so the store refuses to open.
    package static func reserve() throws(StorageSystemError) {
        if (0...2).allSatisfy({ fcntl($0, F_GETFD) != -1 }) { return }
        try lock.withLock { _ throws(StorageSystemError) in
            // `open` returns the lowest free descriptor: keep taking them until one lands above 2.
            while true {
                let fd = open("/dev/null", O_RDWR | O_CLOEXEC)
                if fd < 0 {
                    if (0...2).allSatisfy({ fcntl($0, F_GETFD) != -1 }) { return }
                    throw StorageSystemError(
                        operation: "open /dev/null to cover a closed standard descriptor", errno: errno)
                }
                if fd > 2 {
                    close(fd)
                    return
                }
                // Standard descriptors are inherited by children that expect them open.
                _ = fcntl(fd, F_SETFD, 0)
            }
        }
    }
}

/// A system call that failed, with its `errno` and the operation it was part of.
package struct StorageSystemError: Error, Sendable, CustomStringConvertible {
    package let operation: String
    package let errno: Int32

    package init(operation: String, errno: Int32) {
        self.operation = operation
        self.errno = errno
    }

    package var description: String { "\(operation): \(String(cString: strerror(errno)))" }
}

/// A file for scratch data that nobody else may see or inherit, and that nothing can leave behind.
package enum ScratchFile {
    /// Makes a file named `prefix` and six random characters in `directory` and unlinks it at once:
    /// a normal end, a thrown error or a SIGKILL leaves nothing, and the space goes back when the
    /// descriptor closes. The descriptor is read-write, close-on-exec and never one of 0–2
    /// (`StandardDescriptors.reserve`); the caller closes it.
    package static func create(in directory: String, prefix: String) throws(StorageSystemError) -> Int32 {
        try StandardDescriptors.reserve()
        var template =
            Array((directory.hasSuffix("/") ? directory : directory + "/").utf8CString.dropLast())
            + Array((prefix + "XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            throw StorageSystemError(operation: "create a scratch file in '\(directory)'", errno: errno)
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        return fd
    }
}
