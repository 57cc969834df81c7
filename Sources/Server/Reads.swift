import HTTPTypes
import Hummingbird
import NIOCore
import OfflineStore
import Query
import Storage

/// GET (and HEAD) of a resource: an entity set, one entity, a navigation path, `/$count`, with
/// every query option the engine answers. Server-driven paging follows `Prefer:
/// odata.maxpagesize` or the service's default page size.
struct Reads {
    let service: ODataService
    var store: OfflineStore { service.store }

    func get(_ request: Request, url: String, resource: String) async throws -> Response {
        let isCount = resource.hasSuffix("/$count")
        if isCount { try Negotiation.require(request, "text/plain") } else { try Negotiation.requireJSON(request) }
        let prefer = Prefer(request.headers[.prefer])
        var headers = HTTPFields()
        var applied: [String] = []
        let pageSize = prefer.maxPageSize ?? service.options.defaultPageSize
        if let n = prefer.maxPageSize { applied.append("odata.maxpagesize=\(n)") }
        if !applied.isEmpty { headers[.preferenceApplied] = applied.joined(separator: ",") }
        headers[.contentType] = isCount ? "text/plain" : "application/json;odata.metadata=minimal"
        let store = self.store
        let produce: @Sendable (@escaping (UnsafeRawBufferPointer) throws -> Void) throws -> Void = { sink in
            try store.query(url, format: .json, pageSize: isCount ? nil : pageSize, writeBytes: sink)
        }
        if let body = try ResponseStream.inline(produce) {
            var bytes = body
            if isCount, bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
            if request.method == .head { return Response(status: .ok, headers: headers) }
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
        }
        if request.method == .head { return Response(status: .ok, headers: headers) }
        return Response(status: .ok, headers: headers, body: ResponseStream.streamed(produce))
    }
}
