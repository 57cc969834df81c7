import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTP1
import Query
import Multipart

/// The multipart form of `$batch` (OData V4 Protocol §11.7, the same envelope as V2 [MS-ODATA]
/// §2.2.7.6): parsed into the `[Batch.Item]` of the JSON form, run by the same loop
/// (`Batch.run`), answered as `multipart/mixed`.
///
/// - A top-level `application/http` part is one request: a read, or a write outside any change
///   set. A nested `multipart/mixed` part is a change set: its requests form one atomicity group,
///   applied all or nothing; it holds no reads and no other change set.
/// - A request's `Content-ID` (on its MIME part, else among the headers of its HTTP message) is
///   its id: `$<Content-ID>` at the start of a later URL of the same change set names the entity
///   it created (V4 §11.7.3.1). It must be unique within its change set, and is echoed on its
///   answer. A request without one gets a generated id that no `Content-ID` of the batch takes.
/// - The answer holds one part per part of the request, in order: an `application/http` response
///   per request, a nested `multipart/mixed` with one response per request for a change set that
///   was applied, and one `application/http` error response — the failing request's — for a
///   change set that failed (V4 §11.7.4), in which nothing was applied.
/// - A body that is not such a batch changes nothing and answers 400 naming what is wrong: no
///   boundary, a missing close delimiter, more than `maxMultipartParts` parts in the batch or in a
///   change set, a change set in a change set, a read in a change set, a part that is not
///   `application/http`, a malformed request line.
extension Batch {
    /// The parts a multipart batch, and each of its change sets, may hold.
    static let maxMultipartParts = 1_000

    /// One part of a multipart batch: the item of a top-level request, or the items of a change
    /// set (none, for an empty one).
    enum MultipartUnit: Equatable {
        case request(Int)
        case changeSet(Range<Int>)
    }

    /// A parsed multipart batch: the items the loop runs, how the parts group them, and each
    /// item's `Content-ID` as the client sent it (nil when it sent none).
    struct MultipartRequest {
        var items: [Item] = []
        var units: [MultipartUnit] = []
        var contentIDs: [String?] = []
    }

    func respondMultipart(_ request: inout Request) async throws -> Response {
        let boundary = try Self.multipartBoundary(request.headers[.contentType] ?? "", of: "the $batch")
        try Negotiation.require(request, "multipart/mixed")
        let raw = Array(try await request.collectBody(upTo: service.options.maxRequestBytes).readableBytesView)
        let batch = try Self.parseMultipart(raw, boundary: boundary, maxWrites: service.options.maxBatchWrites)
        let (answers, extra) = try await run(batch.items, request, referencesAcrossUnits: false)
        // Lower-case boundaries: odatapy's client (5.3.0) lower-cases the Content-Type, boundary
        // included, before it splits the answer.
        let outer = "batch_" + UUID().uuidString.lowercased()
        var headers = extra
        headers[.contentType] = "multipart/mixed; boundary=\(outer)"
        // V2 answers a batch 202 Accepted ([MS-ODATA] §2.2.7.6.4, as Gateway does; pyodata
        // requires it), V4 200 OK (§11.7.4).
        return Response(
            status: service.v2 ? .accepted : .ok, headers: headers,
            body: .init(byteBuffer: ByteBuffer(bytes: Self.renderMultipart(batch, answers, boundary: outer))))
    }

    // MARK: Parsing

    /// The boundary of a `multipart/mixed` content type: 1–70 characters of RFC 2046 §5.1.1's
    /// `bchars`, not ending in a space.
    static func multipartBoundary(_ contentType: String, of what: String) throws -> String {
        guard let boundary = Multipart.boundary(ofContentType: contentType) else {
            throw ODataFailure(
                .badRequest,
                "\(what) is multipart/mixed without a boundary of 1 to 70 characters (Content-Type: '\(QueryError.quoting(contentType))')"
            )
        }
        let allowed = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'()+_,-./:=? "
        guard boundary.unicodeScalars.allSatisfy({ allowed.unicodeScalars.contains($0) }), boundary.last != " " else {
            throw ODataFailure(
                .badRequest,
                "the boundary '\(QueryError.quoting(boundary))' of \(what) holds a character RFC 2046 does not allow in one"
            )
        }
        return boundary
    }

    /// The parts of `body` between `--boundary` lines, at most `maxMultipartParts`.
    static func multipartParts(_ body: [UInt8], boundary: String, of what: String) throws -> [Multipart.Part] {
        do {
            return try Multipart.parts(body, boundary: boundary, maxParts: maxMultipartParts)
        } catch {
            throw ODataFailure(.badRequest, "\(what) cannot be read: \(error.description)")
        }
    }

    /// The media type of a `Content-Type` value, lower-cased, without its parameters.
    static func mediaType(_ contentType: String?) -> String? {
        contentType?.split(separator: ";", omittingEmptySubsequences: false)[0]
            .trimmingCharacters(in: .whitespaces).lowercased()
    }

    /// Reads a multipart batch into items: each top-level request one item, each change set an
    /// atomicity group named `changeset<n>` (made unique against every `Content-ID`). Past
    /// `maxWrites` writes it stops, refusing the batch (413).
    static func parseMultipart(_ body: [UInt8], boundary: String, maxWrites: Int = .max) throws -> MultipartRequest {
        let parts = try multipartParts(body, boundary: boundary, of: "the multipart $batch")
        var units: [(changeSet: Bool, requests: [(contentID: String?, item: Item)])] = []
        var writeCount = 0
        for (n, part) in parts.enumerated() {
            let place = "part \(n + 1) of the $batch"
            guard mediaType(part.header("content-type")) == "multipart/mixed" else {
                let request = try multipartRequest(part, place)
                if writes(request.item.method) { writeCount += 1 }
                if writeCount > maxWrites { throw tooManyWrites(maxWrites) }
                units.append((false, [request]))
                continue
            }
            let what = "the change set in \(place)"
            let inner = try multipartBoundary(part.header("content-type") ?? "", of: what)
            var requests: [(contentID: String?, item: Item)] = []
            var ids = Set<String>()
            for (m, sub) in try multipartParts(part.body, boundary: inner, of: what).enumerated() {
                let subPlace = "request \(m + 1) of \(what)"
                if mediaType(sub.header("content-type"))?.hasPrefix("multipart/") == true {
                    throw ODataFailure(.badRequest, "\(subPlace) is a change set: a change set cannot hold another")
                }
                let request = try multipartRequest(sub, subPlace)
                if request.item.method == .get || request.item.method == .head {
                    throw ODataFailure(
                        .badRequest,
                        "\(subPlace) is a \(request.item.method.rawValue): a change set holds only changes; send reads outside change sets"
                    )
                }
                if let id = request.contentID, !ids.insert(id).inserted {
                    throw ODataFailure(
                        .badRequest, "Content-ID '\(QueryError.quoting(id))' appears twice in \(what)")
                }
                requests.append(request)
                writeCount += 1
                if writeCount > maxWrites { throw tooManyWrites(maxWrites) }
            }
            units.append((true, requests))
        }

        // Ids and group names: a Content-ID where it names one request (a change set's are unique
        // within it, and its group is the unit; a top-level request's is its unit's name, unique
        // in the batch), else a generated name no Content-ID of the batch takes.
        var uses: [String: Int] = [:]
        for unit in units { for r in unit.requests { if let id = r.contentID { uses[id, default: 0] += 1 } } }
        var taken = Set(uses.keys)
        func fresh(_ base: String) -> String {
            var name = base
            while taken.contains(name) { name += "_" }
            taken.insert(name)
            return name
        }
        var out = MultipartRequest()
        for (k, unit) in units.enumerated() {
            let first = out.items.count
            let group = unit.changeSet ? fresh("changeset\(k + 1)") : nil
            for r in unit.requests {
                var item = r.item
                if let id = r.contentID, unit.changeSet || uses[id] == 1 {
                    item.id = id
                } else {
                    item.id = fresh("request\(out.items.count + 1)")
                }
                item.group = group
                out.items.append(item)
                out.contentIDs.append(r.contentID)
            }
            out.units.append(unit.changeSet ? .changeSet(first..<out.items.count) : .request(first))
        }
        return out
    }

    /// The request an `application/http` part carries: `METHOD URL HTTP/1.1`, headers, a blank
    /// line, the body (cut to its `Content-Length` when it has one).
    static func multipartRequest(_ part: Multipart.Part, _ place: String) throws -> (contentID: String?, item: Item) {
        let type = part.header("content-type")
        guard mediaType(type) == "application/http" else {
            throw ODataFailure(
                .badRequest,
                "\(place) is not application/http (Content-Type: '\(QueryError.quoting(type ?? "none"))')")
        }
        if let encoding = part.header("content-transfer-encoding"),
            !["binary", "8bit", "7bit"].contains(encoding.lowercased())
        {
            throw ODataFailure(
                .badRequest,
                "\(place) has Content-Transfer-Encoding '\(QueryError.quoting(encoding))'; this service reads binary")
        }
        // Blank lines before the request line are tolerated.
        let message = Array(part.body.drop { $0 == 13 || $0 == 10 })
        let (head, rest) = Multipart.splitHead(message)
        let lineEnd = head.firstIndex(of: 10) ?? head.endIndex
        var requestLine = head[..<lineEnd]
        if requestLine.last == 13 { requestLine = requestLine.dropLast() }
        let line = String(decoding: requestLine, as: UTF8.self)
        let fields = line.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count == 3, !fields[1].isEmpty, fields[2].hasPrefix("HTTP/1."),
            let requested = HTTPRequest.Method(fields[0].uppercased())
        else {
            throw ODataFailure(
                .badRequest,
                "\(place): malformed request line '\(QueryError.quoting(line))'; expected METHOD URL HTTP/1.1")
        }
        var headers: [(String, String)]
        do {
            headers = try Multipart.headers(Array(head[min(lineEnd + 1, head.endIndex)...]))
        } catch {
            throw ODataFailure(.badRequest, "\(place): \(error.description)")
        }
        // V2's MERGE is PATCH, and a POST may stand for another method (X-HTTP-Method), as
        // SAPUI5's V2 model sends them in change sets.
        var method = requested
        if method == .post, let tunnel = headers.first(where: { $0.0 == "x-http-method" })?.1,
            let m = HTTPRequest.Method(tunnel.uppercased()), ["MERGE", "PUT", "PATCH", "DELETE"].contains(m.rawValue)
        {
            method = m
            headers.removeAll { $0.0 == "x-http-method" }
        }
        if method.rawValue == "MERGE" { method = .patch }
        guard [.get, .head, .post, .patch, .put, .delete].contains(method) else {
            throw ODataFailure(
                .badRequest,
                "\(place): method '\(QueryError.quoting(method.rawValue))' is not one this service takes (GET, POST, PATCH, MERGE, PUT, DELETE)"
            )
        }
        var body = rest
        if let length = headers.first(where: { $0.0 == "content-length" })?.1 {
            guard let n = Int(length), n >= 0, n <= body.count else {
                throw ODataFailure(
                    .badRequest,
                    "\(place) says Content-Length: \(QueryError.quoting(length)), but \(body.count) bytes follow its headers"
                )
            }
            body.removeLast(body.count - n)
        }
        let contentID = part.header("content-id") ?? headers.first { $0.0 == "content-id" }?.1
        headers.removeAll { $0.0 == "content-length" || $0.0 == "content-id" }
        let item = Item(
            id: "", method: method, url: String(fields[1]), headers: headers, body: body, group: nil, dependsOn: [])
        return (contentID, item)
    }

    // MARK: Rendering

    /// The answer: one part per unit, in order, CRLF line ends; `Content-ID`s echoed.
    static func renderMultipart(_ batch: MultipartRequest, _ answers: [Answer], boundary: String) -> [UInt8] {
        var out: [UInt8] = []
        func line(_ text: String) {
            out.append(contentsOf: text.utf8)
            out.append(contentsOf: [13, 10])
        }
        func safe(_ value: String) -> String { String(value.unicodeScalars.filter { $0 != "\r" && $0 != "\n" }) }
        func http(_ a: Answer, contentID: String?) {
            line("Content-Type: application/http")
            line("Content-Transfer-Encoding: binary")
            if let contentID { line("Content-ID: \(safe(contentID))") }
            line("")
            line("HTTP/1.1 \(a.status) \(HTTPResponseStatus(statusCode: a.status).reasonPhrase)")
            for (name, value) in a.headers where name.lowercased() != "content-length" {
                line("\(name): \(safe(value))")
            }
            line("Content-Length: \(a.body.count)")
            line("")
            out.append(contentsOf: a.body)
            line("")
        }
        for unit in batch.units {
            line("--\(boundary)")
            switch unit {
            case .request(let i):
                http(answers[i], contentID: batch.contentIDs[i])
            case .changeSet(let range):
                // Failed: the request that failed answers for the change set (the others carry 424).
                if let failed = range.first(where: { answers[$0].status >= 400 && answers[$0].status != 424 })
                    ?? range.first(where: { answers[$0].status >= 400 })
                {
                    http(answers[failed], contentID: batch.contentIDs[failed])
                    continue
                }
                let inner = "changeset_" + UUID().uuidString.lowercased()
                line("Content-Type: multipart/mixed; boundary=\(inner)")
                line("")
                for i in range {
                    line("--\(inner)")
                    http(answers[i], contentID: batch.contentIDs[i])
                }
                line("--\(inner)--")
            }
        }
        line("--\(boundary)--")
        return out
    }
}
