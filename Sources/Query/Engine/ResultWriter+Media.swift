import LMDB
import Storage

extension ResultWriter {
    /// The stream records of `e` (media resource under "", stream properties by name): none for
    /// a type without streams or a store without a `streams` database.
    func streamRecords(_ e: EntityRef, executor: QueryExecutor) throws -> [String: StreamRecord] {
        guard let streams = e.set.streams else { return [:] }
        let keyBytes: [UInt8]
        if let pk = e.primaryKey {
            keyBytes = Array(pk)
        } else {
            keyBytes = try e.set.encodeKey(try e.set.keyValues(try e.properties()))
        }
        var out: [String: StreamRecord] = [:]
        for (name, record) in try streams.records(executor.t, entityKey: e.set.entityKey(keyBytes)) {
            out[name] = record
        }
        return out
    }

    /// V4's media annotations of a media entity (`@odata.mediaReadLink`, `@odata.mediaContentType`,
    /// `@odata.mediaEtag`) and of each stream property (`Name@odata.mediaReadLink`, …; only when
    /// the shape selects every property): the read link is this service's own (`Set(key)/$value`,
    /// `Set(key)/Name`), whatever the service the store copies said; content type and media ETag
    /// are the stored stream's, when known. Each member is preceded by a comma.
    func writeMediaAnnotations(
        _ e: EntityRef, shape: EntityShape, executor: QueryExecutor, first: inout Bool, to out: inout JSONBuffer
    ) throws {
        let type = e.set.type
        let properties = shape.options.select == nil ? type.streamProperties : []
        guard type.hasStream || !properties.isEmpty else { return }
        let records = try streamRecords(e, executor: executor)
        var url = JSONBuffer()
        try shape.writeCanonicalURL(e, to: &url)
        let base = String(decoding: url.bytes.dropFirst().dropLast(), as: UTF8.self)
        func member(_ name: String, _ value: String) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.appendString(name)
            out.append(UInt8(ascii: ":"))
            out.appendString(value)
        }
        for name in (type.hasStream ? [""] : []) + properties {
            let prefix = name.isEmpty ? "" : name
            member(prefix + "@odata.mediaReadLink", base + (name.isEmpty ? "/$value" : "/" + name))
            if let r = records[name] {
                if let c = r.contentType { member(prefix + "@odata.mediaContentType", c) }
                if let tag = r.currentETag { member(prefix + "@odata.mediaEtag", tag) }
            }
        }
    }

    /// V2's media members of `__metadata` (`media_src`, `content_type`, `edit_media`,
    /// `media_etag`) for a media entity; each preceded by a comma.
    func writeMediaMetadataV2(
        _ e: EntityRef, executor: QueryExecutor, absolute: String, to out: inout JSONBuffer
    ) throws {
        guard e.set.type.hasStream else { return }
        let record = try streamRecords(e, executor: executor)[""]
        out.append(",\"media_src\":")
        out.appendString(absolute + "/$value")
        out.append(",\"edit_media\":")
        out.appendString(absolute + "/$value")
        if let c = record?.contentType {
            out.append(",\"content_type\":")
            out.appendString(c)
        }
        if let tag = record?.currentETag {
            out.append(",\"media_etag\":")
            out.appendString(tag)
        }
    }
}
