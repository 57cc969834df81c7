import Foundation
import LMDB
import Query
public import Queue
public import Remote
import Served
public import Storage
import Sync

/// What the store knows of one stream: a media entity's media resource or a stream property.
public struct StreamInfo: Sendable, Hashable {
    /// Whether its bytes are in the store (`OfflineStore.openStream`); else only what the service
    /// said of them is known (a defining request without `retrieveStreams`, or a stream changed
    /// on the service since it was downloaded).
    public var downloaded: Bool
    /// Bytes and SHA-256 (lowercase hex) of the stored bytes.
    public var size: Int?
    public var sha256: String?
    public var contentType: String?
    /// The media ETag of the bytes held: the service's, or for a replacement not yet flushed
    /// one made from its SHA-256.
    public var mediaETag: String?
    /// The bytes are a local replacement (`replaceStream`) the service has not acknowledged yet.
    public var pendingUpload: Bool
    /// Where the service reads and writes it (nil: the conventional URL).
    public var readLink: String?
    public var editLink: String?

    init(_ r: StreamRecord) {
        downloaded = r.state == .stored
        size = r.size
        sha256 = r.sha256
        contentType = r.contentType
        mediaETag = r.currentETag
        pendingUpload = r.isLocal
        readLink = r.readLink
        editLink = r.editLink
    }
}

/// A stored stream opened to read: in pieces, never whole (a 1 GiB stream reads in 64 KiB).
/// What it reads stays whole even if a refresh replaces the stream meanwhile.
public final class StoredStream: Sendable {
    let file: StreamFile
    public let info: StreamInfo

    init(_ file: StreamFile) {
        self.file = file
        self.info = StreamInfo(file.record)
    }

    public var size: Int { file.size }

    /// Reads up to `buffer.count` bytes at `offset`; 0 at the end.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws -> Int {
        try file.read(into: buffer, at: offset)
    }

    /// Calls `body` with each piece in order.
    public func forEachChunk(size chunk: Int = 1 << 16, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        try file.forEachChunk(chunk: chunk, body)
    }

    /// The whole stream in memory: for small ones.
    public func bytes() throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(size)
        try forEachChunk { out.append(contentsOf: $0) }
        return out
    }
}

extension OfflineStore {
    /// A stream's address: `Photos(1)` or `Photos(1)/$value` (a media entity's media resource),
    /// `Albums(1)/Cover` (a stream property).
    struct StreamAddress {
        var set: EntitySetHandle
        var key: [Value]
        var name: String
        var text: String
        var entityKey: [UInt8]
    }

    func streamAddress(_ given: String) throws -> StreamAddress {
        // As a URL may have it: `Attachments%28%27a%27%29/$value` (pyodata writes keys so).
        let path = try percentDecode(Substring(given), plusAsSpace: false, part: nil)
        // The key ends at the last ')'; a segment after it names the stream.
        guard let close = path.lastIndex(of: ")") else {
            throw EntityError.badInput(
                "'\(path)' is not a stream's address: give Set(key), Set(key)/$value or Set(key)/Property")
        }
        let entityText = String(path[...close])
        var rest = String(path[path.index(after: close)...])
        if rest.hasPrefix("/") { rest.removeFirst() }
        let (setName, key) = try parseEntityPath(entityText)
        let set = try entities.set(setName)
        let name: String
        switch rest {
        case "", "$value":
            guard set.type.hasStream else {
                throw EntityError.badInput(
                    "\(setName) is not a set of media entities (its type has no HasStream)"
                        + (set.type.streamProperties.isEmpty
                            ? "" : "; its stream properties: \(set.type.streamProperties.joined(separator: ", "))"))
            }
            name = ""
        default:
            guard set.type.streamProperties.contains(rest) else {
                throw EntityError.badInput(
                    "\(setName) has no stream property '\(rest)'"
                        + (set.type.streamProperties.isEmpty
                            ? "" : " (it has \(set.type.streamProperties.joined(separator: ", ")))"))
            }
            name = rest
        }
        let text = "\(setName)(\(set.describeKey(key)))" + (name.isEmpty ? "/$value" : "/\(name)")
        return StreamAddress(
            set: set, key: key, name: name, text: text, entityKey: set.entityKey(try set.encodeKey(key)))
    }

    /// What the store knows of a stream (`Photos(1)`, `Photos(1)/$value`, `Albums(1)/Cover`);
    /// nil when the entity exists but nothing is known of its stream. Throws when the entity does
    /// not exist or its type declares no such stream.
    public func streamInfo(_ path: String) throws -> StreamInfo? {
        let a = try streamAddress(path)
        let store = entities
        return try store.read { t -> StreamInfo? in
            guard try t.contains(a.set.entities, Array(a.entityKey.dropFirst(a.set.entityKey([]).count))) else {
                throw EntityError.notFound(set: a.set.name, key: a.set.describeKey(a.key))
            }
            return try store.streams?.record(t, entityKey: a.entityKey, name: a.name).map(StreamInfo.init)
        }
    }

    /// Opens a downloaded stream to read. Throws, saying so, when it is not downloaded.
    public func openStream(_ path: String) throws -> StoredStream {
        let a = try streamAddress(path)
        let store = entities
        guard let streams = store.streams else { throw EntityError.badInput("\(a.text): this store has no streams") }
        // Read the record again once when its file went between the read and the open (a
        // refresh replaced the stream meanwhile).
        let keyBytes = Array(a.entityKey.dropFirst(a.set.entityKey([]).count))
        for attempt in 0..<2 {
            let record = try store.read { t in
                guard try t.contains(a.set.entities, keyBytes) else {
                    throw EntityError.notFound(set: a.set.name, key: a.set.describeKey(a.key))
                }
                return try streams.record(t, entityKey: a.entityKey, name: a.name)
            }
            guard let record, record.state == .stored else { throw StreamNotDownloaded(what: a.text) }
            do { return StoredStream(try streams.open(record, what: a.text)) } catch let e as StreamFileMissing {
                if attempt == 1 { throw EntityError.badInput("\(e)") }
            }
        }
        preconditionFailure("unreachable")
    }

    /// Downloads one stream from the service now (`serviceRoot`: the configuration's unless
    /// given) and stores it, replacing what the store had; the entity must be in the store.
    /// Memory holds one piece of it at a time.
    @discardableResult
    public func fetchStream(
        _ path: String, serviceRoot: String? = nil, headers: [(String, String)] = [],
        authorizer: (any RequestAuthorizer)? = nil
    ) async throws -> StreamInfo {
        let transport = try readingTransport(serviceRoot: serviceRoot, headers: headers, authorizer: authorizer)
        do {
            let info = try await fetchStream(path, transport: transport)
            try await transport.shutdown()
            return info
        } catch {
            try? await transport.shutdown()
            throw Self.redacted(error)
        }
    }

    package func fetchStream(_ path: String, transport: any Transport) async throws -> StreamInfo {
        let a = try streamAddress(path)
        let store = entities
        guard let streams = store.streams else { throw EntityError.badInput("\(a.text): this store has no streams") }
        let keyBytes = Array(a.entityKey.dropFirst(a.set.entityKey([]).count))
        let known = try store.read { t -> StreamRecord? in
            guard try t.contains(a.set.entities, keyBytes) else {
                throw EntityError.notFound(set: a.set.name, key: a.set.describeKey(a.key))
            }
            return try streams.record(t, entityKey: a.entityKey, name: a.name)
        }
        let file = try streams.incoming(for: a.text)
        let backend = ODataBackend(transport: transport, store: store)
        let answer = try await backend.download(
            set: a.set.name, key: a.key, keyText: a.set.describeKey(a.key), name: a.name, link: known?.readLink,
            into: file, extra: [])
        guard answer.isSuccess else {
            throw EntityError.badInput(
                "GET \(a.text) answered \(answer.status): \(String(answer.message.prefix(300)))")
        }
        var template = known ?? StreamRecord(state: .notDownloaded)
        template.contentType = answer.contentType ?? template.contentType
        let record = try file.finish(template)
        let (set, entityKey, name) = (a.set, a.entityKey, a.name)
        try await store.write { t in
            guard try t.contains(set.entities, keyBytes) else {
                throw EntityError.notFound(set: set.name, key: set.describeKey(a.key))
            }
            try streams.put(t, entityKey: entityKey, name: name, record)
        }
        file.committed()
        store.sweepStreamsIfNeeded()
        return StreamInfo(record)
    }
}

/// A stream being stored as the store's own (`OfflineStore.beginStream`): append its bytes,
/// then `finish`. Dropped unfinished, nothing changes.
package final class StreamUpload: @unchecked Sendable {
    // @unchecked: used by one task at a time, in order (append…, finish).
    let store: OfflineStore
    let address: OfflineStore.StreamAddress
    let file: IncomingStream

    init(store: OfflineStore, address: OfflineStore.StreamAddress, file: IncomingStream) {
        self.store = store
        self.address = address
        self.file = file
    }

    package var size: Int { file.size }

    package func append(_ bytes: UnsafeRawBufferPointer) throws { try file.append(bytes) }

    /// Stores the bytes with `contentType` as a local change (`OfflineStore.replaceStream`): the
    /// stream's record and its queued request in one transaction, unless `ifMatch` does not
    /// match the stream's media ETag now (`StreamPreconditionFailed`, nothing changes).
    package func finishQueued(
        contentType: String, ifMatch: String? = nil, options: ChangeOptions
    ) async throws
        -> StreamInfo
    {
        let written = try file.finish(StreamRecord(state: .stored, contentType: contentType))
        let (a, store) = (address, self.store.entities)
        let (queue, optimize) = (self.store.requestQueue, self.store.entities.configuration.requestQueueOptimization)
        guard let streams = store.streams else { throw EntityError.badInput("\(a.text): this store has no streams") }
        let stored: StreamRecord?
        do {
            stored = try await store.write { t in
                if let ifMatch {
                    let current = try streams.record(t.reader, entityKey: a.entityKey, name: a.name)
                    if !StreamUpload.matches(ifMatch, current?.currentETag) {
                        throw StreamPreconditionFailed(what: a.text, current: current?.currentETag)
                    }
                }
                _ = try queue.replaceStream(
                    t, set: a.set.name, key: a.key, name: a.name, bytes: written, options: options, optimize: optimize)
                return try streams.record(t.reader, entityKey: a.entityKey, name: a.name)
            }
        } catch {
            file.abandon()
            throw error
        }
        file.committed()
        store.sweepStreamsIfNeeded()
        return StreamInfo(stored ?? written)
    }

    /// Stores the bytes with `contentType` in one transaction, unless `ifMatch` (an `If-Match`
    /// value: `*` or ETags) does not match the stream's media ETag now: then nothing changes and
    /// `StreamPreconditionFailed` is thrown. The new media ETag is made from the bytes' SHA-256.
    package func finish(contentType: String, ifMatch: String? = nil) async throws -> StreamInfo {
        var template = StreamRecord(state: .stored, contentType: contentType)
        let record0 = try file.finish(template)
        template = record0
        template.mediaETag = "\"" + (record0.sha256 ?? "").prefix(32) + "\""
        let record = template
        let (a, store) = (address, store.entities)
        guard let streams = store.streams else { throw EntityError.badInput("\(a.text): this store has no streams") }
        let keyBytes = Array(a.entityKey.dropFirst(a.set.entityKey([]).count))
        // An authority logs the entity as changed, so a client's delta brings its new media ETag.
        let log = self.store.isOffline ? nil : ChangeLog(store: store)
        do {
            try await store.write { t in
                try log?.record(t, set: a.set.name, keyBytes: keyBytes, kind: .upsert)
                guard try t.contains(a.set.entities, keyBytes) else {
                    throw EntityError.notFound(set: a.set.name, key: a.set.describeKey(a.key))
                }
                let current = try streams.record(t.reader, entityKey: a.entityKey, name: a.name)
                if let ifMatch, !StreamUpload.matches(ifMatch, current?.currentETag) {
                    throw StreamPreconditionFailed(what: a.text, current: current?.currentETag)
                }
                var next = record
                next.readLink = current?.readLink
                next.editLink = current?.editLink
                try streams.put(t, entityKey: a.entityKey, name: a.name, next)
            }
        } catch {
            file.abandon()
            throw error
        }
        file.committed()
        store.sweepStreamsIfNeeded()
        return StreamInfo(record)
    }

    /// Whether an `If-Match` value matches `etag`: `*` matches any existing stream; otherwise
    /// one of its comma-separated tags equals it (weak comparison: `W/` ignored).
    static func matches(_ ifMatch: String, _ etag: String?) -> Bool {
        let given = ifMatch.trimmingCharacters(in: .whitespaces)
        if given == "*" { return etag != nil }
        guard let etag else { return false }
        func bare(_ s: Substring) -> Substring {
            let t = s.trimmingCharacters(in: .whitespaces)
            return Substring(t.hasPrefix("W/") ? String(t.dropFirst(2)) : t)
        }
        return given.split(separator: ",").contains { bare($0) == bare(Substring(etag)) }
    }
}

/// A stream the store knows of but has not downloaded.
public struct StreamNotDownloaded: Error, CustomStringConvertible {
    public let what: String
    public var description: String {
        "\(what): the stream is not downloaded (a defining request with retrieveStreams brings it at refresh; 'offline-store stream --fetch' or fetchStream brings it now)"
    }
}

/// A stream write whose `If-Match` does not match the stream's media ETag now.
public struct StreamPreconditionFailed: Error, CustomStringConvertible {
    public let what: String
    public let current: String?
    public var description: String {
        "\(what): If-Match does not match the stream's media ETag (now \(current ?? "none"))"
    }
}

extension OfflineStore {
    /// Begins storing a stream as the store's own, not queued (as `load` and `upsert` are).
    package func beginStream(_ path: String) throws -> StreamUpload {
        let a = try streamAddress(path)
        guard let streams = entities.streams else { throw EntityError.badInput("\(a.text): this store has no streams") }
        return StreamUpload(store: self, address: a, file: try streams.incoming(for: a.text))
    }

    /// Stores a stream's bytes as the store's own, not queued (as `load` and `upsert` are): an
    /// authority's media, say. `read` fills the buffer it is given and returns how many bytes it
    /// put there, 0 at the end; memory holds one buffer. The media ETag is made from the bytes'
    /// SHA-256. The entity must exist.
    @discardableResult
    public func putStream(
        _ path: String, contentType: String, read: (UnsafeMutableRawBufferPointer) throws -> Int
    ) async throws -> StreamInfo {
        try await filledUpload(path, read: read).finish(contentType: contentType)
    }

    /// `putStream` of bytes in memory.
    @discardableResult
    public func putStream(_ path: String, contentType: String, bytes: [UInt8]) async throws -> StreamInfo {
        try await putStream(path, contentType: contentType, read: Self.reading(bytes))
    }

    /// A stream upload of `path` holding what `read` gives, one buffer at a time.
    func filledUpload(_ path: String, read: (UnsafeMutableRawBufferPointer) throws -> Int) throws -> StreamUpload {
        let upload = try beginStream(path)
        try Self.pump(read, into: upload.append)
        return upload
    }

    /// Hands what `read` gives to `append`, one 64 KiB buffer at a time, until `read` gives 0.
    static func pump(
        _ read: (UnsafeMutableRawBufferPointer) throws -> Int, into append: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let n = try read(buffer)
            if n == 0 { break }
            try append(UnsafeRawBufferPointer(rebasing: buffer[..<n]))
        }
    }

    /// A `read` for `putStream` and `replaceStream` over bytes in memory.
    static func reading(_ bytes: [UInt8]) -> (UnsafeMutableRawBufferPointer) -> Int {
        var offset = 0
        return { buffer in
            let n = min(buffer.count, bytes.count - offset)
            bytes.withUnsafeBytes { b in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: b[offset..<offset + n]))
            }
            offset += n
            return n
        }
    }

    /// Replaces a stream's bytes as a local change, like `update` for an entity: the stream's
    /// record and a queued request (`PUT-STREAM`) in one durable transaction; the next flush
    /// sends them as `PUT Set(key)/$value` (or the stream property, or the edit link the service
    /// gave) with `contentType`, in its entity's order, as a request of its own (a JSON `$batch`
    /// carries no binary body — so not in a transaction: `options.transactionID` is refused).
    /// `If-Match` carries the service's media ETag of the version replaced (else the entity's
    /// ETag; with `streamIfMatch: entity`, always the entity's). Two replacements of one stream
    /// before a flush send the last. Until the service acknowledges it, a refresh leaves the
    /// stream as it is here; `undo` puts back the service's version (not downloaded). `read` fills the buffer it is given and returns how many bytes
    /// it put there, 0 at the end; memory holds one buffer. The entity must exist.
    @discardableResult
    public func replaceStream(
        _ path: String, contentType: String, options: ChangeOptions = .init(),
        read: (UnsafeMutableRawBufferPointer) throws -> Int
    ) async throws -> StreamInfo {
        guard isOffline else {
            throw EntityError.badInput(
                "this store is an authority: its streams are its own (putStream), not changes to send")
        }
        return try await filledUpload(path, read: read).finishQueued(contentType: contentType, options: options)
    }

    /// `replaceStream` of bytes in memory.
    @discardableResult
    public func replaceStream(
        _ path: String, contentType: String, bytes: [UInt8], options: ChangeOptions = .init()
    ) async throws -> StreamInfo {
        try await replaceStream(path, contentType: contentType, options: options, read: Self.reading(bytes))
    }

    /// Creates a media entity with its bytes as a local change, like `create` for an entity: the
    /// entity (a local key where its key is missing, the service's taking its place once the
    /// create is answered), its media resource and its requests in one durable transaction. The
    /// next flush sends `POST Set` with the bytes as the body, `contentType` and `slug` (the
    /// `Slug` header: what the client would name it, a file name say), as a request of its own —
    /// the way OData creates a media entity —, then the entity's other properties as a PATCH once
    /// the service has made it (SAP Gateway's `CREATE_STREAM` takes no properties either). Not in
    /// a transaction (`options.transactionID` is refused). `read` as in `replaceStream`.
    @discardableResult
    public func createMedia(
        set: String, entity: Properties, contentType: String, slug: String? = nil, options: ChangeOptions = .init(),
        read: (UnsafeMutableRawBufferPointer) throws -> Int
    ) async throws -> ChangeReceipt {
        guard isOffline else {
            throw EntityError.badInput(
                "this store is an authority: load the entity and putStream its bytes, they are its own")
        }
        let target = try entities.set(set)
        guard let streams = entities.streams else { throw EntityError.badInput("\(set): this store has no streams") }
        let file = try streams.incoming(for: "a new \(target.name)")
        try Self.pump(read) { try file.append($0) }
        let written = try file.finish(StreamRecord(state: .stored, contentType: contentType))
        let queue = requestQueue
        let created: (requestID: Int64, entity: Properties)
        do {
            created = try await entities.write { t in
                try queue.createMedia(
                    t, set: target.name, entity: entity, bytes: written, slug: slug, options: options)
            }
        } catch {
            file.abandon()
            throw error
        }
        file.committed()
        return ChangeReceipt(requestID: created.requestID, entity: created.entity)
    }

    /// `createMedia` of bytes in memory.
    @discardableResult
    public func createMedia(
        set: String, entity: Properties, contentType: String, slug: String? = nil, bytes: [UInt8],
        options: ChangeOptions = .init()
    ) async throws -> ChangeReceipt {
        try await createMedia(
            set: set, entity: entity, contentType: contentType, slug: slug, options: options, read: Self.reading(bytes))
    }

    /// Whether `path` addresses a stream (`Set(key)/$value`, `Set(key)/StreamProperty`) rather
    /// than an entity or a property: what `serve` answers with the bytes.
    package func isStreamAddress(_ given: String) -> Bool {
        guard let path = try? percentDecode(Substring(given), plusAsSpace: false, part: nil),
            let close = path.lastIndex(of: ")")
        else { return false }
        let rest = path[path.index(after: close)...]
        guard rest.hasPrefix("/") else { return false }
        let name = rest.dropFirst()
        if name == "$value" { return true }
        guard !name.contains("/"), let open = path.firstIndex(of: "(") else { return false }
        let setName = String(path[..<open])
        return (try? entities.set(setName))?.type.streamProperties.contains(String(name)) ?? false
    }
}
