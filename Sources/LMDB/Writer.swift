import Synchronization
import CLMDB
import Foundation

/// One caller's write: a closure to run in a (child) transaction and where its outcome goes.
class _AnyWriteJob: @unchecked Sendable {
    // @unchecked: fields are written by the writer thread before `onDone` hands the job back.
    let exclusive: Bool
    /// May use the room above the size cap without removing entries: the bookkeeping of an
    /// upload (marking requests sent, settling their answers), which is how a full offline store
    /// frees room — refusing it would leave the store full for good.
    var mayUseReserve = false
    var onDone: (@Sendable () -> Void)?
    init(exclusive: Bool) { self.exclusive = exclusive }
    /// Runs the body; returns the error it threw, if any (the outcome is kept for `finish`).
    func run(_ txn: borrowing WriteTransaction) -> Error? { fatalError("abstract") }
    /// Records a failure of the whole batch (e.g. the commit failed).
    func fail(_ error: Error) { fatalError("abstract") }
    /// Hands the outcome back. `onDone` is dropped first: the async `write`'s closure refers to
    /// the job, and the cycle would keep every job — its body and all the body captured — alive.
    func finish() {
        let done = onDone
        onDone = nil
        done?()
    }
}

final class _WriteJob<R: Sendable>: _AnyWriteJob, @unchecked Sendable {
    let body: @Sendable (borrowing WriteTransaction) throws -> R
    var result: Result<R, Error>?

    init(body: @escaping @Sendable (borrowing WriteTransaction) throws -> R, exclusive: Bool) {
        self.body = body
        super.init(exclusive: exclusive)
    }

    override func run(_ txn: borrowing WriteTransaction) -> Error? {
        do {
            result = .success(try body(txn))
            return nil
        } catch {
            result = .failure(error)
            return error
        }
    }

    override func fail(_ error: Error) { result = .failure(error) }
}

/// The one thread that runs write transactions (LMDB binds a write transaction to its thread).
///
/// It takes every job waiting, runs each in a child transaction of one parent (so a failing job
/// undoes only itself), commits the parent once — one fsync for all — and then resumes every caller.
/// When the map fills, the batch is aborted, the map doubled, and the batch run again.
final class _Writer: @unchecked Sendable {
    // @unchecked: `pending` and `running` are guarded by `cond`; `environment` is set once before start.
    unowned(unsafe) var environment: Environment!
    private let cond = NSCondition()
    private var pending: [_AnyWriteJob] = []
    private var running = true
    private var thread: Thread?
    private let finished = DispatchSemaphore(value: 0)
    /// Upper bound on jobs in one group commit.
    static let maxBatch = 1024

    var isCurrentThread: Bool { Thread.current === thread }

    func start() {
        let t = Thread { [self] in loop() }
        t.name = "OfflineStore.writer"
        t.stackSize = 8 << 20
        thread = t
        t.start()
    }

    func stop() {
        cond.lock()
        running = false
        cond.signal()
        cond.unlock()
        finished.wait()
    }

    func submit(_ job: _AnyWriteJob) { submit([job]) }

    /// Queues `jobs` together, in order: they run one after another, in the same group commit
    /// unless the batch bound (`maxBatch`) falls between them.
    func submit(_ jobs: [_AnyWriteJob]) {
        cond.lock()
        pending.append(contentsOf: jobs)
        cond.signal()
        cond.unlock()
    }

    private func loop() {
        while true {
            cond.lock()
            while pending.isEmpty && running { cond.wait() }
            if pending.isEmpty && !running {
                cond.unlock()
                finished.signal()
                return
            }
            // An exclusive job (opening or dropping a database) runs in a transaction of its own.
            var batch: [_AnyWriteJob]
            if pending[0].exclusive {
                batch = [pending.removeFirst()]
            } else {
                let n = min(pending.prefix(while: { !$0.exclusive }).count, Self.maxBatch)
                batch = Array(pending.prefix(n))
                pending.removeFirst(n)
            }
            cond.unlock()
            runBatch(batch)
            for job in batch { job.finish() }
        }
    }

    /// Runs a batch in one transaction: each job in a nested transaction of its own (so a job
    /// that throws undoes only itself), then one commit. When the map fills — seen through the
    /// transaction, whatever error a body turned LMDB's into — the whole batch is aborted, the map
    /// grown, and the batch run again; so a body may run more than once.
    ///
    /// At the size cap a batch runs again job by job; a job that alone does not fit runs once
    /// more with `reserve`: in the room above the cap, kept only if it removes more entries than
    /// it adds (a delete) or may use the reserve (`mayUseReserve`), else refused with
    /// `sizeCapReached`.
    private func runBatch(_ batch: [_AnyWriteJob], reserve: Bool = false) {
        let env = environment.raw
        if reserve { environment._useReserve(true) }
        defer { if reserve { environment._useReserve(false) } }
        while true {
            let started = DispatchTime.now().uptimeNanoseconds
            var parent: OpaquePointer?
            var rc = _lmdb.txnBegin(env, parent: nil, 0, &parent)
            if rc == MDB_MAP_RESIZED {
                // Another process grew the map; no transaction of ours is open on this thread.
                _ = _lmdb.envSetMapSize(env, 0)
                rc = _lmdb.txnBegin(env, parent: nil, 0, &parent)
            }
            if rc != 0 {
                let e = _diskFull(LMDBError(code: rc, context: "mdb_txn_begin (write)"), path: environment.path)
                for job in batch { job.fail(e) }
                return
            }
            let state = _WriteState()
            if batch.count == 1 {
                let before = reserve ? environment._entryCount(parent!) : 0
                let failed = batch[0].run(WriteTransaction(raw: parent!, state: state)) != nil
                if reserve && !batch[0].mayUseReserve && !failed && !state.mapFull
                    && environment._entryCount(parent!) >= before
                {
                    _lmdb.txnAbort(parent!)
                    batch[0].fail(
                        EnvironmentError.sizeCapReached(path: environment.path, capBytes: environment.sizeCap ?? 0))
                    return
                }
                if failed || state.mapFull {
                    _lmdb.txnAbort(parent!)
                    if !state.mapFull { return }
                }
            } else {
                for job in batch {
                    var child: OpaquePointer?
                    let crc = _lmdb.txnBegin(env, parent: parent, 0, &child)
                    if crc != 0 {
                        if crc == MDB_MAP_FULL { state.mapFull = true; break }
                        job.fail(LMDBError(code: crc, context: "mdb_txn_begin (nested)"))
                        continue
                    }
                    let failed = job.run(WriteTransaction(raw: child!, state: state)) != nil
                    if failed || state.mapFull {
                        _lmdb.txnAbort(child!)
                        if state.mapFull { break }
                    } else {
                        let ccrc = _lmdb.txnCommit(child!)
                        if ccrc != 0 {
                            if ccrc == MDB_MAP_FULL { state.mapFull = true; break }
                            job.fail(LMDBError(code: ccrc, context: "mdb_txn_commit (nested)"))
                        }
                    }
                }
                if state.mapFull { _lmdb.txnAbort(parent!) }
            }
            if !state.mapFull {
                let txnID = _lmdb.txnID(parent!)
                let crc = _lmdb.txnCommit(parent!)
                if crc == 0 {
                    environment._commits.add(1, ordering: .relaxed)
                    environment._committed(
                        Environment.CommitNotice(
                            txnID: txnID, touched: state.touched, keys: state.keys, jobs: batch.count,
                            nanoseconds: DispatchTime.now().uptimeNanoseconds - started))
                    return
                }
                if crc != MDB_MAP_FULL {
                    let e = _diskFull(LMDBError(code: crc, context: "mdb_txn_commit"), path: environment.path)
                    for job in batch { job.fail(e) }
                    return
                }
            }
            // The map is full: grow it and run the whole batch again.
            do {
                try environment._growMap()
            } catch EnvironmentError.sizeCapReached where batch.count > 1 {
                // At the size cap: each job alone, so those that fit still commit.
                for job in batch { runBatch([job]) }
                return
            } catch EnvironmentError.sizeCapReached where !reserve {
                runBatch(batch, reserve: true)
                return
            } catch {
                for job in batch { job.fail(error) }
                return
            }
        }
    }
}
