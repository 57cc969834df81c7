import Foundation
import LMDB

/// What the store knows of one stream of one entity: a media entity's media resource
/// (`Set(key)/$value`, stream name "") or a named stream property (`Set(key)/Photo`).
///
/// Kept in the `streams` database under `StreamStore.key(set:keyBytes:name:)`; the bytes, when
/// downloaded, are a file of `StreamStore.directory` named by `file`.
package struct StreamRecord: Codable, Sendable, Hashable {
    /// The bytes are in `file`; or only what the service said of them is known.
    package enum State: String, Codable, Sendable {
        case stored
        case notDownloaded
    }

    package var state: State
    /// The file under `streams/` (`stored` only).
    package var file: String?
    /// Its size in bytes and SHA-256 (lowercase hex), as written (`stored` only).
    package var size: Int?
    package var sha256: String?
    /// The media type (`@odata.mediaContentType`, V2 `content_type`, the answer's `Content-Type`).
    package var contentType: String?
    /// The service's media ETag (`@odata.mediaEtag`, V2 `media_etag`, the answer's `ETag`): what
    /// a refresh compares to know whether the bytes changed.
    package var mediaETag: String?
    /// Where the service reads and writes the bytes (`@odata.mediaReadLink`/`mediaEditLink`, V2
    /// `media_src`/`edit_media`); nil: the conventional `Set(key)/$value` or `Set(key)/Name`.
    package var readLink: String?
    package var editLink: String?
    /// The entity's ETag when the service announced the stream: its version where the service
    /// gives no media ETag (odatapy until a stream is replaced; a service whose entity ETag
    /// covers its media).
    package var entityETag: String?
    /// The bytes are a local change the service has not acknowledged yet (a queued
    /// `RequestQueue.replaceStream`): `mediaETag` is then the service's version the change was
    /// made on (what the change's `If-Match` carries), and a refresh leaves the record alone.
    /// Nil (not written) for the service's own bytes.
    package var local: Bool?

    /// Whether the bytes are a local change not yet acknowledged (`local`).
    package var isLocal: Bool { local == true }

    /// The ETag of the bytes this record holds: the service's media ETag, or for a local change
    /// one made from its SHA-256 (as an authority makes its own: `"` and 32 hex digits `"`).
    package var currentETag: String? {
        guard isLocal else { return mediaETag }
        return sha256.map { "\"" + $0.prefix(32) + "\"" }
    }

    package init(
        state: State, file: String? = nil, size: Int? = nil, sha256: String? = nil, contentType: String? = nil,
        mediaETag: String? = nil, readLink: String? = nil, editLink: String? = nil
    ) {
        self.state = state
        self.file = file
        self.size = size
        self.sha256 = sha256
        self.contentType = contentType
        self.mediaETag = mediaETag
        self.readLink = readLink
        self.editLink = editLink
    }

    /// What the service says of a stream, without its bytes.
    package static func announced(
        contentType: String?, mediaETag: String?, readLink: String?, editLink: String?
    ) -> StreamRecord {
        StreamRecord(
            state: .notDownloaded, contentType: contentType, mediaETag: mediaETag, readLink: readLink,
            editLink: editLink)
    }

    /// Whether `announced`, what the service says of the stream now, is the version this record
    /// holds: the same media ETag; where neither has one, the same entity ETag. With neither,
    /// nothing says the bytes are unchanged, so they are not taken to be.
    package func sameVersion(as announced: StreamRecord) -> Bool {
        if mediaETag != nil || announced.mediaETag != nil { return mediaETag == announced.mediaETag }
        guard let tag = entityETag else { return false }
        return tag == announced.entityETag
    }

    package func encoded() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return Array((try? encoder.encode(self)) ?? Data())
    }

    package static func decode(_ bytes: some Collection<UInt8>) throws -> StreamRecord {
        do { return try JSONDecoder().decode(StreamRecord.self, from: Data(bytes)) } catch {
            throw EntityError.badInput("a stream record does not decode: \(error)")
        }
    }
}
