import NIOCore
import Glibc
import Queue
public import Sync
public import Remote
import Storage
import Synchronization

/// A named read URL whose results the store keeps (`StoreConfiguration.DefiningRequest`).
public typealias DefiningRequest = StoreConfiguration.DefiningRequest
/// What a refresh did (`RefreshReport.Request` per defining request).
public typealias RefreshReport = Sync.RefreshReport
/// Where a running refresh is.
public typealias RefreshProgress = Sync.RefreshProgress
/// Why a refresh, define or undefine stopped.
public typealias RefreshError = Sync.RefreshError
/// No answer, or one that cannot be read, from the service (what a refresh throws when it is down).
package typealias BackendError = Sync.BackendError

/// Stores with a refresh, define or undefine running in this process: path → the descriptor of
/// its `sync.lock`, on which this process holds an exclusive `flock`.
private let busyStores = Mutex<[String: Int32]>([:])

extension OfflineStore {
    /// Entities per page asked of the service (`Prefer: odata.maxpagesize`) when the caller gives none.
    public static let defaultRefreshPageSize = 1_000

    /// The store's defining requests, in the order refresh runs them.
    public var definingRequests: [DefiningRequest] { configuration.definingRequests }

    /// Adds defining request `name` (1 to 128 letters, digits, `_`, `-`, `.`), or gives an existing
    /// one another URL; on an open store, kept in its configuration. The URL is checked against the
    /// schema: a read of a whole entity set with `$filter`, `$select`, `$expand` (and custom
    /// options) only. A new URL for an existing name drops its delta link: the next refresh reads
    /// it in full and removes what the new URL no longer returns.
    ///
    /// With `retrieveStreams`, a refresh also downloads the streams of the entities it reads
    /// (`DefiningRequest.retrieveStreams`).
    public func define(name: String, url: String, retrieveStreams: Bool = false) throws {
        try Membership.validate(name: name)
        _ = try DefiningRequests.bind(url, schema: schema)
        try exclusively {
            if let existing = definingRequests.first(where: { $0.name == name }) {
                if existing.url == url && existing.retrieveStreams == retrieveStreams { return }
                if existing.url != url {
                    let m = Membership(store: entities)
                    try entities.write { t in try m.setDeltaLink(t, name: name, nil) }
                }
            }
            try entities.changeDefiningRequests { list in
                if let i = list.firstIndex(where: { $0.name == name }) {
                    list[i].url = url
                    list[i].retrieveStreams = retrieveStreams
                } else {
                    list.append(DefiningRequest(name: name, url: url, retrieveStreams: retrieveStreams))
                }
            }
        }
    }

    /// Removes defining request `name` and its membership: an entity it brought that no other
    /// defining request holds is deleted — except one with pending local changes, which stays
    /// (unheld: no later refresh removes it; flush or undo settles its changes, delete it locally
    /// if it should go). Runs in transactions of bounded size; after a crash the request is
    /// still defined, without its delta link, and `undefine` (or a full refresh) finishes the job.
    /// Returns the number of entities deleted.
    @discardableResult
    public func undefine(name: String) throws -> Int {
        try exclusively {
            guard definingRequests.contains(where: { $0.name == name }) else { throw RefreshError.unknownRequest(name) }
            let m = Membership(store: entities)
            try entities.write { t in try m.setDeltaLink(t, name: name, nil) }
            let removed = try m.sweepBlocking(name: name, below: .max, retain: false).removed
            try entities.changeDefiningRequests(
                { list in list.removeAll { $0.name == name } },
                also: { t in try m.forgetState(t, name: name) })
            return removed
        }
    }

    /// Refreshes the store from the service at `serviceRoot` (default: the configuration's): runs
    /// every defining request, or those named in `subset`, then rebases and compacts the request
    /// queue — see the DocC article "Refresh and defining requests". `headers` go with every request;
    /// `authorizer` sets each request's credentials (see `RequestAuthorizer`) — without one, the
    /// configuration's `authentication` does, its secret read now; `pageSize` is asked as
    /// `Prefer: odata.maxpagesize` (default 1,000). A full read's pages are written in groups of
    /// about 5,000 entities, each in its own transaction; a refresh that fails or is killed
    /// leaves a consistent store, and the next one converges.
    ///
    /// - Throws: `RefreshError` (a service error status, an unknown name, no service root, one
    ///   already running), `BackendError` (no answer), `AuthenticationError` (a secret that cannot
    ///   be read, a token refused), `EntityError`/`JSONError` for a payload that does not fit the schema.
    @discardableResult
    public func refresh(
        serviceRoot: String? = nil, subset: [String]? = nil, headers: [(String, String)] = [], pageSize: Int? = nil,
        authorizer: (any RequestAuthorizer)? = nil, progress: (@Sendable (RefreshProgress) -> Void)? = nil
    ) async throws -> RefreshReport {
        let backend = try readingTransport(serviceRoot: serviceRoot, headers: headers, authorizer: authorizer)
        do {
            let report = try await refresh(backend: backend, subset: subset, pageSize: pageSize, progress: progress)
            try await backend.shutdown()
            return report
        } catch {
            try? await backend.shutdown()
            throw error
        }
    }

    /// The HTTP transport a read of the service goes over (a refresh, a check of its
    /// `$metadata`): the service root given or configured, checked; the headers checked; the
    /// configuration's credentials and timeouts.
    func readingTransport(
        serviceRoot: String?, headers: [(String, String)], authorizer: (any RequestAuthorizer)?
    ) throws -> HTTPTransport {
        guard let root = serviceRoot ?? configuration.serviceRoot, !root.isEmpty else {
            throw RefreshError.noServiceRoot
        }
        try ServiceURL.check(root, option: "the service root")
        try HTTPTransport.validate(headers: headers)
        let authorizer = try authorizer ?? Credentials.authorizer(for: configuration.sync, serviceRoot: root)
        let t = configuration.timeouts
        return HTTPTransport(
            serviceRoot: root, headers: headers, timeout: .seconds(Int64(t.requestSeconds)),
            connectTimeout: .seconds(Int64(t.connectSeconds)), idleTimeout: .seconds(Int64(t.idleSeconds)),
            version: schema.version, authorizer: authorizer, queryParameters: configuration.queryParameters)
    }

    /// `refresh` over any `Transport` (tests put their own around `HTTPTransport`).
    @discardableResult
    package func refresh(
        backend: any Transport, subset: [String]? = nil, pageSize: Int? = nil,
        progress: (@Sendable (RefreshProgress) -> Void)? = nil
    ) async throws -> RefreshReport {
        if let pageSize, pageSize < 1 {
            throw EntityError.badInput("the page size must be at least 1, not \(pageSize)")
        }
        let all = definingRequests
        var chosen = all
        if let subset {
            for name in subset where !all.contains(where: { $0.name == name }) {
                throw RefreshError.unknownRequest(name)
            }
            chosen = all.filter { subset.contains($0.name) }
        }
        try enter()
        defer { leave() }
        do {
            return try await refreshRun(chosen, pageSize: pageSize, backend: backend, progress: progress)
        } catch {
            throw Self.redacted(error)  // the service's words, without a secret it repeats
        }
    }

    /// The refresh itself, in the lifecycle's `downloading` state, measured.
    private func refreshRun(
        _ chosen: [DefiningRequest], pageSize: Int?, backend: any Transport,
        progress: (@Sendable (RefreshProgress) -> Void)?
    ) async throws -> RefreshReport {
        try await metrics.refresh {
            try await lifecycle.during(.downloading) { lifecycleProgress in
                let refresher = Refresher(
                    store: entities, backend: ODataBackend(transport: backend, store: entities),
                    settings: configuration.sync, pageSize: pageSize ?? Self.defaultRefreshPageSize
                ) { p in
                    lifecycleProgress(
                        LifecycleEvent(state: .downloading, entities: p.received, bytes: p.bytes, detail: p.request))
                    progress?(p)
                }
                return try await refresher.run(chosen, optimize: configuration.requestQueueOptimization)
            }
        } length: {
            try? pendingRequestCount()
        }
    }

    /// Names valid and distinct, URLs defining requests of the schema in `metadata`.
    static func checkDefiningRequests(_ requests: [DefiningRequest], metadata: [UInt8]) throws {
        guard !requests.isEmpty else { return }
        let schema = try CSDL.parse(metadata).withSystemSets()
        var names: Set<String> = []
        for r in requests {
            try Membership.validate(name: r.name)
            guard names.insert(r.name).inserted else {
                throw EntityError.badInput("configuration: the defining request '\(r.name)' is given twice")
            }
            do { _ = try DefiningRequests.bind(r.url, schema: schema) } catch {
                throw EntityError.badInput("configuration: defining request '\(r.name)': \(error)")
            }
        }
    }

    /// Takes the store's refresh lock: in this process (a set of paths), and across processes (an
    /// exclusive `flock` on `sync.lock` in the store's directory, released by the system when the
    /// process ends, even by SIGKILL). Two refreshes of one store at once would each sweep what
    /// the other had just marked (the later one's membership sweep deletes entities the earlier
    /// one brought); the second is refused instead, with `RefreshError.alreadyRunning`.
    private func enter() throws {
        let path = self.path
        try busyStores.withLock { busy in
            guard busy[path] == nil else { throw RefreshError.alreadyRunning }
            let fd = Glibc.open(path + "/sync.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            guard fd >= 0 else {
                throw EntityError.badInput(
                    "cannot open \(path)/sync.lock for the refresh lock: \(String(cString: strerror(errno)))")
            }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
                let e = errno
                close(fd)
                if e == EWOULDBLOCK { throw RefreshError.alreadyRunning }
                throw EntityError.badInput("cannot lock \(path)/sync.lock: \(String(cString: strerror(e)))")
            }
            busy[path] = fd
        }
    }

    private func leave() {
        let path = self.path
        busyStores.withLock { busy in
            if let fd = busy.removeValue(forKey: path) {
                flock(fd, LOCK_UN)
                close(fd)
            }
        }
    }

    private func exclusively<R>(_ body: () throws -> R) throws -> R {
        try enter()
        defer { leave() }
        return try body()
    }
}
