import LMDB
import Query
import Queue
package import Storage

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
    /// The sync role's settings (the store's, read once for this refresh).
    let settings: SyncSettings
    let reader: PayloadReader

    package init(
        store: EntityStore, backend: any Backend, settings: SyncSettings, pageSize: Int? = nil,
        headers: [(String, String)] = [], progress: (@Sendable (RefreshProgress) -> Void)? = nil
    ) {
        self.settings = settings
        self.store = store
        self.backend = backend
        self.pageSize = pageSize
        self.headers = headers
        self.progress = progress
        self.reader = PayloadReader(schema: store.schema, serviceRoot: backend.serviceRoot, shapes: store.entityShapes)
        self.groupRows = settings.refreshGroupRows
        self.groupParts = max(16, groupRows * 16 / SyncSettings.defaultRefreshGroupRows)
    }

    var membership: Membership { Membership(store: store) }

    /// Refreshes `requests` in order, then compacts the queue (with `optimize`: the store's
    /// `requestQueueOptimization`) and logs a download event. Stops at the first failure
    /// (logged too), keeping what was written.
    package func run(_ requests: [SyncSettings.DefiningRequest], optimize: Bool) async throws -> RefreshReport {
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
    package func refresh(_ r: SyncSettings.DefiningRequest) async throws -> RefreshReport.Request {
        let query = try DefiningRequests.bind(r.url, schema: store.schema)
        var report = try await read(r, query: query)
        if r.retrieveStreams { try await downloadStreams(sets: query.setsReached, into: &report) }
        return report
    }

    /// The read of one defining request (`refresh`), without its streams.
    func read(_ r: SyncSettings.DefiningRequest, query: BoundQuery) async throws -> RefreshReport.Request {
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

    /// A read of `url`: with `track`, asking for a delta link; with `count`, asking the service
    /// to count the collection; in pages of `pageSize` where the service lets its client choose.
    func get(_ url: String, track: Bool, count: Bool = false) async throws -> PageAnswer {
        try await backend.read(
            PageRequest(url: url, trackChanges: track, pageSize: pageSize, count: count), extra: headers)
    }

    /// The service's own message (V4 `error.message`, V2 `error.message.value`, with its code and
    /// details), or the start of the body when it is not an OData error.
    func failure(_ name: String, _ response: PageAnswer) -> RefreshError {
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
    func followsExpand(_ response: PageAnswer, _ query: BoundQuery) -> Bool {
        query.options.expand.isEmpty || response.deltaFollowsExpand
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
        _ r: SyncSettings.DefiningRequest, query: BoundQuery, track: Bool, mode: RefreshReport.Mode
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
                        bytes: report.bytes, topLevel: topLevel, expected: counted))
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
        var prefetch: (url: String, task: Task<PageAnswer, any Error>)? = nil
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
                var response: PageAnswer
                if let p = prefetch, p.url == url, index > 0 {
                    prefetch = nil
                    response = try await p.task.value
                } else {
                    await Self.drop(&prefetch)
                    response = try await get(url, track: track, count: index == 0)
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
    static func drop(_ prefetch: inout (url: String, task: Task<PageAnswer, any Error>)?) async {
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
}
