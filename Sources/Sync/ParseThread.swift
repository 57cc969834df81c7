import Foundation

/// Runs a parse on a thread of its own, handing what it makes to one consumer a few items
/// ahead: one core parses while the other writes, and memory holds at most `ahead` items
/// besides the one being made. `load` parses its input so, and refresh each page of a read.
final class ParseThread<Item: Sendable>: @unchecked Sendable {
    // @unchecked: `queue`, `stopped` and `finished` are guarded by `cond`.
    private enum Entry { case item(Item), end, failed(any Error) }
    private let cond = NSCondition()
    private var queue: [Entry] = []
    private var stopped = false
    private var finished = false
    private let ahead: Int

    /// Thrown by `put` once the consumer stopped: the parse ends there.
    struct Stopped: Error {}

    /// Starts `produce` on a new thread; it hands each item to `put`, which waits while the
    /// consumer is `ahead` items behind. What `produce` throws reaches the consumer at `next`.
    init(
        name: String, ahead: Int = 4,
        produce: @escaping @Sendable (_ put: (Item) throws -> Void) throws -> Void
    ) {
        self.ahead = ahead
        let thread = Thread { [self] in
            do {
                try produce { item in guard self.put(.item(item)) else { throw Stopped() } }
                _ = put(.end)
            } catch is Stopped {
            } catch {
                _ = put(.failed(error))
            }
            cond.lock()
            finished = true
            cond.broadcast()
            cond.unlock()
        }
        thread.name = name
        thread.stackSize = 8 << 20
        thread.start()
    }

    /// The next item, waiting for it; nil at the end.
    func next() throws -> Item? {
        cond.lock()
        defer { cond.unlock() }
        while queue.isEmpty { cond.wait() }
        switch queue[0] {
        case .item(let item):
            queue.removeFirst()
            cond.broadcast()
            return item
        case .end:
            return nil
        case .failed(let error):
            throw error
        }
    }

    /// `next()` for async code: the wait happens on a thread of Dispatch's, not on one of the
    /// concurrency pool's few.
    func nextItem() async throws -> Item? {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Item?, any Error>) in
            DispatchQueue.global().async { c.resume(with: Result { try self.next() }) }
        }
    }

    /// Stops the parsing thread and waits for it.
    func stop() {
        cond.lock()
        stopped = true
        cond.broadcast()
        while !finished { cond.wait() }
        cond.unlock()
    }

    /// Hands an entry over, waiting while the consumer is `ahead` behind; false once stopped.
    private func put(_ entry: Entry) -> Bool {
        cond.lock()
        defer { cond.unlock() }
        while queue.count >= ahead && !stopped { cond.wait() }
        if stopped { return false }
        queue.append(entry)
        cond.broadcast()
        return true
    }
}
