import Synchronization
import Foundation
package import LMDB
package import Storage

/// What a queued stream replacement (`RequestRecord.Method.putStream`) sends: its body, as JSON
/// in the record's `Body`. The bytes are a file of `streams/` that the queue keeps
/// (`q/stream-files`) until the request leaves the queue, whatever becomes of the stream's
/// record meanwhile (a later replacement, the entity deleted after the request was sent).
package struct StreamChange: Codable, Sendable, Hashable {
    /// The stream: "" for a media entity's media resource (`$value`), else a stream property.
    package var stream: String
    /// The file under `streams/`, its size and SHA-256 (lowercase hex), and its media type.
    package var file: String
    package var size: Int
    package var sha256: String
    package var contentType: String
    /// A media create's `Slug` (RFC 5023 §9.7: what the client would name it), if given.
    package var slug: String?

    package init(stream: String, file: String, size: Int, sha256: String, contentType: String, slug: String? = nil) {
        (self.stream, self.file, self.size, self.sha256, self.contentType) = (stream, file, size, sha256, contentType)
        self.slug = slug
    }

    package var text: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }

    /// The body of a `putStream` record.
    package static func of(_ r: RequestRecord) throws -> StreamChange {
        guard r.method.carriesStream, let body = r.body,
            let change = try? JSONDecoder().decode(StreamChange.self, from: Data(body.utf8))
        else { throw EntityError.badInput("request \(r.id): not a stream replacement with a readable body") }
        return change
    }

    /// `Set(key)/$value` or `Set(key)/Name`, for messages.
    package func describe(_ r: RequestRecord) -> String {
        "\(r.entitySet)(\(r.entityKey))/" + (stream.isEmpty ? "$value" : stream)
    }
}

extension QueueRole {
    /// `q/stream-files`: file name → the id of the request whose bytes it holds (8 bytes, BE).
    static let streamFilesName = "q/stream-files"

    package static func streamFiles(_ store: EntityStore, _ t: ReadView) throws -> Set<String> {
        var files: Set<String> = []
        try t.withCursor(store.database(streamFilesName)) { c in
            var e = try c.first()
            while let (k, _) = e {
                files.insert(String(decoding: k, as: UTF8.self))
                e = try c.next()
            }
        }
        return files
    }
}

extension RequestQueue {
    var streamFiles: Database { store.database(QueueRole.streamFilesName) }

    /// Keeps `file` for request `id` (the sweep leaves it).
    func pin(_ t: WriteView, file: String, for id: Int64) throws {
        var value: [UInt8] = []
        withUnsafeBytes(of: UInt64(bitPattern: id).bigEndian) { value.append(contentsOf: $0) }
        try t.put(streamFiles, Array(file.utf8), value)
    }

    /// Lets go of the file of stream request `r` (it leaves the queue or its body changes).
    func unpin(_ t: WriteView, _ r: RequestRecord) throws {
        guard r.method.carriesStream, let change = try? StreamChange.of(r) else { return }
        try t.delete(streamFiles, Array(change.file.utf8))
        store.streams?.mayHaveOrphans.withLock { $0 = true }
    }

    /// The set a stream change (`what`) goes to, refused when it is the store's own, in a
    /// transaction, or without its bytes written; with the bytes' file, size and SHA-256.
    private func streamChangeTarget(
        _ setName: String, bytes: StreamRecord, options: ChangeOptions, what: String
    ) throws -> (EntitySetHandle, StreamStore, String, Int, String) {
        let set = try store.set(setName)
        guard !store.schema.isSystemSet(set.name) else {
            throw EntityError.badInput("'\(set.name)' is one of the store's own sets; it cannot be changed directly")
        }
        guard options.transactionID == nil else {
            throw EntityError.badInput(
                "\(what) goes to the service as a request of its own (a JSON $batch carries no binary bodies): it cannot be part of transaction '\(options.transactionID!)'"
            )
        }
        guard let streams = store.streams else { throw EntityError.badInput("this store has no streams") }
        guard bytes.state == .stored, let file = bytes.file, let size = bytes.size, let sha = bytes.sha256 else {
            throw EntityError.badInput("\(what) needs its bytes written first")
        }
        return (set, streams, file, size, sha)
    }

    /// Replaces a stream of an entity as a local change: `bytes` (a file `IncomingStream.finish`
    /// wrote, with its size, SHA-256 and content type) becomes the stream's record, marked local,
    /// and a `putStream` request is queued after the entity's other requests — both in `t`. The
    /// record keeps the service's media ETag it replaces (what the request's `If-Match` carries).
    ///
    /// Two replacements of one stream collapse: a pending one of the same stream, last in its
    /// entity's chain and mergeable (same upload category, neither non-mergeable, not sent),
    /// takes the new bytes and keeps its place; its old file goes. A stream replacement goes to
    /// the service as a request of its own (a JSON `$batch` carries no binary bodies), so it is
    /// refused in a transaction (`transactionID`). Returns the request's id.
    package func replaceStream(
        _ t: WriteView, set setName: String, key: [Value], name: String, bytes: StreamRecord,
        options: ChangeOptions, optimize: Bool
    ) throws -> Int64 {
        let (set, streams, file, size, sha) = try streamChangeTarget(
            setName, bytes: bytes, options: options, what: "a stream replacement")
        let keyBytes = try set.encodeKey(key)
        guard let entity = try set.get(t.reader, key: key) else {
            throw EntityError.notFound(set: set.name, key: set.describeKey(key))
        }
        let chain = try chainForChange(t, set: set, keyBytes: keyBytes, entity: entity)
        let entityKey = set.entityKey(keyBytes)
        let current = try streams.record(t.reader, entityKey: entityKey, name: name)
        var local = bytes
        local.local = true
        local.mediaETag = current?.mediaETag
        local.entityETag = current?.entityETag
        local.readLink = current?.readLink
        local.editLink = current?.editLink
        try streams.put(t, entityKey: entityKey, name: name, local)
        let change = StreamChange(
            stream: name, file: file, size: size, sha256: sha,
            contentType: bytes.contentType ?? "application/octet-stream")
        // The last request of the entity, if a pending replacement of this stream that may merge.
        if optimize, !options.nonMergeable, let last = chain.last, last.status == .pending,
            try !callQueued(t.reader, after: last.id),
            var r = try record(t.reader, id: last.id), r.method == .putStream, !r.nonMergeable,
            r.uploadCategory == options.uploadCategory, r.transactionID == nil,
            (try? StreamChange.of(r))?.stream == name
        {
            try unpin(t, r)
            r.body = change.text
            r.customTag = Collapse.joinTags(r.customTag, options.customTag)
            r.customHeaders.merge(options.customHeaders) { _, new in new }
            try put(t, r, hasDependents: last.hasDependents)
            try pin(t, file: file, for: r.id)
            return r.id
        }
        let id = try allocateID(t)
        let r = RequestRecord(
            id: id, method: .putStream, entitySet: set.name, entityKey: Self.entityKey(set, key), keyBytes: keyBytes,
            body: change.text, options: options, repeatabilityID: EDMGuid.random(), createdAt: .now, dependencies: [],
            localKey: false)
        // A replacement of an entity created here waits for its create (it is in its chain).
        try put(t, r, hasDependents: false)
        try pin(t, file: file, for: id)
        return id
    }

    /// Creates a media entity as a local change: `entity` (a local key where its key is
    /// missing) with `bytes` (a file `IncomingStream.finish` wrote) as its media resource, and
    /// its requests — a `createMedia` (`POST Set` with the bytes and `slug`, the way OData creates
    /// a media entity) and, when the entity sets properties besides its key, a PATCH of them after
    /// it, waiting for its answer — all in `t`. Refused in a transaction, as a stream
    /// replacement is. Returns the create's request id and the entity as stored.
    package func createMedia(
        _ t: WriteView, set setName: String, entity given: Properties, bytes: StreamRecord, slug: String?,
        options: ChangeOptions
    ) throws -> (requestID: Int64, entity: Properties) {
        let (set, streams, file, size, sha) = try streamChangeTarget(
            setName, bytes: bytes, options: options, what: "a media create")
        guard set.type.hasStream else {
            throw EntityError.badInput("\(set.name) is not a set of media entities (its type has no HasStream)")
        }
        let (entity, localKey) = try fillLocalKey(t, set: set, Self.withEmptyCollections(given, set))
        try set.insert(t, entity)
        let key = try set.keyValues(entity)
        let keyBytes = try set.encodeKey(key)
        var local = bytes
        local.local = true
        try streams.put(t, entityKey: set.entityKey(keyBytes), name: "", local)
        let change = StreamChange(
            stream: "", file: file, size: size, sha256: sha,
            contentType: bytes.contentType ?? "application/octet-stream", slug: slug)
        let deps = try dependencies(t.reader, set: set, props: entity)
        let id = try allocateID(t)
        let create = RequestRecord(
            id: id, method: .createMedia, entitySet: set.name, entityKey: Self.entityKey(set, key), keyBytes: keyBytes,
            body: change.text, options: options, repeatabilityID: EDMGuid.random(), createdAt: .now,
            dependencies: deps, localKey: localKey)
        try put(t, create, hasDependents: false)
        try pin(t, file: file, for: id)
        for d in deps { try markDepended(t, id: d) }
        // What the entity sets besides its key: a PATCH once the service has made it.
        let keyNames = Set(set.type.key)
        let changes = Properties(entity.filter { !keyNames.contains($0.key) && !$0.value.isNull })
        if !changes.isEmpty {
            let patch = RequestRecord(
                id: try allocateID(t), method: .update, entitySet: set.name, entityKey: create.entityKey,
                keyBytes: keyBytes, body: json(set, changes, select: Set(changes.map(\.key))), options: options,
                repeatabilityID: EDMGuid.random(), createdAt: .now, dependencies: [], localKey: false)
            try put(t, patch, hasDependents: false)
        }
        return (id, try set.get(t.reader, key: key) ?? entity)
    }

    /// After stream replacement `r` left the queue unapplied (undone, given up, superseded by a
    /// delete): the stream's record, if it still holds `r`'s bytes as a local change, goes back to
    /// the service's version — not downloaded, its bytes brought by the next refresh that
    /// retrieves streams or by `fetchStream`.
    func revertStream(_ t: WriteView, _ r: RequestRecord) throws {
        guard let change = try? StreamChange.of(r), let streams = store.streams else { return }
        let entityKey = EntityStore.entityKey(set: r.entitySet, keyBytes: r.keyBytes)
        guard let record = try streams.record(t.reader, entityKey: entityKey, name: change.stream),
            record.isLocal, record.file == change.file
        else { return }
        var back = StreamRecord.announced(
            contentType: nil, mediaETag: record.mediaETag, readLink: record.readLink, editLink: record.editLink)
        back.entityETag = record.entityETag
        try streams.put(t, entityKey: entityKey, name: change.stream, back)
    }

    /// After stream replacement `r` was applied by the service (answered with the media ETag
    /// `mediaETag`, nil when it gave none): the stream's record, if it still holds `r`'s bytes, is
    /// the service's version now; if a later replacement is queued, it is made on that version.
    package func streamApplied(_ t: WriteView, _ r: RequestRecord, mediaETag: String?, entityETag: String?) throws {
        guard let change = try? StreamChange.of(r), let streams = store.streams else { return }
        let entityKey = EntityStore.entityKey(set: r.entitySet, keyBytes: r.keyBytes)
        guard var record = try streams.record(t.reader, entityKey: entityKey, name: change.stream) else { return }
        if record.file == change.file { record.local = nil }
        record.mediaETag = mediaETag
        record.entityETag = entityETag ?? record.entityETag
        try streams.put(t, entityKey: entityKey, name: change.stream, record)
    }

    /// Stream replacement `r` met a conflict (the service's stream changed since): its local
    /// record is now made on the service's version, `mediaETag` (nil: none given — the entity's
    /// ETag goes then), so that "keep mine" sends it against that version and "give up" goes
    /// back to it.
    package func streamConflict(_ t: WriteView, _ r: RequestRecord, mediaETag: String?) throws {
        guard let change = try? StreamChange.of(r), let streams = store.streams else { return }
        let entityKey = EntityStore.entityKey(set: r.entitySet, keyBytes: r.keyBytes)
        guard var record = try streams.record(t.reader, entityKey: entityKey, name: change.stream), record.isLocal
        else { return }
        record.mediaETag = mediaETag
        try streams.put(t, entityKey: entityKey, name: change.stream, record)
    }

    /// The stream queue's invariants (`check`): each `putStream` record's body reads and its file
    /// is kept for it in `q/stream-files`, exists with the recorded size and SHA-256; each entry
    /// of `q/stream-files` belongs to a queued `putStream` request with that file.
    func checkStreamFiles(_ t: ReadView, _ putStreams: [RequestRecord], problem: (String) -> Void) throws {
        var expected: [String: Int64] = [:]
        for r in putStreams {
            guard let change = try? StreamChange.of(r) else {
                problem("RequestQueue: request \(r.id) replaces a stream but its body does not read")
                continue
            }
            expected[change.file] = r.id
            if let streams = store.streams {
                var file = StreamRecord(state: .stored, file: change.file, size: change.size, sha256: change.sha256)
                file.contentType = change.contentType
                do {
                    let opened = try streams.open(file, what: change.describe(r))
                    if opened.size != change.size {
                        problem(
                            "RequestQueue: request \(r.id)'s stream file streams/\(change.file) has \(opened.size) bytes, not \(change.size)"
                        )
                    } else if try opened.sha256() != change.sha256 {
                        problem(
                            "RequestQueue: request \(r.id)'s stream file streams/\(change.file) does not have the recorded SHA-256"
                        )
                    }
                } catch {
                    problem("RequestQueue: request \(r.id): \(error)")
                }
            }
        }
        var pinned: [String: Int64] = [:]
        try t.withCursor(streamFiles) { c in
            var e = try c.first()
            while let (k, v) = e {
                let name = String(decoding: k, as: UTF8.self)
                if v.count == 8 {
                    pinned[name] = Int64(bitPattern: v.reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
                } else {
                    problem("q/stream-files: the entry of streams/\(name) does not name a request")
                }
                e = try c.next()
            }
        }
        for (file, id) in expected where pinned[file] != id {
            problem("q/stream-files: request \(id)'s file streams/\(file) is not kept for it")
        }
        for (file, id) in pinned where expected[file] != id {
            problem(
                "q/stream-files: streams/\(file) is kept for request \(id), which is not a queued stream replacement")
        }
    }
}
