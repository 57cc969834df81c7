import TestSupport
import Foundation
import Testing

/// `Examples/Sidecar/run.sh` as a user runs it (soak tier: it waits out one sync against a back end
/// that is away, about 10 s): a Python service reads and writes through an offline store's
/// `serve --sync-interval 1`, keeps working while the back end is stopped, and its writes reach
/// the back end once it is back; both stores pass `check`.
@Suite(.soak, .serialized, .runsOffThePool) struct SidecarExampleTests {
    @Test func theExampleRunsToTheEnd() throws {
        let dir = tempDir()
        let status = try SAPGatewayExampleTests.shell(
            "exec timeout 300 sh '\(repositoryRoot)/Examples/Sidecar/run.sh' > '\(dir)/out' 2> '\(dir)/err'",
            environment: ["OFFLINE_STORE": CLI.executable, "TMPDIR": dir])
        let out = (try? String(contentsOfFile: dir + "/out", encoding: .utf8)) ?? ""
        let err = (try? String(contentsOfFile: dir + "/err", encoding: .utf8)) ?? ""
        #expect(status == 0, "exit \(status)\n\(out.suffix(4_000))\n\(err.suffix(2_000))")
        // The update collapses into the pending create unless a sync (every second) took the
        // create between the two requests: either is right, and says so.
        #expect(
            out.contains("the update collapsed into the pending create")
                || out.contains("a sync took the create first: the update waits behind it"), "\(out.suffix(4_000))")
        for line in [
            "refresh failed: the service cannot be reached (nothing was sent)",
            "the back end is away; the service still reads and writes: ['PY-SIDE-1', 'PY-SIDE-2']",
            "on the back end: PY-SIDE-1 17.5, PY-SIDE-2 5",
            "both stores pass check",
            "the sidecar example ran to the end",
        ] {
            #expect(out.contains(line), "missing '\(line)' in\n\(out.suffix(4_000))")
        }
        // The two writes reach the back end in one sync or in two (the first may go before the
        // back end stops, 1 s syncs): what the syncs' flushes succeeded adds up to 2, none archived.
        var succeeded = 0
        for line in out.split(separator: "\n") where line.contains("flush sent") {
            if let r = line.range(of: "succeeded "), let n = Int(line[r.upperBound...].prefix { $0.isNumber }) {
                succeeded += n
            }
            #expect(line.contains("archived 0"), "\(line)")
        }
        #expect(succeeded == 2, "\(out.suffix(4_000))")
        // The trap stopped the servers and removed the work directory.
        let left = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasPrefix("sidecar-example.") }
        #expect(left.isEmpty, "\(left)")
    }
}
