import Synchronization

/// Parsed and bound request URLs by their text, so a URL asked again skips parsing and binding
/// (like a prepared statement). Bounded: a shard that is full starts over; URLs longer than
/// `maxURLLength` bytes are bound every time, so the cache holds at most `capacity × maxURLLength`.
///
/// Sharded by the URL's hash, and a full shard's entries are released outside its lock: under a
/// server's many threads, one lock for all (and 512 bound queries released while holding it, each
/// time it filled) was a tenth of `serve`'s CPU on point reads by key, every one a new URL.
package final class BoundQueryCache: Sendable {
    private static let shardCount = 16
    private final class Shard: Sendable { let entries = Mutex<[String: BoundQuery]>([:]) }
    private let shards: [Shard]
    package let capacity: Int
    package let maxURLLength: Int
    private let perShard: Int

    package init(capacity: Int = 512, maxURLLength: Int = 8192) {
        self.capacity = capacity
        self.maxURLLength = maxURLLength
        perShard = max(1, capacity / Self.shardCount)
        shards = (0..<Self.shardCount).map { _ in Shard() }
    }

    /// The bound query for `url`, binding it with `bind` on a miss. Errors are not cached.
    func query(_ url: String, bind: () throws -> BoundQuery) throws -> BoundQuery {
        if url.utf8.count > maxURLLength { return try bind() }
        let shard = shards[Int(UInt(bitPattern: url.hashValue) % UInt(Self.shardCount))]
        if let hit = shard.entries.withLock({ $0[url] }) { return hit }
        let bound = try bind()
        let evicted = shard.entries.withLock { cache -> [String: BoundQuery]? in
            var full: [String: BoundQuery]? = nil
            if cache.count >= perShard { full = cache; cache = [:] }
            cache[url] = bound
            return full
        }
        _ = evicted  // released here, outside the lock
        return bound
    }
}
