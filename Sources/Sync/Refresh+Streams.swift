import LMDB
import Query
package import Storage

extension IncomingStream: StreamSink {}

/// One stream to download: its entity and name, and the record that announced it.
package struct PendingStream: Sendable {
    package var set: String
    package var key: [Value]
    package var keyBytes: [UInt8]
    package var name: String
    package var record: StreamRecord
}

extension Refresher {
    /// Downloads the streams of `sets` that are announced but not downloaded (new, or changed
    /// since: `StreamStore.announce` marks those), one at a time, each into a file of its own and
    /// committed in a transaction of its own — so memory holds one piece of one stream, and a
    /// refresh killed meanwhile keeps every stream committed before and downloads the rest next
    /// time. An unchanged stream is never downloaded again. A stream the service does not answer
    /// with a success is counted in `streamsFailed` with its message and stays not downloaded.
    func downloadStreams(sets: [String], into report: inout RefreshReport.Request) async throws {
        let store = self.store
        guard let streams = store.streams else { return }
        for setName in sets {
            let set = try store.set(setName)
            guard set.type.hasStreams else { continue }
            let pending = try store.read { t in try Self.pendingStreams(t, set: set, streams: streams) }
            for p in pending {
                try Task.checkCancellation()
                try await download(p, set: set, streams: streams, into: &report)
            }
        }
        store.sweepStreamsIfNeeded()
    }

    /// The not-downloaded streams of `set`'s entities.
    static func pendingStreams(_ t: ReadView, set: EntitySetHandle, streams: StreamStore) throws -> [PendingStream] {
        var out: [PendingStream] = []
        let prefix = set.entityKey([])
        try t.withCursor(streams.database) { c in
            var e = try c.seek(prefix)
            while let (k, v) = e, k.starts(with: prefix) {
                let rest = Array(k.dropFirst(prefix.count))
                if let record = try? StreamRecord.decode(v), record.state == .notDownloaded,
                    let (values, n) = try? rest.withUnsafeBytes({ try KeyCodec.decode($0, count: set.type.key.count) }),
                    let name = StreamStore.streamName(Array(rest[n...]))
                {
                    out.append(
                        PendingStream(
                            set: set.name, key: values, keyBytes: Array(rest[..<n]), name: name, record: record))
                }
                e = try c.next()
            }
        }
        return out
    }

    /// Downloads one stream and commits its record, unless the record changed meanwhile (a newer
    /// announcement, a delete): then the file goes and the newer state stays.
    func download(
        _ p: PendingStream, set: EntitySetHandle, streams: StreamStore, into report: inout RefreshReport.Request
    ) async throws {
        let what = "\(p.set)(\(set.describeKey(p.key)))" + (p.name.isEmpty ? "/$value" : "/\(p.name)")
        let file = try streams.incoming(for: what)
        func failed(_ why: String) {
            file.abandon()
            report.streamsFailed += 1
            if report.streamProblems.count < 10 { report.streamProblems.append("\(what): \(why)") }
        }
        let answer: StreamAnswer
        do {
            answer = try await backend.download(
                set: p.set, key: p.key, keyText: set.describeKey(p.key), name: p.name, link: p.record.readLink,
                into: file, extra: headers)
        } catch let e as BackendError {
            // A link to another origin (not followed: credentials go only to the service root), a
            // stream past the limit, an answer that cannot be read: this stream's fault, not the
            // service's state — it stays not downloaded and the refresh goes on. No answer at
            // all stops the refresh, as for a page.
            switch e {
            case .otherOrigin(let url, _):
                failed(
                    "its read link is on another origin than the service root, not followed: \(Membership.quoted(url))")
            case .badResponse(let m): failed("unreadable answer: \(Membership.quoted(m))")
            case .transport, .unreachable:
                file.abandon()
                throw e
            }
            return
        }
        guard answer.isSuccess else {
            failed("GET answered \(answer.status): \(Membership.quoted(String(answer.message.prefix(200))))")
            return
        }
        var template = p.record
        // 204: the entity has no bytes yet; stored as an empty stream.
        template.contentType = answer.contentType ?? template.contentType
        let record = try file.finish(template)
        let entityKey = set.entityKey(p.keyBytes)
        let stored = try await store.write { t -> Bool in
            guard try streams.record(t.reader, entityKey: entityKey, name: p.name) == p.record else { return false }
            try streams.put(t, entityKey: entityKey, name: p.name, record)
            return true
        }
        if stored {
            file.committed()
            report.streamsDownloaded += 1
            report.streamBytes += record.size ?? 0
        } else {
            file.abandon()
        }
    }
}
