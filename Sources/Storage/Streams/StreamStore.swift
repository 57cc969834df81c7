import Crypto
import Foundation
import Glibc
package import LMDB
package import Synchronization

/// The streams of a store's media entities and stream properties: records in LMDB, bytes in files.
///
/// **Why files.** LMDB holds a value whole in the writing transaction's memory until it commits
/// (256 MiB put in one value took 256 MiB of anonymous memory, `MDB_RESERVE` or not: measured
/// with Debian's liblmdb, see `PerfTests/results/2026-11-28-schema-generation.md`), so a 1 GiB
/// stream cannot be one value within a few MiB; chunked values would cost a transaction per
/// chunk and a second copy in the map. A stream is therefore a file of `streams/` that the
/// store owns, and its record — file name, size, SHA-256, content type, media ETag, links — is in
/// the `streams` database under "entity set ‖ key ‖ stream name", committed in the same
/// transaction as the entity's change.
///
/// **Crash safety.** A file is written before the transaction that refers to it (`incoming`):
/// an `O_TMPFILE` with no name, SHA-256 and size taken as it is written, `fsync`ed, then linked
/// into `streams/` under a fresh random name and the directory `fsync`ed — all while the writer
/// holds an `flock` on it. The record commits after that, and only then is the lock released
/// (`IncomingStream.committed`). So a committed record's file is always whole and durable; a
/// crash before the commit leaves either nothing (no name yet) or a named file no record refers
/// to, which `EntityStore.sweepStreams` removes once no process holds its lock. A record that is
/// replaced or deleted leaves its file to the same sweep (or to the caller, after its commit).
/// A reader that opened a file keeps reading it whole even when it is removed meanwhile.
package final class StreamStore: Sendable {
    package static let databaseName = "streams"
    package let database: Database
    /// `<store>/streams`.
    package let directory: String
    /// Set when a transaction may have left files no record refers to (a record removed or
    /// replaced): the next `sweepStreamsIfNeeded` sweeps.
    package let mayHaveOrphans = Mutex(true)

    init(database: Database, directory: String) {
        self.database = database
        self.directory = directory
    }

    /// The record's key: `EntityStore.entityKey` of the entity, then the stream's name ("" for a
    /// media entity's media resource) as a key component.
    package static func key(entityKey: [UInt8], name: String) -> [UInt8] {
        entityKey + ((try? KeyCodec.encode([.string(name)])) ?? [])
    }

    /// The stream name at the end of a record's key (after the entity key), or nil.
    package static func streamName(_ bytes: [UInt8]) -> String? {
        bytes.withUnsafeBytes { b -> String? in
            guard let values = try? KeyCodec.decode(b, count: 1).values, case .string(let s)? = values.first else {
                return nil
            }
            return s
        }
    }

    // MARK: Records

    package func record(_ t: ReadView, entityKey: [UInt8], name: String) throws -> StreamRecord? {
        try t.get(database, Self.key(entityKey: entityKey, name: name)).map(StreamRecord.decode)
    }

    /// Every stream record of one entity, by stream name.
    package func records(_ t: ReadView, entityKey: [UInt8]) throws -> [(name: String, record: StreamRecord)] {
        var out: [(String, StreamRecord)] = []
        try t.withCursor(database) { c in
            var e = try c.seek(entityKey)
            while let (k, v) = e, k.starts(with: entityKey) {
                let rest = Array(k.dropFirst(entityKey.count))
                if let name = Self.streamName(rest) { out.append((name, try StreamRecord.decode(v))) }
                e = try c.next()
            }
        }
        return out
    }

    /// Stores `record` (replacing the one there); its old file, if another, is left to the sweep.
    package func put(_ t: WriteView, entityKey: [UInt8], name: String, _ record: StreamRecord) throws {
        let key = Self.key(entityKey: entityKey, name: name)
        if let old = try t.get(database, key), (try? StreamRecord.decode(old))?.file != record.file {
            mayHaveOrphans.withLock { $0 = true }
        }
        try t.put(database, key, record.encoded())
    }

    /// Notes what the service says of a stream now (`announced`, not downloaded): a record of the
    /// same version keeps its bytes and takes the new links and content type; any other is
    /// replaced by the announcement (its bytes, now stale, left to the sweep).
    /// A record whose bytes are a local change not yet acknowledged (`StreamRecord.local`) is
    /// left as it is: the change was made on the version it names, and its flush settles it.
    package func announce(_ t: WriteView, entityKey: [UInt8], name: String, _ announced: StreamRecord) throws {
        if let old = try record(t.reader, entityKey: entityKey, name: name) {
            if old.isLocal { return }
            var next = announced
            if old.state == .stored, old.sameVersion(as: announced) {
                next = old
                next.readLink = announced.readLink ?? old.readLink
                next.editLink = announced.editLink ?? old.editLink
                next.contentType = announced.contentType ?? old.contentType
                next.entityETag = announced.entityETag
            }
            if next == old { return }
            try put(t, entityKey: entityKey, name: name, next)
        } else {
            try put(t, entityKey: entityKey, name: name, announced)
        }
    }

    /// Removes one stream's record; returns whether there was one.
    @discardableResult
    package func remove(_ t: WriteView, entityKey: [UInt8], name: String) throws -> Bool {
        mayHaveOrphans.withLock { $0 = true }
        return try t.delete(database, Self.key(entityKey: entityKey, name: name))
    }

    /// Removes every stream record of one entity (it is being deleted).
    package func removeAll(_ t: WriteView, entityKey: [UInt8]) throws {
        var keys: [[UInt8]] = []
        try t.reader.withCursor(database) { c in
            var e = try c.seek(entityKey)
            while let (k, _) = e, k.starts(with: entityKey) {
                keys.append(Array(k))
                e = try c.next()
            }
        }
        if keys.isEmpty { return }
        mayHaveOrphans.withLock { $0 = true }
        for k in keys { try t.delete(database, k) }
    }

    /// Removes the records of streams `schema` does not declare: of a set it dropped, of a type
    /// that is no longer a media entity, of a stream property it dropped (a `$metadata`
    /// migration). Their files go at the next sweep. Returns how many.
    package func dropUndeclared(_ t: WriteView, in schema: Schema) throws -> Int {
        var gone: [[UInt8]] = []
        try t.reader.withCursor(database) { c in
            var e = try c.first()
            while let (k, _) = e {
                let key = Array(k)
                let declared = key.withUnsafeBytes { b -> Bool in
                    guard let (values, n) = try? KeyCodec.decode(b, count: 1), case .string(let set)? = values.first,
                        let type = schema.entityType(ofSet: set)
                    else { return false }
                    let rest = UnsafeRawBufferPointer(rebasing: b[n...])
                    guard let keyLength = try? KeyCodec.decode(rest, count: type.key.count).length,
                        let name = Self.streamName(Array(rest[keyLength...]))
                    else { return false }
                    return name.isEmpty ? type.hasStream : type.streamProperties.contains(name)
                }
                if !declared { gone.append(key) }
                e = try c.next()
            }
        }
        if !gone.isEmpty { mayHaveOrphans.withLock { $0 = true } }
        for k in gone { try t.delete(database, k) }
        return gone.count
    }

    // MARK: Files

    /// A new stream file to write, before the transaction that will refer to it.
    package func incoming(for what: String) throws -> IncomingStream {
        try IncomingStream(directory: directory, what: what)
    }

    /// The stored bytes of `record`, to read; throws when it has none or its file is gone.
    package func open(_ record: StreamRecord, what: String) throws -> StreamFile {
        guard record.state == .stored, let file = record.file else {
            throw EntityError.badInput("\(what): the stream is not downloaded")
        }
        let fd = Glibc.open(directory + "/" + file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw StreamFileMissing(what: what, file: file, errno: errno)
        }
        return StreamFile(fd: fd, record: record)
    }

    /// The names of the files in `streams/` (none when it does not exist).
    func fileNames() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { !$0.hasPrefix(".") }
    }
}

/// A record's file was not there when opened (removed by a write that replaced or deleted it
/// after the record was read, or lost): a reader reads the record again once.
package struct StreamFileMissing: Error, CustomStringConvertible {
    package let what: String
    package let file: String
    package let errno: Int32
    package var description: String {
        "\(what): the stream's file streams/\(file) cannot be opened: \(String(cString: strerror(errno)))"
    }
}

/// A stream file being written (`StreamStore.incoming`): append, `finish` before the transaction
/// that stores its record, `committed` after it. Dropped without `committed`, its file goes.
package final class IncomingStream: @unchecked Sendable {
    // @unchecked: used by one task at a time, in order (append…, finish, committed).
    private var fd: Int32
    private let directory: String
    private let what: String
    /// Set when the file was made with a name from the start (no `O_TMPFILE` here).
    private var temporaryName: String?
    private var hasher = SHA256()
    package private(set) var size = 0
    private var name: String?
    private var done = false

    /// Linux's `O_TMPFILE` (`__O_TMPFILE | O_DIRECTORY`), which Glibc's module does not export.
    private static let tmpfileFlag: Int32 = 0o20_000_000 | O_DIRECTORY

    init(directory: String, what: String) throws {
        self.directory = directory
        self.what = what
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw EntityError.badInput("cannot make \(directory) for \(what): \(String(cString: strerror(errno)))")
        }
        var fd = Glibc.open(directory, Self.tmpfileFlag | O_RDWR | O_CLOEXEC, 0o600)
        if fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL) {
            // A file system without O_TMPFILE: a named file, locked at once.
            let name = Self.freshName() + ".part"
            fd = Glibc.open(directory + "/" + name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0o600)
            temporaryName = name
        }
        guard fd >= 0 else {
            throw EntityError.badInput(
                "cannot make a stream file in \(directory) for \(what): \(String(cString: strerror(errno)))")
        }
        self.fd = fd
        guard flock(fd, LOCK_EX) == 0 else {
            let e = errno
            close(fd)
            throw EntityError.badInput("cannot lock a stream file for \(what): \(String(cString: strerror(e)))")
        }
    }

    deinit {
        if !done { abandon() }
    }

    static func freshName() -> String {
        var g = SystemRandomNumberGenerator()
        return (0..<2).map { _ in String(g.next() as UInt64, radix: 16).leftPadded(16) }.joined()
    }

    package func append(_ bytes: UnsafeRawBufferPointer) throws {
        precondition(name == nil, "append after finish")
        var written = 0
        while written < bytes.count {
            let w = Glibc.write(fd, bytes.baseAddress! + written, bytes.count - written)
            if w < 0 {
                if errno == EINTR { continue }
                throw EntityError.badInput("cannot write the stream of \(what): \(String(cString: strerror(errno)))")
            }
            written += w
        }
        hasher.update(bufferPointer: bytes)
        size += bytes.count
    }

    package func append(_ bytes: [UInt8]) throws { try bytes.withUnsafeBytes { try append($0) } }

    /// Starts the file over, empty (a download tried again).
    package func restart() throws {
        precondition(name == nil, "restart after finish")
        guard ftruncate(fd, 0) == 0, lseek(fd, 0, SEEK_SET) == 0 else {
            throw EntityError.badInput("cannot empty the stream file of \(what): \(String(cString: strerror(errno)))")
        }
        hasher = SHA256()
        size = 0
    }

    /// Makes the file durable under its final name and returns the record to commit:
    /// `template`'s content type, media ETag and links with this file, its size and SHA-256.
    package func finish(_ template: StreamRecord) throws -> StreamRecord {
        guard fsync(fd) == 0 else {
            throw EntityError.badInput("cannot make the stream of \(what) durable: \(String(cString: strerror(errno)))")
        }
        let final = Self.freshName()
        let target = directory + "/" + final
        if let temporaryName {
            guard rename(directory + "/" + temporaryName, target) == 0 else {
                throw EntityError.badInput(
                    "cannot name the stream file of \(what): \(String(cString: strerror(errno)))")
            }
        } else {
            guard linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, target, AT_SYMLINK_FOLLOW) == 0 else {
                throw EntityError.badInput(
                    "cannot name the stream file of \(what): \(String(cString: strerror(errno)))")
            }
        }
        name = final
        temporaryName = nil
        let dir = Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            defer { close(dir) }
            guard fsync(dir) == 0 else {
                throw EntityError.badInput(
                    "cannot make the stream file of \(what) durable: \(String(cString: strerror(errno)))")
            }
        }
        var record = template
        record.state = .stored
        record.file = final
        record.size = size
        record.sha256 = hasher.finalize().map { String($0, radix: 16).leftPadded(2) }.joined()
        return record
    }

    /// The transaction that refers to the file committed: the lock goes, the file stays.
    package func committed() {
        guard !done else { return }
        done = true
        close(fd)
    }

    /// The transaction did not commit (or was never run): the file goes.
    package func abandon() {
        guard !done else { return }
        done = true
        if let name { unlink(directory + "/" + name) }
        if let temporaryName { unlink(directory + "/" + temporaryName) }
        close(fd)
    }
}

/// A stored stream opened to read (`StreamStore.open`): read in pieces, never whole.
package final class StreamFile: @unchecked Sendable {
    // @unchecked: `pread` at explicit offsets; the descriptor is closed once, at deinit.
    let fd: Int32
    package let record: StreamRecord

    init(fd: Int32, record: StreamRecord) {
        self.fd = fd
        self.record = record
    }

    deinit { close(fd) }

    /// The file's size now (the record's, unless the file was damaged).
    package var size: Int {
        var st = stat()
        return fstat(fd, &st) == 0 ? Int(st.st_size) : (record.size ?? 0)
    }

    /// Reads up to `buffer.count` bytes at `offset`; 0 at the end.
    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws -> Int {
        while true {
            let n = pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
            if n >= 0 { return n }
            if errno == EINTR { continue }
            throw EntityError.badInput("cannot read a stream file: \(String(cString: strerror(errno)))")
        }
    }

    /// Calls `body` with each piece of the file in order (`chunk` bytes at most), from one buffer.
    package func forEachChunk(chunk: Int = 1 << 16, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var offset = 0
        while true {
            let n = try read(into: buffer, at: offset)
            if n == 0 { return }
            try body(UnsafeRawBufferPointer(rebasing: buffer[..<n]))
            offset += n
        }
    }

    /// The file's SHA-256, lowercase hex (reads it whole, in pieces).
    package func sha256() throws -> String {
        var hasher = SHA256()
        try forEachChunk { hasher.update(bufferPointer: $0) }
        return hasher.finalize().map { String($0, radix: 16).leftPadded(2) }.joined()
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

/// The SHA-256 of bytes that arrive in pieces and are not kept (a stream read back from a
/// service to compare with one sent): `restart`, `append`…, `hex`.
package final class StreamDigest: Sendable {
    private let state = Mutex((hasher: SHA256(), size: 0))

    package init() {}

    package func restart() { state.withLock { $0 = (SHA256(), 0) } }

    package func append(_ bytes: UnsafeRawBufferPointer) {
        state.withLock {
            $0.hasher.update(bufferPointer: bytes)
            $0.size += bytes.count
        }
    }

    /// Bytes appended since the last `restart`.
    package var size: Int { state.withLock { $0.size } }

    /// The SHA-256 of what was appended, lowercase hex.
    package func hex() -> String {
        state.withLock { $0.hasher }.finalize().map { String($0, radix: 16).leftPadded(2) }.joined()
    }
}
