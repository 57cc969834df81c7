import Foundation

/// Where tests put their files: one directory per test process, `$TMPDIR/offline-store-tests-PID`,
/// removed when the process exits. Each test asks for its own directory under it.
///
/// A test run used to leave every store it made in `$TMPDIR` (280 MB for the fast tier, gigabytes
/// for `TEST_TIER=all`), and a CI machine ran out of disk. Now a normal exit removes the lot, and
/// the next test process removes what a killed one left (a root whose PID is gone).
/// `KEEP_TEST_FILES=1` keeps them, to look at after a failure.
public enum TestScratch {
    /// A new, empty directory named `PREFIX-UUID` under this process's root.
    public static func directory(_ prefix: String) -> String {
        let dir = root + "/\(prefix)-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// This process's root, made (and its removal at exit arranged) on first use.
    public static let root: String = {
        _ = PoolWatchdog.start  // POOL_WATCHDOG=1: how late the pool runs a task
        let base = FileManager.default.temporaryDirectory.path
        removeOrphans(in: base)
        let dir = base + "/\(prefix)\(getpid())"
        try? FileManager.default.removeItem(atPath: dir)  // a dead process's, with a reused PID
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        if ProcessInfo.processInfo.environment["KEEP_TEST_FILES"] != "1" {
            atexit { try? FileManager.default.removeItem(atPath: TestScratch.root) }
        }
        return dir
    }()

    private static let prefix = "offline-store-tests-"

    /// Removes the roots of test processes that no longer run (killed, so their `atexit` never ran).
    private static func removeOrphans(in base: String) {
        guard ProcessInfo.processInfo.environment["KEEP_TEST_FILES"] != "1",
            let names = try? FileManager.default.contentsOfDirectory(atPath: base)
        else { return }
        for name in names where name.hasPrefix(prefix) {
            guard let pid = pid_t(name.dropFirst(prefix.count)), pid != getpid() else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH {
                try? FileManager.default.removeItem(atPath: base + "/" + name)
            }
        }
    }
}
