import NIOCore
import Queue
public import Sync
public import Remote
public import Storage
import Synchronization

/// What one flush did: requests sent, succeeded (of them reconciled), archived, round trips, why
/// it stopped (nil when it ran to the end), requests left.
public typealias FlushReport = Sync.FlushReport

extension OfflineStore {
    /// Uploads the request queue to the service at `serviceRoot` (default: the configuration's
    /// `serviceRoot`), in request-id order, in `$batch` round trips of up to `batchSize` requests
    /// (JSON for a V4 service; `multipart/mixed` with change sets, V2 JSON bodies, `MERGE` and a
    /// CSRF token with its session cookies for a V2 service such as SAP Gateway); with `category`, only the requests of that upload category. `headers` go with
    /// every round trip. `authorizer` sets each request's credentials (see `RequestAuthorizer`);
    /// without one, the configuration's `authentication` does, its secret read now. `progress` is
    /// called after each round trip.
    ///
    /// ```swift
    /// let report = try await store.flush(headers: [("Authorization", "Bearer …")])
    /// if let why = report.stopped { print("will retry: \(why)") }
    /// ```
    /// A refusal (a 4xx) does not throw: the request and its dependents go to ErrorArchive and
    /// the rest goes on. A 5xx or a lost connection does not throw either: the flush stops, the
    /// queue keeps what was not settled, and `report.stopped` says why; the next flush resumes.
    /// Throws for no service root, a batch size below 1, a flush of this store already running in
    /// this process, `AuthenticationError` (a secret that cannot be read, a token refused), and
    /// errors of the store itself. See `Flush` for the algorithm.
    public func flush(
        serviceRoot: String? = nil, category: String? = nil, batchSize: Int = 50, headers: [(String, String)] = [],
        authorizer: (any RequestAuthorizer)? = nil, progress: (@Sendable (FlushReport) -> Void)? = nil
    ) async throws -> FlushReport {
        try await flush(
            serviceRoot: serviceRoot, category: category, batchSize: batchSize, headers: headers, reconcile: true,
            authorizer: authorizer, progress: progress)
    }

    /// `flush(serviceRoot:…)` with reconciliation on or off (`offline-store flush --no-reconcile`,
    /// hidden: for the kill test).
    package func flush(
        serviceRoot: String?, category: String?, batchSize: Int, headers: [(String, String)], reconcile: Bool,
        authorizer: (any RequestAuthorizer)? = nil, progress: (@Sendable (FlushReport) -> Void)?
    ) async throws -> FlushReport {
        guard let root = serviceRoot ?? configuration.serviceRoot else {
            throw EntityError.badInput(
                "no service to flush to: give its URL (--service) or set serviceRoot in the store's configuration")
        }
        try ServiceURL.check(root, option: "the service root")
        try HTTPTransport.validate(headers: headers)
        let authorizer = try authorizer ?? Credentials.authorizer(for: configuration.sync, serviceRoot: root)
        let t = configuration.timeouts
        let backend = HTTPTransport(
            serviceRoot: root, timeout: .seconds(Int64(t.requestSeconds)),
            connectTimeout: .seconds(Int64(t.connectSeconds)), idleTimeout: .seconds(Int64(t.idleSeconds)),
            version: schema.version, authorizer: authorizer, queryParameters: configuration.queryParameters,
            supportsBatch: configuration.supportsBatch)
        do {
            let report = try await flush(
                // Without $batch, one request a round trip (a transaction still goes whole).
                backend: backend, category: category, batchSize: configuration.supportsBatch ? batchSize : 1,
                headers: headers,
                reconcile: reconcile, progress: progress)
            try? await backend.shutdown()
            return report
        } catch {
            try? await backend.shutdown()
            throw error
        }
    }

    /// `flush` over any `Transport` (tests put their own around `HTTPTransport`). `reconcile: false` turns reconciliation off,
    /// so a request the service applied twice shows up in ErrorArchive (the kill test's probe).
    package func flush(
        backend: any Transport, category: String? = nil, batchSize: Int = 50, headers: [(String, String)] = [],
        reconcile: Bool = true, progress: (@Sendable (FlushReport) -> Void)? = nil
    ) async throws -> FlushReport {
        guard batchSize >= 1 else { throw EntityError.badInput("the batch size must be at least 1, not \(batchSize)") }
        let path = self.path
        guard Self.flushing.withLock({ $0.insert(path).inserted }) else {
            throw EntityError.badInput("a flush of the store in '\(path)' is already running")
        }
        defer { _ = Self.flushing.withLock { $0.remove(path) } }
        // The service's words (why it stopped, its messages), without a secret it repeats.
        do {
            return Self.redacted(
                try await metrics.flush {
                    try await flushRun(
                        backend: backend, category: category, batchSize: batchSize, headers: headers,
                        reconcile: reconcile, progress: progress)
                } length: {
                    try? pendingRequestCount()
                })
        } catch {
            throw Self.redacted(error)
        }
    }

    /// The flush itself, in the lifecycle's `uploading` state.
    private func flushRun(
        backend: any Transport, category: String?, batchSize: Int, headers: [(String, String)], reconcile: Bool,
        progress: (@Sendable (FlushReport) -> Void)?
    ) async throws -> FlushReport {
        try await lifecycle.during(.uploading, detail: category) { lifecycleProgress in
            let options = Flush.Options(
                category: category, batchSize: batchSize, headers: headers, reconcile: reconcile
            ) { report in
                lifecycleProgress(LifecycleEvent(state: .uploading, requests: report.sent, detail: category))
                progress?(report)
            }
            let odata = ODataBackend(
                transport: backend, store: entities, contentIDReferences: configuration.contentIDReferences)
            return try await Flush(queue: requestQueue, backend: odata, options: options).run()
        }
    }

    /// `flush` (no reconciliation) and then nothing else, against an HTTP backend that gives up
    /// quickly: no retries, and a connect timeout of `connectTimeout` seconds — AsyncHTTPClient
    /// keeps retrying a refused connection until its connect timeout (10 s by default), so against
    /// a stopped server a flush would wait that long. For `crashtest`'s workers, whose server is
    /// killed and started again on another port.
    package func quickFlush(serviceRoot: String, batchSize: Int, connectTimeout: Double) async throws -> FlushReport {
        let backend = HTTPTransport(
            serviceRoot: serviceRoot, retries: 0, connectTimeout: .milliseconds(Int64(connectTimeout * 1000)),
            version: schema.version)
        do {
            let report = try await flush(backend: backend, batchSize: batchSize, reconcile: false)
            try? await backend.shutdown()
            return report
        } catch {
            try? await backend.shutdown()
            throw error
        }
    }

    /// `refresh` against a backend that gives up quickly (see `quickFlush`).
    package func quickRefresh(serviceRoot: String, pageSize: Int, connectTimeout: Double) async throws -> RefreshReport
    {
        let backend = HTTPTransport(
            serviceRoot: serviceRoot, retries: 0, connectTimeout: .milliseconds(Int64(connectTimeout * 1000)),
            version: schema.version)
        do {
            let report = try await refresh(backend: backend, pageSize: pageSize)
            try? await backend.shutdown()
            return report
        } catch {
            try? await backend.shutdown()
            throw error
        }
    }

    /// Whether `error` (of `refresh` or `flush`) says the service gave no answer at all — it is
    /// away, or the network is — rather than refusing something: a sync then does not try the
    /// other half.
    package static func isNoAnswer(_ error: any Error) -> Bool {
        if case BackendError.transport = error { return true }
        if case BackendError.unreachable = error { return true }
        return false
    }

    /// Stores with a flush running in this process, by path.
    static let flushing = Mutex<Set<String>>([])

    /// The ETag the service last gave for an entity (recorded by flush and refresh; sent as
    /// `If-Match` when the entity's next change is flushed), or nil.
    public func serverETag(set: String, key: [Value]) throws -> String? {
        let h = try entities.set(set)
        let keyBytes = try h.encodeKey(key)
        let etags = ServerETags(store: entities)
        return try entities.read { t in try etags.get(t, set: set, keyBytes: keyBytes) }
    }
}
