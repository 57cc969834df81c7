import TestSupport
import CDispatch  // struct stat: this target sees Glibc's header through Dispatch's C module (MemberImportVisibility)
import Foundation
import Testing
@testable import OfflineStore
import Samples
import Storage

/// The second hardening round's CLI findings 18–20: a failed `init` leaves the user's symlink as
/// it was; help and completion text that cannot be written is an error; a header that cannot go on
/// the wire is refused before anything is sent, by refresh as by flush, and in the Swift API.
@Suite(.checksStores) struct CLIHardeningTests {
    /// Runs the tool with standard output to `/dev/full`; returns its exit status and stderr.
    static func toFullDisk(_ args: [String]) async throws -> (Int32, String) {
        let err = tempDir() + "/err"
        let pid = try ChildProcess.spawnDetached(args, stdout: "/dev/full", stderr: err)
        var status: Int32 = 0
        let started = Date()
        while waitpid(pid, &status, WNOHANG) == 0 {
            if Date().timeIntervalSince(started) > 60 { kill(pid, SIGKILL) }
            try await Task.sleep(for: .milliseconds(10))
        }
        return ((status >> 8) & 0xFF, (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    @Test(.runsOffThePool) func aFailedInitLeavesADanglingSymlinkAlone() throws {
        let dir = tempDir()
        try SampleData.metadata.write(toFile: dir + "/metadata.xml", atomically: true, encoding: .utf8)
        for target in [dir + "/nowhere/store", dir + "/missing"] {
            let link = dir + "/link-\(target.count)"
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
            let r = try CLI.run(["init", "--store", link, "--metadata", dir + "/metadata.xml"])
            var st = stat()
            #expect(lstat(link, &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK, "\(link) was removed: \(r.stderr)")
            #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == target)
            if r.status != 0 {
                #expect(!FileManager.default.fileExists(atPath: target + "/data.mdb"))
            }
        }
    }

    @Test(arguments: [
        ["--help"], ["help", "query"], ["query", "--help"], ["--generate-completion-script", "bash"],
        ["--generate-completion-script", "zsh"],
    ])
    func helpThatCannotBeWrittenIsAnError(_ args: [String]) async throws {
        let (status, stderr) = try await Self.toFullDisk(args)
        #expect(status == 1, "\(args): exit \(status)")
        #expect(stderr.contains("standard output"), "\(args): \(stderr)")
        let ok = try await CLI.run(args)
        #expect(ok.status == 0 && !ok.stdout.isEmpty, "\(args): \(ok.stderr)")
    }

    @Test func headersThatCannotGoOnTheWireAreRefused() async throws {
        let dir = tempDir()
        try SampleData.metadata.write(toFile: dir + "/metadata.xml", atomically: true, encoding: .utf8)
        let made = try await CLI.run(["init", "--store", dir + "/s", "--metadata", dir + "/metadata.xml"])
        #expect(made.status == 0, "\(made.stderr)")
        // (A NUL cannot be in an argument; the API's check below has one.)
        for header in [": x", "Bad Name: x", "X-A: a\r\nInjected: 1", "X-B: a\u{7}b", "no colon"] {
            for verb in ["refresh", "flush"] {
                let started = Date()
                let r = try await CLI.run([
                    verb, "--store", dir + "/s", "--service", "http://127.0.0.1:9/", "--header", header,
                ])
                #expect(r.status == 1, "\(verb) --header \(header.debugDescription): \(r.stderr)")
                #expect(r.stderr.contains("--header"), "\(verb): \(r.stderr)")
                #expect(Date().timeIntervalSince(started) < 10)
            }
        }
        let store = try OfflineStore.open(at: dir + "/s")
        for bad in [("", "x"), ("X", "a\r\nb"), ("X Y", "z"), ("X", "a\u{0}b")] {
            await #expect(throws: EntityError.self) {
                try await store.refresh(serviceRoot: "http://127.0.0.1:9/", headers: [bad])
            }
            await #expect(throws: EntityError.self) {
                try await store.flush(serviceRoot: "http://127.0.0.1:9/", headers: [bad])
            }
        }
    }
}
