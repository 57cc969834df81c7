#if DEBUG
import Synchronization

/// Makes chosen `mdb_*` calls fail, in debug builds, so tests can drive every error path.
///
/// Faults are scoped to one environment (so tests running in parallel do not see each other's)
/// and counted per call: "fail the 7th matching call with `EIO`", or count the calls an operation
/// makes so a test can fail each of them in turn.
///
/// ```swift
/// FaultInjection.countCalls(in: env)          // learn how many calls a create makes
/// try store.create(…)
/// let calls = FaultInjection.stop(env)        // e.g. ["mdb_txn_begin", "mdb_get", …]
/// FaultInjection.fail(callNumber: 3, with: EIO, in: env)
/// ```
package enum FaultInjection {
    struct Plan {
        var calls: [String] = []
        var failAt: Int?
        var code: Int32 = 0
        var names: Set<String>?
        var failed = false
    }

    private static let armed = Atomic<Int>(0)
    private static let plans = Mutex<[UInt: Plan]>([:])

    /// True while any environment has a plan; the one check a call pays when none does.
    @inline(__always)
    static var isArmed: Bool { armed.load(ordering: .relaxed) != 0 }

    /// Records every call made on `env` (by name) until `stop`.
    package static func countCalls(in env: Environment, names: Set<String>? = nil) {
        install(Plan(names: names), env)
    }

    /// Makes call number `callNumber` (1-based, among calls named in `names` if given) on `env`
    /// return `code`; calls are recorded as with `countCalls`.
    package static func fail(callNumber: Int, with code: Int32, in env: Environment, names: Set<String>? = nil) {
        install(Plan(failAt: callNumber, code: code, names: names), env)
    }

    /// Ends the plan for `env`; returns the calls seen and whether the fault was injected.
    @discardableResult
    package static func stop(_ env: Environment) -> (calls: [String], injected: Bool) {
        let plan = plans.withLock { $0.removeValue(forKey: key(env.raw)) }
        if plan != nil { armed.subtract(1, ordering: .relaxed) }
        return (plan?.calls ?? [], plan?.failed ?? false)
    }

    private static func install(_ plan: Plan, _ env: Environment) {
        let replaced = plans.withLock { $0.updateValue(plan, forKey: key(env.raw)) != nil }
        if !replaced { armed.add(1, ordering: .relaxed) }
    }

    private static func key(_ env: OpaquePointer?) -> UInt {
        UInt(bitPattern: env.map { Int(bitPattern: UnsafeRawPointer($0)) } ?? 0)
    }

    static func intercept(_ name: StaticString, env: OpaquePointer?) -> Int32? {
        plans.withLock { plans -> Int32? in
            let k = key(env)
            guard var plan = plans[k] else { return nil }
            let n = "\(name)"
            if let names = plan.names, !names.contains(n) { return nil }
            plan.calls.append(n)
            var rc: Int32? = nil
            if plan.failAt == plan.calls.count {
                plan.failed = true
                rc = plan.code
            }
            plans[k] = plan
            return rc
        }
    }
}
#endif
