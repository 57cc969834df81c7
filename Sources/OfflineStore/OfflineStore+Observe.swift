import LMDB
import Query
import Storage
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
    /// - Cancelling the task that iterates it (or dropping the sequence) stops it. It throws what
    ///   running the query throws (a store that cannot be read).
    ///
    /// Throws at once for a URL that does not bind (as `entities(_:)` would).
    public func observe(
        _ url: String, otherProcessesEvery: Duration = .milliseconds(100)
    ) throws -> AsyncThrowingStream<[Properties], any Error> {
        let bound = try queries.bind(url)
        let watched = try Self.databasesRead(by: bound, schema: schema, store: entities)
        let entity = try Self.entityRead(by: bound, store: entities)
        let (signals, signal) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let (results, out) = AsyncThrowingStream<[Properties], any Error>.makeStream(
            bufferingPolicy: .bufferingNewest(1))
        let (hub, environment) = (observations, entities.environment)
        let id = hub.add(
            watched: watched, entity: entity, signal: signal, environment: environment, poll: otherProcessesEvery)
        let task = Task { [self] in
            var last: [Properties]? = nil
            do {
                var pending = signals.makeAsyncIterator()
                repeat {
                    hub.evaluated()
                    let now = try entities(url)
                    if now != last {
                        out.yield(now)
                        last = now
                    }
                } while await pending.next() != nil
                out.finish()
            } catch {
                out.finish(throwing: error)
            }
            hub.remove(id, environment: environment)
        }
        out.onTermination = { _ in
            task.cancel()
            hub.remove(id, environment: environment)
        }
        return results
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

    /// Live queries of this store now (`observe`) and the times they ran: for tests.
    package var observationCounts: (observers: Int, evaluations: Int) { observations.counts }
}

/// The live queries of one store (`OfflineStore.observe`): told of this process's commits by the
/// environment's commit listener, and of other processes' by a task that polls LMDB's last
/// transaction id while any is live.
final class ObservationHub: Sendable {
    private struct Observer {
        /// The entity databases it reads; nil: any.
        var watched: Set<UInt32>?
        /// The one entity it reads, if it reads one.
        var entity: (dbi: UInt32, key: [UInt8])?
        var signal: AsyncStream<Void>.Continuation
    }

    private struct State {
        var observers: [Int: Observer] = [:]
        var next = 0
        var listener: Int?
        var poller: Task<Void, Never>?
        /// The last transaction id accounted for, and this process's commits after it.
        var seen: UInt64 = 0
        var own: Set<UInt64> = []
        var evaluations = 0
    }

    private let state = Mutex(State())

    var counts: (observers: Int, evaluations: Int) { state.withLock { ($0.observers.count, $0.evaluations) } }

    func evaluated() { state.withLock { $0.evaluations += 1 } }

    /// Adds an observer; the first one starts listening to commits and polling for other
    /// processes' every `poll`.
    func add(
        watched: Set<UInt32>?, entity: (dbi: UInt32, key: [UInt8])?, signal: AsyncStream<Void>.Continuation,
        environment: Environment, poll: Duration
    ) -> Int {
        let (id, start) = state.withLock { s -> (Int, Bool) in
            s.next += 1
            s.observers[s.next] = Observer(watched: watched, entity: entity, signal: signal)
            return (s.next, s.observers.count == 1 && s.listener == nil)
        }
        if start {
            let listener = environment.addCommitListener { [weak self] notice in self?.committed(notice) }
            let seen = environment.lastCommittedTxnID
            let poller = Task.detached { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: poll)
                    guard let self else { return }
                    self.poll(environment)
                }
            }
            let stale = state.withLock { s -> (Int?, Task<Void, Never>?) in
                // Another `add` may have raced this one: the first to get here keeps its listener.
                guard s.listener == nil else { return (listener, poller) }
                (s.listener, s.poller, s.seen, s.own) = (listener, poller, seen, [])
                return (nil, nil)
            }
            if let id = stale.0 { environment.removeCommitListener(id) }
            stale.1?.cancel()
        }
        return id
    }

    /// Removes an observer (again: nothing); the last one stops the listening and the polling.
    func remove(_ id: Int, environment: Environment) {
        let (signal, stop) = state.withLock { s -> (AsyncStream<Void>.Continuation?, (Int, Task<Void, Never>?)?) in
            let o = s.observers.removeValue(forKey: id)
            guard s.observers.isEmpty, let listener = s.listener else { return (o?.signal, nil) }
            defer { (s.listener, s.poller) = (nil, nil) }
            return (o?.signal, (listener, s.poller))
        }
        signal?.finish()
        if let (listener, poller) = stop {
            poller?.cancel()
            environment.removeCommitListener(listener)
        }
    }

    /// A commit of this process: its id is not another process's, and the observers that read a
    /// database it wrote run again (those that read one entity, when it may have written that one).
    private func committed(_ notice: Environment.CommitNotice) {
        let signals = state.withLock { s -> [AsyncStream<Void>.Continuation] in
            if notice.txnID > s.seen { s.own.insert(notice.txnID) }
            return s.observers.values.compactMap { o in
                guard let w = o.watched else { return o.signal }
                guard notice.touched.containsAny(of: w) else { return nil }
                if let e = o.entity, !notice.keys.mayContain(e.dbi, e.key) { return nil }
                return o.signal
            }
        }
        for s in signals { s.yield() }
    }

    /// Commits since the last poll that are not this process's: every observer runs again.
    private func poll(_ environment: Environment) {
        let last = environment.lastCommittedTxnID
        let signals = state.withLock { s -> [AsyncStream<Void>.Continuation] in
            guard last > s.seen else { return [] }
            let foreign = (s.seen + 1...last).contains { !s.own.contains($0) }
            s.seen = last
            s.own = s.own.filter { $0 > last }
            return foreign ? s.observers.values.map(\.signal) : []
        }
        for s in signals { s.yield() }
    }
}
