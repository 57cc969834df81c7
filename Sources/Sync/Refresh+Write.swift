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
        var written = 0, removed = 0, rebased = 0, retained = 0, new = 0, conflicts = 0
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
                    case .conflict: c.written += 1; c.rebased += 1; c.conflicts += 1
                    }
                    if !row.links.isEmpty { try Self.writeLinks(row, t, store: store, set: set, keyBytes: keyBytes) }
                    if !row.streams.isEmpty, let streams = set.streams, try t.contains(set.entities, keyBytes) {
                        for (stream, announced) in row.streams {
                            try streams.announce(t, entityKey: entity, name: stream, announced)
                        }
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
            report.conflicts += c.conflicts
            report.skippedProperties += page.skippedProperties
            report.facetViolations += page.facetViolations
        }
        progress?(
            RefreshProgress(
                request: name, mode: report.mode, pages: report.pages, received: report.received, bytes: report.bytes))
        return counts.map(\.new)
    }

    enum Written { case unchanged, written, rebased, keptLocal, conflict }

    /// The links `row`'s expanded navigation properties without a referential constraint
    /// brought (`LinkStore`): the whole list replaces what the entity had, a partial one (a
    /// filtered expansion) adds to it; each navigation is marked linked. Nothing for an entity
    /// that is not in the store (deleted locally).
    static func writeLinks(
        _ row: ServerRow, _ t: WriteView, store: EntityStore, set: EntitySetHandle, keyBytes: [UInt8]
    ) throws {
        guard let links = store.links, try t.contains(set.entities, keyBytes) else { return }
        for (nav, list) in row.links {
            let target = try store.set(list.targetSet)
            let keys = try list.keys.map { try target.encodeKey($0) }
            try links.replace(
                t, sourceSet: set.name, sourceKeyBytes: keyBytes, nav: nav, targetSet: list.targetSet, targets: keys,
                adding: !list.complete)
            try links.markLinked(t, set: set.name, nav: nav)
        }
        // The entity's link changes not yet settled, laid over the service's links (rebase).
        let queue = RequestQueue(store: store)
        for entry in try queue.chain(t.reader, set: set.name, keyBytes: keyBytes) where entry.method.isLinkChange {
            guard let r = try queue.record(t.reader, id: entry.id), let change = try? LinkChange.of(r),
                row.links[change.navigation] != nil
            else { continue }
            let source = EntityStore.entityKey(set: set.name, keyBytes: keyBytes)
            var now = try links.targets(t.reader, source: source, nav: change.navigation)
            let target = change.targetBytes
            if r.method == .link {
                if !now.contains(target) { now = change.collection ? now + [target] : [target] }
            } else {
                now.removeAll { $0 == target }
            }
            try links.replace(
                t, sourceSet: set.name, sourceKeyBytes: keyBytes, nav: change.navigation,
                targetSet: change.targetSet, targets: now)
        }
    }

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
        if records[0].method.isCreate {
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
        let stored = try t.get(base, keyBytes)
        if let stored, stored.elementsEqual(encoded) { return .unchanged }
        let before = try stored.map { try set.codec.decode($0) }
        let overlap = try before.map { try conflicting(records, base: $0, server: image, set: set, queue: queue) } ?? []
        try t.put(base, keyBytes, encoded)
        var local: Properties? = image
        for r in records { local = try queue.apply(r, to: local) }
        if let local {
            try set.upsert(t, local, facets: false)
        } else {
            _ = try set.delete(t, key: keyValues)
        }
        guard !overlap.isEmpty, let before else { return .rebased }
        try recordConflict(
            t, queue: queue, records, overlap: overlap, base: before, server: image, set: set, etag: row.etag)
        return .conflict
    }

    /// The properties where pending `records` (all pending, the first a change of a server
    /// entity) and the service disagree since `base`, the service's image they were made on:
    /// changed there (`base` → `server`) and changed here (a PATCH's names, a PUT's differences
    /// from `base`) to another value than the service's. Any change there conflicts with a
    /// pending DELETE. Empty when the changes can be rebased without losing either side.
    static func conflicting(
        _ records: [RequestRecord], base: Properties, server: Properties, set: EntitySetHandle, queue: RequestQueue
    ) throws -> [String] {
        guard records.allSatisfy({ $0.status == .pending }) else { return [] }
        let keys = Set(set.type.key)
        func same(_ a: Value?, _ b: Value?) -> Bool {
            (a ?? .null) == (b ?? .null) || ((a ?? .null).isNull && (b ?? .null).isNull)
        }
        let theirs = set.type.properties.map(\.name).filter { !keys.contains($0) && !same(base[$0], server[$0]) }
        guard !theirs.isEmpty else { return [] }
        var mine: [String: Value?] = [:]
        for r in records {
            switch r.method {
            case .delete: return theirs
            case .putStream, .createMedia, .link, .unlink, .call: continue  // no property of the entity
            case .update:
                for (name, value) in try queue.body(of: r) { mine[name] = value }
            case .replace, .create:
                let body = try queue.body(of: r)
                for p in set.type.properties where !keys.contains(p.name) && !same(body[p.name], base[p.name]) {
                    mine[p.name] = body[p.name]
                }
            }
        }
        return theirs.filter { name in mine[name].map { !same($0, server[name]) } ?? false }
    }

    /// A pending change met a service change in a refresh: its ErrorArchive entry with the three
    /// versions (`base` the change was made on, the entity as changed here — rebased: the
    /// service's other changes under mine — and `server`, the refresh's), as a 412 would have
    /// made at flush; then the set's policy, as flush applies it. The new ETag is written by the
    /// caller: "keep mine" sends the change against the service's version.
    static func recordConflict(
        _ t: WriteView, queue: RequestQueue, _ records: [RequestRecord], overlap: [String], base: Properties,
        server: Properties, set: EntitySetHandle, etag: String?
    ) throws {
        let first = records[0]
        let error = ServiceError(
            httpStatus: 412, code: "RefreshConflict",
            message:
                "the service changed \(overlap.joined(separator: ", ")) of \(set.name)(\(first.entityKey)) since this change was made (seen by a refresh)"
        )
        // The entry's base is the one the change was made on; recordConflict then puts the
        // service's version in its place.
        try t.put(queue.store.base(ofSet: set.name), first.keyBytes, set.codec.encode(base))
        _ = try queue.archive(t, id: first.id, error: error)
        guard let versions = try queue.recordConflict(t, id: first.id, server: server, serverETag: etag) else { return }
        // The program's resolver or the set's policy, as at flush: keep mine sends the change
        // again at the next flush, against the ETag this refresh brought.
        _ = try queue.settleConflict(
            t, first, versions, status: nil, what: "a conflict seen by a refresh",
            policy: try queue.store.syncSettings().conflictPolicies[first.entitySet] ?? .manual)
    }

    /// Releases request `name`'s entries with a generation below `below`, in transactions of at
    /// most `sweepChunk` releases: after a full read (`below` = its generation) the entities the
    /// service no longer returned, after a delta (`below` = 1) the retained ones.
    func sweep(name: String, below: UInt64) async throws -> (removed: Int, retained: Int) {
        try await Membership(store: store).sweep(name: name, below: below, chunk: sweepChunk)
    }
}
