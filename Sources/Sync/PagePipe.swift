/// The parts of a full read's pages on their way from the task that fetches and parses them to
/// the one that writes them, so that the next pages are fetched and parsed while the last are
/// written, and the writer writes many parts in one transaction: a read of N entities commits
/// about N / `groupRows` times, not once a page.
///
/// The groups are the same whatever the timing (the writer takes parts until they hold
/// `groupRows` rows or are `groupParts` parts, or the read ended), so the same read makes the
/// same transactions every time — which the fault-injection tests rely on. Large groups ramp up:
/// the first holds at most `firstRows` rows (and `firstParts` parts), each next one twice as many
/// until `groupRows`, so the writer starts early and a short read is not one late transaction.
/// Memory holds at most one group and `firstRows` rows waiting besides the one being written
/// (two groups when they are small), whatever the read's size.
///
/// ```swift
/// let pipe = PagePipe(groupRows: 5_000, groupParts: 16)
/// // reading task:  try await pipe.put(part) … ; await pipe.finish(nil)
/// // writing task:  while let parts = try await pipe.take() { write(parts) }
/// ```
actor PagePipe {
    /// One part of a page (a page is one part unless it has more than `chunkRows` rows).
    struct Part: Sendable {
        var page: ServerPage
        /// The page it belongs to, from 1.
        var index: Int
        /// Its page's last part: the page's next and delta links and count are in it.
        var endsPage: Bool
        /// Bytes of the page's body (on its last part; 0 on the others).
        var bytes: Int
    }

    private var parts: [Part] = []
    private var rows = 0
    private let groupRows: Int
    private let groupParts: Int
    /// The size of the next group: from `firstRows` and `firstParts`, doubling up to the above.
    private var nextRows: Int
    private var nextParts: Int
    /// Rows and parts that may wait beyond one whole group.
    private let slackRows: Int
    private let slackParts: Int
    private var ended = false
    private var failure: (any Error)?
    private var closed = false
    private var taker: CheckedContinuation<Void, Never>?
    private var putter: CheckedContinuation<Void, Never>?

    init(groupRows: Int, groupParts: Int, firstRows: Int = 5_000, firstParts: Int = 16) {
        self.groupRows = max(1, groupRows)
        self.groupParts = max(1, groupParts)
        self.nextRows = min(self.groupRows, max(1, firstRows))
        self.nextParts = min(self.groupParts, max(1, firstParts))
        self.slackRows = nextRows
        self.slackParts = nextParts
    }

    /// Hands a part over, waiting while a group and the slack wait; throws `CancellationError`
    /// once the writer has closed the pipe.
    func put(_ part: Part) async throws {
        while (rows >= nextRows + slackRows || parts.count >= nextParts + slackParts) && !closed {
            await withCheckedContinuation { putter = $0 }
        }
        if closed { throw CancellationError() }
        parts.append(part)
        rows += part.page.received
        if taker != nil && groupIsReady {
            taker?.resume()
            taker = nil
        }
    }

    /// No more parts: the read ended, or failed with `error` (the writer gets it after the parts before it).
    func finish(_ error: (any Error)?) {
        ended = true
        failure = error
        taker?.resume()
        taker = nil
    }

    private var groupIsReady: Bool { rows >= nextRows || parts.count >= nextParts || ended }

    /// The next group: parts from the first until they hold `nextRows` rows or are `nextParts`
    /// parts (fewer at the end), waiting for them; nil at the end, or the reader's failure.
    func take() async throws -> [Part]? {
        while !groupIsReady { await withCheckedContinuation { taker = $0 } }
        if parts.isEmpty {
            if let failure { throw failure }
            return nil
        }
        var (n, taken) = (0, 0)
        while n < parts.count && n < nextParts && taken < nextRows {
            taken += parts[n].page.received
            n += 1
        }
        let group = Array(parts.prefix(n))
        parts.removeFirst(n)
        rows -= taken
        nextRows = min(groupRows, nextRows * 2)
        nextParts = min(groupParts, nextParts * 2)
        putter?.resume()
        putter = nil
        return group
    }

    /// The writer stops taking: a waiting or later `put` throws.
    func close() {
        closed = true
        putter?.resume()
        putter = nil
    }
}
