package import LMDB
package import Storage
/// The recorded answer to a write with a `Repeatability-Request-ID` (OData 4.01): what a served
/// store replays when the same request comes again, instead of applying it twice.
package struct RepeatRecord: Sendable, Hashable {
    package var status: Int
    package var headers: [Header]
    package var body: [UInt8]
    /// When it was recorded, in milliseconds since 1970 (UTC).
    package var recordedAt: Int64
    /// The request it answered (method, URL, body hash: the caller's choice of bytes), so that a
    /// reused id with a different request is told apart.
    package var fingerprint: [UInt8]

    package struct Header: Sendable, Hashable {
        package var name: String
        package var value: String
        package init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    package init(status: Int, headers: [Header], body: [UInt8], recordedAt: Int64, fingerprint: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
        self.recordedAt = recordedAt
        self.fingerprint = fingerprint
    }

    static let version: UInt8 = 1

    /// The stored form: version, time (Int64 big-endian), status (UInt16), then the fingerprint,
    /// the headers (a count, then name and value) and the body, each length-prefixed (UInt32).
    package func encoded() throws(EntityError) -> [UInt8] {
        guard (100...999).contains(status) else {
            throw .badInput("a recorded response needs an HTTP status from 100 to 999, not \(status)")
        }
        var out: [UInt8] = [Self.version]
        withUnsafeBytes(of: recordedAt.bigEndian) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt16(status).bigEndian) { out.append(contentsOf: $0) }
        func append(_ bytes: some Collection<UInt8>) throws(EntityError) {
            guard let n = UInt32(exactly: bytes.count) else {
                throw .badInput("a recorded response part of \(bytes.count) bytes is too large")
            }
            withUnsafeBytes(of: n.bigEndian) { out.append(contentsOf: $0) }
            out.append(contentsOf: bytes)
        }
        try append(fingerprint)
        guard let count = UInt32(exactly: headers.count) else { throw .badInput("too many headers") }
        withUnsafeBytes(of: count.bigEndian) { out.append(contentsOf: $0) }
        for h in headers {
            try append(h.name.utf8)
            try append(h.value.utf8)
        }
        try append(body)
        return out
    }

    /// Reads the stored form; nil when the bytes are not one (wrong version, lengths past the end,
    /// bytes left over, text that is not UTF-8).
    package init?(_ bytes: UnsafeRawBufferPointer) {
        var i = 0
        func take(_ n: Int) -> UnsafeRawBufferPointer? {
            guard n >= 0, n <= bytes.count - i else { return nil }
            defer { i += n }
            return UnsafeRawBufferPointer(rebasing: bytes[i..<(i + n)])
        }
        func integer(_ n: Int) -> UInt64? { take(n).map { $0.reduce(0) { $0 << 8 | UInt64($1) } } }
        func part() -> [UInt8]? {
            guard let n = integer(4), let b = take(Int(n)) else { return nil }
            return Array(b)
        }
        func text() -> String? {
            guard let b = part() else { return nil }
            return String(validating: b, as: UTF8.self)
        }
        guard take(1)?.first == Self.version, let time = integer(8), let status = integer(2),
            (100...999).contains(status),
            let fingerprint = part(), let count = integer(4)
        else { return nil }
        var headers: [Header] = []
        for _ in 0..<count {
            guard let name = text(), let value = text() else { return nil }
            headers.append(Header(name: name, value: value))
        }
        guard let body = part(), i == bytes.count else { return nil }
        self.init(
            status: Int(status), headers: headers, body: body, recordedAt: Int64(bitPattern: time),
            fingerprint: fingerprint)
    }
}

/// The repeatability records of a served store.
///
/// Layout, written in the same transaction as the write they answer:
/// - `repeat`: the repeatability request id (its UTF-8 bytes, 1 to 200) → the `RepeatRecord`;
/// - `repeat/by-time`: the record's time (Int64 big-endian, sign bit flipped) ‖ the id → empty,
///   so the oldest records are found first and purged once older than the retention window.
package struct RepeatRecords: Sendable {
    package let store: EntityStore
    /// Records purged by one write at most, so a write's cost stays bounded however many expired.
    package static let purgeLimit = 16
    /// The longest repeatability id accepted, in bytes.
    package static let maxIDLength = 200

    package init(store: EntityStore) { self.store = store }

    /// Refuses an id that is empty or longer than `maxIDLength` bytes; returns its bytes.
    package static func validate(_ id: String) throws(EntityError) -> [UInt8] {
        let bytes = Array(id.utf8)
        if bytes.isEmpty { throw .badInput("the Repeatability-Request-ID is empty") }
        if bytes.count > maxIDLength {
            throw .badInput("the Repeatability-Request-ID is \(bytes.count) bytes long; the limit is \(maxIDLength)")
        }
        return bytes
    }

    static func timeKey(_ ms: Int64, id: [UInt8]) -> [UInt8] {
        withUnsafeBytes(of: (UInt64(bitPattern: ms) ^ (1 << 63)).bigEndian) { Array($0) } + id
    }

    /// The time of a `repeat/by-time` key, or nil when it is too short.
    static func time(ofTimeKey key: UnsafeRawBufferPointer) -> Int64? {
        guard key.count > 8 else { return nil }
        return Int64(bitPattern: key.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } ^ (1 << 63))
    }

    /// The record of `id`, or nil. Throws for one that does not decode.
    package func get(_ t: ReadView, id: [UInt8]) throws -> RepeatRecord? {
        guard let v = try t.get(store.repeatRecords, id) else { return nil }
        guard let r = RepeatRecord(v) else {
            throw EntityError.badInput(
                "repeat: the record of a Repeatability-Request-ID does not decode (run offline-store check)")
        }
        return r
    }

    /// Stores `record` under `id`, replacing (with its time entry) any record the id had.
    package func put(_ t: WriteView, id: [UInt8], _ record: RepeatRecord) throws {
        let value = try record.encoded()
        if let old = try get(t.reader, id: id) {
            try t.delete(store.repeatRecordsByTime, Self.timeKey(old.recordedAt, id: id))
        }
        try t.put(store.repeatRecords, id, value)
        try t.put(store.repeatRecordsByTime, Self.timeKey(record.recordedAt, id: id), [])
    }

    /// Deletes up to `limit` records recorded before `cutoff` (milliseconds since 1970), oldest
    /// first. Returns how many it deleted.
    @discardableResult
    package func purge(_ t: WriteView, before cutoff: Int64, limit: Int = RepeatRecords.purgeLimit) throws -> Int {
        var expired: [[UInt8]] = []
        try t.reader.withCursor(store.repeatRecordsByTime) { c in
            var e = try c.first()
            while let (k, _) = e, expired.count < limit, let time = Self.time(ofTimeKey: k), time < cutoff {
                expired.append(Array(k))
                e = try c.next()
            }
        }
        for key in expired {
            try t.delete(store.repeatRecordsByTime, key)
            try t.delete(store.repeatRecords, Array(key[8...]))
        }
        return expired.count
    }
}
