package import CLMDB
import Foundation
package import Synchronization

/// How hard a returned write is made to last.
public enum Durability: String, Sendable, Codable {
    /// A returned write survives power loss: every commit is fsynced (the default).
    case full
    /// A returned write survives a process crash, not an OS crash or power loss (`MDB_NOSYNC`).
    case noSync
}

/// An LMDB environment: one directory holding `data.mdb` and `lock.mdb`, many named databases.
///
/// Reads run on any thread (`MDB_NOTLS`); writes run on one writer thread that group-commits
/// concurrent callers' changes: many closures, one transaction, one fsync. The map grows by itself
/// when it fills, so callers never size it.
///
/// ```swift
/// let env = try Environment(path: "/tmp/store")
/// let db = try env.database(named: "e/Products", create: true)
/// try env.write { txn in try txn.view.put(db, key, value) }
/// let n = try env.read { txn in try txn.view.count(db) }
/// ```
package final class Environment: @unchecked Sendable {
    // @unchecked: MDB_env is thread-safe under MDB_NOTLS; our mutable state is behind `state` and
    // `resize` (a reader/writer lock: read transactions share it, a map resize takes it alone).
    package let raw: OpaquePointer
    package let path: String
    private let resize = _RWLock()
    private let state = Mutex<[String: Database]>([:])
    /// Serializes `mdb_dbi_open` in read-only environments (writable ones open on the writer thread).
    private let dbiLock = Mutex(())
    /// Write transactions committed by this environment (a group commit counts once).
    package let _commits = Atomic<Int>(0)
    package var commitCount: Int { _commits.load(ordering: .relaxed) }
    /// The limit given to `mdb_env_set_maxdbs`.
    package let maxDatabases: Int
    private let writer: _Writer
    /// Reset read transactions kept for reuse (`mdb_txn_reset` / `mdb_txn_renew`): renewing keeps
    /// the reader slot and the allocation, which makes a short read several times cheaper.
    private let idleReaders = Mutex<[UInt]>([])  // MDB_txn pointers' bit patterns (Sendable)
    /// The size cap in bytes (`setSizeCap`), or nil: the map then grows without bound.
    private let _sizeCap = Atomic<Int>(0)
    package var sizeCap: Int? { let c = _sizeCap.load(ordering: .relaxed); return c == 0 ? nil : c }
    static let maxIdleReaders = 32

    /// Opens (creating if needed) the environment in directory `path` (`mdb_env_open`).
    ///
    /// - Parameters:
    ///   - mapSize: the initial map size in bytes; it doubles whenever a write fills it.
    ///   - maxDatabases: how many named databases may be open (`mdb_env_set_maxdbs`).
    ///   - readOnly: open with `MDB_RDONLY`: nothing is created and writes fail. On a read-only
    ///     file system, where the lock file cannot be written, the environment is opened without
    ///     locking (`MDB_NOLOCK`): nobody can be writing there.
    /// - Throws: `LMDBError`, `StorageSystemError`, `EnvironmentError`, or `DataFileError` for a
    ///   truncated or damaged `data.mdb` (found before LMDB maps it). On failure the environment
    ///   is closed again (`mdb_env_close`).
    package init(
        path: String, durability: Durability = .full, mapSize: Int = Environment.defaultMapSize,
        maxDatabases: Int = 1024, fileMode: mode_t = 0o644, readOnly: Bool = false
    ) throws {
        // Before any file of ours is opened: a closed standard descriptor must not become data.mdb.
        try StandardDescriptors.reserve()
        try Self._prepareDirectory(path, create: !readOnly)
        try Self._refuseDamagedDataFile(in: path)
        var flags = UInt32(MDB_NOTLS)
        if durability == .noSync { flags |= UInt32(MDB_NOSYNC) }
        if readOnly { flags |= UInt32(MDB_RDONLY) }
        var env: OpaquePointer
        do {
            env = try Self._open(path, flags: flags, mapSize: mapSize, maxDatabases: maxDatabases, fileMode: fileMode)
        } catch let e as LMDBError where readOnly && (e.code == EROFS || e.code == EACCES) {
            env = try Self._open(
                path, flags: flags | UInt32(MDB_NOLOCK), mapSize: mapSize,
                maxDatabases: maxDatabases, fileMode: fileMode)
        }
        self.raw = env
        self.path = path
        self.maxDatabases = maxDatabases
        self.isReadOnly = readOnly
        self.writer = _Writer()
        writer.environment = self
        writer.start()
    }

    /// `mdb_env_create`, the limits, `mdb_env_open`; `mdb_env_close` again if any of it fails.
    private static func _open(
        _ path: String, flags: UInt32, mapSize: Int, maxDatabases: Int, fileMode: mode_t
    ) throws -> OpaquePointer {
        var env: OpaquePointer?
        try _check(_lmdb.envCreate(&env), "mdb_env_create")
        do {
            try _check(_lmdb.envSetMaxDBs(env, maxDatabases), "mdb_env_set_maxdbs")
            try _check(_lmdb.envSetMapSize(env, mapSize), "mdb_env_set_mapsize")
            try _check(_lmdb.envSetMaxReaders(env, 510), "mdb_env_set_maxreaders")
            try _check(_lmdb.envOpen(env, path, flags, fileMode), "mdb_env_open \(path)")
            if flags & UInt32(MDB_NOLOCK) == 0 {
                // Reader slots of processes that died (SIGKILL) are freed now, not when the
                // table fills; a stale slot would also pin old pages and grow the file.
                var dead: Int32 = 0
                try _check(_lmdb.readerCheck(env!, &dead), "mdb_reader_check")
            }
        } catch {
            _lmdb.envClose(env)
            throw _diskFull(error, path: path)
        }
        return env!
    }

    /// Checks that `path` is (or, with `create`, becomes) a directory, and gives its lock file
    /// real blocks. LMDB sizes `lock.mdb` with `ftruncate` and writes it through a shared map: on
    /// a full disk the first write to that sparse file is a SIGBUS. Allocating it first
    /// (`posix_fallocate`) turns that into an error here.
    static func _prepareDirectory(_ path: String, create: Bool) throws {
        var st = stat()
        if stat(path, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFDIR else { throw EnvironmentError.notADirectory(path) }
        } else if errno != ENOENT || !create {
            throw StorageSystemError(operation: "open the store directory '\(path)'", errno: errno)
        } else {
            // Like `mkdir -p`: missing parents are made too.
            var prefix = path.hasPrefix("/") ? "" : "."
            for part in path.split(separator: "/") {
                prefix += "/" + part
                if mkdir(prefix, 0o755) != 0 && errno != EEXIST {
                    throw StorageSystemError(operation: "create the store directory '\(path)'", errno: errno)
                }
            }
        }
        guard create else { return }
        let lock = path + "/lock.mdb"
        let fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw StorageSystemError(operation: "open '\(lock)'", errno: errno) }
        defer { close(fd) }
        let rc = posix_fallocate(fd, 0, Self.lockFileBytes)
        if rc == ENOSPC || rc == EDQUOT {
            throw EnvironmentError.diskFull(path: path, operation: "allocate the lock file")
        }
        // Other failures (a file system without fallocate) leave LMDB to size the file as before.
    }

    /// Room for LMDB's reader table of `mdb_env_set_maxreaders(510)` (64 bytes a slot) and header.
    static let lockFileBytes = 64 << 10

    deinit {
        writer.stop()
        for bits in idleReaders.withLock({ $0 }) { _lmdb.txnAbort(OpaquePointer(bitPattern: bits)!) }
        _lmdb.envClose(raw)
    }

    /// The map reserved at open: 64 GiB of address space, not of disk (the file grows only as pages
    /// are written). So large a map almost never fills, so writers almost never wait for every
    /// reader to finish before a resize — a long streaming read would otherwise stall them.
    package static let defaultMapSize = 64 << 30

    /// True when opened with `readOnly`: writes throw.
    package let isReadOnly: Bool

    /// The durability in force (`mdb_env_get_flags`).
    package var durability: Durability {
        var flags: UInt32 = 0
        _ = _lmdb.envGetFlags(raw, &flags)
        return flags & UInt32(MDB_NOSYNC) != 0 ? .noSync : .full
    }

    /// Changes the durability of later commits (`mdb_env_set_flags` with `MDB_NOSYNC`).
    package func setDurability(_ d: Durability) throws {
        try _check(_lmdb.envSetFlags(raw, UInt32(MDB_NOSYNC), d == .noSync), "mdb_env_set_flags")
    }

    /// The current map size in bytes (`mdb_env_info`).
    package var mapSize: Int {
        var info = MDB_envinfo()
        _ = _lmdb.envInfo(raw, &info)
        return info.me_mapsize
    }

    /// Size of the data file in bytes.
    package var fileSize: Int {
        let attrs = try? FileManager.default.attributesOfItem(atPath: path + "/data.mdb")
        return (attrs?[.size] as? NSNumber)?.intValue ?? 0
    }

    /// The id of the last transaction committed to the environment, by this process or another
    /// (`mdb_env_info`'s `me_last_txnid`, read from the lock file).
    package var lastCommittedTxnID: UInt64 {
        var info = MDB_envinfo()
        _ = _lmdb.envInfo(raw, &info)
        return UInt64(info.me_last_txnid)
    }

    // MARK: Commit listeners

    /// What one commit of this environment's writer did.
    package struct CommitNotice: Sendable {
        /// The committed transaction's id (`mdb_txn_id`).
        package var txnID: UInt64
        /// The databases its bodies wrote to.
        package var touched: DatabaseSet
        /// The keys they wrote, when few.
        package var keys: WrittenKeys
        /// Write calls (jobs) the commit took together.
        package var jobs: Int
        /// From the transaction's start to its durable commit.
        package var nanoseconds: UInt64
    }

    private let listeners = Mutex<(next: Int, all: [Int: @Sendable (CommitNotice) -> Void])>((0, [:]))

    /// Calls `listener` after every commit of this environment's writer (not another process's:
    /// see `lastCommittedTxnID`), on the writer thread, before the writes' callers resume: it must
    /// return at once. Returns an id for `removeCommitListener`.
    package func addCommitListener(_ listener: @escaping @Sendable (CommitNotice) -> Void) -> Int {
        listeners.withLock { l in
            l.next += 1
            l.all[l.next] = listener
            return l.next
        }
    }

    package func removeCommitListener(_ id: Int) { listeners.withLock { _ = $0.all.removeValue(forKey: id) } }

    /// Tells the listeners of a commit (the writer, right after it).
    func _committed(_ notice: CommitNotice) {
        let all = listeners.withLock { $0.all.isEmpty ? [] : Array($0.all.values) }
        for listener in all { listener(notice) }
    }

    /// Flushes buffers to disk (`mdb_env_sync` with force), for `noSync` stores that want a checkpoint.
    package func sync() throws {
        try _check(_lmdb.envSync(raw, force: true), "mdb_env_sync")
    }

    // MARK: Reading

    /// Runs `body` in a read-only transaction and returns its result; the transaction ends with it.
    ///
    /// Do not start a write from inside `body`: a map resize waits for readers to finish.
    package func read<R>(_ body: (borrowing ReadTransaction) throws -> R) throws -> R {
        resize.lockShared()
        defer { resize.unlock() }
        let t = ReadTransaction(raw: try beginRead(), environment: self)
        return try body(t)
    }

    /// A read transaction: a renewed idle one, else a new one (`mdb_txn_renew` / `mdb_txn_begin`).
    private func beginRead() throws -> OpaquePointer {
        if let bits = idleReaders.withLock({ $0.popLast() }), let idle = OpaquePointer(bitPattern: bits) {
            if _lmdb.txnRenew(idle) == 0 { return idle }
            _lmdb.txnAbort(idle)
        }
        var txn: OpaquePointer?
        var rc = _lmdb.txnBegin(raw, parent: nil, UInt32(MDB_RDONLY), &txn)
        if rc == MDB_MAP_RESIZED {
            // Another process grew the map: adopt its size, with no transaction of ours active
            // (the exclusive lock waits for this process's readers to end).
            resize.unlock()
            resize.lockExclusive()
            let src = _lmdb.envSetMapSize(raw, 0)
            resize.unlock()
            resize.lockShared()
            try _check(src, "mdb_env_set_mapsize (adopt)")
            rc = _lmdb.txnBegin(raw, parent: nil, UInt32(MDB_RDONLY), &txn)
        }
        try _check(rc, "mdb_txn_begin (read)")
        return txn!
    }

    /// Ends a read transaction: reset and kept for reuse, or aborted when enough are idle.
    func _endRead(_ txn: OpaquePointer) {
        _lmdb.txnReset(txn)
        let bits = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(txn)))
        let kept = idleReaders.withLock { idle -> Bool in
            guard idle.count < Self.maxIdleReaders else { return false }
            idle.append(bits)
            return true
        }
        if !kept { _lmdb.txnAbort(txn) }
    }

    // MARK: Writing

    /// Runs `body` in a write transaction on the writer thread and waits for its durable commit.
    ///
    /// `body` may run more than once (it is re-run after the map grows), so it must only act
    /// through the transaction. Throwing from `body` undoes exactly its own changes.
    @discardableResult
    package func write<R: Sendable>(_ body: @escaping @Sendable (borrowing WriteTransaction) throws -> R) throws -> R {
        precondition(!writer.isCurrentThread, "Environment.write called from inside a write")
        if isReadOnly { throw EnvironmentError.readOnly(path) }
        return try runAndWait(_WriteJob<R>(body: body, exclusive: false))
    }

    /// Runs `body` in a write transaction on the writer thread; resumes after the durable commit.
    @discardableResult
    package func write<R: Sendable>(
        _ body: @escaping @Sendable (borrowing WriteTransaction) throws -> R
    ) async throws -> R {
        try await write(usingReserve: false, body)
    }

    /// `write`, where `usingReserve` lets `body`, at the size cap, use the room above it even if it
    /// removes no entries — for an upload's bookkeeping, the way out of a full store (see
    /// `sizeReserve`).
    @discardableResult
    package func write<R: Sendable>(
        usingReserve: Bool, _ body: @escaping @Sendable (borrowing WriteTransaction) throws -> R
    ) async throws -> R {
        if isReadOnly { throw EnvironmentError.readOnly(path) }
        let job = _WriteJob<R>(body: body, exclusive: false)
        job.mayUseReserve = usingReserve
        return try await withCheckedThrowingContinuation { (c: CheckedContinuation<R, Error>) in
            job.onDone = { c.resume(with: job.result!) }
            writer.submit(job)
        }
    }

    /// Runs `bodies` in order on the writer thread, each in a nested transaction of its own (one
    /// that throws undoes only itself), queued together so they share one group commit (two when
    /// more than `Writer.maxBatch` jobs wait); resumes after the durable commit with each body's
    /// outcome, in order. A failed commit fails them all. As with `write`, a body may run more
    /// than once (after the map grows), always after the bodies before it ran again.
    package func writeAll<R: Sendable>(
        _ bodies: [@Sendable (borrowing WriteTransaction) throws -> R]
    ) async -> [Result<R, Error>] {
        if bodies.isEmpty { return [] }
        if isReadOnly { return bodies.map { _ in .failure(EnvironmentError.readOnly(path)) } }
        let jobs = bodies.map { _WriteJob<R>(body: $0, exclusive: false) }
        let left = Mutex(jobs.count)
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            for job in jobs {
                job.onDone = {
                    if left.withLock({ n in
                        n -= 1; return n == 0
                    }) {
                        c.resume()
                    }
                }
            }
            writer.submit(jobs)
        }
        return jobs.map { $0.result! }
    }

    /// Like `write`, but in a transaction of its own rather than group-committed with others:
    /// for work that changes what later writes must do (adding an index).
    @discardableResult
    package func writeAlone<R: Sendable>(
        _ body: @escaping @Sendable (borrowing WriteTransaction) throws -> R
    ) throws -> R {
        precondition(!writer.isCurrentThread, "Environment.write called from inside a write")
        if isReadOnly { throw EnvironmentError.readOnly(path) }
        return try runAndWait(_WriteJob<R>(body: body, exclusive: true))
    }

    /// Hands `job` to the writer thread and blocks until it has committed (or failed).
    private func runAndWait<R>(_ job: _WriteJob<R>) throws -> R {
        let done = DispatchSemaphore(value: 0)
        job.onDone = { done.signal() }
        writer.submit(job)
        done.wait()
        return try job.result!.get()
    }

    /// Opens the named database `name` (`mdb_dbi_open`), creating it if `create` is true.
    /// Returns nil when it does not exist and `create` is false.
    ///
    /// LMDB allows one `mdb_dbi_open` at a time in a process, in a transaction that ends before
    /// any other may call it: every open runs in a transaction of its own on the writer thread
    /// (or, read-only, under `dbiLock`). Handles are cached. Call it when the store opens, not
    /// from inside a write body (that throws rather than wait for itself).
    package func database(named name: String, create: Bool) throws -> Database? {
        try databases(named: [name], create: create)[0]
    }

    /// Opens several named databases in one transaction; nil for each that is absent when
    /// `create` is false.
    package func databases(named names: [String], create: Bool) throws -> [Database?] {
        let cached = state.withLock { cache in names.map { cache[$0] } }
        let missing = zip(names, cached).filter { $0.1 == nil }.map(\.0)
        if missing.isEmpty { return cached }
        if writer.isCurrentThread { throw EnvironmentError.databaseOpenInsideWrite(missing[0]) }
        let create = create && !isReadOnly
        let open: @Sendable (OpaquePointer) throws -> [Database?] = { txn in
            try missing.map { name throws -> Database? in
                var dbi = MDB_dbi()
                let rc = _lmdb.dbiOpen(txn, name, create ? UInt32(MDB_CREATE) : 0, &dbi)
                if rc == MDB_NOTFOUND { return nil }
                if rc == MDB_DBS_FULL { throw EnvironmentError.tooManyDatabases(name: name, limit: self.maxDatabases) }
                try _check(rc, "mdb_dbi_open \(name)")
                return Database(dbi: dbi, name: name)
            }
        }
        let opened: [Database?]
        if isReadOnly {
            opened = try dbiLock.withLock { _ in
                resize.lockShared()
                defer { resize.unlock() }
                var txn: OpaquePointer?
                try _check(_lmdb.txnBegin(raw, parent: nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin (open databases)")
                let result = Result { try open(txn!) }
                // The transaction must commit, not abort, for the handles to stay open.
                if case .failure = result {
                    _lmdb.txnAbort(txn!)
                } else {
                    try _check(_lmdb.txnCommit(txn!), "mdb_txn_commit (open databases)")
                }
                return try result.get()
            }
        } else {
            opened = try runAndWait(_WriteJob<[Database?]>(body: { txn in try open(txn.view.raw) }, exclusive: true))
        }
        return state.withLock { cache in
            for case let db? in opened { cache[db.name] = db }
            return names.map { cache[$0] }
        }
    }

    /// Deletes the named database and its contents (`mdb_drop` with del = 1).
    package func dropDatabase(named name: String) throws {
        guard let db = try database(named: name, create: false) else { return }
        let dropped = Result {
            try runAndWait(
                _WriteJob<Void>(
                    body: { txn in
                        txn.view.state.touched.insert(db.dbi)
                        txn.view.state.keys.overflow()
                        try _check(_lmdb.drop(txn.view.raw, db.dbi, delete: true), "mdb_drop \(name)")
                    }, exclusive: true))
        }
        state.withLock { _ = $0.removeValue(forKey: name) }
        try dropped.get()
    }

    /// Names of all named databases (the keys of LMDB's main database).
    package func databaseNames() throws -> [String] {
        try read { txn in
            // The main database is always handle 1 (MAIN_DBI): no mdb_dbi_open needed.
            var names: [String] = []
            try txn.view.withCursor(Database(dbi: 1, name: "(main)")) { c in
                var e = try c.first()
                while let (k, _) = e {
                    names.append(String(decoding: k, as: UTF8.self))
                    e = try c.next()
                }
            }
            return names
        }
    }

    /// Caps the data file at `bytes` (rounded down to whole 4 KiB pages), or lifts the cap (nil).
    ///
    /// The cap is the map size itself: the map is set to exactly `bytes` and never grows past it,
    /// so LMDB refuses (`MDB_MAP_FULL`) a transaction that would need a page beyond it, and the
    /// writer reports `EnvironmentError.sizeCapReached` instead of growing the map. Pages freed by
    /// deletes are reused, so writes fit again once enough is deleted. When the data already
    /// uses more than `bytes`, LMDB keeps the map at the size in use (every write then fails
    /// until enough is freed). Call it before writing from other threads (the store does so as it
    /// opens): it remaps, which must not race a write transaction.
    package func setSizeCap(_ bytes: Int?) throws {
        guard !isReadOnly else { return }
        resize.lockExclusive()
        defer { resize.unlock() }
        if let bytes {
            let cap = bytes & ~4095
            try _check(_lmdb.envSetMapSize(raw, cap), "mdb_env_set_mapsize \(cap)")
            _sizeCap.store(cap, ordering: .relaxed)
        } else {
            if sizeCap != nil { try _check(_lmdb.envSetMapSize(raw, Self.defaultMapSize), "mdb_env_set_mapsize") }
            _sizeCap.store(0, ordering: .relaxed)
        }
    }

    /// Room above the size cap that only a write removing more entries than it adds may use
    /// (1/16 of the cap, at least 64 KiB): without it a full store could not even delete, since
    /// LMDB copies every page it changes.
    package var sizeReserve: Int { sizeCap.map { max($0 / 16, 64 << 10) & ~4095 } ?? 0 }

    /// Sets the map to the cap plus the reserve (`true`) or back to the cap (LMDB keeps it at
    /// least as large as the pages in use). Called by the writer with no transaction open.
    func _useReserve(_ on: Bool) {
        guard let cap = sizeCap else { return }
        resize.lockExclusive()
        defer { resize.unlock() }
        _ = _lmdb.envSetMapSize(raw, on ? cap + sizeReserve : cap)
    }

    /// Entries in every database this environment has open, as `txn` sees them.
    func _entryCount(_ txn: OpaquePointer) -> Int {
        state.withLock { dbs in
            dbs.values.reduce(0) { n, db in
                var st = MDB_stat()
                return _lmdb.stat(txn, db.dbi, &st) == 0 ? n + Int(st.ms_entries) : n
            }
        }
    }

    // MARK: Used by the writer thread

    /// Grows the map to twice its size (never past the size cap: at the cap it throws
    /// `sizeCapReached`). Called by the writer with no transaction of its own open.
    func _growMap() throws {
        resize.lockExclusive()
        defer { resize.unlock() }
        if let cap = sizeCap {
            if mapSize >= cap { throw EnvironmentError.sizeCapReached(path: path, capBytes: cap) }
            try _check(_lmdb.envSetMapSize(raw, cap), "mdb_env_set_mapsize \(cap)")
            return
        }
        let (newSize, overflow) = mapSize.multipliedReportingOverflow(by: 2)
        if overflow { throw LMDBError(code: MDB_MAP_FULL, context: "the map cannot grow past \(mapSize) bytes") }
        try _check(_lmdb.envSetMapSize(raw, newSize), "mdb_env_set_mapsize \(newSize)")
    }
}

/// A pthread reader/writer lock, preferring writers so a map resize is not starved by readers.
final class _RWLock: @unchecked Sendable {
    // @unchecked: the pthread lock is the synchronization itself.
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    init() {
        lock = .allocate(capacity: 1)
        var attr = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attr)
        pthread_rwlockattr_setkind_np(&attr, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        pthread_rwlock_init(lock, &attr)
        pthread_rwlockattr_destroy(&attr)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    func lockShared() { pthread_rwlock_rdlock(lock) }
    func lockExclusive() { pthread_rwlock_wrlock(lock) }
    func unlock() { pthread_rwlock_unlock(lock) }
}
