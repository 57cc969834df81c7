import Glibc
import HummingbirdCore
import Logging

/// The most connections `serve` keeps open at once: fewer than its descriptor limit
/// (`RLIMIT_NOFILE`) allows, so that the process keeps descriptors for everything else it opens
/// — its store, its event loops, a query's temporary file, a sync's connections to its service,
/// libdispatch's own. At the limit it stops accepting (Hummingbird's `AvailableConnectionsDelegate`):
/// a new client waits in the listen backlog (or is refused by the system when that is full) until
/// a connection closes — an idle one after the idle timeout. Without it, 1,100 idle clients under
/// a limit of 1,024 took every descriptor: `serve` spun at a whole core on failing accepts, and
/// died by SIGILL in libdispatch when a live query or a write needed one more.
struct ConnectionLimit: AvailableConnectionsDelegate {
    /// Connections kept open at most.
    let maximum: Int
    let logger: Logger
    private var open = 0
    private var full = false

    init(maximum: Int, logger: Logger) {
        self.maximum = maximum
        self.logger = logger
    }

    /// The limit for this process's descriptor limit (`descriptorLimit`).
    init(logger: Logger) {
        self.init(maximum: Self.maximum(descriptors: Self.descriptorLimit), logger: logger)
    }

    /// The process's soft descriptor limit (`ulimit -n`); `Int.max` when it has none.
    static var descriptorLimit: Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else {
            return Int.max
        }
        return Int(clamping: limit.rlim_cur)
    }

    /// The connections `descriptors` leave room for: a quarter of them (at least 64, at most
    /// 1,024) are kept for the rest of the process; at least 16 connections.
    static func maximum(descriptors: Int) -> Int {
        guard descriptors != Int.max else { return Int.max }
        let reserve = min(1_024, max(64, descriptors / 4))
        return max(16, descriptors - reserve)
    }

    mutating func connectionOpened() {
        open += 1
        if open >= maximum, !full {
            full = true
            logger.warning(
                "\(open) connections open, the most the descriptor limit (ulimit -n \(Self.descriptorLimit)) leaves room for: new ones wait until one closes (an idle one after the idle timeout)"
            )
        }
    }

    mutating func connectionClosed() {
        open -= 1
        if full, open < maximum - maximum / 10 {
            full = false
            logger.notice("\(open) connections open: accepting new ones again")
        }
    }

    func isAcceptingNewConnections() -> Bool { open < maximum }
}
