import Dispatch
import LMDB
import Query
import Synchronization

/// The live queries of one store (`OfflineStore.observe`): one run per URL however many observe
/// it, told of this process's commits by the environment's commit listener, and of other
/// processes' by a task that polls LMDB's last transaction id while any is live.
///
/// A live query runs once when it starts and again after each commit that may change its result;
/// each run's result goes to every observer of its URL when it differs from the run before (and to
/// an observer that has had nothing yet, whatever it is). An observer that joins a live query gets
/// its last result at once when no commit has come since that run began; else it waits for the
/// run that commit brings, so its first element always shows what was committed before it joined.
///
/// A run's result is a `Snapshot`: the entities, and what else the answer carries — the rendering
/// of its `$expand` tree and, for a stream, the ETags of what it holds — so that a commit that
/// changes only an expanded entity, or only an ETag, is a change of the result (issue 37, F12
/// and F15: it brought no element, and streamed answers went stale).
final class ObservationHub: Sendable {
    /// What one run of a live query gave.
    struct Snapshot: Sendable, Equatable {
        var entities: [Properties]
        /// The answer as rendered (JSON), when the entities alone do not show all of it; nil else.
        var rendering: [UInt8]? = nil
        /// What the observers get, made once a run for all of them (`observeRendering`: a stream's
        /// event, shared by every stream of the URL); not compared.
        var event: (any Sendable)? = nil

        static func == (a: Snapshot, b: Snapshot) -> Bool { a.entities == b.entities && a.rendering == b.rendering }
    }

    /// Where an observer's results go.
    struct Observer: Sendable {
        var yield: @Sendable (Snapshot) -> Void
        var finish: @Sendable ((any Error)?) -> Void
    }

    /// What a live query reads and how to run it.
    struct Query: Sendable {
        /// The entity databases it reads; nil: any.
        var watched: Set<UInt32>?
        /// The one entity it reads, if it reads one.
        var entity: (dbi: UInt32, key: [UInt8])?
        var run: @Sendable () throws -> Snapshot
        /// Where its runs happen: nil, on the live query's task (Swift's concurrency pool).
        var executor: OfflineStore.LiveQueryExecutor? = nil

        /// One run, on the executor when it has one. An executor that refuses the work (a server
        /// shutting down) ends the live query with its error.
        func evaluate() async throws -> Snapshot {
            guard let executor else { return try run() }
            let outcome = Mutex<Result<Snapshot, any Error>?>(nil)
            let run = self.run
            try await executor {
                let result = Result { try run() }
                outcome.withLock { $0 = result }
            }
            guard let result = outcome.withLock({ $0 }) else { throw CancellationError() }
            return try result.get()
        }
    }

    /// A live query: touched only under the hub's lock.
    private final class Live {
        let url: String
        let query: Query
        let signal: AsyncStream<Void>.Continuation
        var task: Task<Void, Never>?
        /// Its observers, and whether each has had an element.
        var observers: [Int: (out: Observer, served: Bool)] = [:]
        /// The result of its last run.
        var last: Snapshot?
        /// A commit that may change the result came after its last run began (or it has not run).
        var dirty = true
        var running = false

        init(url: String, query: Query, signal: AsyncStream<Void>.Continuation) {
            (self.url, self.query, self.signal) = (url, query, signal)
        }

        /// The one entity it reads, when that is all it reads (`entityRead` allows no `$expand`;
        /// checked here too, so that a query of one entity that reads another set is never
        /// filed under its key alone).
        var entityOnly: (dbi: UInt32, key: [UInt8])? {
            guard let e = query.entity, query.watched == [e.dbi] else { return nil }
            return e
        }
    }

    private struct State {
        var live: [Int: Live] = [:]
        var liveByURL: [String: Int] = [:]
        /// The live queries by what they read, so a commit finds those it may change without
        /// looking at the others: of one entity, by database and key; else by each database they
        /// read, or among those that read any.
        var byEntity: [UInt32: [[UInt8]: Set<Int>]] = [:]
        var byDatabase: [UInt32: Set<Int>] = [:]
        var readingAny: Set<Int> = []
        /// Each observer's live query.
        var observed: [Int: Int] = [:]
        var next = 0
        var listener: Int?
        var poller: Task<Void, Never>?
        /// The last transaction id accounted for, and this process's commits after it.
        var seen: UInt64 = 0
        var own: Set<UInt64> = []
        /// The last transaction id the poll before read: the commits up to it are judged at the
        /// next poll, by when this process's commit listener has surely been told of its own (a
        /// commit is visible in LMDB a moment before the listener hears of it; judged at once, a
        /// commit of this process was taken for another's under load and ran every live query).
        var read: UInt64 = 0
        var runs = 0

        mutating func newID() -> Int {
            next += 1
            return next
        }

        mutating func insert(_ id: Int, _ l: Live) {
            live[id] = l
            liveByURL[l.url] = id
            if let e = l.entityOnly {
                byEntity[e.dbi, default: [:]][e.key, default: []].insert(id)
            } else if let watched = l.query.watched {
                for dbi in watched { byDatabase[dbi, default: []].insert(id) }
            } else {
                readingAny.insert(id)
            }
        }

        /// The live queries a commit may have changed the result of.
        func hit(by notice: Environment.CommitNotice) -> Set<Int> {
            var hit = readingAny
            for (dbi, ids) in byDatabase where notice.touched.contains(dbi) { hit.formUnion(ids) }
            for (dbi, byKey) in byEntity where notice.touched.contains(dbi) {
                if let written = notice.keys.keys {
                    for w in written where w.dbi == dbi { byKey[w.key].map { hit.formUnion($0) } }
                } else {
                    for ids in byKey.values { hit.formUnion(ids) }
                }
            }
            return hit
        }

        /// Takes a live query out, with what must be stopped outside the lock: its observers'
        /// streams, its signal and task, and the commit listener and poller when it was the last.
        mutating func remove(_ id: Int) -> Stopped {
            var stopped = Stopped()
            guard let l = live.removeValue(forKey: id) else { return stopped }
            if liveByURL[l.url] == id { liveByURL[l.url] = nil }
            if let e = l.entityOnly {
                byEntity[e.dbi]?[e.key]?.remove(id)
                if byEntity[e.dbi]?[e.key]?.isEmpty == true { byEntity[e.dbi]![e.key] = nil }
                if byEntity[e.dbi]?.isEmpty == true { byEntity[e.dbi] = nil }
            } else if let watched = l.query.watched {
                for dbi in watched {
                    byDatabase[dbi]?.remove(id)
                    if byDatabase[dbi]?.isEmpty == true { byDatabase[dbi] = nil }
                }
            } else {
                readingAny.remove(id)
            }
            for o in l.observers.keys { observed[o] = nil }
            stopped.outs = l.observers.values.map(\.out)
            (stopped.signal, stopped.task) = (l.signal, l.task)
            if live.isEmpty {
                (stopped.listener, stopped.poller) = (listener, poller)
                (listener, poller) = (nil, nil)
            }
            return stopped
        }
    }

    /// What to stop outside the lock (finishing a stream may call its termination handler, which
    /// takes the lock).
    private struct Stopped {
        var outs: [Observer] = []
        var signal: AsyncStream<Void>.Continuation?
        var task: Task<Void, Never>?
        var listener: Int?
        var poller: Task<Void, Never>?

        func stop(_ environment: Environment, error: (any Error)? = nil) {
            for out in outs { out.finish(error) }
            signal?.finish()
            task?.cancel()
            poller?.cancel()
            if let listener { environment.removeCommitListener(listener) }
        }
    }

    private let state = Mutex(State())
    private let environment: Environment

    init(environment: Environment) { self.environment = environment }

    /// Observers now, live queries now (one per URL), and the runs of live queries so far.
    var counts: (observers: Int, queries: Int, runs: Int) {
        state.withLock { ($0.observed.count, $0.live.count, $0.runs) }
    }

    /// Adds an observer of `url` whose results go to `out`: it joins the live query of `url`, or
    /// starts one that runs `query`. The first live query starts listening to commits and polling
    /// for other processes' every `poll` — before its first run, so no commit after that run
    /// begins goes unseen. Returns the observer's id, for `remove`.
    func add(_ url: String, _ query: Query, _ out: Observer, poll: Duration) -> Int {
        state.withLock { s in
            let id = s.newID()
            if let existing = s.liveByURL[url], let l = s.live[existing] {
                // Its last result is current when no commit came since its run began.
                let current = !l.dirty && !l.running ? l.last : nil
                if let current { out.yield(current) }
                l.observers[id] = (out, current != nil)
                s.observed[id] = existing
                return id
            }
            if s.listener == nil {
                // Safe under the lock: the environment calls its listeners outside its own.
                s.listener = environment.addCommitListener { [weak self] notice in self?.committed(notice) }
                s.poller = Task.detached { [weak self] in
                    while !Task.isCancelled {
                        try? await Task.sleep(for: poll)
                        guard let self else { return }
                        self.poll()
                    }
                }
                (s.seen, s.own) = (environment.lastCommittedTxnID, [])
                s.read = s.seen
            }
            let liveID = s.newID()
            let (signals, signal) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
            let l = Live(url: url, query: query, signal: signal)
            l.observers[id] = (out, false)
            l.task = run(liveID, query, signals)
            s.insert(liveID, l)
            s.observed[id] = liveID
            return id
        }
    }

    /// `remove` from an observer's stream termination handler: soon, on a thread of its own, never
    /// in the handler. A stream's handler runs inside the concurrency runtime's lock of the task
    /// being cancelled; `publish` holds the hub's lock while it resumes that same task, which takes
    /// that task's lock. Taken in the handler, the hub's lock stopped both threads, and with them a
    /// `serve` whose streams ended while a result was published (both of the concurrency pool's
    /// threads on two cores: nothing more was answered, not even SIGTERM).
    func removeSoon(_ observer: Int) {
        DispatchQueue.global().async { [self] in remove(observer) }
    }

    /// Removes an observer (again: nothing); its live query stops with its last observer.
    func remove(_ observer: Int) {
        let stopped = state.withLock { s -> Stopped in
            guard let id = s.observed.removeValue(forKey: observer) else { return Stopped() }
            s.live[id]?.observers[observer] = nil
            guard s.live[id]?.observers.isEmpty == true else { return Stopped() }
            return s.remove(id)
        }
        stopped.stop(environment)
    }

    /// The task of live query `id`: a run now and one after each signal, until its signal ends.
    /// A run that throws ends the live query and its observers' streams with the error.
    private func run(_ id: Int, _ query: Query, _ signals: AsyncStream<Void>) -> Task<Void, Never> {
        Task { [self] in
            var pending = signals.makeAsyncIterator()
            var last: Snapshot? = nil
            repeat {
                let live = state.withLock { s -> Bool in
                    guard let l = s.live[id] else { return false }
                    s.runs += 1
                    (l.dirty, l.running) = (false, true)
                    return true
                }
                guard live else { return }
                do {
                    let now = try await query.evaluate()
                    publish(id, now, changed: now != last)
                    last = now
                } catch {
                    state.withLock { $0.remove(id) }.stop(environment, error: error)
                    return
                }
            } while await pending.next() != nil
        }
    }

    /// A run's result: to every observer when it `changed`, else to those that have had nothing.
    private func publish(_ id: Int, _ result: Snapshot, changed: Bool) {
        state.withLock { s in
            guard let l = s.live[id] else { return }
            (l.last, l.running) = (result, false)
            for (o, (out, served)) in l.observers where changed || !served {
                out.yield(result)
                if !served { l.observers[o]!.served = true }
            }
        }
    }

    /// A commit of this process: its id is not another process's, and the live queries whose
    /// result it may have changed run again.
    private func committed(_ notice: Environment.CommitNotice) {
        let signals = state.withLock { s -> [AsyncStream<Void>.Continuation] in
            if notice.txnID > s.seen { s.own.insert(notice.txnID) }
            return s.hit(by: notice).compactMap { id in
                guard let l = s.live[id] else { return nil }
                l.dirty = true
                return l.signal
            }
        }
        for s in signals { s.yield() }
    }

    /// Commits up to the one the last poll read that are not this process's: every live query
    /// runs again (another process's commit is noticed within two polls).
    private func poll() {
        let now = environment.lastCommittedTxnID
        let signals = state.withLock { s -> [AsyncStream<Void>.Continuation] in
            let last = s.read
            s.read = max(s.read, now)
            guard last > s.seen else { return [] }
            let foreign = (s.seen + 1...last).contains { !s.own.contains($0) }
            s.seen = last
            s.own = s.own.filter { $0 > last }
            guard foreign else { return [] }
            for l in s.live.values { l.dirty = true }
            return s.live.values.map(\.signal)
        }
        for s in signals { s.yield() }
    }
}
