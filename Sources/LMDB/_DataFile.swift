#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `data.mdb` opened for `pread` only. The audit never maps the file, so reading past its end is
/// a short read, not a SIGBUS, and a multi-gigabyte file costs one page buffer, not its size.
///
/// The descriptor is read-only: should it ever be 0, 1 or 2, a stray write to it fails rather
/// than landing in the file.
final class _DataFile {
    let path: String
    private let fd: Int32
    /// The size of the file in bytes when it was opened (`fstat`).
    let size: Int

    /// Opens `path` read-only (`open` with `O_RDONLY | O_CLOEXEC`, then `fstat`). Returns nil
    /// when there is no such file.
    static func open(_ path: String) throws(DataFileError) -> _DataFile? {
        let fd = _openReadOnly(path)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw .unreadable(path: path, operation: "open", errno: errno)
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let code = errno
            close(fd)
            throw .unreadable(path: path, operation: "stat", errno: code)
        }
        return _DataFile(path: path, fd: fd, size: Int(st.st_size))
    }

    private init(path: String, fd: Int32, size: Int) {
        self.path = path
        self.fd = fd
        self.size = size
    }

    deinit { close(fd) }

    /// Reads up to `buffer.count` bytes at `offset` (`pread`, again after `EINTR` or a short
    /// read). Returns how many were read: fewer only at the end of the file.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(DataFileError) -> Int {
        var done = 0
        while done < buffer.count {
            let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            if n > 0 {
                done += n
            } else if n == 0 {
                break
            } else if errno != EINTR {
                throw .unreadable(
                    path: path, operation: "read \(buffer.count) bytes at offset \(offset) of", errno: errno)
            }
        }
        return done
    }
}

/// `open(path, O_RDONLY | O_CLOEXEC)`; apart so the variadic C function is called in one place.
private func _openReadOnly(_ path: String) -> Int32 {
    open(path, O_RDONLY | O_CLOEXEC)
}
