import Synchronization

/// Where a store is in its life, reported through `Lifecycle.events`.
///
/// `opening → initializing` (a new store: schema and configuration written) `→ open`; from `open`,
/// `populating` (a `load`), `downloading` (a `refresh`) and `uploading` (a `flush`) and back to
/// `open`; `closed` when the store is released.
public enum LifecycleState: String, Sendable, Hashable {
    case opening, initializing, populating, downloading, open, uploading, closed
}

/// One report of a store's lifecycle: its state and the progress of the work that state stands
/// for (zero where it does not apply).
public struct LifecycleEvent: Sendable, Hashable, CustomStringConvertible {
    public var state: LifecycleState
    /// Entities loaded (`populating`) or received (`downloading`) so far.
    public var entities = 0
    /// Response bytes read (`downloading`).
    public var bytes = 0
    /// Requests sent (`uploading`), or defining requests done (`downloading`).
    public var requests = 0
    /// What the state is about: a defining request's name, a set being loaded, why a flush stopped.
    public var detail: String?

    public init(state: LifecycleState, entities: Int = 0, bytes: Int = 0, requests: Int = 0, detail: String? = nil) {
        self.state = state
        self.entities = entities
        self.bytes = bytes
        self.requests = requests
        self.detail = detail
    }

    /// `downloading SG_Sales: 1200 entities, 350 KiB, 0 requests`, or just the state.
    public var description: String {
        guard entities != 0 || bytes != 0 || requests != 0 || detail != nil else { return state.rawValue }
        var s = state.rawValue + (detail.map { " " + $0 } ?? "")
        if entities != 0 || bytes != 0 || requests != 0 {
            s +=
                ": \(entities) entities, \(bytes >= 10_240 ? "\(bytes / 1_024) KiB" : "\(bytes) bytes"), \(requests) requests"
        }
        return s
    }
}

/// The lifecycle of one store: its current state, and any number of `AsyncStream`s of its
/// changes. Make one before opening to see `opening` too:
///
/// ```swift
/// let lifecycle = Lifecycle()
/// let watcher = Task { for await e in lifecycle.events() { print(e) } }
/// let store = try OfflineStore.open(at: path, lifecycle: lifecycle)
/// try await store.refresh()          // downloading …, open
/// ```
/// A stream starts with the current event, then gets every later one; it ends after `closed`.
/// Events are never dropped for a slow reader unless it asks for `.bufferingNewest(n)`.
public final class Lifecycle: Sendable {
    struct State {
        var current = LifecycleEvent(state: .opening)
        var next = 0
        var watchers: [Int: AsyncStream<LifecycleEvent>.Continuation] = [:]
        var history: [LifecycleEvent] = []
        /// Work running now, oldest first.
        var active: [(token: Int, event: LifecycleEvent)] = []

        /// Makes `event` current and sends it to every stream; after `closed`, nothing. Returns
        /// the streams to finish (after `closed`), to be finished outside the lock.
        mutating func publish(_ event: LifecycleEvent) -> [AsyncStream<LifecycleEvent>.Continuation] {
            guard current.state != .closed else { return [] }
            current = event
            history.append(event)
            if history.count > Lifecycle.historyLimit { history.removeFirst(history.count - Lifecycle.historyLimit) }
            for c in watchers.values { c.yield(event) }
            guard event.state == .closed else { return [] }
            defer { watchers = [:] }
            return Array(watchers.values)
        }
    }
    let state = Mutex(State())
    /// How many past events `history` keeps.
    static let historyLimit = 1_000

    public init() {}

    /// The state now.
    public var current: LifecycleEvent { state.withLock { $0.current } }

    /// The last events (up to 1,000), oldest first.
    public var history: [LifecycleEvent] { state.withLock { $0.history } }

    /// A stream of this lifecycle's events: the current one first, then each change.
    public func events(
        bufferingPolicy: AsyncStream<LifecycleEvent>.Continuation.BufferingPolicy = .unbounded
    ) -> AsyncStream<LifecycleEvent> {
        AsyncStream(bufferingPolicy: bufferingPolicy) { continuation in
            let id: Int? = state.withLock { s in
                continuation.yield(s.current)
                guard s.current.state != .closed else { return nil }
                let id = s.next
                s.next += 1
                s.watchers[id] = continuation
                return id
            }
            guard let id else { continuation.finish(); return }
            continuation.onTermination = { [weak self] _ in
                _ = self?.state.withLock { $0.watchers.removeValue(forKey: id) }
            }
        }
    }

    /// Reports `event` to every stream (nothing after `closed`).
    func report(_ event: LifecycleEvent) {
        let ended = state.withLock { s in s.publish(event) }
        for c in ended { c.finish() }
    }

    /// Starts a piece of work in state `event.state` (work may overlap: a `load` during a
    /// `refresh`); the store is back in `open` when the last piece ends.
    func begin(_ event: LifecycleEvent) -> Int {
        state.withLock { s in
            let token = s.next
            s.next += 1
            s.active.append((token, event))
            _ = s.publish(event)
            return token
        }
    }

    /// Reports progress of the work `token`.
    func update(_ token: Int, _ event: LifecycleEvent) {
        state.withLock { s in
            guard let i = s.active.firstIndex(where: { $0.token == token }) else { return }
            s.active[i].event = event
            _ = s.publish(event)
        }
    }

    /// Ends the work `token`: the state goes back to the latest work still running, or `open`.
    func end(_ token: Int) {
        state.withLock { s in
            s.active.removeAll { $0.token == token }
            _ = s.publish(s.active.last?.event ?? LifecycleEvent(state: .open))
        }
    }

    /// Runs `body` as a piece of work in state `busy`; `body` gets a function to report progress.
    func during<R>(
        _ busy: LifecycleState, detail: String? = nil,
        _ body: (_ progress: @escaping @Sendable (LifecycleEvent) -> Void) async throws -> R
    ) async rethrows -> R {
        let token = begin(LifecycleEvent(state: busy, detail: detail))
        defer { end(token) }
        return try await body { [self] in update(token, $0) }
    }

    func during<R>(
        _ busy: LifecycleState, detail: String? = nil,
        _ body: (_ progress: @escaping @Sendable (LifecycleEvent) -> Void) throws -> R
    ) rethrows -> R {
        let token = begin(LifecycleEvent(state: busy, detail: detail))
        defer { end(token) }
        return try body { [self] in update(token, $0) }
    }

    deinit {
        for c in state.withLock({ $0.watchers.values }) { c.finish() }
    }
}
