import TestSupport
import Foundation
import Testing

/// `Examples/SAPGateway/run.sh` as a user runs it, against mock-sap (external tier): the script
/// starts its own server, tells the whole offline story and exits 0 only when every step did what
/// it should.
@Suite(.external, .serialized, .runsOffThePool) struct SAPGatewayExampleTests {
    @Test func theExampleRunsToTheEnd() throws {
        let dir = tempDir()
        // timeout(1) bounds it (SIGTERM, which the script's trap answers by stopping mock-sap);
        // the first run may install mock-sap from PyPI.
        let status = try Self.shell(
            "exec timeout 900 sh '\(repositoryRoot)/Examples/SAPGateway/run.sh' > '\(dir)/out' 2> '\(dir)/err'",
            environment: ["OFFLINE_STORE": CLI.executable, "TMPDIR": dir])
        let out = (try? String(contentsOfFile: dir + "/out", encoding: .utf8)) ?? ""
        let err = (try? String(contentsOfFile: dir + "/err", encoding: .utf8)) ?? ""
        #expect(status == 0, "exit \(status)\n\(out.suffix(4_000))\n\(err.suffix(2_000))")
        for line in [
            "mock-sap serving at http://127.0.0.1:",
            "== 4. refresh: download SG_Sales and SG_Product",
            "on the server: HT-9001 is 'Notebook Offline 14', HT-1000 costs 899.000, HT-1001 answers 404",
            "the new order's local key: ~1",
            "the order is 05",
            "HT-1002 in the store: 'Notebook Basic 19 (2026)'",
            "on the server: HT-9100 is 'Our Tablet'",
            "requests left: 0, errors: 0",
            "the SAP Gateway example ran to the end",
        ] {
            #expect(out.contains(line), "missing '\(line)' in\n\(out.suffix(4_000))")
        }
        // init's warning names the key, its section and its line.
        #expect(err.contains("app.ini line 6, [endpoint] http://127.0.0.1:"), "\(err)")
        #expect(err.contains(": local_change_expiry=10080: local changes never expire"), "\(err)")
        // The trap stopped mock-sap, and the work directory is gone.
        let stopped = out.split(separator: "\n").last { $0.hasPrefix("stopped mock-sap (pid ") }
        let pid = stopped.flatMap { pid_t($0.dropFirst("stopped mock-sap (pid ".count).dropLast()) }
        #expect(pid.map { kill($0, 0) != 0 } == true, "\(stopped ?? "no 'stopped mock-sap' line")")
        let pids = try FileManager.default.contentsOfDirectory(atPath: dir).filter {
            $0.hasPrefix("sap-gateway-example.")
        }
        #expect(pids.isEmpty, "\(pids)")
    }

    /// Runs `/bin/sh -c command` with `environment` added to this process's; returns its exit
    /// status (128 + the signal when a signal ended it).
    static func shell(_ command: String, environment: [String: String]) throws -> Int32 {
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { _, new in new }
        let argv = (["/bin/sh", "-c", command] as [String]).map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in argv + envp { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, "/bin/sh", nil, nil, argv, envp)
        guard rc == 0 else { throw CocoaError(.executableLoad) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
    }
}
