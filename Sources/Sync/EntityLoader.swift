package import LMDB
import Foundation
import Glibc
package import Storage
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
        let reader = PayloadReader(schema: store.schema, shapes: store.entityShapes)
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
        for row in rows { try upsert(row, t, store: store, handles: &handles) }
    }

    /// Upserts one row, and notes what it says of its streams (`StreamStore.announce`).
    package static func upsert(
        _ row: ServerRow, _ t: WriteView, store: EntityStore, handles: inout [String: EntitySetHandle]
    ) throws {
        try upsert(row.entity, into: row.set, t, store: store, handles: &handles)
        if !row.links.isEmpty, let h = handles[row.set] {
            try Refresher.writeLinks(
                row, t, store: store, set: h, keyBytes: try h.encodeKey(try h.keyValues(row.entity)))
        }
        guard !row.streams.isEmpty, let h = handles[row.set], let streams = h.streams else { return }
        let entity = h.entityKey(try h.encodeKey(try h.keyValues(row.entity)))
        for (name, announced) in row.streams { try streams.announce(t, entityKey: entity, name: name, announced) }
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
        var dropped = DroppedMembers()
        let json = try reader.parse(object, set: set, dropped: &dropped)
        do {
            try reader.collect(json, set: set, into: &rows)
            // A file is the user's data: a property the schema lacks is an error, as it was
            // before the parse dropped it without building it.
            if let (owner, name) = dropped.first { throw EntityError.unknownProperty(set: owner, property: name) }
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
    package let size: Int?
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

    /// A temporary file's, read from any offset; closed with the input.
    init(temporary fd: Int32, size: Int) {
        (self.fd, self.size, self.sequential, self.owned) = (fd, size, false, true)
    }

    /// Copies a pipe to a temporary file (unlinked at once) in `TMPDIR`.
    private static func spool(_ from: Int32, path: String) throws -> (fd: Int32, size: Int) {
        let file = try TemporaryFile(holding: "'\(path)'")
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(from, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw EntityError.badInput("cannot read '\(path)': \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            try chunk.withUnsafeBytes { try file.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        return file.take()
    }
}

/// Parses a load's input on a thread of its own, a chunk of rows at a time, a few chunks ahead
/// of the writer: the two cores split the work.
final class _LoadParser: Sendable {
    struct Chunk: Sendable {
        var rows: [ServerRow]
        /// How far into the input its last entity object ends.
        var read: Int
        /// The last chunk of a batch (with a batch size) or of the input.
        var endsBatch: Bool
    }
    /// Entity rows per chunk handed over (fewer when they exceed `PayloadReader.chunkBytes`).
    static let chunkRows = 2_000
    private let thread: ParseThread<Chunk>

    /// - Parameter batchSize: a batch ends with the first whole entity object (with its
    ///   expanded children) that brings it to this many rows or more.
    init(input: LoadInput, set: String, reader: PayloadReader, batchSize: Int?) {
        thread = ParseThread(name: "OfflineStore.load") { put in
            let stream = EntityObjectStream(rereadable: !input.sequential) { buffer, offset in
                try input.read(into: buffer, at: offset)
            }
            stream.shape = reader.shapes[set]
            var rows: [ServerRow] = []
            var bytes = 0
            // Rows of the current batch in chunks already handed over.
            var inBatch = 0
            try stream.forEach { object in
                try EntityLoader.collect(object, set: set, reader: reader, into: &rows)
                bytes += object.length
                let endsBatch = batchSize.map { inBatch + rows.count >= $0 } ?? false
                guard endsBatch || rows.count >= Self.chunkRows || bytes >= PayloadReader.chunkBytes else { return }
                try put(Chunk(rows: rows, read: object.offset + object.length, endsBatch: endsBatch))
                inBatch = endsBatch ? 0 : inBatch + rows.count
                (rows, bytes) = ([], 0)
            }
            if !rows.isEmpty || inBatch > 0 { try put(Chunk(rows: rows, read: stream.bytesRead, endsBatch: true)) }
        }
    }

    /// The next chunk; nil at the end of the input.
    func next() throws -> Chunk? { try thread.next() }

    /// Stops the parsing thread and waits for it.
    func stop() { thread.stop() }
}
