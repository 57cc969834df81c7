import CLMDB

/// Every `mdb_*` call the package makes, in one place.
///
/// Each wrapper returns LMDB's return code unchanged; callers turn it into an `LMDBError` with
/// `_check`. In debug builds each call first asks `FaultInjection` whether a test wants it to fail,
/// so the error paths of every call site can be driven on purpose (swift-system does the same with
/// its syscalls). Release builds call LMDB directly.
enum _lmdb {
    // MARK: Environment

    static func envCreate(_ env: inout OpaquePointer?) -> Int32 { mdb_env_create(&env) }

    static func envSetMaxDBs(_ env: OpaquePointer?, _ n: Int) -> Int32 { mdb_env_set_maxdbs(env, MDB_dbi(n)) }

    static func envSetMapSize(_ env: OpaquePointer?, _ size: Int) -> Int32 {
        if let rc = _fault("mdb_env_set_mapsize", env: env) { return rc }
        return mdb_env_set_mapsize(env, size)
    }

    static func envSetMaxReaders(_ env: OpaquePointer?, _ n: UInt32) -> Int32 { mdb_env_set_maxreaders(env, n) }

    static func envOpen(_ env: OpaquePointer?, _ path: String, _ flags: UInt32, _ mode: mdb_mode_t) -> Int32 {
        if let rc = _fault("mdb_env_open", env: env) { return rc }
        return mdb_env_open(env, path, flags, mode)
    }

    static func envClose(_ env: OpaquePointer?) { mdb_env_close(env) }

    static func envGetFlags(_ env: OpaquePointer, _ flags: inout UInt32) -> Int32 { mdb_env_get_flags(env, &flags) }

    static func envSetFlags(_ env: OpaquePointer, _ flags: UInt32, _ on: Bool) -> Int32 {
        mdb_env_set_flags(env, flags, on ? 1 : 0)
    }

    static func envInfo(_ env: OpaquePointer, _ info: inout MDB_envinfo) -> Int32 { mdb_env_info(env, &info) }

    static func envSync(_ env: OpaquePointer, force: Bool) -> Int32 {
        if let rc = _fault("mdb_env_sync", env: env) { return rc }
        return mdb_env_sync(env, force ? 1 : 0)
    }

    /// Clears reader slots left by dead processes (`mdb_reader_check`); `dead` is how many.
    static func readerCheck(_ env: OpaquePointer, _ dead: inout Int32) -> Int32 { mdb_reader_check(env, &dead) }

    static func strerror(_ rc: Int32) -> String { String(cString: mdb_strerror(rc)) }

    // MARK: Transactions

    static func txnBegin(
        _ env: OpaquePointer, parent: OpaquePointer?, _ flags: UInt32, _ txn: inout OpaquePointer?
    ) -> Int32 {
        if let rc = _fault(
            parent == nil
                ? (flags & UInt32(MDB_RDONLY) != 0 ? "mdb_txn_begin(read)" : "mdb_txn_begin") : "mdb_txn_begin(nested)",
            env: env)
        {
            return rc
        }
        return mdb_txn_begin(env, parent, flags, &txn)
    }

    static func txnCommit(_ txn: OpaquePointer) -> Int32 {
        if let rc = _fault("mdb_txn_commit", txn: txn) {
            mdb_txn_abort(txn)  // a failed commit frees the transaction, as LMDB's does
            return rc
        }
        return mdb_txn_commit(txn)
    }

    static func txnAbort(_ txn: OpaquePointer) { mdb_txn_abort(txn) }

    /// The environment of a transaction (`mdb_txn_env`).
    static func txnEnv(_ txn: OpaquePointer) -> OpaquePointer { mdb_txn_env(txn) }

    /// The transaction's id (`mdb_txn_id`, a `size_t`): for a read transaction, the snapshot it reads.
    static func txnID(_ txn: OpaquePointer) -> UInt64 { UInt64(UInt(bitPattern: mdb_txn_id(txn))) }

    static func txnReset(_ txn: OpaquePointer) { mdb_txn_reset(txn) }

    static func txnRenew(_ txn: OpaquePointer) -> Int32 {
        if let rc = _fault("mdb_txn_renew", txn: txn) { return rc }
        return mdb_txn_renew(txn)
    }

    // MARK: Databases

    static func dbiOpen(_ txn: OpaquePointer, _ name: String?, _ flags: UInt32, _ dbi: inout MDB_dbi) -> Int32 {
        if let rc = _fault("mdb_dbi_open", txn: txn) { return rc }
        return mdb_dbi_open(txn, name, flags, &dbi)
    }

    static func drop(_ txn: OpaquePointer, _ dbi: MDB_dbi, delete: Bool) -> Int32 {
        if let rc = _fault("mdb_drop", txn: txn) { return rc }
        return mdb_drop(txn, dbi, delete ? 1 : 0)
    }

    static func stat(_ txn: OpaquePointer, _ dbi: MDB_dbi, _ st: inout MDB_stat) -> Int32 {
        if let rc = _fault("mdb_stat", txn: txn) { return rc }
        return mdb_stat(txn, dbi, &st)
    }

    // MARK: Data

    static func get(_ txn: OpaquePointer, _ dbi: MDB_dbi, _ key: inout MDB_val, _ value: inout MDB_val) -> Int32 {
        if let rc = _fault("mdb_get", txn: txn) { return rc }
        return mdb_get(txn, dbi, &key, &value)
    }

    static func put(
        _ txn: OpaquePointer, _ dbi: MDB_dbi, _ key: inout MDB_val, _ value: inout MDB_val, _ flags: UInt32
    ) -> Int32 {
        if let rc = _fault("mdb_put", txn: txn) { return rc }
        return mdb_put(txn, dbi, &key, &value, flags)
    }

    static func del(_ txn: OpaquePointer, _ dbi: MDB_dbi, _ key: inout MDB_val) -> Int32 {
        if let rc = _fault("mdb_del", txn: txn) { return rc }
        return mdb_del(txn, dbi, &key, nil)
    }

    // MARK: Cursors

    static func cursorOpen(_ txn: OpaquePointer, _ dbi: MDB_dbi, _ cursor: inout OpaquePointer?) -> Int32 {
        if let rc = _fault("mdb_cursor_open", txn: txn) { return rc }
        return mdb_cursor_open(txn, dbi, &cursor)
    }

    static func cursorClose(_ cursor: OpaquePointer?) { mdb_cursor_close(cursor) }

    @inline(__always)
    static func cursorGet(
        _ cursor: OpaquePointer, _ key: inout MDB_val, _ value: inout MDB_val, _ op: MDB_cursor_op
    ) -> Int32 {
        #if DEBUG
        if FaultInjection.isArmed,
            let rc = FaultInjection.intercept("mdb_cursor_get", env: mdb_txn_env(mdb_cursor_txn(cursor)))
        {
            return rc
        }
        #endif
        return mdb_cursor_get(cursor, &key, &value, op)
    }
}

/// The injected return code for call `name` on environment `env`, if a test armed one.
@inline(__always)
private func _fault(_ name: StaticString, env: OpaquePointer?) -> Int32? {
    #if DEBUG
    if FaultInjection.isArmed { return FaultInjection.intercept(name, env: env) }
    #endif
    return nil
}

@inline(__always)
private func _fault(_ name: StaticString, txn: OpaquePointer) -> Int32? {
    #if DEBUG
    if FaultInjection.isArmed { return FaultInjection.intercept(name, env: mdb_txn_env(txn)) }
    #endif
    return nil
}
