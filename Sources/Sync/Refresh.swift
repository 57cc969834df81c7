import LMDB
import Query
import Queue
import Storage

/// What a refresh did, per defining request and in all.
public struct RefreshReport: Sendable, Hashable, CustomStringConvertible {
    /// How a request was read.
    public enum Mode: String, Sendable, Hashable {
        /// Its delta link: only what changed since the last refresh.
        case delta
        /// Every page of the request (the first refresh, a request without change tracking, one
        /// with `$expand` the service gives no delta link for).
        case full
        /// The service refused the delta link (410 Gone or another 4xx): a full read instead.
        case fullAfterExpiredDelta
        /// The service refused change tracking for this request (400 or 501 to `Prefer:
        /// odata.track-changes`, as SAP Gateway does for a type without a change timestamp): read
        /// in full, and remembered, so later refreshes read it in full without asking.
        case fullWithoutTracking
    }

    public struct Request: Sendable, Hashable {
        public var name: String
        public var mode: Mode
        /// Responses read (pages of the collection, or of the delta).
        public var pages = 0
        /// Entity objects received, expanded ones and `@removed` entries included.
        public var received = 0
        /// Bytes of response bodies read.
        public var bytes = 0
        /// Entities written because they were new or changed (rebased ones included).
        public var written = 0
        /// Entities deleted from the store: no defining request holds them any more.
        public var removed = 0
        /// Entities with pending local changes that got the new server image under them.
        public var rebased = 0
        /// Entities the service no longer returns for this request that stay because of pending
        /// local changes (retained), as the refresh leaves them.
        public var retained = 0
        /// Properties the service sent that the store's `$metadata` does not declare, skipped (a
        /// service may add properties; the store keeps what its schema has).
        public var skippedProperties = 0
        /// Values the service sent beyond a facet its `$metadata` declares (MaxLength, Precision,
        /// Scale): stored as sent, and counted here (local writes are held to the facets).
        public var facetViolations = 0
        /// Entities the service counted for a full read (`$count`, `$inlinecount`) but its pages
        /// did not bring (offset paging while the collection changed). When not 0, nothing was
        /// removed and no delta link kept: the next refresh reads the request in full again.
        public var missing = 0

        public init(name: String, mode: Mode) {
            self.name = name
            self.mode = mode
        }
    }

    public var requests: [Request] = []
    /// Requests the queue compaction removed (merged into another, or changing nothing).
    public var compacted = 0

    public init() {}

    public var received: Int { requests.reduce(0) { $0 + $1.received } }
    public var written: Int { requests.reduce(0) { $0 + $1.written } }
    public var removed: Int { requests.reduce(0) { $0 + $1.removed } }
    public var rebased: Int { requests.reduce(0) { $0 + $1.rebased } }
    public var skippedProperties: Int { requests.reduce(0) { $0 + $1.skippedProperties } }
    public var missing: Int { requests.reduce(0) { $0 + $1.missing } }
    public var facetViolations: Int { requests.reduce(0) { $0 + $1.facetViolations } }

    /// One line: `refreshed 2 requests (Products: delta, Orders: full): 120 received, 118 written, 2 removed, 1 rebased, 0 compacted`.
    public var description: String {
        let modes = requests.map { "\($0.name): \($0.mode.rawValue)" }.joined(separator: ", ")
        return
            "refreshed \(requests.count) request\(requests.count == 1 ? "" : "s")\(modes.isEmpty ? "" : " (\(modes))"): "
            + "\(received) received, \(written) written, \(removed) removed, \(rebased) rebased, \(compacted) compacted"
            + (skippedProperties == 0 ? "" : ", \(skippedProperties) unknown properties skipped")
            + (facetViolations == 0 ? "" : ", \(facetViolations) values beyond their MaxLength/Precision/Scale kept")
            + (missing == 0
                ? ""
                : "; \(missing) counted by the service but not sent (paging while it changed): nothing removed, read in full next time")
    }
}

/// Where a refresh is, for a progress line.
public struct RefreshProgress: Sendable, Hashable {
    public var request: String
    public var mode: RefreshReport.Mode
    public var pages: Int
    public var received: Int
    /// Bytes of response bodies read for this request so far.
    public var bytes: Int
}

/// Why a refresh stopped. What it wrote before stays: each group of pages (each chunk of a delta)
/// is its own transaction, and the next refresh converges.
public enum RefreshError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The service answered a read with an error status.
    case service(request: String, status: Int, message: String)
    /// No defining request of that name.
    case unknownRequest(String)
    /// Another refresh (or define, undefine) of this store is running, in this process or another.
    case alreadyRunning
    /// Neither an argument nor the configuration gives the service root.
    case noServiceRoot
    /// The service's answer cannot be used (a next link that repeats, …).
    case badResponse(request: String, message: String)

    public var description: String {
        switch self {
        case .service(let r, let s, let m): "refresh of '\(r)': the service answered \(s): \(m)"
        case .unknownRequest(let n): "no defining request named '\(Membership.quoted(n))'"
        case .alreadyRunning:
            "a refresh, define or undefine of this store is already running (in this process or another); try again when it ends"
        case .noServiceRoot:
            "no service root: give one (--service URL) or set \"serviceRoot\" in the store's configuration"
        case .badResponse(let r, let m): "refresh of '\(r)': \(m)"
        }
    }
}

/// Defining requests: named read URLs whose results the store keeps.
package enum DefiningRequests {
    /// Binds `url` against `schema` and checks that it is a defining request: a read of a whole
    /// entity set (no key, navigation, singleton or `/$count`) that is not one of the store's own
    /// sets, with `$filter`, `$select`, `$expand` (any options inside it) and custom options only —
    /// `$orderby`, `$top`, `$skip`, `$count`, `$search`, `$skiptoken` and `$format` are refused,
    /// since a refresh reads the whole collection.
    package static func bind(_ url: String, schema: Schema) throws -> BoundQuery {
        let query = try Binder(schema: schema).bind(url)
        guard query.path.segments.count == 1, let segment = query.path.segments.first, segment.key == nil,
            !segment.isSingle,
            !query.path.isCount
        else {
            throw EntityError.badInput(
                "a defining request reads an entity set ('Set?$filter=…'), not a key, navigation, singleton or /$count: '\(Membership.quoted(url))'"
            )
        }
        guard !schema.isSystemSet(segment.entitySet) else {
            throw EntityError.badInput(
                "'\(segment.entitySet)' is one of the store's own sets; a defining request reads the service's")
        }
        let o = query.options
        for (name, present) in [
            ("$orderby", !o.orderBy.isEmpty), ("$top", o.top != nil), ("$skip", o.skip != nil), ("$count", o.count),
            ("$search", o.search != nil), ("$skiptoken", query.skipToken != nil), ("$format", query.format != nil),
        ] where present {
            throw EntityError.badInput(
                "\(name) is not allowed in a defining request: refresh reads the whole collection (use $filter, $select and $expand)"
            )
        }
        return query
    }

    /// `url` made fit for an HTTP request line: spaces, quotes that need it, control and non-ASCII
    /// characters percent-encoded; `%XX` escapes already there are kept.
    package static func encode(_ url: String) -> String {
        let bytes = Array(url.utf8)
        var out = ""
        var i = 0
        func hex(_ b: UInt8) -> Bool {
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66)
        }
        while i < bytes.count {
            let b = bytes[i]
            let keep: Bool
            switch b {
            case 0x25: keep = i + 2 < bytes.count && hex(bytes[i + 1]) && hex(bytes[i + 2])
            case 0x21, 0x24...0x2F, 0x30...0x3B, 0x3D, 0x3F...0x5A, 0x5F, 0x61...0x7A, 0x7E: keep = true
            default: keep = false
            }
            if keep {
                out.unicodeScalars.append(Unicode.Scalar(b))
            } else {
                out += "%" + (b < 16 ? "0" : "") + String(b, radix: 16, uppercase: true)
            }
            i += 1
        }
        return out
    }
}

/// The refresh algorithm against a `Backend`: each defining request read in pages (or through its
/// delta link), a full read's pages fetched ahead and written in groups (`PagePipe`), a delta's
/// chunk by chunk, each in its own transaction, then the queue compacted.
///
/// **Membership** (`Membership`): a full read of request R takes a new generation g (kept in
/// `meta` with the delta link removed, in one transaction), marks every entity a page brings with
/// g, and after the last page sweeps R's entries below g in chunks: each is released — deleted
/// from the store when no request holds it any more, unless it has pending local changes (then
/// retained). A crash at any instant leaves whole pages and whole chunks: R has no delta link, so
/// the next refresh reads it in full with generation g + 1, and its sweep removes whatever the
/// half-finished one left. A delta read applies changed entities (marked with R's current
/// generation) and `@removed` entries (released), then rechecks R's retained entries, then stores
/// the new delta link; a crash before that repeats the same delta, which is idempotent.
///
/// **Rebase**: an entity that comes from the service with pending local changes gets the server
/// image in `base/` and its pending requests re-applied on top (`apply(_:to:)`: PATCH bodies
/// merged in order, a PUT wins whole, a DELETE keeps it deleted). A pending create whose key the
/// service now has becomes a replace (PUT) of the service's entity — local wins until flushed,
/// as in the collapse rule delete + create → replace; a create already sent (or refused) is left
/// as it is, without a server image, for flush to settle.
package struct Refresher: Sendable {
    package let store: EntityStore
    package let backend: any Backend
    /// `Prefer: odata.maxpagesize` (nil: none asked; the service's default paging applies).
    package var pageSize: Int?
    /// Sent with every read, besides the backend's own headers.
    package var headers: [(String, String)] = []
    package var progress: (@Sendable (RefreshProgress) -> Void)?
    /// Entries a sweep transaction releases at most (and looks at, ×50).
    package var sweepChunk = 1_000
    /// Pages in a row of a full read that bring nothing new (no entity, or only entities an earlier
    /// page of the same read brought) before the read stops as endless.
    package var maxPagesWithoutProgress = 10
    /// Rows (entities, expanded ones included, and removals) of a part: a page is parsed and
    /// handed to the writer in parts of at most this many, so memory holds a few parts whatever
    /// the size of a page.
    package var chunkRows = 2_000
    /// Rows (or parts, `groupParts`) a full read writes in one transaction (`PagePipe`): its
    /// pages are fetched and parsed up to two such groups ahead of the writer. The store's
    /// `refreshGroupRows`; `groupParts` grows with it (16 parts a 5,000 rows).
    package var groupRows: Int
    package var groupParts: Int
    let reader: PayloadReader

    package init(
        store: EntityStore, backend: any Backend, pageSize: Int? = nil, headers: [(String, String)] = [],
        progress: (@Sendable (RefreshProgress) -> Void)? = nil
    ) {
        self.store = store
        self.backend = backend
        self.pageSize = pageSize
        self.headers = headers
        self.progress = progress
        self.reader = PayloadReader(schema: store.schema, serviceRoot: backend.serviceRoot, shapes: store.entityShapes)
        self.groupRows = store.configuration.refreshGroupRows
        self.groupParts = max(16, groupRows * 16 / StoreConfiguration.defaultRefreshGroupRows)
    }

    var membership: Membership { Membership(store: store) }

    /// Refreshes `requests` in order, then compacts the queue (with `optimize`: the store's
    /// `requestQueueOptimization`) and logs a download event. Stops at the first failure
    /// (logged too), keeping what was written.
    package func run(_ requests: [StoreConfiguration.DefiningRequest], optimize: Bool) async throws -> RefreshReport {
        let started = EDMDateTimeOffset.now
        var report = RefreshReport()
        do {
            for r in requests { report.requests.append(try await refresh(r)) }
            let store = self.store
            report.compacted = try await store.write { t in
                try RequestQueue(store: store).compact(t, optimize: optimize)
            }
        } catch {
            let (store, received, text) = (self.store, report.received, "\(error)")
            let outcome = error is CancellationError ? "cancelled" : "failed"
            try? await store.write { t in
                try RequestQueue(store: store).logEvent(
                    t, type: "Download", startedAt: started, finishedAt: .now, outcome: outcome,
                    entities: received, details: String(text.prefix(1_000)))
            }
            throw error
        }
        let (store, received, text) = (self.store, report.received, report.description)
        try await store.write { t in
            try RequestQueue(store: store).logEvent(
                t, type: "Download", startedAt: started, finishedAt: .now, outcome: "succeeded",
                entities: received, details: text)
        }
        return report
    }

    /// Refreshes one defining request: through its delta link when it has one, else (or when the
    /// service refuses the link) a full read.
    package func refresh(_ r: StoreConfiguration.DefiningRequest) async throws -> RefreshReport.Request {
        let query = try DefiningRequests.bind(r.url, schema: store.schema)
        let name = r.name
        let m = membership
        if try store.read({ t in try m.untracked(t, name: name) }) != nil {
            return try await fullRead(r, query: query, track: false, mode: .fullWithoutTracking)
        }
        // Every tracked request asks for a delta link, one with $expand too, and keeps it when the
        // service says its delta follows the expansion (`followsExpand`).
        if let link = try store.read({ t in try m.deltaLink(t, name: name) }) {
            if let done = try await deltaRead(name: name, query: query, link: link) { return done }
            return try await fullRead(r, query: query, track: true, mode: .fullAfterExpiredDelta)
        }
        return try await fullRead(r, query: query, track: true, mode: .full)
    }

    // MARK: Reading

    /// A read of `url`. `Prefer: odata.track-changes` asks for a delta link (V4; SAP's V2 services
    /// with delta support take it too); `odata.maxpagesize` goes to V4 services only — V2 has no
    /// client-driven paging, and Gateway pages as its service implementation decides.
    func get(_ url: String, track: Bool) async throws -> BackendResponse {
        var prefer: [String] = []
        if track { prefer.append("odata.track-changes") }
        if let n = pageSize, store.schema.version == .v4 { prefer.append("odata.maxpagesize=\(n)") }
        var hs = headers
        if !prefer.isEmpty { hs.append(("Prefer", prefer.joined(separator: ", "))) }
        var request = BackendRequest(method: "GET", url: url, headers: hs)
        request.largeAnswer = true
        return try await backend.send(request)
    }

    /// The service's own message (V4 `error.message`, V2 `error.message.value`, with its code and
    /// details), or the start of the body when it is not an OData error.
    func failure(_ name: String, _ response: BackendResponse) -> RefreshError {
        let head = response.head(1 << 20)
        let message = ServiceMessage.parse(head)?.summary ?? String(decoding: head.prefix(500), as: UTF8.self)
        return .service(request: name, status: response.status, message: Membership.quoted(String(message.prefix(500))))
    }

    /// A link to keep: relative to the service root when it is under it, so that the store can
    /// move to another address of the same service.
    func relative(_ link: String) -> String {
        link.hasPrefix(backend.serviceRoot) ? String(link.dropFirst(backend.serviceRoot.count)) : link
    }

    /// The response header by which a service says that the delta link it gives (or the delta it
    /// is) covers every entity set the request's `$expand` reaches — `serve` sends it (the
    /// server's `HTTPField.Name.deltaExpand` spells the same name).
    package static let deltaExpandHeader = "OfflineStore-Delta-Expand"

    /// Whether `response`'s delta link may be kept for `query`: always without `$expand`; with it,
    /// only when the service says its delta follows the expansion. A service whose delta reports
    /// the top set's changes alone (SAP Gateway's, mock-sap's, V2 and V4) gives a delta link for
    /// a request with `$expand` all the same, and keeping it would leave changed children stale
    /// until the request is read in full again — which would then never happen.
    func followsExpand(_ response: BackendResponse, _ query: BoundQuery) -> Bool {
        query.options.expand.isEmpty || response.header(Self.deltaExpandHeader)?.lowercased() == "followed"
    }

    /// `url` asking the service to count the collection: V4 `$count=true`, V2 `$inlinecount=allpages`.
    func withCount(_ url: String) -> String {
        url + (url.contains("?") ? "&" : "?") + (store.schema.version == .v4 ? "$count=true" : "$inlinecount=allpages")
    }

    /// A delta link to store: relative, or absolute on the service root's origin. Any other is
    /// refused before it is stored, so that no later refresh sends the credentials there.
    func storable(_ link: String, request name: String) throws -> String {
        let kept = relative(link)
        if Origin.isAbsolute(kept), Origin.of(kept) == nil || Origin.of(kept) != Origin.of(backend.serviceRoot) {
            throw RefreshError.badResponse(
                request: name,
                message:
                    "the service sent a delta link to another origin, which is not kept (credentials go only to \(backend.serviceRoot)): \(Membership.quoted(String(link.prefix(300))))"
            )
        }
        return kept
    }

    func fullRead(
        _ r: StoreConfiguration.DefiningRequest, query: BoundQuery, track: Bool, mode: RefreshReport.Mode
    ) async throws -> RefreshReport.Request {
        let (m, name) = (membership, r.name)
        let generation = try await store.write { t in
            let g = try m.generation(t.reader, name: name) + 1
            try m.setGeneration(t, name: name, g)
            try m.setDeltaLink(t, name: name, nil)
            return g
        }
        var report = RefreshReport.Request(name: name, mode: mode)
        // One task fetches and parses the pages, this one writes them: the next page comes while
        // the last is written, and the parts waiting when a write begins go into it together.
        let pipe = PagePipe(groupRows: groupRows, groupParts: groupParts)
        async let fetched = fetchPages(
            first: DefiningRequests.encode(r.url), query: query, name: name, track: track, into: pipe)
        var deltaLink: String? = nil
        // The service's count of the collection (asked on the first page) against the entities
        // its pages bring: a service that pages by offset while entities are deleted before the
        // cursor skips some, and a sweep would then remove them (finding 2 of the second round).
        var counted: Int? = nil
        var topLevel = 0
        var withoutProgress = 0
        var newInPage = 0
        do {
            while let parts = try await pipe.take() {
                let news = try await apply(parts.map(\.page), name: name, generation: generation, into: &report)
                for (part, new) in zip(parts, news) {
                    topLevel += part.page.topLevel
                    newInPage += new
                    guard part.endsPage else { continue }
                    report.pages += 1
                    report.bytes += part.bytes
                    if part.index == 1 { counted = part.page.count }
                    deltaLink = part.page.deltaLink
                    withoutProgress = newInPage == 0 && part.page.nextLink != nil ? withoutProgress + 1 : 0
                    newInPage = 0
                    if withoutProgress >= maxPagesWithoutProgress {
                        throw RefreshError.badResponse(
                            request: name,
                            message:
                                "the service sent \(withoutProgress) pages in a row with no entity that earlier pages of this read had not brought (\(report.pages) pages, \(report.received) entities in all): its next links do not end; nothing was removed, and the next refresh reads it again"
                        )
                    }
                }
                progress?(
                    RefreshProgress(
                        request: name, mode: report.mode, pages: report.pages, received: report.received,
                        bytes: report.bytes))
                try Task.checkCancellation()  // between groups: each is whole or absent
            }
        } catch {
            await pipe.close()  // the fetching task stops at its next hand-over
            _ = try? await fetched
            throw error
        }
        let (tracked, refused, followed) = try await fetched
        if refused { report.mode = .fullWithoutTracking }
        if let counted, topLevel < counted {
            // Not the whole collection: sweeping would remove what the service skipped. Keep
            // everything, store no delta link: the next refresh reads it in full again.
            report.missing = counted - topLevel
            return report
        }
        let swept = try await sweep(name: name, below: generation)
        report.removed += swept.removed
        report.retained += swept.retained
        if tracked, followed, let deltaLink {
            let link = try storable(deltaLink, request: name)
            try await store.write { t in try m.setDeltaLink(t, name: name, link) }
        }
        return report
    }

    /// The reading half of a full read: fetches the pages from `first` on, following next
    /// links, and hands each page's parts to `pipe` as it parses them (on a thread of its own,
    /// from memory or from the temporary file a large answer went to); ends the pipe with nil or
    /// the failure. Returns whether the read kept change tracking, whether the service refused
    /// it, and whether the last page's delta link covers the request's expand tree (`followsExpand`).
    ///
    /// The next page is asked for as soon as a page has come, before it is parsed: its link is
    /// read from the body's end (`NextLinkGuess`), and the parse's own link decides whether the
    /// answer is used — a page that comes from a wrong guess is dropped, never read.
    func fetchPages(
        first: String, query: BoundQuery, name: String, track: Bool, into pipe: PagePipe
    ) async throws -> (tracked: Bool, refused: Bool, followed: Bool) {
        var prefetch: (url: String, task: Task<BackendResponse, any Error>)? = nil
        do {
            var next: String? = first
            var seen: Set<String> = []
            var (track, refused, followed, index) = (track, false, false, 0)
            while let url = next {
                guard seen.insert(url).inserted else {
                    throw RefreshError.badResponse(
                        request: name, message: "the service sent the same next link twice: \(Membership.quoted(url))")
                }
                try Task.checkCancellation()  // between pages (each part of a page is whole or absent)
                var response: BackendResponse
                if let p = prefetch, p.url == url, index > 0 {
                    prefetch = nil
                    response = try await p.task.value
                } else {
                    await Self.drop(&prefetch)
                    response = try await get(index == 0 ? withCount(url) : url, track: track)
                }
                if index == 0, response.status == 400 || response.status == 501 {
                    response = try await get(url, track: track)  // a service that does not count
                }
                if track, index == 0, response.status == 400 || response.status == 501 {
                    // Refused change tracking (Gateway: "Delta is not supported for …"): read it in
                    // full, now and from now on. A request the service refuses for another reason
                    // fails again below, with the service's message.
                    let status = response.status
                    response = try await get(url, track: false)
                    if response.status == 200 {
                        let m = membership
                        try await store.write { t in try m.setUntracked(t, name: name, status: status) }
                        (track, refused) = (false, true)
                    }
                }
                guard response.status == 200 else { throw failure(name, response) }
                followed = followsExpand(response, query)
                index += 1
                if let guess = NextLinkGuess.guess(response.tail(NextLinkGuess.window)), !seen.contains(guess) {
                    let track = track
                    prefetch = (guess, Task { try await self.get(guess, track: track) })
                }
                let parse = parser(response, query: query, related: nil)
                defer { parse.stop() }
                // One part behind the parse, so that the page's last part (its links) is known as such.
                var held: ServerPage? = nil
                while let part = try await parse.nextItem() {
                    if let held {
                        try await pipe.put(PagePipe.Part(page: held, index: index, endsPage: false, bytes: 0))
                    }
                    held = part
                }
                let last = held ?? ServerPage()
                next = last.nextLink
                try await pipe.put(PagePipe.Part(page: last, index: index, endsPage: true, bytes: response.size))
            }
            await Self.drop(&prefetch)
            await pipe.finish(nil)
            return (track, refused, followed)
        } catch {
            await Self.drop(&prefetch)
            await pipe.finish(error)
            throw error
        }
    }

    /// Cancels a prefetch that is not wanted and waits for it to end, so that no request of a
    /// read outlives it.
    static func drop(_ prefetch: inout (url: String, task: Task<BackendResponse, any Error>)?) async {
        guard let p = prefetch else { return }
        prefetch = nil
        p.task.cancel()
        _ = await p.task.result
    }

    /// Reads the delta from `link`; nil when the service refuses it (4xx: expired or unknown).
    func deltaRead(name: String, query: BoundQuery, link: String) async throws -> RefreshReport.Request? {
        let m = membership
        let generation = max(1, try store.read { t in try m.generation(t, name: name) })
        var report = RefreshReport.Request(name: name, mode: .delta)
        var url = link
        var seen: Set<String> = []
        var withoutProgress = 0
        while true {
            guard seen.insert(url).inserted else {
                throw RefreshError.badResponse(
                    request: name, message: "the service sent the same next link twice: \(Membership.quoted(url))")
            }
            try Task.checkCancellation()
            let response = try await get(url, track: true)
            if (400..<500).contains(response.status) { return nil }
            guard response.status == 200 else { throw failure(name, response) }
            report.bytes += response.size
            let page = try await read(response, query: query, name: name, generation: generation, into: &report)
            if let next = page.nextLink {
                if page.received == 0 {
                    withoutProgress += 1
                    if withoutProgress >= maxPagesWithoutProgress {
                        throw RefreshError.badResponse(
                            request: name,
                            message:
                                "the service sent \(withoutProgress) empty delta pages in a row, each with another next link: they do not end"
                        )
                    }
                } else {
                    withoutProgress = 0
                }
                url = next
                continue
            }
            // Entities retained earlier whose pending changes have gone since (flushed, undone).
            let swept = try await sweep(name: name, below: 1)
            report.removed += swept.removed
            report.retained += swept.retained
            // A delta that no longer says it follows the expansion (the service changed): no link
            // kept, and the next refresh reads the request in full.
            let newLink = try page.deltaLink.map { try storable($0, request: name) }.flatMap {
                followsExpand(response, query) ? $0 : nil
            }
            try await store.write { t in try m.setDeltaLink(t, name: name, newLink) }
            return report
        }
    }

    // MARK: Writing

    /// What a page said of itself, once all of it was written.
    struct PageRead {
        var nextLink: String?
        var deltaLink: String?
        var count: Int?
        /// Entities at its top level; entity objects and removals in all; entities new to the generation.
        var topLevel = 0, received = 0, new = 0
    }

    /// The parse of one page of `response` as it streams, on a thread of its own, from memory or
    /// from the temporary file a large answer went to, in parts of at most `chunkRows` rows.
    /// `related`: the sets other than the request's whose entries the page may hold (a delta's).
    func parser(
        _ response: BackendResponse, query: BoundQuery, related: [String: BoundOptions]?
    ) -> ParseThread<ServerPage> {
        let (reader, set, options, chunkRows) = (reader, query.path.entitySet, query.options, chunkRows)
        return ParseThread<ServerPage>(name: "OfflineStore.refresh") { put in
            try reader.readPage(
                response.stream(), set: set, options: options, chunkRows: chunkRows, related: related, emit: put)
        }
    }

    /// Reads one page of a delta as it streams (`parser`) and writes it `chunkRows` rows a
    /// transaction as the parse goes on. A read that fails midway keeps the chunks written:
    /// they are the service's data, and the delta link is not moved, so the next refresh reads
    /// the page again.
    func read(
        _ response: BackendResponse, query: BoundQuery, name: String, generation: UInt64,
        into report: inout RefreshReport.Request
    ) async throws -> PageRead {
        // A delta's entries may be of any set of the request's expand tree.
        let parse = parser(response, query: query, related: Self.expandTree(query.options))
        defer { parse.stop() }
        var page = PageRead()
        while let part = try await parse.nextItem() {
            page.new += try await apply(part, name: name, generation: generation, into: &report)
            page.topLevel += part.topLevel
            page.received += part.received
            (page.nextLink, page.deltaLink, page.count) = (part.nextLink, part.deltaLink, part.count)
        }
        report.pages += 1
        progress?(
            RefreshProgress(
                request: name, mode: report.mode, pages: report.pages, received: report.received, bytes: report.bytes))
        return page
    }

    /// Each entity set below the top of `options`' expand tree, with the options of its first
    /// level (breadth first).
    static func expandTree(_ options: BoundOptions) -> [String: BoundOptions] {
        var out: [String: BoundOptions] = [:]
        var level = options.expand
        while !level.isEmpty {
            for e in level where out[e.entitySet] == nil { out[e.entitySet] = e.options }
            level = level.flatMap(\.options.expand)
        }
        return out
    }

    struct PageCounts: Sendable {
        var written = 0, removed = 0, rebased = 0, retained = 0, new = 0
    }

    /// Writes one page (or a chunk of one) in one transaction: see `apply(_:[ServerPage]…)`.
    @discardableResult
    func apply(
        _ page: ServerPage, name: String, generation: UInt64, into report: inout RefreshReport.Request
    ) async throws -> Int {
        try await apply([page], name: name, generation: generation, into: &report)[0]
    }

    /// Writes parts of pages in one transaction, in order: their entities (rebased where they
    /// have pending local changes) with their ETags and membership, and their removals. Returns,
    /// per part, how many of its entities are new to this generation (not brought by an earlier
    /// part of the same read).
    func apply(
        _ parts: [ServerPage], name: String, generation: UInt64, into report: inout RefreshReport.Request
    ) async throws -> [Int] {
        let store = self.store
        let counts = try await store.write { t in
            let m = Membership(store: store)
            // The handle of the last row's set: a page's rows are mostly of one set.
            var last: (name: String, set: EntitySetHandle, system: Bool)? = nil
            return try parts.map { page in
                var c = PageCounts()
                for row in page.rows {
                    if last?.name != row.set {
                        let set = try store.set(row.set)
                        last = (row.set, set, store.schema.isSystemSet(set.name))
                    }
                    guard let (_, set, system) = last, !system else { continue }
                    let keyValues = try set.keyValues(row.entity)
                    let keyBytes = try set.encodeKey(keyValues)
                    let entity = set.entityKey(keyBytes)
                    switch try Self.writeServerImage(
                        t, store: store, set: set, keyValues: keyValues, keyBytes: keyBytes, entityKey: entity, row: row
                    )
                    {
                    case .unchanged, .keptLocal: break
                    case .written: c.written += 1
                    case .rebased: c.written += 1; c.rebased += 1
                    }
                    if try m.hold(t, name: name, entity: entity, generation: generation) { c.new += 1 }
                    try m.putETag(t, entity: entity, row.etag)
                }
                for (setName, key) in page.removed {
                    let set = try store.set(setName)
                    switch try m.release(t, name: name, set: set, keyBytes: try set.encodeKey(key)) {
                    case .removed: c.removed += 1
                    case .retained: c.retained += 1
                    case .notMember, .stillHeld, .orphaned: break
                    }
                }
                return c
            }
        }
        for (page, c) in zip(parts, counts) {
            report.received += page.received
            report.written += c.written
            report.removed += c.removed
            report.rebased += c.rebased
            report.skippedProperties += page.skippedProperties
            report.facetViolations += page.facetViolations
        }
        progress?(
            RefreshProgress(
                request: name, mode: report.mode, pages: report.pages, received: report.received, bytes: report.bytes))
        return counts.map(\.new)
    }

    enum Written { case unchanged, written, rebased, keptLocal }

    /// Writes the service's image of one entity: as the entity when it has no pending local
    /// changes, else into `base/` with the pending requests re-applied on top (rebase).
    static func writeServerImage(
        _ t: WriteView, store: EntityStore, set: EntitySetHandle, keyValues: [Value], keyBytes: [UInt8],
        entityKey: [UInt8], row: ServerRow
    ) throws -> Written {
        let queue = RequestQueue(store: store)
        let chain = try queue.chain(t.reader, set: set.name, entityKey: entityKey)
        if chain.isEmpty {
            var image = row.entity
            if row.partial, let old = try set.get(t.reader, key: keyValues) {
                image = old; for (k, v) in row.entity { image[k] = v }
            }
            let written = try set.upsertIfChanged(t, image, keyValues: keyValues, keyBytes: keyBytes, facets: false)
            return written ? .written : .unchanged
        }
        var records = try chain.map { e -> RequestRecord in
            guard let r = try queue.record(t.reader, id: e.id) else {
                throw EntityError.badInput(
                    "q/by-entity names request \(e.id) of \(set.name)(\(set.describeKeyBytes(keyBytes))), which is not in the queue"
                )
            }
            return r
        }
        let base = store.base(ofSet: set.name)
        if records[0].method == .create {
            // The service has the key too. A create that already left (or was refused) is flush's to settle.
            guard records[0].status == .pending else { return .keptLocal }
            records[0].method = .replace
            try queue.put(t, records[0], hasDependents: chain[0].hasDependents)
        }
        var image = row.entity
        if row.partial, let old = try t.get(base, keyBytes).map({ try set.codec.decode($0) }) {
            image = old; for (k, v) in row.entity { image[k] = v }
        }
        let encoded = set.codec.encode(image)
        // Already the server image under the local changes (an entity two requests bring): nothing to do.
        if let current = try t.get(base, keyBytes), current.elementsEqual(encoded) { return .unchanged }
        try t.put(base, keyBytes, encoded)
        var local: Properties? = image
        for r in records { local = try queue.apply(r, to: local) }
        if let local {
            try set.upsert(t, local, facets: false)
        } else {
            _ = try set.delete(t, key: keyValues)
        }
        return .rebased
    }

    /// Releases request `name`'s entries with a generation below `below`, in transactions of at
    /// most `sweepChunk` releases: after a full read (`below` = its generation) the entities the
    /// service no longer returned, after a delta (`below` = 1) the retained ones.
    func sweep(name: String, below: UInt64) async throws -> (removed: Int, retained: Int) {
        try await Membership(store: store).sweep(name: name, below: below, chunk: sweepChunk)
    }
}
