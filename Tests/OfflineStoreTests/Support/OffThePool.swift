import Foundation

/// Runs `body` on a new thread and returns its result: for a long synchronous part of an `async`
/// test (building a store of 100,000 items, a loop of synchronous fault-injection trials, waiting
/// for a child process), which would otherwise hold one of the test process's few threads of
/// Swift's concurrency pool (two on a two-core machine) for seconds, and with it every other
/// test's timers and continuations. The store registry of the running test (`.checksStores`) goes
/// with it, so stores made inside are checked after the test as before.
func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    let registry = StoreRegistry.current
    return try await withCheckedThrowingContinuation { (done: CheckedContinuation<T, any Error>) in
        let thread = Thread {
            done.resume(with: Result { try StoreRegistry.$current.withValue(registry) { try body() } })
        }
        thread.start()
    }
}
