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
