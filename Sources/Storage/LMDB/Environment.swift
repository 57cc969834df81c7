import CLMDB
import Foundation
import Synchronization

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
/// try env.write { txn in try txn.txn.put(db, key, value) }
/// let n = try env.read { txn in try txn.txn.count(db) }
/// ```
public final class Environment: @unchecked Sendable {
    // @unchecked: MDB_env is thread-safe under MDB_NOTLS; our mutable state is behind `state` and
    // `resize` (a reader/writer lock: read transactions share it, a map resize takes it alone).
    package let raw: OpaquePointer
    public let path: String
    private let resize = _RWLock()
    private let state = Mutex<[String: Database]>([:])
    private let writer: _Writer
    /// Reset read transactions kept for reuse (`mdb_txn_reset` / `mdb_txn_renew`): renewing keeps
    /// the reader slot and the allocation, which makes a short read several times cheaper.
    private let idleReaders = Mutex<[UInt]>([])  // MDB_txn pointers' bit patterns (Sendable)
    static let maxIdleReaders = 32

    /// Opens (creating if needed) the environment in directory `path` (`mdb_env_open`).
    ///
    /// - Parameters:
    ///   - mapSize: the initial map size in bytes; it doubles whenever a write fills it.
    ///   - maxDatabases: how many named databases may be open (`mdb_env_set_maxdbs`).
    /// - Throws: `LMDBError`, `DataFileError` for a truncated or damaged `data.mdb` (found before
    ///   LMDB maps it), or a POSIX error if the directory cannot be made. On failure the
    ///   environment is closed again (`mdb_env_close`).
    public init(path: String, durability: Durability = .full, mapSize: Int = 1 << 30,
                maxDatabases: Int = 1024, fileMode: mode_t = 0o644) throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try Self._refuseDamagedDataFile(in: path)
        var env: OpaquePointer?
        try _check(mdb_env_create(&env), "mdb_env_create")
        do {
            try _check(mdb_env_set_maxdbs(env, MDB_dbi(maxDatabases)), "mdb_env_set_maxdbs")
            try _check(mdb_env_set_mapsize(env, mapSize), "mdb_env_set_mapsize")
            try _check(mdb_env_set_maxreaders(env, 510), "mdb_env_set_maxreaders")
            var flags = UInt32(MDB_NOTLS)
            if durability == .noSync { flags |= UInt32(MDB_NOSYNC) }
            try _check(mdb_env_open(env, path, flags, fileMode), "mdb_env_open \(path)")
        } catch {
            mdb_env_close(env)
            throw error
        }
        self.raw = env!
        self.path = path
        self.writer = _Writer()
        writer.environment = self
        writer.start()
    }

    deinit {
        writer.stop()
        for bits in idleReaders.withLock({ $0 }) { mdb_txn_abort(OpaquePointer(bitPattern: bits)) }
        mdb_env_close(raw)
    }

    /// The durability in force (`mdb_env_get_flags`).
    public var durability: Durability {
        var flags: UInt32 = 0
        mdb_env_get_flags(raw, &flags)
        return flags & UInt32(MDB_NOSYNC) != 0 ? .noSync : .full
    }

    /// Changes the durability of later commits (`mdb_env_set_flags` with `MDB_NOSYNC`).
    public func setDurability(_ d: Durability) throws {
        try _check(mdb_env_set_flags(raw, UInt32(MDB_NOSYNC), d == .noSync ? 1 : 0), "mdb_env_set_flags")
    }

    /// The current map size in bytes (`mdb_env_info`).
    public var mapSize: Int {
        var info = MDB_envinfo()
        mdb_env_info(raw, &info)
        return info.me_mapsize
    }

    /// Size of the data file in bytes.
    public var fileSize: Int {
        let attrs = try? FileManager.default.attributesOfItem(atPath: path + "/data.mdb")
        return (attrs?[.size] as? NSNumber)?.intValue ?? 0
    }

    /// Flushes buffers to disk (`mdb_env_sync` with force), for `noSync` stores that want a checkpoint.
    public func sync() throws {
        try _check(mdb_env_sync(raw, 1), "mdb_env_sync")
    }

    // MARK: Reading

    /// Runs `body` in a read-only transaction and returns its result; the transaction ends with it.
    ///
    /// Do not start a write from inside `body`: a map resize waits for readers to finish.
    public func read<R>(_ body: (borrowing ReadTransaction) throws -> R) throws -> R {
        resize.lockShared()
        defer { resize.unlock() }
        let t = ReadTransaction(raw: try beginRead(), environment: self)
        return try body(t)
    }

    /// A read transaction: a renewed idle one, else a new one (`mdb_txn_renew` / `mdb_txn_begin`).
    private func beginRead() throws -> OpaquePointer {
        if let bits = idleReaders.withLock({ $0.popLast() }), let idle = OpaquePointer(bitPattern: bits) {
            if mdb_txn_renew(idle) == 0 { return idle }
            mdb_txn_abort(idle)
        }
        var txn: OpaquePointer?
        var rc = mdb_txn_begin(raw, nil, UInt32(MDB_RDONLY), &txn)
        if rc == MDB_MAP_RESIZED {
            // Another process grew the map: adopt its size (needs no transaction of ours active).
            resize.unlock()
            resize.lockExclusive()
            mdb_env_set_mapsize(raw, 0)
            resize.unlock()
            resize.lockShared()
            rc = mdb_txn_begin(raw, nil, UInt32(MDB_RDONLY), &txn)
        }
        try _check(rc, "mdb_txn_begin (read)")
        return txn!
    }

    /// Ends a read transaction: reset and kept for reuse, or aborted when enough are idle.
    func _endRead(_ txn: OpaquePointer) {
        mdb_txn_reset(txn)
        let bits = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(txn)))
        let kept = idleReaders.withLock { idle -> Bool in
            guard idle.count < Self.maxIdleReaders else { return false }
            idle.append(bits)
            return true
        }
        if !kept { mdb_txn_abort(txn) }
    }

    // MARK: Writing

    /// Runs `body` in a write transaction on the writer thread and waits for its durable commit.
    ///
    /// `body` may run more than once (it is re-run after the map grows), so it must only act
    /// through the transaction. Throwing from `body` undoes exactly its own changes.
    @discardableResult
    public func write<R: Sendable>(_ body: @escaping @Sendable (borrowing WriteTransaction) throws -> R) throws -> R {
        precondition(!writer.isCurrentThread, "Environment.write called from inside a write")
        return try runAndWait(_WriteJob<R>(body: body, exclusive: false))
    }

    /// Runs `body` in a write transaction on the writer thread; resumes after the durable commit.
    @discardableResult
    public func write<R: Sendable>(_ body: @escaping @Sendable (borrowing WriteTransaction) throws -> R) async throws -> R {
        let job = _WriteJob<R>(body: body, exclusive: false)
        return try await withCheckedThrowingContinuation { (c: CheckedContinuation<R, Error>) in
            job.onDone = { c.resume(with: job.result!) }
            writer.submit(job)
        }
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
    public func database(named name: String, create: Bool) throws -> Database? {
        if let db = state.withLock({ $0[name] }) { return db }
        if create {
            let db = try runAndWait(_WriteJob<Database?>(body: { txn in
                var dbi = MDB_dbi()
                try _check(mdb_dbi_open(txn.txn.raw, name, UInt32(MDB_CREATE), &dbi), "mdb_dbi_open \(name)")
                return Database(dbi: dbi, name: name)
            }, exclusive: true))
            state.withLock { $0[name] = db }
            return db
        }
        // A read transaction may open an existing database; it must commit (not abort) for the
        // handle to stay open. Only one mdb_dbi_open at a time.
        return try state.withLock { cache -> Database? in
            if let db = cache[name] { return db }
            resize.lockShared()
            defer { resize.unlock() }
            var txn: OpaquePointer?
            try _check(mdb_txn_begin(raw, nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin (open \(name))")
            var dbi = MDB_dbi()
            let rc = mdb_dbi_open(txn, name, 0, &dbi)
            if rc == MDB_NOTFOUND {
                mdb_txn_abort(txn)
                return nil
            }
            if rc != 0 { mdb_txn_abort(txn) }
            try _check(rc, "mdb_dbi_open \(name)")
            try _check(mdb_txn_commit(txn), "mdb_txn_commit (open \(name))")
            let db = Database(dbi: dbi, name: name)
            cache[name] = db
            return db
        }
    }

    /// Deletes the named database and its contents (`mdb_drop` with del = 1).
    public func dropDatabase(named name: String) throws {
        guard let db = try database(named: name, create: false) else { return }
        let dropped = Result { try runAndWait(_WriteJob<Void>(body: { txn in
            try _check(mdb_drop(txn.txn.raw, db.dbi, 1), "mdb_drop \(name)")
        }, exclusive: true)) }
        state.withLock { _ = $0.removeValue(forKey: name) }
        try dropped.get()
    }

    /// Names of all named databases (the keys of LMDB's main database).
    public func databaseNames() throws -> [String] {
        try read { txn in
            var dbi = MDB_dbi()
            try _check(mdb_dbi_open(txn.txn.raw, nil, 0, &dbi), "mdb_dbi_open (main)")
            var names: [String] = []
            try txn.txn.withCursor(Database(dbi: dbi, name: "(main)")) { c in
                var e = try c.first()
                while let (k, _) = e {
                    names.append(String(decoding: k, as: UTF8.self))
                    e = try c.next()
                }
            }
            return names
        }
    }

    // MARK: Used by the writer thread

    /// Grows the map to twice its size. Called by the writer with no transaction of its own open.
    func _growMap() throws {
        resize.lockExclusive()
        defer { resize.unlock() }
        let newSize = mapSize * 2
        try _check(mdb_env_set_mapsize(raw, newSize), "mdb_env_set_mapsize \(newSize)")
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
