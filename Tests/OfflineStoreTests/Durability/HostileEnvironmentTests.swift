import TestSupport
import Foundation
import Testing
@testable import OfflineStore
import Samples

/// The tool in the environments daemons and careless scripts give it: standard descriptors closed,
/// output that cannot be written, a full disk, a read-only file system, hostile bytes in arguments.
/// Each ends in one clear line on stderr and a non-zero exit, never a signal, and changes nothing.
@Suite(.soak, .serialized, .checksStores, .runsOffThePool) struct HostileEnvironmentTests {
    /// Runs the tool through `posix_spawn` so the test decides exactly which descriptors the child
    /// has: `closed` are closed in the child; `stdout`, when given, becomes its descriptor 1.
    /// SIGPIPE is ignored in the child when `ignoreSIGPIPE` (a disposition a spawned child inherits).
    static func spawn(
        _ args: [String], closed: [Int32] = [], stdout: Int32? = nil,
        ignoreSIGPIPE: Bool = false, environment: [String: String] = [:]
    ) throws -> (status: Int32, signal: Int32, stderr: String) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let errPath = tempDir() + "/stderr"
        if let stdout { posix_spawn_file_actions_adddup2(&actions, stdout, 1) }
        if !closed.contains(2) {
            posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        }
        if !closed.contains(1) && stdout == nil {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        for fd in closed { posix_spawn_file_actions_addclose(&actions, fd) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // The child's SIGPIPE is set in the child alone: this process ignores SIGPIPE (a child
        // inherits that), and a child that must have the default gets it reset by posix_spawn.
        // (Setting it here for the child's lifetime was a window in which any other test of this
        // process writing to a closed pipe or socket was killed by SIGPIPE: it ended a CI run.)
        signal(SIGPIPE, SIG_IGN)
        if !ignoreSIGPIPE {
            var reset = sigset_t()
            sigemptyset(&reset)
            sigaddset(&reset, SIGPIPE)
            posix_spawnattr_setsigdefault(&attributes, &reset)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF))
        }
        let argv = ([CLI.executable] + args).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        let envp = env.map { strdup("\($0)=\($1)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, CLI.executable, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw CLIError(description: "posix_spawn: \(rc)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let err = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
        let signaled = status & 0x7F != 0 && status & 0x7F != 0x7F
        return (signaled ? -1 : (status >> 8) & 0xFF, signaled ? status & 0x7F : 0, err)
    }

    struct CLIError: Error { var description: String }

    // MARK: Descriptors 0–2

    /// Regression: with stdin and stdout closed, `get` opened data.mdb as descriptor 1 and wrote
    /// its JSON answer over page 0; the store never opened again. With stdout and stderr closed a
    /// failing `get` died. Now every verb runs and the store stays whole.
    @Test func closedStandardDescriptorsNeverBecomeTheStore() throws {
        let dir = try CLITests().sampleStore()
        let store = dir + "/store"
        for closed: [Int32] in [[0, 1], [1, 2], [0, 1, 2], [1], [2]] {
            let get = try Self.spawn(["get", "--store", store, "Products('HT-1001')"], closed: closed)
            #expect(get.signal == 0 && get.status == 0, "closed \(closed): \(get)")
            let missing = try Self.spawn(["get", "--store", store, "Products('nope')"], closed: closed)
            #expect(missing.signal == 0 && missing.status == 1, "closed \(closed): \(missing)")
            try write(
                #"{"value":[{"ProductID":"FD-\#(closed.count)","Name":"written with descriptors closed"}]}"#,
                to: dir + "/fd.json")
            let load = try Self.spawn(
                ["load", "--store", store, "--set", "Products", dir + "/fd.json"], closed: closed)
            #expect(load.signal == 0 && load.status == 0, "closed \(closed): \(load)")
            let query = try Self.spawn(["query", "--store", store, "Products?$top=5"], closed: closed)
            #expect(query.signal == 0 && query.status == 0, "closed \(closed): \(query)")
            let check = try CLI.run(["check", "--store", store])
            #expect(check.status == 0, "closed \(closed): \(check.stdout)\(check.stderr)")
        }
        let written = try CLI.run(["get", "--store", store, "Products('FD-3')"])
        #expect(written.stdout.contains("written with descriptors closed"), "\(written)")
    }

    // MARK: Output that cannot be written

    /// Regression: `query … > /dev/full` and a closed pipe with SIGPIPE ignored ended in a fatal
    /// error (SIGILL). Now: exit 1 and one line naming the reason.
    @Test func unwritableOutputIsAnError() throws {
        let dir = try CLITests().sampleStore()
        let store = dir + "/store"
        let full = open("/dev/full", O_WRONLY)
        #expect(full >= 0)
        defer { close(full) }
        for args in [
            ["query", "--store", store, "SalesOrderItems"], ["get", "--store", store, "Products('HT-1001')"],
            ["stats", "--store", store], ["query", "--store", store, "Products", "--format", "table"],
        ] {
            let r = try Self.spawn(args, stdout: full)
            #expect(r.signal == 0 && r.status == 1, "\(args): \(r)")
            #expect(r.stderr.contains("cannot write to standard output: No space left on device"), "\(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1, "\(r.stderr)")
        }
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        close(fds[0])  // no reader: every write fails with EPIPE
        defer { close(fds[1]) }
        let r = try Self.spawn(["query", "--store", store, "SalesOrderItems"], stdout: fds[1], ignoreSIGPIPE: true)
        #expect(r.signal == 0 && r.status == 1, "\(r)")
        #expect(r.stderr.contains("Broken pipe"), "\(r.stderr)")
    }

    // MARK: Arguments

    /// Control characters from the input are escaped in the error line (no terminal escapes), and
    /// a huge value is cut.
    @Test func errorsEscapeControlCharactersAndCutHugeValues() throws {
        let dir = try CLITests().sampleStore()
        let store = dir + "/store"
        let r = try CLI.run(["get", "--store", store, "Products('\u{1B}[31mred\u{7}')"])
        #expect(r.status == 1)
        #expect(!r.stderr.contains("\u{1B}") && !r.stderr.contains("\u{7}"), "\(r.stderr.debugDescription)")
        #expect(r.stderr.contains("\\u{1B}[31mred"), "\(r.stderr)")
        let digits = String(repeating: "9", count: 100_000)
        try write(#"{"value":[{"ProductID":"X","Price":\#(digits)}]}"#, to: dir + "/big.json")
        let big = try CLI.run(["load", "--store", store, "--set", "Products", dir + "/big.json"])
        #expect(big.status == 1 && big.stderr.contains("expected Edm.Decimal"), "\(big.stderr.prefix(300))")
        #expect(big.stderr.count < 400, "the error line is \(big.stderr.count) characters")
        let file = try CLI.run(["get", "--store", dir + "/big.json", "Products('X')"])
        #expect(
            file.status == 1 && file.stderr.contains("is not a directory") && !file.stderr.contains("NSCocoa"),
            "\(file.stderr)")
        let initFile = try CLI.run(["init", "--store", dir + "/big.json", "--metadata", dir + "/metadata.xml"])
        #expect(initFile.status == 1 && initFile.stderr.contains("is not a directory"), "\(initFile.stderr)")
        let count = try Self.spawn([
            "generate", "--store", store, "--set", "SalesOrderItems", "--count", String(Int.max),
        ])
        #expect(count.signal == 0 && count.status == 1, "\(count)")
        let batch = try Self.spawn([
            "generate", "--store", store, "--set", "BusinessPartners", "--count", "3", "--batch", String(Int.max),
        ])
        #expect(batch.signal == 0 && batch.status == 0, "\(batch)")
        #expect(try CLI.run(["check", "--store", store]).status == 0)
    }

    /// `init` makes missing parent directories, as it always did (a regression of the hardening).
    @Test func initMakesMissingParents() throws {
        let dir = tempDir()
        try write(SampleData.metadata, to: dir + "/m.xml")
        let r = try CLI.run(["init", "--store", dir + "/a/b/c", "--metadata", dir + "/m.xml"])
        #expect(r.status == 0 && r.stdout.contains("4 entity sets"), "\(r.stdout)\(r.stderr)")
    }

    /// JSON with a byte order mark loads; so does JSON from a pipe (`-` or /dev/stdin).
    @Test func loadTakesBOMsAndPipes() throws {
        let dir = try CLITests().sampleStore()
        let store = dir + "/store"
        try Data([0xEF, 0xBB, 0xBF] + Array(#"{"value":[{"ProductID":"BOM-1"}]}"#.utf8)).write(
            to: URL(fileURLWithPath: dir + "/bom.json"))
        let bom = try CLI.run(["load", "--store", store, "--set", "Products", dir + "/bom.json"])
        #expect(bom.status == 0, "\(bom.stderr)")
        for name in ["-", "/dev/stdin"] {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: CLI.executable)
            p.arguments = ["load", "--store", store, "--set", "Products", name]
            let input = Pipe(), err = Pipe()
            p.standardInput = input
            p.standardOutput = FileHandle.nullDevice
            p.standardError = err
            try p.run()
            input.fileHandleForWriting.write(Data(#"{"value":[{"ProductID":"PIPE-\#(name.count)"}]}"#.utf8))
            try input.fileHandleForWriting.close()
            p.waitUntilExit()
            #expect(
                p.terminationStatus == 0,
                "\(name): \(String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))")
        }
        #expect(try CLI.run(["get", "--store", store, "Products('PIPE-10')"]).status == 0)
        #expect(try CLI.run(["get", "--store", store, "Products('BOM-1')"]).status == 0)
    }

    /// The demo's scratch directory comes from mkdtemp (not `offline-store-demo-<pid>`, which a
    /// planted symlink could redirect) and is removed at the end.
    @Test func demoUsesAnUnguessableScratchDirectory() throws {
        let tmp = tempDir()
        let p = Process()
        p.executableURL = URL(fileURLWithPath: CLI.executable)
        p.arguments = ["demo", "--size", "20"]  // small: the story, not the data, is under test
        p.environment = ProcessInfo.processInfo.environment.merging(["TMPDIR": tmp]) { $1 }
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        let firstLine = text.split(separator: "\n").first.map(String.init) ?? ""
        #expect(firstLine.contains(tmp + "/offline-store-demo-"), "\(firstLine)")
        #expect(!firstLine.contains("offline-store-demo-\(p.processIdentifier)/"), "\(firstLine)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp).isEmpty)
    }
}
