import Foundation

/// OData V2 `$batch` in `multipart/mixed` (OData V2 §2.2.7.6 of [MS-ODATA]; RFC 2046 §5.1): the
/// encoder of a batch request and the parser of its response.
///
/// A batch is a sequence of **units**: a retrieve request (a GET) as one `application/http` part,
/// or a **change set** — a nested `multipart/mixed` part holding modifying requests that the
/// service applies all or nothing. V2 allows a modifying request only inside a change set, so a
/// modifying request outside any atomicity group goes as a change set of its own. Each request of
/// a change set carries a `Content-ID` (its `Request.id`, else its position) by which a
/// later request of the same change set may name its result (`$1`); flush does not rely on it,
/// since not every service resolves such references (mock-sap does not): a request after a
/// create with a server-assigned key waits for the next round trip, with the key rewritten.
///
/// The answer is one part per unit, in order: an `application/http` response for a retrieve
/// request, a nested `multipart/mixed` with one response per request for a change set that was
/// applied, and a single `application/http` error response for a change set that failed (the
/// service rolled it back, and does not say which member failed).
///
/// **Why hand-written, not `vapor/multipart-kit`.** multipart-kit 4.7.1 is a streaming
/// `multipart/form-data` library (`FormDataEncoder`/`FormDataDecoder`, a callback parser): it
/// neither nests a multipart body in a part nor reads the `application/http` messages inside
/// parts, which are most of the work here; the answer is already in memory, bounded by
/// the client's body limit; and it would be a new package dependency for about 200 lines of code that `MultipartTests` pin (delimiters at line starts only, preamble and
/// epilogue ignored, LF or CRLF line ends, a missing close delimiter refused).
///
/// This module depends on nothing: `Remote` writes a client's `$batch` with it and `Server` reads a
/// client's, without the server linking the HTTP client.
package enum Multipart {
    /// One HTTP request inside a batch.
    package struct Request: Sendable {
        package var method: String
        package var url: String
        package var headers: [(String, String)]
        package var body: [UInt8]?
        /// Its atomicity group (a change set; nil: none).
        package var group: String?
        /// Its `Content-ID` inside a change set (nil: its position, 1-based).
        package var id: String?

        package init(
            method: String, url: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
            group: String? = nil, id: String? = nil
        ) {
            (self.method, self.url, self.headers, self.body, self.group, self.id) =
                (method, url, headers, body, group, id)
        }

        package func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }
    }

    /// One HTTP response inside a batch's answer (header names lower-cased).
    package struct Response: Sendable {
        package var status: Int
        package var headers: [(String, String)]
        package var body: [UInt8]

        package init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
            (self.status, self.headers, self.body) = (status, headers, body)
        }

        package func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }
    }

    /// One unit of a batch: the indices (into the request list) it sends, and whether they form a
    /// change set.
    package struct Unit: Equatable, Sendable {
        package var requests: [Int]
        package var isChangeSet: Bool
    }

    /// One part of a multipart body: its headers (names lower-cased) and its content.
    package struct Part: Sendable {
        package var headers: [(String, String)]
        package var body: [UInt8]

        package func header(_ name: String) -> String? {
            headers.first { $0.0 == name.lowercased() }?.1
        }
    }

    /// The answer to one unit.
    package enum Answer: Sendable {
        case single(Response)
        case changeSet([Response])
    }

    /// The units `requests` go in: consecutive requests of one `group` form one change set, a
    /// modifying request outside any group a change set of its own, a GET a part of its own.
    package static func units(_ requests: [Request]) -> [Unit] {
        var out: [Unit] = []
        var lastGroup: String? = nil
        for (i, r) in requests.enumerated() {
            if let g = r.group {
                if lastGroup == g, let last = out.indices.last {
                    out[last].requests.append(i)
                } else {
                    out.append(Unit(requests: [i], isChangeSet: true))
                }
                lastGroup = g
                continue
            }
            lastGroup = nil
            out.append(Unit(requests: [i], isChangeSet: r.method != "GET"))
        }
        return out
    }

    /// The body of a `$batch` request of `requests` with `boundary` (the `Content-Type` is
    /// `multipart/mixed; boundary=<boundary>`). URLs go as they are, relative to the service
    /// root; each request's headers go with it, with `Content-Type: application/json` and its
    /// length when it has a body.
    package static func encode(_ requests: [Request], boundary: String) -> [UInt8] {
        var out: [UInt8] = []
        func line(_ s: String) { out.append(contentsOf: Array(s.utf8)); out.append(contentsOf: [13, 10]) }
        func http(_ i: Int, contentID: String?) {
            let r = requests[i]
            line("Content-Type: application/http")
            line("Content-Transfer-Encoding: binary")
            if let contentID { line("Content-ID: \(contentID)") }
            line("")
            line("\(r.method) \(r.url) HTTP/1.1")
            var headers = r.headers.filter { !["content-length", "content-id"].contains($0.0.lowercased()) }
            if r.header("Accept") == nil { headers.append(("Accept", "application/json")) }
            if let body = r.body {
                if r.header("Content-Type") == nil { headers.append(("Content-Type", "application/json")) }
                headers.append(("Content-Length", String(body.count)))
            }
            for (k, v) in headers { line("\(k): \(Self.headerSafe(v))") }
            line("")
            if let body = r.body { out.append(contentsOf: body) }
            line("")
        }
        for (u, unit) in units(requests).enumerated() {
            line("--\(boundary)")
            if unit.isChangeSet {
                let changeSet = "changeset_\(boundary)_\(u + 1)"
                line("Content-Type: multipart/mixed; boundary=\(changeSet)")
                line("")
                for i in unit.requests {
                    line("--\(changeSet)")
                    http(i, contentID: requests[i].id ?? String(i + 1))
                }
                line("--\(changeSet)--")
            } else {
                http(unit.requests[0], contentID: nil)
            }
        }
        line("--\(boundary)--")
        return out
    }

    /// A header value with line breaks removed (they would end the header).
    static func headerSafe(_ v: String) -> String {
        String(v.unicodeScalars.filter { $0 != "\r" && $0 != "\n" })
    }

    /// The `boundary` parameter of a `multipart/*` content type, unquoted; nil when there is none
    /// or it is not one (1–70 characters, RFC 2046 §5.1.1).
    package static func boundary(ofContentType ct: String) -> String? {
        guard ct.lowercased().hasPrefix("multipart/") else { return nil }
        for param in ct.split(separator: ";").dropFirst() {
            let kv = param.split(separator: "=", maxSplits: 1)
            guard kv.count == 2, kv[0].trimmingCharacters(in: .whitespaces).lowercased() == "boundary" else { continue }
            var value = kv[1].trimmingCharacters(in: .whitespaces)
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
                value = String(value.dropFirst().dropLast())
            }
            return (1...70).contains(value.utf8.count) ? value : nil
        }
        return nil
    }

    /// The parts of a multipart body: what lies between the delimiter lines `--boundary` (at the
    /// start of the body or of a line) up to the close delimiter `--boundary--`. The line break
    /// before a delimiter belongs to it. The preamble and epilogue are ignored. More than
    /// `maxParts` parts is an error, found before any part is read (a peer's bound on the work).
    package static func parts(
        _ body: [UInt8], boundary: String, maxParts: Int = .max
    ) throws(MultipartError) -> [Part] {
        let delimiter = Array("--\(boundary)".utf8)
        var starts: [(at: Int, end: Int, close: Bool)] = []  // each delimiter: where its line starts, where it ends
        var i = 0
        while let found = find(delimiter, in: body, from: i) {
            let atLineStart = found == 0 || body[found - 1] == 10
            var j = found + delimiter.count
            if atLineStart {
                let close = j + 1 < body.count && body[j] == 45 && body[j + 1] == 45
                if close { j += 2 }
                // Transport padding, then the line end (or the end of the body).
                var k = j
                while k < body.count, body[k] == 32 || body[k] == 9 { k += 1 }
                if close || k == body.count || body[k] == 13 || body[k] == 10 {
                    if k < body.count, body[k] == 13 { k += 1 }
                    if k < body.count, body[k] == 10 { k += 1 }
                    var lineStart = found
                    if lineStart > 0, body[lineStart - 1] == 10 { lineStart -= 1 }
                    if lineStart > 0, body[lineStart - 1] == 13 { lineStart -= 1 }
                    starts.append((lineStart, k, close))
                    if close { break }
                    if starts.count > maxParts { throw MultipartError("more than \(maxParts) parts") }
                }
            }
            i = max(j, found + 1)
        }
        guard let last = starts.last, last.close else {
            throw MultipartError("a multipart body without its close delimiter (--\(boundary)--)")
        }
        var out: [Part] = []
        for (a, b) in zip(starts, starts.dropFirst()) {
            out.append(try part(Array(body[a.end..<max(a.end, b.at)])))
        }
        return out
    }

    /// A part's headers (up to the first empty line) and content.
    static func part(_ raw: [UInt8]) throws(MultipartError) -> Part {
        let (head, rest) = splitHead(raw)
        return Part(headers: try headers(head), body: rest)
    }

    /// The header block of `raw` (up to its first empty line) and what follows it.
    package static func splitHead(_ raw: [UInt8]) -> ([UInt8], [UInt8]) {
        if raw.first == 10 { return ([], Array(raw.dropFirst())) }
        if raw.starts(with: [13, 10]) { return ([], Array(raw.dropFirst(2))) }
        if let crlf = find([13, 10, 13, 10], in: raw, from: 0),
            find([10, 10], in: raw, from: 0).map({ $0 > crlf }) ?? true
        {
            return (Array(raw[..<crlf]), Array(raw[(crlf + 4)...]))
        }
        if let lf = find([10, 10], in: raw, from: 0) { return (Array(raw[..<lf]), Array(raw[(lf + 2)...])) }
        return (raw, [])
    }

    /// The header lines of `head` (LF or CRLF line ends), names lower-cased.
    package static func headers(_ head: [UInt8]) throws(MultipartError) -> [(String, String)] {
        var out: [(String, String)] = []
        for line in String(decoding: head, as: UTF8.self).split(
            omittingEmptySubsequences: true,
            whereSeparator: {
                $0 == "\n" || $0 == "\r\n"
            })
        {
            let text = line.hasSuffix("\r") ? line.dropLast() : line[...]
            guard let colon = text.firstIndex(of: ":") else {
                throw MultipartError("a multipart header line without a colon: \(text.prefix(100))")
            }
            out.append(
                (
                    text[..<colon].trimmingCharacters(in: .whitespaces).lowercased(),
                    text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                ))
        }
        return out
    }

    /// The HTTP response an `application/http` part carries: `HTTP/1.1 201 Created`, headers, body.
    package static func response(_ part: Part) throws(MultipartError) -> Response {
        let (head, body) = splitHead(part.body)
        var lines = String(decoding: head, as: UTF8.self).split(
            omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        guard !lines.isEmpty else { throw MultipartError("a $batch response part without a status line") }
        let statusLine = lines.removeFirst().split(separator: " ", omittingEmptySubsequences: true)
        guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/"), let status = Int(statusLine[1]),
            (100...599).contains(status)
        else {
            throw MultipartError("a $batch response part whose status line is not HTTP: \(head.prefix(100))")
        }
        let hs = try headers(Array(lines.joined(separator: "\n").utf8))
        var content = body
        if let length = hs.first(where: { $0.0 == "content-length" }).flatMap({ Int($0.1) }), length <= content.count {
            content = Array(content.prefix(length))
        }
        // The part's Content-ID (a MIME header, before the HTTP message) names the request it
        // answers; kept with the response's own headers.
        var all = hs
        if let id = part.header("content-id"), !hs.contains(where: { $0.0 == "content-id" }) {
            all.append(("content-id", id))
        }
        return Response(status: status, headers: all, body: content)
    }

    /// The answers of a `$batch` response body with content type `contentType`: one per part.
    package static func answers(_ body: [UInt8], contentType: String) throws(MultipartError) -> [Answer] {
        guard let boundary = boundary(ofContentType: contentType) else {
            throw MultipartError(
                "the $batch answer is not multipart/mixed with a boundary (Content-Type: \(contentType.prefix(100)))")
        }
        var out: [Answer] = []
        for p in try parts(body, boundary: boundary) {
            let ct = p.header("content-type") ?? ""
            if let inner = Self.boundary(ofContentType: ct) {
                out.append(
                    .changeSet(try parts(p.body, boundary: inner).map { (q) throws(MultipartError) in try response(q) })
                )
            } else {
                out.append(.single(try response(p)))
            }
        }
        return out
    }

    /// One response per request of `requests`, from the answers to its `units`: a change set
    /// answered with one response per member maps one to one; a change set answered with one
    /// error response (rolled back) gives that response to every member, since none of them was
    /// applied and the service does not say which failed.
    package static func responses(
        for requests: [Request], _ answers: [Answer]
    ) throws(MultipartError) -> [Response] {
        let units = units(requests)
        guard answers.count == units.count else {
            throw MultipartError("the $batch answer has \(answers.count) parts for \(units.count) sent")
        }
        var out = [Response?](repeating: nil, count: requests.count)
        for (unit, answer) in zip(units, answers) {
            switch answer {
            case .single(let r):
                guard !unit.isChangeSet || unit.requests.count == 1 || r.status >= 400 else {
                    throw MultipartError("a change set of \(unit.requests.count) requests answered by one success")
                }
                for i in unit.requests { out[i] = r }
            case .changeSet(let rs):
                guard unit.isChangeSet, rs.count == unit.requests.count else {
                    throw MultipartError(
                        "a change set of \(unit.requests.count) requests answered with \(rs.count) responses")
                }
                // A response that names its request (Content-ID) is that request's, wherever it
                // stands in the change set; one that names a request of another change set means
                // the answer's parts are not in the order sent (a proxy reordered them), and none
                // of it can be mapped.
                let ids = unit.requests.map { requests[$0].id ?? String($0 + 1) }
                let named = rs.map { $0.header("content-id") }
                if named.allSatisfy({ $0 != nil }), Set(named.compactMap { $0 }) == Set(ids),
                    Set(ids).count == ids.count
                {
                    for r in rs { out[unit.requests[ids.firstIndex(of: r.header("content-id")!)!]] = r }
                    continue
                }
                for (i, r) in zip(unit.requests, rs) {
                    let id = requests[i].id ?? String(i + 1)
                    if let answered = r.header("content-id"), answered != id {
                        throw MultipartError(
                            "the answer to the request with Content-ID \(id) names Content-ID \(answered): its parts are not in the order sent"
                        )
                    }
                    out[i] = r
                }
            }
        }
        return out.map { $0! }
    }

    static func find(_ needle: [UInt8], in hay: [UInt8], from: Int) -> Int? {
        guard !needle.isEmpty, hay.count >= needle.count, from <= hay.count - needle.count else { return nil }
        let first = needle[0]
        var i = from
        let last = hay.count - needle.count
        while i <= last {
            if hay[i] == first {
                var k = 1
                while k < needle.count, hay[i + k] == needle[k] { k += 1 }
                if k == needle.count { return i }
            }
            i += 1
        }
        return nil
    }
}

/// A multipart body that cannot be read: what is wrong with it.
package struct MultipartError: Error, Sendable, Hashable, CustomStringConvertible {
    package var description: String

    package init(_ description: String) { self.description = description }
}
