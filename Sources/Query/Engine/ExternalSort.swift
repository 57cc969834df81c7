import Foundation
import HeapModule
import LMDB

/// The `.sort` strategy's sorter: an external merge sort of a query's matches by `$orderby`.
///
/// Each match is one record appended to a flat byte arena (`SortRecord`): its key — the
/// `$orderby` values' `KeyCodec` encoding followed by the primary key — and where its row is. The
/// arena is sorted through an array of `(prefix, offset)` slots, so records never move. Past
/// `entryLimit` records or `byteLimit` arena bytes, the sorted records are written as one run to a
/// scratch file and the arena starts again; at the end the runs are merged (a heap of each run's
/// head, each run read through a bounded buffer). When nothing was spilled the arena is sorted and
/// read in place.
///
/// **Order.** The key is compared bytewise (`memcmp`, a shorter key first when one is a prefix of
/// the other), which is `$orderby` order with the primary key as the tiebreak: `KeyCodec`'s
/// components are order-preserving (bytes compare as the values do; a descending component is the
/// complement of its ascending bytes) and self-delimiting (no component's encoding is a proper
/// prefix of another's: fixed widths after the type tag, strings and binaries ended by `00 00` with
/// a `00` inside escaped as `00 FF`, decimals' digits ended by a byte no digit uses — all of it
/// complemented when descending). So two sort keys of the same `$orderby` first differ at a byte
/// inside both, and compare as their first differing values; equal sort keys leave the primary
/// keys to compare, as `lexicographicallyPrecedes` did.
///
/// **Rows.** A record carries the address and length of its row bytes — the entity's row, or a
/// covering plan's index value — in the read transaction's memory map, not a copy: such bytes stay
/// valid until the transaction ends (`ReadView`), and the whole query runs in one. On the
/// benchmark's sort of 1,000,000 rows to JSON (`offline-store-bench --profile sort`, release, in
/// one session) this took 2.8–3.0 µs a row; reading each row again by key after the merge (as the
/// LMDB spill before it did) 4.1–4.4 µs; carrying the row bytes in the runs (as SQLite's sorter
/// does) 2.8–3.3 µs, while writing every row to the scratch file as well.
///
/// **Memory.** The arena holds at most `entryLimit` records and about `byteLimit` bytes (a single
/// larger record makes a run of its own), the merge one read buffer per run and at most `fanIn`
/// runs at once; the rows stay in the map. The scratch file grows by every record once per merge
/// pass (one pass up to `fanIn` runs: 12,800,000 rows at the default limits).
///
/// **Scratch file.** One file for all runs, in `directory`, unlinked as soon as it is made: neither
/// a normal end, a thrown error nor a SIGKILL leaves anything behind (the descriptor closes with the
/// sorter). A full disk is `EnvironmentError.diskFull`, thrown.
final class ExternalSort {
    /// Records kept in the arena before a run is written (the query's `memorySortLimit`).
    let entryLimit: Int
    /// Arena bytes before a run is written.
    let byteLimit: Int
    /// Runs merged at once; more runs are first merged in groups of this many into longer runs.
    let fanIn: Int
    let directory: String
    private var arena: [UInt8] = []
    private var slots: [Slot] = []
    private var file: RunFile? = nil
    /// The runs written so far: byte ranges of `file`.
    private var runs: [Range<Int>] = []

    /// Where a record is in the arena, and the first 8 bytes of its key (big-endian, zero-padded),
    /// which decide most comparisons without reading the arena.
    struct Slot {
        var prefix: UInt64
        var offset: Int
    }

    /// The default `byteLimit`: beside the 200,000-entry limit, a bound for long sort keys.
    static let defaultByteLimit = 32 << 20
    /// A run reader's buffer (it grows only for a record larger than this).
    static let readBuffer = 128 << 10

    init(entryLimit: Int, byteLimit: Int = ExternalSort.defaultByteLimit, fanIn: Int = 64, scratchDirectory: String?) {
        self.entryLimit = max(1, entryLimit)
        self.byteLimit = byteLimit
        self.fanIn = max(2, fanIn)
        directory = scratchDirectory ?? FileManager.default.temporaryDirectory.path
    }

    /// Adds one match: `sortKey` appends its `$orderby` key to the arena (`KeyCodec.append`), then
    /// the primary key is copied after it. `row` must stay valid until the sort is read.
    func add(
        primaryKey: UnsafeRawBufferPointer, row: MappedBytes, sortKey: (inout [UInt8]) throws -> Void
    ) throws {
        let start = arena.count
        SortRecord.appendHeader(row: row, to: &arena)
        do { try sortKey(&arena) } catch {
            arena.removeSubrange(start...)
            throw error
        }
        arena.append(contentsOf: primaryKey)
        let prefix = arena.withUnsafeMutableBytes { a in
            SortRecord.finishHeader(a.baseAddress! + start, end: a.baseAddress! + a.count, primaryKey: primaryKey.count)
        }
        slots.append(Slot(prefix: prefix, offset: start))
        if slots.count >= entryLimit || arena.count >= byteLimit { try spill() }
    }

    /// Visits every record in key order until `body` returns false; once, after the last `add`.
    func inOrder(_ body: (SortRecord) throws -> Bool) throws {
        guard let file else {
            sortSlots()
            try arena.withUnsafeBytes { a in
                for s in slots where try !body(SortRecord(a.baseAddress! + s.offset)) { return }
            }
            return
        }
        if !slots.isEmpty { try spill() }
        (arena, slots) = ([], [])
        while runs.count > fanIn {
            let group = Array(runs.prefix(fanIn))
            runs.removeFirst(fanIn)
            let start = file.size
            try merge(group, file) { r in
                try file.append(r.bytes)
                return true
            }
            try file.flush()
            runs.append(start..<file.size)
        }
        try merge(runs, file, body)
    }

    /// Sorts the slots by their records' keys: prefixes first, the arena only for equal prefixes.
    private func sortSlots() {
        arena.withUnsafeBytes { a in
            let base = a.baseAddress!
            slots.sort { x, y in
                x.prefix != y.prefix ? x.prefix < y.prefix : SortRecord.compare(base + x.offset, base + y.offset) < 0
            }
        }
    }

    /// Writes the arena's records in key order as one run, and empties the arena.
    private func spill() throws {
        sortSlots()
        let file = try self.file ?? RunFile(in: directory)
        self.file = file
        let start = file.size
        try arena.withUnsafeBytes { a in
            for s in slots { try file.append(SortRecord(a.baseAddress! + s.offset).bytes) }
        }
        try file.flush()
        runs.append(start..<file.size)
        arena.removeAll(keepingCapacity: true)
        slots.removeAll(keepingCapacity: true)
    }

    /// The records of `runs` in key order, until `body` returns false: a heap of each run's next
    /// record. A record stays valid until its run is read on, which is after `body` returns.
    private func merge(_ runs: [Range<Int>], _ file: RunFile, _ body: (SortRecord) throws -> Bool) throws {
        let readers = runs.map { RunReader(file, $0) }
        var heap = Heap<Head>()
        for (i, reader) in readers.enumerated() {
            if let r = try reader.next() { heap.insert(Head(r, run: i)) }
        }
        while let head = heap.min {
            if try !body(head.record) { return }
            if let r = try readers[head.run].next() {
                heap.replaceMin(with: Head(r, run: head.run))
            } else {
                heap.removeMin()
            }
        }
    }

    /// A run's next record in the merge, ordered by key.
    private struct Head: Comparable {
        let prefix: UInt64
        let record: SortRecord
        let run: Int

        init(_ record: SortRecord, run: Int) {
            (prefix, self.record, self.run) = (record.prefix, record, run)
        }

        static func < (a: Head, b: Head) -> Bool {
            if a.prefix != b.prefix { return a.prefix < b.prefix }
            let c = SortRecord.compare(a.record.base, b.record.base)
            return c != 0 ? c < 0 : a.run < b.run
        }

        static func == (a: Head, b: Head) -> Bool { !(a < b) && !(b < a) }
    }
}

/// One record of an `ExternalSort`, the same in the arena and in a run:
///
///     u64 row address · u32 row length · u32 key length · u32 primary-key length · key
///
/// (native byte order; the key is the sort key followed by the primary key).
struct SortRecord {
    let base: UnsafeRawPointer

    init(_ base: UnsafeRawPointer) { self.base = base }

    static let headerSize = 20

    var keyLength: Int { Int(base.loadUnaligned(fromByteOffset: 12, as: UInt32.self)) }
    /// The whole record.
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: Self.headerSize + keyLength) }
    /// The sort key followed by the primary key.
    var key: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base + Self.headerSize, count: keyLength) }

    var primaryKey: UnsafeRawBufferPointer {
        let n = Int(base.loadUnaligned(fromByteOffset: 16, as: UInt32.self))
        return UnsafeRawBufferPointer(start: base + Self.headerSize + keyLength - n, count: n)
    }

    /// The row bytes, where they were when the record was added.
    var row: MappedBytes {
        let address = UInt(base.loadUnaligned(as: UInt64.self))
        let count = Int(base.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
        return MappedBytes(start: UnsafeRawPointer(bitPattern: address), count: count)
    }

    var prefix: UInt64 { Self.prefix(key) }

    /// The first 8 bytes of `key` as a big-endian number, zero-padded: `prefix(a) < prefix(b)`
    /// implies `a < b` bytewise, and unequal keys may share a prefix.
    static func prefix(_ key: UnsafeRawBufferPointer) -> UInt64 {
        if key.count >= 8 { return UInt64(bigEndian: key.loadUnaligned(as: UInt64.self)) }
        var p: UInt64 = 0
        for (i, b) in key.enumerated() { p |= UInt64(b) << (56 - 8 * i) }
        return p
    }

    /// Appends a header for `row` whose key lengths `finishHeader` fills in once the key follows it.
    static func appendHeader(row: MappedBytes, to out: inout [UInt8]) {
        let address = UInt64(UInt(bitPattern: row.baseAddress))
        withUnsafeBytes(of: address) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(row.count)) { out.append(contentsOf: $0) }
        out.append(contentsOf: repeatElement(0, count: 8))
    }

    /// Fills in the key lengths of the record at `start`, whose key ends at `end`; returns its prefix.
    static func finishHeader(_ start: UnsafeMutableRawPointer, end: UnsafeMutableRawPointer, primaryKey: Int) -> UInt64
    {
        let keyLength = end - start - headerSize
        start.storeBytes(of: UInt32(keyLength), toByteOffset: 12, as: UInt32.self)
        start.storeBytes(of: UInt32(primaryKey), toByteOffset: 16, as: UInt32.self)
        return SortRecord(start).prefix
    }

    /// `memcmp` of two records' keys, the shorter first when one is a prefix of the other.
    static func compare(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer) -> Int {
        let (x, y) = (SortRecord(a).keyLength, SortRecord(b).keyLength)
        let c = memcmp(a + headerSize, b + headerSize, min(x, y))
        return c != 0 ? Int(c) : x - y
    }
}

/// The scratch file the runs are written to, one after another (through a buffer), and read from
/// at any offset.
private final class RunFile {
    let fd: Int32
    let directory: String
    /// Bytes in the file and in the buffer.
    private(set) var size = 0
    private var written = 0
    private let buffer: UnsafeMutableRawBufferPointer
    private var buffered = 0

    init(in directory: String) throws {
        fd = try ScratchFile.create(in: directory, prefix: "offline-store-sort-")
        self.directory = directory
        buffer = .allocate(byteCount: 256 << 10, alignment: 16)
    }

    deinit {
        close(fd)
        buffer.deallocate()
    }

    func append(_ bytes: UnsafeRawBufferPointer) throws {
        if buffered + bytes.count > buffer.count { try flush() }
        if bytes.count > buffer.count {
            try write(bytes)
        } else {
            (buffer.baseAddress! + buffered).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
            buffered += bytes.count
        }
        size += bytes.count
    }

    /// Writes what the buffer holds.
    func flush() throws {
        try write(UnsafeRawBufferPointer(rebasing: buffer[..<buffered]))
        buffered = 0
    }

    private func write(_ bytes: UnsafeRawBufferPointer) throws {
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(written))
            if n < 0 {
                if errno == EINTR { continue }
                if errno == ENOSPC || errno == EDQUOT {
                    throw EnvironmentError.diskFull(path: directory, operation: "write a sort run to a scratch file")
                }
                throw StorageSystemError(
                    operation: "write a sort run to a scratch file in '\(directory)'", errno: errno)
            }
            done += n
            written += n
        }
    }

    /// Reads up to `count` bytes at `offset` (from the file: flushed bytes only); returns how many.
    func read(into p: UnsafeMutableRawPointer, count: Int, at offset: Int) throws -> Int {
        while true {
            let n = pread(fd, p, count, off_t(offset))
            if n >= 0 { return n }
            if errno != EINTR {
                throw StorageSystemError(
                    operation: "read a sort run from a scratch file in '\(directory)'", errno: errno)
            }
        }
    }
}

/// Reads one run's records in order through a buffer of `ExternalSort.readBuffer` bytes.
private final class RunReader {
    let file: RunFile
    /// The next file offset to read, and where the run ends.
    var position: Int
    let end: Int
    var buffer: UnsafeMutableRawBufferPointer
    /// The unread bytes are `buffer[start..<filled]`; the record last returned is `start..<start + current`.
    var start = 0
    var filled = 0
    var current = 0

    init(_ file: RunFile, _ range: Range<Int>) {
        (self.file, position, end) = (file, range.lowerBound, range.upperBound)
        buffer = .allocate(byteCount: min(ExternalSort.readBuffer, max(range.count, 1)), alignment: 16)
    }

    deinit { buffer.deallocate() }

    /// The run's next record, valid until the next call; nil at the run's end.
    func next() throws -> SortRecord? {
        start += current
        current = 0
        guard try available(SortRecord.headerSize) else { return nil }
        let size = SortRecord.headerSize + SortRecord(buffer.baseAddress! + start).keyLength
        guard try available(size) else {
            throw StorageSystemError(operation: "read a sort run (it ends inside a record)", errno: EIO)
        }
        current = size
        return SortRecord(buffer.baseAddress! + start)
    }

    /// Whether `count` unread bytes are in the buffer, reading more (and growing the buffer for a
    /// large record) as needed; false only at the run's end.
    private func available(_ count: Int) throws -> Bool {
        if filled - start >= count { return true }
        let unread = filled - start
        if count > buffer.count {
            let larger = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 16)
            larger.baseAddress!.copyMemory(from: buffer.baseAddress! + start, byteCount: unread)
            buffer.deallocate()
            buffer = larger
        } else if unread > 0 {
            memmove(buffer.baseAddress!, buffer.baseAddress! + start, unread)
        }
        (start, filled) = (0, unread)
        while filled < count && position < end {
            let n = try file.read(
                into: buffer.baseAddress! + filled, count: min(buffer.count - filled, end - position), at: position)
            if n == 0 {
                throw StorageSystemError(operation: "read a sort run (the scratch file ends early)", errno: EIO)
            }
            (filled, position) = (filled + n, position + n)
        }
        return filled >= count
    }
}
