import Foundation
import Storage
public import Sync
import Synchronization

extension OfflineStore {
    /// Imports server data into `set` from a file, read as it is written to the store: memory
    /// holds a chunk of the file and a few thousand entities, whatever the file's size. The file
    /// is OData JSON (`{"value":[…]}`, V2's `{"d":{"results":[…]}}`, an array, one entity object)
    /// or JSON lines. A second thread parses while the writer thread writes. Nothing is queued.
    ///
    /// - Parameters:
    ///   - set: the entity set the file's entities go to (their expanded children go to their own).
    ///   - path: the file; `-` reads standard input.
    ///   - batchSize: nil (the default): all or nothing, one transaction for the whole file (LMDB
    ///     keeps up to 512 MiB of its dirty pages in memory and spills the rest to the data file).
    ///     A number: commit every that many entities (whole entity objects: an entity and its
    ///     expanded children are never split); a failure keeps the batches before it and throws
    ///     `LoadError` saying how many entities they hold.
    ///   - progress: called on the writer thread every few thousand entities and at the end.
    /// - Returns: how many entities were written, across all sets.
    @discardableResult
    public func load(
        set: String, file path: String, batchSize: Int? = nil,
        progress: (@Sendable (LoadProgress) -> Void)? = nil
    ) throws -> Int {
        let input = try LoadInput(path: path, needsRereading: batchSize == nil)
        return try load(set: set, input: input, batchSize: batchSize, progress: progress)
    }

    private func load(
        set: String, input: LoadInput, batchSize: Int?, progress: (@Sendable (LoadProgress) -> Void)?
    ) throws -> Int {
        if let batchSize, batchSize < 1 {
            throw EntityError.badInput("the batch size must be at least 1, not \(batchSize)")
        }
        _ = try entities.set(set)
        let loader = EntityLoader(store: entities)
        return try lifecycle.during(.populating, detail: set) { lifecycleProgress in
            // Forward only: a body run again (the map grew) does not report its counts again.
            let last = Mutex(LoadProgress(entities: -1, committed: -1, bytesRead: 0))
            let report: @Sendable (LoadProgress) -> Void = { p in
                let forward = last.withLock { l in
                    guard p.entities > l.entities || p.committed > l.committed else { return false }
                    l = p
                    return true
                }
                guard forward else { return }
                lifecycleProgress(LifecycleEvent(state: .populating, entities: p.entities, detail: set))
                progress?(p)
            }
            return try loader.load(set: set, input: input, batchSize: batchSize, report: report)
        }
    }
}
