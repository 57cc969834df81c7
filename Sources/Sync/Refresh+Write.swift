import LMDB
import Query
import Queue
import Storage

extension Refresher {
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
        _ response: PageAnswer, query: BoundQuery, related: [String: BoundOptions]?
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
        _ response: PageAnswer, query: BoundQuery, name: String, generation: UInt64,
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
