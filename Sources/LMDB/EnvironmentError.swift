#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Failures of an environment as a whole, said in the user's terms rather than LMDB's.
public enum EnvironmentError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `--store` names something that is not a directory.
    case notADirectory(String)
    /// A write was attempted on an environment opened read-only.
    case readOnly(String)
    /// The file system holding the store has no room left; nothing of the operation was kept.
    case diskFull(path: String, operation: String)
    /// A write would have made the store's data file larger than its size cap
    /// (`maxSizeBytes`); nothing of the write was kept.
    case sizeCapReached(path: String, capBytes: Int)
    /// `database(named:)` was called from inside a write body, where it would wait for itself.
    case databaseOpenInsideWrite(String)
    /// The environment's named-database limit is reached.
    case tooManyDatabases(name: String, limit: Int)

    public var description: String {
        switch self {
        case .notADirectory(let p): "'\(p)' is not a directory (a store is a directory holding data.mdb and lock.mdb)"
        case .readOnly(let p): "the store '\(p)' is open read-only"
        case .databaseOpenInsideWrite(let n): "the database '\(n)' must be opened before a write, not inside one"
        case .tooManyDatabases(let n, let limit):
            "cannot open database '\(n)': the store holds at most \(limit) named databases"
        case .sizeCapReached(let p, let cap):
            "the store '\(p)' reached its size cap of \(Self.mebibytes(cap)) (maxSizeBytes \(cap)); the failed write changed nothing — flush (an upload settles the queue and frees room; it may use the reserve above the cap), delete entities that have nothing pending, or raise the cap"
        case .diskFull(let p, let op):
            "the disk is full: no space left on the file system of '\(p)' (\(op)); the failed write changed nothing"
        }
    }

    /// `bytes` in whole MiB, else in KiB.
    static func mebibytes(_ bytes: Int) -> String {
        bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : "\(bytes >> 10) KiB"
    }
}

/// LMDB reports a failed write of a full disk as `ENOSPC`, or as `EIO` when `write` wrote only
/// part of a page run. Either one, on a file system with less than a megabyte left, is a full disk.
func _diskFull(_ error: LMDBError, path: String) -> Error {
    guard error.code == ENOSPC || error.code == EIO || error.code == EDQUOT else { return error }
    if error.code == ENOSPC || error.code == EDQUOT {
        return EnvironmentError.diskFull(path: path, operation: error.context)
    }
    var fs = statvfs()
    guard statvfs(path, &fs) == 0 else { return error }
    let free = UInt64(fs.f_bavail) * UInt64(fs.f_frsize)
    return free < 1 << 20 ? EnvironmentError.diskFull(path: path, operation: error.context) : error
}
