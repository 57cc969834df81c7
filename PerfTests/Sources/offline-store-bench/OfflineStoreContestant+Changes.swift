import Dispatch
import OfflineStore
import Synchronization

/// Local changes through the public API: `update(set:key:changes:)` (a PATCH of `Quantity` and
/// `ChangedAt`), which validates the change, applies it to the entity and its indexes and records
/// it in `RequestQueue` in one durable transaction; `apply([...])` for a batch.
extension OfflineStoreContestant {
    /// One change with the blocking form (the single writer, and the "threads" line).
    func change(_ item: Item) throws {
        let r = try store.update(set: set, key: item.keyValues, changes: item.changeProperties)
        guard r.requestID != nil else {
            throw BenchError("OfflineStore: the change of \(item.salesOrderID)/\(item.itemPosition) has no request")
        }
    }

    /// The async form from one task per writer (a task group; the cooperative pool has as many
    /// threads as cores): each task awaits its change before making the next, and the writer
    /// thread group-commits whatever changes are waiting — many changes, one fsync.
    func changeConcurrently(_ writers: [[Item]]) throws -> UInt64 {
        let (store, set) = (self.store, self.set)
        let outcome = Mutex<Swift.Result<UInt64, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let start = now()
            do {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for items in writers {
                        group.addTask {
                            for item in items {
                                let r = try await store.update(
                                    set: set, key: item.keyValues, changes: item.changeProperties)
                                guard r.requestID != nil else {
                                    throw BenchError("OfflineStore: a change has no request")
                                }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                let elapsed = now() - start
                outcome.withLock { $0 = .success(elapsed) }
            } catch {
                outcome.withLock { $0 = .failure(error) }
            }
            done.signal()
        }
        done.wait()
        return try outcome.withLock { $0! }.get()
    }

    /// The blocking form from one OS thread per writer, as raw LMDB and SQLite are driven: the
    /// writer thread group-commits these too.
    func changeOnThreads(_ writers: [[Item]]) throws -> UInt64 {
        try runThreads(writers.count) { w in
            for item in writers[w] { try self.change(item) }
        }
    }

    func changeBatch(_ items: [Item]) throws {
        let receipts = try store.apply(items.map { .update(set: set, key: $0.keyValues, changes: $0.changeProperties) })
        guard receipts.count == items.count, receipts.allSatisfy({ $0.requestID != nil }) else {
            throw BenchError(
                "OfflineStore: the batch of \(items.count) changes made \(receipts.filter { $0.requestID != nil }.count) requests"
            )
        }
    }

    func queueCount() throws -> Int { try store.pendingRequestCount() }

    func queueBody(id: Int64) throws -> String? {
        guard case .string(let body)? = try store.get(set: "RequestQueue", key: [.int(id)])?["Body"] else { return nil }
        return body
    }
}
