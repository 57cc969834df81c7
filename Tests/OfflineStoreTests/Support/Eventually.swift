import Foundation

/// Waits until `condition` holds, checking every 10 ms for at most `seconds` (generous: a loaded
/// CI run has kept a test's tasks from running for 20 s); returns whether it
/// did (the last check at the deadline included).
func eventually(within seconds: Int = 60, _ condition: () throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        try await Task.sleep(for: .milliseconds(10))
    }
    return try condition()
}
