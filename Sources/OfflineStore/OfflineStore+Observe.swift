import LMDB
import Query
public import Storage
import Synchronization

extension OfflineStore {
    /// The results of an OData URL (what `entities(_:)` returns for it), kept up to date: the first
    /// element is the current result; a new one comes after a commit that changed it.
    ///
    /// ```swift
    /// for try await dear in try store.observe("Products?$filter=Price gt 1000&$orderby=Name") {
    ///     print(dear.count)   // now, and again whenever a commit changes the answer
    /// }
    /// ```
    ///
    /// - Which commits: every commit of this store in this process — local changes, refresh groups,
    ///   flush settlements, writes served by `serve` — that wrote to an entity set the URL reads
    ///   (its set, the sets of its path and `$expand`, the sets its `$filter` and `$orderby` reach
    ///   through navigation; any commit when the query calls an `offline.` function). Another
    ///   process's commits are noticed by polling LMDB's last transaction id
    ///   (`otherProcessesEvery`, 100 ms by default) while something observes the store, and
    ///   re-run every query then.
    /// - An element comes only when the result differs from the last one: a commit to another set,
    ///   or to a property the result does not hold, brings none.
    /// - Bursts coalesce: commits that come while the query runs again bring one more run, not
    ///   one each. A consumer that reads slowly gets the newest result; at most one waits for it.
    /// - Observers of the same URL share its runs: one run a commit, however many observe it. One
    ///   that joins later gets the last result at once, or, when a commit came since that run
    ///   began, the result of the run the commit brings.
    /// - Cancelling the task that iterates it (or dropping the sequence) stops it. It throws what
    ///   running the query throws (a store that cannot be read), to every observer of the URL.
    ///
    /// Throws at once for a URL that does not bind (as `entities(_:)` would).
    public func observe(
        _ url: String, otherProcessesEvery: Duration = .milliseconds(100)
    ) throws -> AsyncThrowingStream<[Properties], any Error> {
        let bound = try queries.bind(url)
        let queries = self.queries
        // The entities do not hold their expansions: with `$expand`, the answer's rendering is
        // compared too, so a commit that changes only an expanded entity brings an element. Both
        // come from one read transaction, so they show one snapshot.
        let expands = !bound.options.expand.isEmpty
        let query = try liveQuery(bound) {
            guard expands else { return ObservationHub.Snapshot(entities: try queries.entities(bound)) }
            var rendering: [UInt8] = []
            let entities = try queries.entities(bound, url: url) { rendering.append(contentsOf: $0) }
            return ObservationHub.Snapshot(entities: entities, rendering: rendering)
        }
        let (results, out) = AsyncThrowingStream<[Properties], any Error>.makeStream(
            bufferingPolicy: .bufferingNewest(1))
        let hub = observations
        let id = hub.add(
            "entities\n" + url, query,
            ObservationHub.Observer(yield: { out.yield($0.entities) }, finish: { out.finish(throwing: $0) }),
            poll: otherProcessesEvery)
        out.onTermination = { _ in hub.removeSoon(id) }
        return results
    }

    /// The answer of `url` as `query(_:format:options:writeBytes:)` renders it in JSON with
    /// `options` (no server-driven paging), kept up to date as `observe` keeps its entities: the
    /// first element now, another after each commit that changed the rendering — an entity, an
    /// expanded one, or an ETag the answer carries (`options.etags`), even of a property a
    /// `$select` leaves out. Each element is `event` of the rendering, made once a run: streams of
    /// one URL with the same options share each run, its one rendering and its one event. The runs
    /// (the query, the rendering and `event`) happen on `executor` when given, else on Swift's
    /// concurrency pool. An answer over `limit` bytes ends the stream with `LiveRenderingTooLarge`.
    package func observeRendering<Event: Sendable>(
        _ url: String, options: ResultOptions, limit: Int, executor: LiveQueryExecutor? = nil,
        otherProcessesEvery: Duration = .milliseconds(100), event: @escaping @Sendable ([UInt8]) -> Event
    ) throws -> AsyncThrowingStream<Event, any Error> {
        let bound = try queries.bind(url)
        let queries = self.queries
        var query = try liveQuery(bound) {
            let rendering = try Self.render(queries, url, options, limit: limit)
            return ObservationHub.Snapshot(entities: [], rendering: rendering, event: event(rendering))
        }
        query.executor = executor
        let (results, out) = AsyncThrowingStream<Event, any Error>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let hub = observations
        let key =
            "rendering \(Event.self) \(options.serviceRoot ?? "") \(options.etags) \(options.verbose) \(limit)\n" + url
        let id = hub.add(
            key, query,
            ObservationHub.Observer(
                yield: { snapshot in (snapshot.event as? Event).map { _ = out.yield($0) } },
                finish: { out.finish(throwing: $0) }),
            poll: otherProcessesEvery)
        out.onTermination = { _ in hub.removeSoon(id) }
        return results
    }

    /// `observeRendering` whose elements are the renderings themselves.
    package func observeRendering(
        _ url: String, options: ResultOptions, limit: Int, otherProcessesEvery: Duration = .milliseconds(100)
    ) throws -> AsyncThrowingStream<[UInt8], any Error> {
        try observeRendering(url, options: options, limit: limit, otherProcessesEvery: otherProcessesEvery) { $0 }
    }

    /// Runs a live query's work (`observeRendering`) away from Swift's concurrency pool: `serve`
    /// hands it to its query threads, as it does a plain read's, so scans run again after each
    /// commit never hold the pool's few threads, which answer everything else (issue 37, F9: four
    /// live scans made `$metadata` wait 3–8 s). It runs `work` once and returns when it has run;
    /// what it throws (a server shutting down) ends the live query with that error.
    package typealias LiveQueryExecutor = @Sendable (_ work: @escaping @Sendable () -> Void) async throws -> Void

    /// A live query of `bound`: what it reads, and `run`.
    private func liveQuery(
        _ bound: BoundQuery, run: @escaping @Sendable () throws -> ObservationHub.Snapshot
    ) throws -> ObservationHub.Query {
        ObservationHub.Query(
            watched: try Self.databasesRead(by: bound, schema: schema, store: entities),
            entity: try Self.entityRead(by: bound, store: entities), run: run)
    }

    /// `url`'s JSON answer, whole; past `limit` bytes, `LiveRenderingTooLarge`.
    static func render(_ queries: QueryEngine, _ url: String, _ options: ResultOptions, limit: Int?) throws -> [UInt8] {
        var out: [UInt8] = []
        try queries.execute(
            url, format: .json, pageSize: nil, options: options,
            writeBytes: { chunk in
                if let limit, out.count + chunk.count > limit { throw LiveRenderingTooLarge(limit: limit) }
                out.append(contentsOf: chunk)
            })
        return out
    }

    /// The entity databases `query` reads, or nil when it may read any (an `offline.` function
    /// reads the request queue).
    static func databasesRead(by query: BoundQuery, schema: Schema, store: EntityStore) throws -> Set<UInt32>? {
        var sets = Set(query.path.segments.map(\.entitySet))
        var open = false
        func walk(_ e: TypedExpr) {
            switch e.kind {
            case .literal: break
            case .property(let p): steps(p)
            case .compare(_, let a, let b), .arithmetic(_, let a, let b):
                walk(a)
                walk(b)
            case .isNull(let x), .not(let x), .negate(let x), .convert(let x), .in(let x, _), .has(let x, _): walk(x)
            case .and(let xs), .or(let xs): xs.forEach(walk)
            case .function(let name, let args):
                if name.hasPrefix("offline.") { open = true }
                args.forEach(walk)
            case .any(let p, _, let predicate):
                steps(p)
                predicate.map(walk)
            case .all(let p, _, let predicate):
                steps(p)
                walk(predicate)
            case .count(let p): steps(p)
            }
        }
        func steps(_ p: PropertyPath) {
            for case .navigation(_, let target) in p.steps { sets.insert(target) }
        }
        func options(_ o: BoundOptions) {
            o.filter.map(walk)
            o.orderBy.forEach { walk($0.expression) }
            for e in o.expand {
                sets.insert(e.entitySet)
                options(e.options)
            }
        }
        options(query.options)
        if open { return nil }
        return Set(try sets.map { try store.set($0).entities.dbi })
    }

    /// The one entity `query` reads — its database and key — when it reads one (`Set(key)` with
    /// no `$expand`), so that a commit that wrote other entities of the set does not run it again.
    static func entityRead(by query: BoundQuery, store: EntityStore) throws -> (dbi: UInt32, key: [UInt8])? {
        guard query.path.segments.count == 1, let segment = query.path.segments.first, let key = segment.key,
            query.options.expand.isEmpty
        else { return nil }
        let set = try store.set(segment.entitySet)
        return (set.entities.dbi, try set.encodeKey(key.map(\.value)))
    }

    /// Observers of this store now (`observe`), its live queries (one per URL) and the times they
    /// ran: for tests.
    package var observationCounts: (observers: Int, queries: Int, evaluations: Int) {
        let c = observations.counts
        return (c.observers, c.queries, c.runs)
    }
}

/// A live answer (`observeRendering`) grew past its limit.
package struct LiveRenderingTooLarge: Error {
    package var limit: Int
}
