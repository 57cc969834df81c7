import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OfflineStore
import Storage

/// Streams over HTTP: `GET`/`HEAD Set(key)/$value` (a media entity's media resource) and
/// `Set(key)/Property` (a stream property, OData 4.01 Part 2 §4.10: answered with the bytes
/// themselves), and `PUT` of either in an authority store.
///
/// A GET answers the stored bytes with their `Content-Type`, `Content-Length` and media `ETag`,
/// read from the file in pieces and sent through `ResponseStream` (a bounded queue): a 1 GiB
/// stream is served within a few MiB. `If-None-Match` with the media ETag answers 304. A stream
/// the store has not downloaded (an offline copy whose defining request does not retrieve
/// streams) answers 404 saying so.
///
/// A PUT stores the body as the stream (`Content-Type` as sent, `application/octet-stream` when
/// none), read in pieces as it arrives, and answers 204 with the new media ETag; `If-Match` with
/// another ETag answers 412 and changes nothing. In an offline copy the PUT is a local change
/// (`OfflineStore.replaceStream`): stored and queued in one transaction, sent to the service by
/// the next flush, with the `OfflineOData.*` headers of any other write (not a transaction id:
/// a stream goes alone); the ETag answered is made from the bytes until the service's comes.
struct Media {
    let service: ODataService
    var store: OfflineStore { service.store }

    func respond(_ request: Request, resource: String, query: String) async throws -> Response {
        if !query.isEmpty {
            throw ODataFailure(.badRequest, "a stream takes no query options ('\(QueryError.quoting(query))')")
        }
        switch request.method {
        case .get, .head: return try get(request, resource: resource)
        case .put: return try await put(request, resource: resource)
        default:
            throw ODataFailure.methodNotAllowed(
                request.method, "the stream '\(QueryError.quoting(resource))'", allow: "GET, HEAD, PUT")
        }
    }

    func get(_ request: Request, resource: String) throws -> Response {
        let stream: StoredStream
        do { stream = try store.openStream(resource) } catch let e as StreamNotDownloaded {
            // An authority's media entity whose stream was never written has no bytes yet.
            if !store.isOffline { return Response(status: .noContent) }
            throw ODataFailure(.notFound, "\(e)")
        } catch let e as EntityError {
            if case .notFound = e { throw e }
            throw ODataFailure(.badRequest, "\(e)")
        }
        var headers = HTTPFields()
        headers[.contentType] = stream.info.contentType ?? "application/octet-stream"
        if let tag = stream.info.mediaETag { headers[.eTag] = tag }
        if let tag = stream.info.mediaETag, let wanted = request.headers[.ifNoneMatch],
            wanted == "*"
                || wanted.split(separator: ",").contains(where: { Self.bare($0) == Self.bare(Substring(tag)) })
        {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentLength] = String(stream.size)
        if request.method == .head { return Response(status: .ok, headers: headers) }
        return Response(
            status: .ok, headers: headers,
            body: ResponseStream.streamed(logger: service.logger) { emit in
                try stream.forEachChunk { try emit($0) }
            })
    }

    func put(_ request: Request, resource: String) async throws -> Response {
        let options =
            store.isOffline
            ? try Writes.changeOptions { name in HTTPField.Name(name).flatMap { request.headers[$0] } } : nil
        if options?.transactionID != nil {
            throw ODataFailure(
                .badRequest,
                "a stream replacement goes to the service as a request of its own: it takes no OfflineOData.TransactionID"
            )
        }
        let upload: StreamUpload
        do { upload = try store.beginStream(resource) } catch let e as EntityError {
            if case .notFound = e { throw e }
            throw ODataFailure(.badRequest, "\(e)")
        }
        let limit = service.options.maxStreamBytes
        for try await buffer in request.body {
            guard upload.size + buffer.readableBytes <= limit else {
                throw ODataFailure(.contentTooLarge, "the stream is larger than the limit of \(limit) bytes")
            }
            try buffer.withUnsafeReadableBytes { try upload.append($0) }
        }
        let info: StreamInfo
        do {
            let contentType = request.headers[.contentType] ?? "application/octet-stream"
            if let options {
                info = try await upload.finishQueued(
                    contentType: contentType, ifMatch: request.headers[.ifMatch], options: options)
            } else {
                info = try await upload.finish(contentType: contentType, ifMatch: request.headers[.ifMatch])
            }
        } catch let e as StreamPreconditionFailed {
            throw ODataFailure(.preconditionFailed, "\(e)")
        }
        var headers = HTTPFields()
        if let tag = info.mediaETag { headers[.eTag] = tag }
        return Response(status: .noContent, headers: headers)
    }

    static func bare(_ s: Substring) -> Substring {
        let t = s.trimmingCharacters(in: .whitespaces)
        return Substring(t.hasPrefix("W/") ? String(t.dropFirst(2)) : t)
    }

    /// The media entity set `resource` names (`Photos`), or nil.
    static func mediaSet(_ store: OfflineStore, _ resource: String) -> String? {
        guard let set = store.schema.entitySet(resource.removingPercentEncoding ?? resource),
            (try? store.entities.set(set.name))?.type.hasStream == true
        else { return nil }
        return set.name
    }

    /// Whether the request's body is JSON (an entity, not a media resource's bytes).
    static func isJSON(_ request: Request) -> Bool {
        let type = request.headers[.contentType]?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces)
        return type?.lowercased() == "application/json"
    }

    /// `POST Set` of a media entity set with the bytes as the body (OData 4.01 Part 1 §11.4.2.2;
    /// V2 the same): the entity is made with the key the service assigns (`Core.Computed`, V2
    /// `sap:creatable="false"`) and the bytes as its media resource, its properties at their
    /// defaults — 201 with the entity, its `Location` and media annotations. In an offline copy it
    /// is a local change (`OfflineStore.createMedia`), its key a local one until flushed. The
    /// `Slug` header is kept for the flush. Repeatable as any write, by the bytes' SHA-256.
    func create(_ request: Request, set: String) async throws -> Response {
        let options =
            store.isOffline
            ? try Writes.changeOptions { name in HTTPField.Name(name).flatMap { request.headers[$0] } }
            : ChangeOptions()
        if options.transactionID != nil {
            throw ODataFailure(
                .badRequest,
                "a media create goes to the service as a request of its own: it takes no OfflineOData.TransactionID")
        }
        guard let streams = store.entities.streams else {
            throw ODataFailure(.badRequest, "\(set): this store has no streams")
        }
        let file = try streams.incoming(for: "a new \(set)")
        let limit = service.options.maxStreamBytes
        for try await buffer in request.body {
            guard file.size + buffer.readableBytes <= limit else {
                file.abandon()
                throw ODataFailure(.contentTooLarge, "the stream is larger than the limit of \(limit) bytes")
            }
            try buffer.withUnsafeReadableBytes { try file.append($0) }
        }
        let contentType = request.headers[.contentType] ?? "application/octet-stream"
        let written = try file.finish(StreamRecord(state: .stored, contentType: contentType))
        let slug = request.headers[HTTPField.Name("Slug")!].map { $0.removingPercentEncoding ?? $0 }
        let root = service.serviceRoot(request)
        let repeatability = try Repeatability(
            request.headers, window: Double(store.repeatabilityWindowSeconds))
        let fingerprint = Array("POST \(set)\n\(written.sha256 ?? "")".utf8)
        let store = self.store
        let recorded: RecordedResponse
        let replayed: Bool
        do {
            (recorded, replayed) = try await store.served(
                repeatabilityID: repeatability?.id, fingerprint: fingerprint
            ) { tx in
                let entity = tx.queued ? [:] : try Writes.assigningComputedKey(store, tx, set: set, [:])
                let (stored, etag) = try tx.createMedia(
                    set: set, entity: entity, bytes: written, slug: slug, options: options)
                let url = try Writes.entityURL(store, set: set, entity: stored)
                var body = try Writes.entityJSON(store, set: set, entity: stored, etag: etag, root: root)
                if !V2Dialect.applies(to: store), body.last == UInt8(ascii: "}") {
                    var media = JSONBuffer()
                    media.append(",\"@odata.mediaReadLink\":")
                    media.appendString(url + "/$value")
                    media.append(",\"@odata.mediaContentType\":")
                    media.appendString(contentType)
                    if let sha = written.sha256, !tx.queued {
                        media.append(",\"@odata.mediaEtag\":")
                        media.appendString("\"" + sha.prefix(32) + "\"")
                    }
                    body.removeLast()
                    body += media.bytes + [UInt8(ascii: "}")]
                }
                return RecordedResponse(
                    status: 201,
                    headers: [
                        ("Location", root + url), ("ETag", etag),
                        ("Content-Type", V2Dialect.jsonContentType(store)),
                    ],
                    body: body)
            }
        } catch {
            file.abandon()
            throw error
        }
        if replayed { file.abandon() } else { file.committed() }
        store.entities.sweepStreamsIfNeeded()
        var response = recorded.httpResponse
        if let (name, value) = repeatability?.result(replayed: replayed) { response.headers[name] = value }
        return response
    }
}
