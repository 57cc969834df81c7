import Foundation
import Testing
@testable import OfflineStore

#if canImport(Glibc)
import Glibc
#endif

/// Issue 37, finding 4: `serve` under `RLIMIT_NOFILE` 1024 with 1,100 idle TCP clients spun at
/// 96–99% of a core while they stayed, and when busy (live queries, writes) died by SIGILL in
/// libdispatch two seconds after it ran out of descriptors. Here `serve` runs with `ulimit -n`
/// `SERVE_FD_LIMIT` (256), a live query and a connection of its own open, and the test holds
/// `SERVE_FD_CONNECTIONS` (400) idle connections more: it stays alive, uses little CPU, answers
/// reads and writes on the connection it had, and a new client once the idle ones are gone.
@Suite(.soak, .checksStores) struct ConnectionLimitTests {
    static func knob(_ name: String, _ value: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? value
    }

    /// A connection to 127.0.0.1:`port` made within `seconds` (non-blocking: a full backlog makes
    /// a blocking connect wait minutes), or nil.
    static func connect(port: Int, within seconds: Double) -> Int32? {
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard s >= 0 else { return nil }
        _ = fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if rc != 0 {
            var p = pollfd(fd: s, events: Int16(POLLOUT), revents: 0)
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            guard errno == EINPROGRESS, poll(&p, 1, Int32(seconds * 1000)) == 1,
                getsockopt(s, SOL_SOCKET, SO_ERROR, &error, &length) == 0, error == 0
            else {
                close(s)
                return nil
            }
        }
        return s
    }

    /// The CPU time (user and system) process `pid` has used, in seconds; nil when it is gone.
    static func cpuSeconds(_ pid: pid_t) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return nil }
        // After "pid (comm)": state is field 3, utime 14 and stime 15.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    static func isRunning(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return false }
        return !stat[stat.index(after: end)...].hasPrefix(" Z")
    }

    @Test func moreIdleConnectionsThanDescriptorsNeitherSpinNorTrap() async throws {
        let limit = Self.knob("SERVE_FD_LIMIT", 256)
        let count = Self.knob("SERVE_FD_CONNECTIONS", 400)
        let store = try await ServeTests.sampleStore()
        let server = try await ServerProcess.launch(
            "/bin/sh",
            [
                "-c", "ulimit -n \(limit) && exec \"$0\" \"$@\"", CLI.executable, "serve", "--store", store, "--host",
                "127.0.0.1", "--port", "0", "--lifetime", "300",
            ], store: store, startTimeout: 60)
        defer { server.kill() }
        let port = try #require(URL(string: server.url)?.port)

        // Busy: two live queries, and a connection that writes while the idle ones are held.
        var live: [RawConnection] = []
        for filter in ["Price gt 10", "Category eq 'Notebooks'"] {
            let c = try RawConnection(server.url)
            await c.send(
                "GET /Products?$filter=\(filter.replacingOccurrences(of: " ", with: "%20")) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
            )
            live.append(c)
        }
        let busy = try RawConnection(server.url)
        await busy.send("GET /Products('HT-1000') HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(try await busy.response(within: 20).status == 200)

        let started = Date()
        var idle: [Int32] = []
        defer { for fd in idle { close(fd) } }
        for _ in 0..<count {
            guard Date().timeIntervalSince(started) < 60, let fd = Self.connect(port: port, within: 1) else { continue }
            idle.append(fd)
        }
        let opened = Date().timeIntervalSince(started)
        let sockets = openSocketCount(server.pid)

        // Writes for 5 s while they are held: each a commit the live queries run again on.
        let writing = Date()
        var writes = 0
        while Date().timeIntervalSince(writing) < 5 {
            let body = #"{"Name":"held \#(writes)"}"#
            await busy.send(
                "PATCH /Products('HT-1000') HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
            )
            guard let patched = try? await busy.response(within: 20) else {
                Issue.record("PATCH \(writes) was not answered: \(server.diagnosis())")
                break
            }
            #expect(patched.status == 204 || patched.status == 200, "PATCH \(writes): \(patched.status)")
            writes += 1
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(
            live.allSatisfy { c in
                c.drain()
                return !c.closed
            }, "a live query's stream ended")
        // CPU over the time that really passed (a loaded run's sleep of 5 s can take far longer).
        let (cpuStart, measured) = (Self.cpuSeconds(server.pid) ?? 0, Date())
        try await Task.sleep(for: .seconds(5))
        let cpu = ((Self.cpuSeconds(server.pid) ?? .infinity) - cpuStart) / Date().timeIntervalSince(measured)
        #expect(Self.isRunning(server.pid), "serve died holding \(idle.count) connections: \(server.diagnosis())")
        #expect(cpu < 0.25, "serve used \(Int(cpu * 100))% of a core while \(idle.count) idle connections were held")

        let held = idle.count
        for fd in idle { close(fd) }
        idle.removeAll()
        let released = Date()
        var answered: Double?
        while answered == nil, Date().timeIntervalSince(released) < 20 {
            if let fd = Self.connect(port: port, within: 1) {
                close(fd)
                let fresh = try RawConnection(server.url)
                await fresh.send("GET /Products('HT-1001') HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                if (try? await fresh.response(within: 5))?.status == 200 {
                    answered = Date().timeIntervalSince(released)
                }
            }
            if answered == nil { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(answered != nil, "no answer within 20 s of releasing the connections: \(server.diagnosis())")
        #expect(Self.isRunning(server.pid), "\(server.diagnosis())")
        print(
            "descriptor limit \(limit): \(count) idle connections asked, held \(held) in \(opened) s (server sockets \(sockets)); \(writes) writes meanwhile; CPU \(Int(cpu * 100))% of a core while held; a new client answered \(answered ?? -1) s after release"
        )
    }
}
