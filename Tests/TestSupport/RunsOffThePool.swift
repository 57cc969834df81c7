import Foundation
public import Testing

/// A task executor with one thread of its own, for `.runsOffThePool`: the jobs of a test that is
/// synchronous from start to end (child processes run and waited for, stores built and checked)
/// run there in order, and the thread ends when the test does.
public final class OwnThreadExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: `jobs` and `state` are guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private enum State { case running, stopping, ended }
    private var state = State.running

    public init(name: String) {
        let thread = Thread { [self] in loop() }
        thread.name = name
        thread.start()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let ended = condition.withLock {
            guard state != .ended else { return true }
            jobs.append(job)
            condition.signal()
            return false
        }
        // A job that comes after the test ended (nothing of a structured test should) still runs.
        if ended { Thread { job.runSynchronously(on: self.asUnownedTaskExecutor()) }.start() }
    }

    /// Lets the thread end once its queue is empty.
    public func stop() {
        condition.withLock {
            if state == .running { state = .stopping }
            condition.signal()
        }
    }

    private func loop() {
        while true {
            let next: UnownedJob? = condition.withLock {
                while jobs.isEmpty && state == .running { condition.wait() }
                guard !jobs.isEmpty else {
                    state = .ended
                    return nil
                }
                return jobs.removeFirst()
            }
            guard let next else { return }
            next.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

/// Runs each test on a thread of its own rather than on Swift's concurrency pool: for suites whose
/// tests are synchronous and long (the tool run as a child process again and again, stores built
/// and damaged, files read whole). Swift Testing calls a synchronous test from a task of the pool,
/// so such a test held one of the pool's two threads (on a two-core machine) for its whole run,
/// and the timers and answers of the tests running beside it waited (a 100 ms sleep woke seconds
/// late). Only for synchronous tests, or async ones whose child tasks never wait for each other
/// while blocking: a test's tasks run one at a time on its thread.
public struct RunsOffThePoolTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard !test.isSuite else { return try await function() }
        let executor = OwnThreadExecutor(name: "test: \(test.name)")
        defer { executor.stop() }
        try await withTaskExecutorPreference(executor) { try await function() }
    }
}

extension Trait where Self == RunsOffThePoolTrait {
    /// Runs each test on a thread of its own, off Swift's concurrency pool (`RunsOffThePoolTrait`).
    public static var runsOffThePool: Self { RunsOffThePoolTrait() }
}
