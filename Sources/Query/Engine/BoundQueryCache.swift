import Synchronization

/// Parsed and bound request URLs by their text, so a URL asked again skips parsing and binding
/// (like a prepared statement). Bounded: when full it starts over; URLs longer than
/// `maxURLLength` bytes are bound every time, so the cache holds at most `capacity × maxURLLength`.
package final class BoundQueryCache: Sendable {
    private let entries = Mutex<[String: BoundQuery]>([:])
    package let capacity: Int
    package let maxURLLength: Int

    package init(capacity: Int = 512, maxURLLength: Int = 8192) {
        self.capacity = capacity
        self.maxURLLength = maxURLLength
    }

    /// The bound query for `url`, binding it with `bind` on a miss. Errors are not cached.
    func query(_ url: String, bind: () throws -> BoundQuery) throws -> BoundQuery {
        if url.utf8.count > maxURLLength { return try bind() }
        if let hit = entries.withLock({ $0[url] }) { return hit }
        let bound = try bind()
        entries.withLock { cache in
            if cache.count >= capacity { cache.removeAll(keepingCapacity: true) }
            cache[url] = bound
        }
        return bound
    }
}
