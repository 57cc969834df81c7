import Foundation

/// A diagnostic for the test process's concurrency pool, off unless `POOL_WATCHDOG=1`: a task
/// sleeps 100 ms again and again and notes how late it wakes; a wake more than a second late is
/// printed as it happens, and at exit the worst and a count of late wakes. A test that blocks a
/// thread of the pool (two on two cores) for seconds shows here as late wakes, and as the timers
/// of the tests beside it firing late. Started with the scratch root (`TestScratch.root`), which
/// nearly every test makes first thing.
public enum PoolWatchdog {
    final class State: @unchecked Sendable {
        // @unchecked: every field but `start` is guarded by `lock`.
        let lock = NSLock()
        var wakes = 0
        var worst = 0.0
        var worstAt = 0.0
        /// Wakes later than 0.25, 1, 5 and 20 s.
        var late = [0, 0, 0, 0]
        let start = Date()
    }

    static let state = State()

    /// Starts the watchdog once, when `POOL_WATCHDOG=1`.
    public static let start: Void = {
        guard ProcessInfo.processInfo.environment["POOL_WATCHDOG"] == "1" else { return }
        let s = state
        Task.detached {
            while true {
                let t = Date()
                try? await Task.sleep(nanoseconds: 100_000_000)
                let late = Date().timeIntervalSince(t) - 0.1
                let at = Date().timeIntervalSince(s.start)
                s.lock.withLock {
                    s.wakes += 1
                    if late > s.worst { (s.worst, s.worstAt) = (late, at) }
                    for (i, bound) in [0.25, 1, 5, 20].enumerated() where late > bound { s.late[i] += 1 }
                }
                if late > 1 { print("pool watchdog: a 100 ms sleep woke \(late) s late at +\(at) s") }
            }
        }
        atexit {
            let s = PoolWatchdog.state
            s.lock.withLock {
                print(
                    "pool watchdog: \(s.wakes) wakes in \(Date().timeIntervalSince(s.start)) s; worst \(s.worst) s late, at +\(s.worstAt) s; late by more than 0.25 s: \(s.late[0]), 1 s: \(s.late[1]), 5 s: \(s.late[2]), 20 s: \(s.late[3])"
                )
            }
            fflush(nil)
        }
    }()
}
