import LMDB
import Foundation
import Glibc
import Storage
import Synchronization

/// How far a streaming `load` has got.
public struct LoadProgress: Sendable, Equatable {
    /// Entities written (expanded ones included), in the open transaction or committed.
    public var entities: Int
    /// Entities committed: all of them at the end; with a batch size, those of the batches done.
    public var committed: Int
    /// Bytes of the input read so far, and its size if it is a regular file.
    public var bytesRead: Int
    public var inputBytes: Int?

    public init(entities: Int, committed: Int, bytesRead: Int, inputBytes: Int? = nil) {
        (self.entities, self.committed, self.bytesRead, self.inputBytes) = (entities, committed, bytesRead, inputBytes)
    }
}

/// A `load` with a batch size failed after some batches committed: the store keeps those, and
/// loading the same input again (it upserts) completes it once the cause is fixed.
public struct LoadError: Error, Sendable, CustomStringConvertible {
    /// What went wrong (a `JSONError`, an `EntityError`, an I/O or storage error).
    public var underlying: any Error
    /// Entities committed before it, by the batches that completed.
    public var committed: Int

    public var description: String {
        committed == 0
            ? "\(underlying) (nothing was committed)"
            : "\(underlying) (the \(committed) entities before it were committed)"
    }
}

/// Server data into entity sets, with nothing queued: the write path of `load` (files, standard
/// input, bytes) and of `Samples`' `generate`. It upserts what `PayloadReader` makes of OData JSON
/// (expanded children split into their own sets, foreign keys filled from the parent).
///
/// A file is read as it is written: a second thread parses entity objects into rows (`_LoadParser`)
/// while the writer thread writes them, so memory holds a chunk of the input and a few thousand
/// rows, whatever the input's size.
package struct EntityLoader {
    package let store: EntityStore

    package init(store: EntityStore) { self.store = store }

    /// Loads `input` into `set`: all or nothing in one transaction when `batchSize` is nil, else a
    /// commit every `batchSize` entities (a failure throws `LoadError` with what committed).
    /// `report` is called on the writer thread; it may see the same counts again when a body runs
    /// again after the map grew, and must drop what is not forward.
    package func load(
        set: String, input: LoadInput, batchSize: Int?, report: @escaping @Sendable (LoadProgress) -> Void
    ) throws -> Int {
        let store = self.store
        let reader = PayloadReader(schema: store.schema)
        guard let batchSize else {
            // All or nothing: the whole input in one write, parsed by a second thread as the
            // body writes. A body run again (the map grew) reads the input again from its start.
            let written = try store.write { t in
                let parser = _LoadParser(input: input, set: set, reader: reader, batchSize: nil)
                defer { parser.stop() }
                var handles: [String: EntitySetHandle] = [:]
                var written = 0
                while let chunk = try parser.next() {
                    try Self.write(chunk.rows, t, store: store, handles: &handles)
                    written += chunk.rows.count
                    report(LoadProgress(entities: written, committed: 0, bytesRead: chunk.read, inputBytes: input.size))
                }
                return written
            }
            report(
                LoadProgress(entities: written, committed: written, bytesRead: input.size ?? 0, inputBytes: input.size))
            return written
        }
        // A write per batch whose body takes the batch's chunks from the parser as it writes,
        // so parsing goes on while the writer writes, as without batches. A body run again
        // (the map grew) writes again the chunks the first run took, and then goes on.
        let parser = _LoadParser(input: input, set: set, reader: reader, batchSize: batchSize)
        defer { parser.stop() }
        var committed = 0
        do {
            while true {
                let batch = _LoadBatch()
                let written = try store.write { t in
                    var handles: [String: EntitySetHandle] = [:]
                    try Self.write(batch.rows, t, store: store, handles: &handles)
                    while !batch.taken {
                        guard let chunk = try parser.next() else {
                            (batch.taken, batch.atEnd) = (true, true)
                            break
                        }
                        batch.rows += chunk.rows
                        batch.read = chunk.read
                        batch.taken = chunk.endsBatch
                        try Self.write(chunk.rows, t, store: store, handles: &handles)
                    }
                    return batch.rows.count
                }
                committed += written
                if written > 0 {
                    report(
                        LoadProgress(
                            entities: committed, committed: committed, bytesRead: batch.read, inputBytes: input.size))
                }
                if batch.atEnd { return committed }
            }
        } catch {
            throw LoadError(underlying: error, committed: committed)
        }
    }

    /// Upserts rows into their sets.
    static func write(
        _ rows: [ServerRow], _ t: WriteView, store: EntityStore, handles: inout [String: EntitySetHandle]
    ) throws {
        for row in rows { try upsert(row.entity, into: row.set, t, store: store, handles: &handles) }
    }

    /// Upserts one entity into its set, whose handle `handles` keeps for the next; the error of
    /// a refused one names its set and key.
    package static func upsert(
        _ entity: Properties, into set: String, _ t: WriteView, store: EntityStore,
        handles: inout [String: EntitySetHandle]
    ) throws {
        let h = try handles[set] ?? store.set(set)
        handles[set] = h
        do {
            try h.upsert(t, entity)
        } catch let e as EntityError {
            let key = (try? h.keyValues(entity)).map(h.describeKey) ?? "?"
            throw EntityError.badInput("\(set)(\(key)): \(e)")
        }
    }

    /// Converts one entity object of the input (and its expanded children) into rows; an
    /// `EntityError` names the object's place and line in the input.
    package static func collect(
        _ object: EntityObjectBytes, set: String, reader: PayloadReader, into rows: inout [ServerRow]
    ) throws {
        let json = try object.parse()
        do {
            try reader.collect(json, set: set, into: &rows)
        } catch let e as EntityError {
            throw EntityError.badInput("entity \(object.number) of the input (line \(object.line)): \(e)")
        }
    }
}

/// The rows one batch of a `load --batch` has taken from the parser, kept for a body that runs
/// again. `@unchecked Sendable`: only the writer thread touches it while the write runs, and the
/// caller reads it after.
final class _LoadBatch: @unchecked Sendable {
    var rows: [ServerRow] = []
    /// How far into the input the batch goes.
    var read = 0
    /// The batch is complete (its last chunk taken), and the input has no more.
    var taken = false
    var atEnd = false
}

/// The input of a streaming load: a file read with `pread` from any offset, so a write body
/// that runs again reads it again. Standard input or a pipe that must be read twice is first
/// copied to an unlinked temporary file.
package final class LoadInput: Sendable {
    let fd: Int32
    let size: Int?
    /// Read in order with `read` (a pipe read once): offsets are ignored.
    let sequential: Bool
    private let owned: Bool

    package init(path: String, needsRereading: Bool) throws {
        let given = path == "-" ? 0 : open(path, O_RDONLY | O_CLOEXEC)
        guard given >= 0 else {
            throw EntityError.badInput("cannot read '\(path)': \(String(cString: strerror(errno)))")
        }
        var st = stat()
        guard fstat(given, &st) == 0 else {
            let e = errno
            if given != 0 { close(given) }
            throw EntityError.badInput("cannot read '\(path)': \(String(cString: strerror(e)))")
        }
        let kind = st.st_mode & S_IFMT
        if kind == S_IFDIR {
            if given != 0 { close(given) }
            throw EntityError.badInput("cannot read '\(path)': it is a directory")
        }
        if kind == S_IFREG {
            (fd, size, sequential, owned) = (given, Int(st.st_size), false, given != 0)
        } else if !needsRereading {
            (fd, size, sequential, owned) = (given, nil, true, given != 0)
        } else {
            defer { if given != 0 { close(given) } }
            let copy = try Self.spool(given, path: path)
            (fd, size, sequential, owned) = (copy.fd, copy.size, false, true)
        }
    }

    deinit { if owned { close(fd) } }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws -> Int {
        while true {
            let n =
                sequential
                ? Glibc.read(fd, buffer.baseAddress, buffer.count)
                : pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
            if n >= 0 { return n }
            if errno != EINTR {
                throw EntityError.badInput("cannot read the input: \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Copies a pipe to a temporary file (unlinked at once) in `TMPDIR`.
    private static func spool(_ from: Int32, path: String) throws -> (fd: Int32, size: Int) {
        let dir = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template =
            Array((dir.hasSuffix("/") ? dir : dir + "/").utf8CString.dropLast())
            + Array("offline-store-load-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            throw EntityError.badInput(
                "cannot copy '\(path)' to a temporary file in \(dir): \(String(cString: strerror(errno)))")
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var size = 0
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(from, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                let e = errno
                close(fd)
                throw EntityError.badInput("cannot read '\(path)': \(String(cString: strerror(e)))")
            }
            if n == 0 { return (fd, size) }
            var done = 0
            while done < n {
                let w = chunk.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, n - done) }
                if w < 0 {
                    if errno == EINTR { continue }
                    let e = errno
                    close(fd)
                    throw EntityError.badInput(
                        "cannot copy '\(path)' to a temporary file in \(dir): \(String(cString: strerror(e)))")
                }
                done += w
            }
            size += n
        }
    }
}

/// Parses a load's input on a thread of its own, a chunk of rows at a time, a few chunks ahead
/// of the writer: the two cores split the work.
final class _LoadParser: @unchecked Sendable {
    // @unchecked: `queue`, `stopped` and `finished` are guarded by `cond`.
    struct Chunk {
        var rows: [ServerRow]
        /// How far into the input its last entity object ends.
        var read: Int
        /// The last chunk of a batch (with a batch size) or of the input.
        var endsBatch: Bool
    }
    private enum Item { case chunk(Chunk), end, failed(any Error) }
    private let cond = NSCondition()
    private var queue: [Item] = []
    private var stopped = false
    private var finished = false
    /// Entity rows per chunk handed over, and chunks parsed ahead.
    static let chunkRows = 2_000
    static let ahead = 4

    /// - Parameter batchSize: a batch ends with the first whole entity object (with its
    ///   expanded children) that brings it to this many rows or more.
    init(input: LoadInput, set: String, reader: PayloadReader, batchSize: Int?) {
        let thread = Thread { [self] in
            parse(input: input, set: set, reader: reader, batchSize: batchSize)
            cond.lock()
            finished = true
            cond.broadcast()
            cond.unlock()
        }
        thread.name = "OfflineStore.load"
        thread.stackSize = 8 << 20
        thread.start()
    }

    /// The next chunk; nil at the end of the input.
    func next() throws -> Chunk? {
        cond.lock()
        defer { cond.unlock() }
        while queue.isEmpty { cond.wait() }
        switch queue[0] {
        case .chunk(let chunk):
            queue.removeFirst()
            cond.broadcast()
            return chunk
        case .end:
            return nil
        case .failed(let error):
            throw error
        }
    }

    /// Stops the parsing thread and waits for it.
    func stop() {
        cond.lock()
        stopped = true
        cond.broadcast()
        while !finished { cond.wait() }
        cond.unlock()
    }

    private struct Stopped: Error {}

    /// Hands an item over, waiting while the writer is `ahead` chunks behind; false once stopped.
    private func put(_ item: Item) -> Bool {
        cond.lock()
        defer { cond.unlock() }
        while queue.count >= Self.ahead && !stopped { cond.wait() }
        if stopped { return false }
        queue.append(item)
        cond.broadcast()
        return true
    }

    private func parse(input: LoadInput, set: String, reader: PayloadReader, batchSize: Int?) {
        let stream = EntityObjectStream { buffer, offset in try input.read(into: buffer, at: offset) }
        var rows: [ServerRow] = []
        // Rows of the current batch in chunks already handed over.
        var inBatch = 0
        do {
            try stream.forEach { object in
                try EntityLoader.collect(object, set: set, reader: reader, into: &rows)
                let endsBatch = batchSize.map { inBatch + rows.count >= $0 } ?? false
                guard endsBatch || rows.count >= Self.chunkRows else { return }
                guard put(.chunk(Chunk(rows: rows, read: object.offset + object.bytes.count, endsBatch: endsBatch)))
                else { throw Stopped() }
                inBatch = endsBatch ? 0 : inBatch + rows.count
                rows = []
            }
            if !rows.isEmpty || inBatch > 0 {
                guard put(.chunk(Chunk(rows: rows, read: stream.bytesRead, endsBatch: true))) else { return }
            }
            _ = put(.end)
        } catch is Stopped {
            return
        } catch {
            _ = put(.failed(error))
        }
    }
}
