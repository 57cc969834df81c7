package import LMDB
import Storage

/// Control information an OData server wants in a response beyond what `offline-store query`
/// writes: absolute links, ETags, a delta link. The defaults write what `execute` always wrote.
///
/// ```swift
/// var options = ResultOptions(serviceRoot: "http://127.0.0.1:8080/", etags: true)
/// options.deltaLink = { t in "Products?$deltatoken=\(t.id)" }   // package access: the server
/// try engine.execute("Products?$top=20", options: options, writeBytes: send)
/// ```
public struct ResultOptions: Sendable {
    /// The service root, e.g. `http://127.0.0.1:8080/` (a final `/` is added when missing). When
    /// set, `@odata.context` is `<root>$metadata#Set` and `@odata.nextLink` / `@odata.deltaLink` are
    /// `<root>` + the relative link. Nil: relative (`$metadata#Products`, `Products?$skiptoken=20`).
    /// `@odata.id` stays relative either way: it is resolved against the context URL, as the JSON
    /// format says.
    public var serviceRoot: String? {
        didSet { if let r = serviceRoot, !r.hasSuffix("/") { serviceRoot = r + "/" } }
    }
    /// Whether every entity object, top level and expanded, gets `"@odata.etag":"W/\"…\""`:
    /// `EntityTag.of(row:)` of its stored row, after `@odata.id` and before the properties. The
    /// rows are hashed only when this is true.
    public var etags: Bool
    /// Makes the `@odata.deltaLink` of a collection response's last page (one without
    /// `@odata.nextLink`), relative (made absolute with `serviceRoot`) or absolute (`http…`, kept).
    /// Called once per collection response in JSON, inside the read transaction the response is
    /// read in and before anything is written: the token it derives from the view stands for the
    /// snapshot the entities come from, and a throw refuses the request with no output. Not
    /// called for a single entity, `/$count`, `jsonl` or `table`.
    ///
    /// `package`: `ReadView` is not public; the server and the CLI are in this package.
    package var deltaLink: (@Sendable (ReadView) throws -> String)?

    public init(serviceRoot: String? = nil, etags: Bool = false) {
        self.serviceRoot = serviceRoot.map { $0.hasSuffix("/") ? $0 : $0 + "/" }
        self.etags = etags
        deltaLink = nil
    }

    /// OData V2 verbose JSON ([MS-ODATA] §2.2.6.3) instead of V4's: `{"d":{"results":[…],
    /// "__count":"N","__next":"…"}}`, `{"d":{…}}` for one entity, each entity with `__metadata`
    /// (`uri`, `type`, `etag`), V2 value forms (`/Date(ms)/`, Int64 and Decimal as strings),
    /// `__deferred` for a navigation property not expanded and `{"results":[…]}` for an expanded
    /// collection. For a store made from V2 `$metadata` (`serve` speaks its dialect).
    package var verbose = false

    package init(serviceRoot: String? = nil, etags: Bool = false, deltaLink: (@Sendable (ReadView) throws -> String)?) {
        self.init(serviceRoot: serviceRoot, etags: etags)
        self.deltaLink = deltaLink
    }

    /// `@odata.context`'s value for `context` (`Products`, `Products/$entity`, `Products/$delta`).
    func contextURL(_ context: String) -> String { (serviceRoot ?? "") + "$metadata#" + context }

    /// A next or delta link: relative links are put under `serviceRoot`.
    func link(_ link: String) -> String {
        guard let root = serviceRoot, !link.hasPrefix("http://"), !link.hasPrefix("https://") else { return link }
        return root + (link.hasPrefix("/") ? String(link.dropFirst()) : link)
    }
}

/// What `QueryEngine.execute` read, for a server's response headers.
public struct ResultSummary: Sendable, Equatable {
    /// The ETag of the entity a single-entity request (`Set(key)`, `Set(key)/ToOne`) wrote
    /// (`EntityTag.of(row:)`, read in the same transaction as the body): the `ETag` header of
    /// `GET Set(key)`, in any format. Nil for a collection and `/$count`.
    public var etag: String?
    /// The next link of a collection page that did not hold the whole answer (server-driven
    /// paging: a page size, or a page ended before its expansions would pass
    /// `limits.maxExpandedEntities`), relative to the service root as the request was; nil when
    /// the answer is complete. The same link the JSON format writes as `@odata.nextLink`: the
    /// other formats have no place for it, so a caller that pages them follows this.
    public var nextLink: String?

    public init(etag: String? = nil, nextLink: String? = nil) { (self.etag, self.nextLink) = (etag, nextLink) }
}
