import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OfflineStore
import Query
import Served
import Storage

/// GET (and HEAD) of a resource: an entity set, one entity, a navigation path, `/$count`, with
/// every query option the engine answers; entities carry `@odata.etag`, one entity's response an
/// `ETag` header (`If-None-Match` → 304). Server-driven paging follows `Prefer:
/// odata.maxpagesize` or the service's default page size.
///
/// Change tracking: `Prefer: odata.track-changes` on a collection read makes its last page carry
/// an `@odata.deltaLink` (`Set?…&$deltatoken=N`); reading that link returns what changed since —
/// the entities now, `@removed` for deleted ones and for ones that left the `$filter` — and the
/// next delta link. The link keeps `$filter`, `$select` and `$expand` and drops `$top`, `$skip`,
/// `$orderby` and `$count`: it covers every entity of the defining query, in change order — with
/// `$expand`, those of every set the expand tree reaches (`QueryEngine.delta(_:entityChanges:…)`);
/// a request whose `$expand` the change log cannot follow gets no delta link. N is
/// the change log's position read before the first page, carried through the `@odata.nextLink`s
/// as the custom option `trackfrom=N`: a change made while the pages are read is delivered again
/// by the delta, never lost. A delta response pages as a full read does (`Prefer:
/// odata.maxpagesize` or the default page size, at most that many changes a page): its first page
/// fixes the bound S (the change log's newest number then), every page's `@odata.nextLink` keeps
/// the `$deltatoken` and adds a `$skiptoken` (`DeltaResume`) naming S and the last change sent,
/// and the last page's delta link is `$deltatoken=S` (`OfflineStore.changes(_:sets:since:…)`
/// argues why a change made between pages is not lost). An offline store
/// (`OfflineStore.isOffline`) does not track changes: the preference is ignored and a
/// `$deltatoken` answers 501.
struct Reads {
    let service: ODataService
    var store: OfflineStore { service.store }

    func get(_ request: Request, url: String, resource: String) async throws -> Response {
        let isCount = resource.hasSuffix("/$count")
        if isCount { try Negotiation.require(request, "text/plain") } else { try Negotiation.requireJSON(request) }
        let prefer = Prefer(request.headers[.prefer])
        let root = service.serviceRoot(request)
        var headers = HTTPFields()
        var applied: [String] = []
        headers[.contentType] = isCount ? "text/plain" : V2Dialect.jsonContentType(store)
        let store = self.store
        var params = Self.parameters(url)
        let produce: @Sendable (@escaping (UnsafeRawBufferPointer) throws -> Void) throws -> ResultSummary

        if let tokenText = Self.take("$deltatoken", from: &params) {
            guard !store.isOffline else {
                throw ODataFailure(
                    .notImplemented,
                    "this is an offline store: refresh changes its data as well as writes, so it serves no delta links",
                    target: "$deltatoken")
            }
            guard let token = UInt64(tokenText) else {
                throw ODataFailure(
                    .badRequest,
                    "invalid delta token '\(QueryError.quoting(tokenText))': expected one from an @odata.deltaLink of this service",
                    target: "$deltatoken")
            }
            _ = Self.take("trackfrom", from: &params)
            let resume = try Self.take("$skiptoken", from: &params).map { try DeltaResume(parsing: $0, token: token) }
            let base = Self.url(resource, params)
            let pageSize = prefer.maxPageSize ?? service.options.defaultPageSize
            if let n = prefer.maxPageSize { applied.append("odata.maxpagesize=\(n)") }
            // Every page's delta link is the first page's bound: the delta of the whole read.
            let options = ResultOptions(
                serviceRoot: root, etags: true,
                deltaLink: { t in
                    Self.deltaLink(base, token: try resume?.bound ?? store.changeToken(t))
                })
            // The request's set and every set its $expand reaches: their changes are the delta's.
            let sets = try store.queries.deltaSets(base)
            headers[.deltaExpand] = "followed"
            produce = { sink in
                try store.queries.delta(
                    base,
                    page: { t in
                        let page: (changes: [QueryEngine.DeltaChange], bound: UInt64, last: UInt64?, more: Bool)
                        do {
                            page = try store.changes(
                                t, sets: sets, since: token, resumingAfter: resume?.last, bound: resume?.bound,
                                limit: pageSize)
                        } catch let e as ChangeTokenError {
                            guard let resume else { throw ODataFailure(.gone, e.description, target: "$deltatoken") }
                            throw resume.failure(
                                "it names change \(resume.bound), and this store's newest is \(e.newest)")
                        }
                        guard page.more, let last = page.last else {
                            return QueryEngine.DeltaPage(changes: page.changes)
                        }
                        let next =
                            Self.deltaLink(base, token: token) + "&$skiptoken="
                            + DeltaResume.text(bound: page.bound, last: last)
                        return QueryEngine.DeltaPage(changes: page.changes, nextLink: next)
                    }, options: options, writeBytes: sink)
                return ResultSummary()
            }
        } else {
            let pageSize = isCount ? nil : prefer.maxPageSize ?? service.options.defaultPageSize
            if let n = prefer.maxPageSize, !isCount { applied.append("odata.maxpagesize=\(n)") }
            var options = ResultOptions(serviceRoot: root, etags: true)
            options.verbose = V2Dialect.applies(to: store)
            var query = url
            let carried = Self.take("trackfrom", from: &params)
            // An offline store ignores odata.track-changes (not in Preference-Applied): its change
            // log does not see what refresh writes, so it could not serve a true delta.
            // A request whose $expand a delta cannot follow (`QueryEngine.deltaSets`) gets no delta link.
            if !store.isOffline, prefer.trackChanges || carried != nil,
                isCount || Self.deltaCovers(store, resource, params)
            {
                guard !isCount else {
                    throw ODataFailure(.badRequest, "odata.track-changes needs a collection, not /$count")
                }
                let from =
                    try carried.map { text in
                        guard let n = UInt64(text) else {
                            throw ODataFailure(.badRequest, "invalid trackfrom '\(QueryError.quoting(text))'")
                        }
                        return n
                    } ?? store.changeToken()
                if prefer.trackChanges { applied.append("odata.track-changes") }
                headers[.deltaExpand] = "followed"
                // The delta link names the defining query's entities, not one window of them nor
                // their order: no $skiptoken, $top, $skip, $orderby or $count (OData 4.01 Part 1
                // §11.3: it "MUST NOT encode any client top or skip value"), which a delta request
                // refuses anyway — a link with them would be one this service cannot answer.
                var base = params
                for option in Self.notInDeltaLink { while Self.take(option, from: &base) != nil {} }
                let link = Self.deltaLink(Self.url(resource, base), token: from)
                options = ResultOptions(serviceRoot: root, etags: true, deltaLink: { _ in link })
                options.verbose = V2Dialect.applies(to: store)
                // The position goes with every next link, so the last page's delta link has it.
                query = Self.url(resource, params + [("trackfrom", String(from))])
            }
            let (finalQuery, finalOptions, finalPageSize) = (query, options, pageSize)
            produce = { sink in
                try store.query(
                    finalQuery, format: .json, pageSize: finalPageSize, options: finalOptions, writeBytes: sink)
            }
        }
        if !applied.isEmpty { headers[.preferenceApplied] = applied.joined(separator: ",") }

        let inline: ([UInt8], ResultSummary)?
        // On the query threads: a long scan must not hold a thread of Swift's concurrency pool.
        // A read of one entity by key without $expand is one B-tree look-up: answered here, as
        // the hand-off to a query thread and back would cost more than the read.
        let run: @Sendable () throws -> ([UInt8], ResultSummary)? = {
            try ResponseStream.inline(produce).map { ($0.bytes, $0.result) }
        }
        do {
            inline = try Self.isKeyRead(resource, params) ? run() : await service.offload(run)
        } catch is NoRelatedEntity {
            return Response(status: .noContent, headers: headers)
        }
        if let (body, summary) = inline {
            var bytes = body
            if isCount, bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
            if let etag = summary.etag {
                headers[.eTag] = etag
                if let none = request.headers[.ifNoneMatch], EntityTag.header(none, matches: etag) {
                    return Response(status: .notModified, headers: headers)
                }
            }
            if request.method == .head { return Response(status: .ok, headers: headers) }
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
        }
        if request.method == .head { return Response(status: .ok, headers: headers) }
        return Response(status: .ok, headers: headers, body: ResponseStream.streamed(logger: service.logger, produce))
    }

    /// Whether `resource` with `params` reads one entity by its key and nothing more: `Set(key)`
    /// (one path segment ending in a key predicate) without `$expand` (which may fetch a whole
    /// collection of related entities) and without a delta token.
    static func isKeyRead(_ resource: String, _ params: [(String, String)]) -> Bool {
        guard resource.hasSuffix(")"), let open = resource.firstIndex(of: "("), open > resource.startIndex,
            !resource.contains("/")
        else { return false }
        return !params.contains { name, _ in
            let n = (name.removingPercentEncoding ?? name).lowercased()
            return n == "$expand" || n == "$deltatoken"
        }
    }

    /// Whether a delta response can answer the read of `resource` with `params` (its delta link's
    /// URL): it is a collection whose `$expand` a delta can follow. A read that fails to bind is
    /// answered (or refused) as it is, without a delta link.
    static func deltaCovers(_ store: OfflineStore, _ resource: String, _ params: [(String, String)]) -> Bool {
        var base = params
        for option in notInDeltaLink { while take(option, from: &base) != nil {} }
        _ = take("trackfrom", from: &base)
        return (try? store.queries.deltaSets(url(resource, base))) != nil
    }

    /// The options of a collection read that its delta link leaves out.
    static let notInDeltaLink = ["$skiptoken", "$top", "$skip", "$orderby", "$count"]

    /// The query part of `url` as name/value pairs, still percent-encoded.
    static func parameters(_ url: String) -> [(String, String)] {
        guard let q = url.firstIndex(of: "?") else { return [] }
        return url[url.index(after: q)...].split(separator: "&").map { (p: Substring) -> (String, String) in
            guard let eq = p.firstIndex(of: "=") else { return (String(p), "") }
            return (String(p[..<eq]), String(p[p.index(after: eq)...]))
        }
    }

    /// Removes the parameter `name` (also spelled `%24…` for `$…`, any case) and returns its value.
    static func take(_ name: String, from params: inout [(String, String)]) -> String? {
        // Called on every GET: no Foundation string replacing (it was ~10% of a served point read).
        guard !params.isEmpty else { return nil }
        let plain = name.lowercased()
        let encoded = plain.hasPrefix("$") ? "%24" + plain.dropFirst() : plain
        guard
            let i = params.firstIndex(where: {
                let p = $0.0.lowercased(); return p == plain || p == encoded
            })
        else { return nil }
        return params.remove(at: i).1
    }

    static func url(_ resource: String, _ params: [(String, String)]) -> String {
        params.isEmpty ? resource : resource + "?" + params.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }

    static func deltaLink(_ base: String, token: UInt64) -> String {
        base + (base.contains("?") ? "&" : "?") + "$deltatoken=\(token)"
    }
}

/// Where the next page of a delta read in pages starts: the `$skiptoken` of its
/// `@odata.nextLink`, `d<bound>-<last>` beside the delta's own `$deltatoken=<token>`. `bound` is
/// the change log's newest number when the first page was read (the whole delta covers the
/// changes in (token, bound], and its delta link is `$deltatoken=<bound>`), `last` the sequence
/// number of the last change the page before sent. Opaque to clients; a token that is not one
/// this service could have made for the `$deltatoken` beside it is refused with 400.
struct DeltaResume {
    let bound: UInt64
    let last: UInt64
    let text: String

    static func text(bound: UInt64, last: UInt64) -> String { "d\(bound)-\(last)" }

    /// Parses `text` (percent-encoded as it came) for a delta from `token`: decimal numbers only,
    /// `token < last < bound`.
    init(parsing raw: String, token: UInt64) throws {
        text = raw.removingPercentEncoding ?? raw
        let digits = { (s: Substring) -> UInt64? in
            s.isEmpty || s.count > 20 || !s.allSatisfy({ $0.isASCII && $0.isNumber }) ? nil : UInt64(s)
        }
        let parts = text.dropFirst().split(separator: "-", omittingEmptySubsequences: false)
        guard text.hasPrefix("d"), parts.count == 2, let bound = digits(parts[0]), let last = digits(parts[1]) else {
            throw Self.failure(text, "expected one from an @odata.nextLink of this service's delta")
        }
        (self.bound, self.last) = (bound, last)
        guard token < last, last < bound else {
            throw failure("it is not one of the delta from token \(token)")
        }
    }

    func failure(_ why: String) -> ODataFailure { Self.failure(text, why) }

    static func failure(_ text: String, _ why: String) -> ODataFailure {
        ODataFailure(
            .badRequest, "invalid delta skip token '\(QueryError.quoting(text))': \(why)", target: "$skiptoken")
    }
}
