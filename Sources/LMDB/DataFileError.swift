#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A `data.mdb` that must not be handed to LMDB: reading it through the memory map could crash
/// the process (a page past the end of the file is a SIGBUS). Found with `pread`, before
/// `mdb_env_open`.
///
/// ```swift
/// do { _ = try Environment(path: dir) }
/// catch let e as DataFileError { print(e) }  // data.mdb is truncated: its meta page says …
/// ```
public enum DataFileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file ends before a page that holds data: the meta page says `pages` pages of
    /// `pageSize` bytes, the file has `fileSize` bytes.
    case truncated(path: String, pages: UInt64, pageSize: Int, fileSize: Int)
    /// The file is too short to hold LMDB's two meta pages.
    case tooShortForMetaPages(path: String, fileSize: Int)
    /// A meta page (0 or 1) is not a valid LMDB meta page, or the two disagree.
    case badMetaPage(path: String, reason: String)
    /// The file could not be opened or read (`errno`).
    case unreadable(path: String, operation: String, errno: Int32)

    static let advice = "the store is damaged (run offline-store check)"

    public var description: String {
        switch self {
        case .truncated(_, let pages, let pageSize, let fileSize):
            "data.mdb is truncated: its meta page says \(pages) pages of \(pageSize) bytes, the file has \(fileSize) bytes; \(Self.advice)"
        case .tooShortForMetaPages(_, let fileSize):
            "data.mdb is truncated: the file has \(fileSize) bytes, too few for its two meta pages; \(Self.advice)"
        case .badMetaPage(_, let reason):
            "data.mdb has a bad meta page: \(reason); \(Self.advice)"
        case .unreadable(let path, let operation, let code):
            "cannot \(operation) '\(path)': \(String(cString: strerror(code)))"
        }
    }
}
