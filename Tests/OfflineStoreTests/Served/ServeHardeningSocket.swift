import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A raw TCP connection to a `serve` process, for the hardening tests: it sends exactly the bytes
/// it is given (half a head, a broken chunk, a `Host` no client library would send) and reads
/// with a deadline, never blocking a thread of the concurrency pool (the socket is non-blocking;
/// it waits with `Task.sleep`).
final class RawConnection: @unchecked Sendable {
    // @unchecked: one test task uses a connection at a time.
    let fd: Int32
    private(set) var received: [UInt8] = []
    private(set) var closed = false

    struct Failed: Error, CustomStringConvertible { var description: String }

    /// Connects to the host and port of `url` (`http://127.0.0.1:PORT/`), from the address
    /// `source` when given (another loopback address, `127.0.0.2`, is another client to the server).
    init(_ url: String, from source: String? = nil) throws {
        let s = try Self.connected(url, from: source)
        _ = fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK)
        fd = s
    }

    /// A blocking socket connected to the host and port of `url` (from `source`, when given).
    static func connected(_ url: String, from source: String? = nil) throws -> Int32 {
        guard let parsed = URL(string: url), let host = parsed.host, let port = parsed.port else {
            throw Failed(description: "not a URL with a port: \(url)")
        }
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard s >= 0 else { throw Failed(description: "socket: errno \(errno)") }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            inet_pton(AF_INET, source, &local.sin_addr)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else {
                let e = errno
                Glibc.close(s)
                throw Failed(description: "bind to \(source): errno \(e)")
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard rc == 0 else {
            let e = errno
            Glibc.close(s)
            throw Failed(description: "connect to \(url): errno \(e)")
        }
        return s
    }

    deinit { Glibc.close(fd) }

    /// Sends `bytes` whole (waiting while the socket is full, at most 10 s). False when the
    /// connection is gone.
    @discardableResult
    func send(_ bytes: [UInt8]) async -> Bool {
        var offset = 0
        let start = Date()
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                offset += n
            } else if n < 0, errno == EAGAIN || errno == EWOULDBLOCK, Date().timeIntervalSince(start) < 10 {
                try? await Task.sleep(nanoseconds: 5_000_000)
            } else {
                return false
            }
        }
        return true
    }

    @discardableResult
    func send(_ text: String) async -> Bool { await send(Array(text.utf8)) }

    /// Sends `text` whole, for a thread of the test's own (not a task: it waits with
    /// `Thread.sleep` while the socket is full, at most 10 s). False when the connection is gone.
    @discardableResult
    func sendNow(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        var offset = 0
        let start = Date()
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                offset += n
            } else if n < 0, errno == EAGAIN || errno == EWOULDBLOCK, Date().timeIntervalSince(start) < 10 {
                Thread.sleep(forTimeInterval: 0.005)
            } else {
                return false
            }
        }
        return true
    }

    /// Reads what is there now, without waiting. Notes the end of the stream (or a reset).
    func drain() {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while !closed {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                received += buffer[..<n]
            } else if n == 0 {
                closed = true
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                return
            } else {
                closed = true
            }
        }
    }

    /// One read of at most `count` bytes, without waiting: what came, or nil when nothing has yet.
    /// Kept apart from `received`, for a client that reads only the start of its answer.
    func peek(_ count: Int) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: count)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return n > 0 ? Array(buffer[..<n]) : nil
    }

    /// Waits until the server closes the connection, at most `seconds`; true if it did.
    func waitClosed(within seconds: Double) async -> Bool {
        let start = Date()
        while true {
            drain()
            if closed { return true }
            if Date().timeIntervalSince(start) > seconds { return false }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
    }

    /// Waits, at most `seconds`, for one whole response (by `Content-Length`, a chunked body's
    /// last chunk, or the end of the stream); returns it, and leaves what follows in `received`.
    func response(within seconds: Double = 30) async throws -> RawResponse {
        let start = Date()
        while true {
            drain()
            if let (response, length) = RawResponse.parse(received, closed: closed) {
                received.removeFirst(length)
                return response
            }
            if closed { throw Failed(description: "closed before a whole response: \(text(received))") }
            if Date().timeIntervalSince(start) > seconds {
                throw Failed(description: "no whole response within \(seconds) s: \(text(received))")
            }
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
    }

    private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes.prefix(600), as: UTF8.self) }
}

/// One HTTP/1.1 response as the raw bytes said it.
struct RawResponse {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]
    var text: String { String(decoding: body, as: UTF8.self) }
    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
    var object: [String: Any] {
        ((try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]) ?? [:]
    }

    /// The first response in `bytes` and how many bytes it took, or nil when it is not whole yet.
    static func parse(_ bytes: [UInt8], closed: Bool) -> (RawResponse, Int)? {
        let crlf2: [UInt8] = [13, 10, 13, 10]
        guard let end = (0..<max(0, bytes.count - 3)).first(where: { Array(bytes[$0..<$0 + 4]) == crlf2 }) else {
            return nil
        }
        let head = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusLine = head[0].split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { return nil }
        let headers = head.dropFirst().compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var response = RawResponse(status: status, headers: headers, body: [])
        let bodyStart = end + 4
        if let length = response.header("Content-Length").flatMap(Int.init) {
            guard bytes.count >= bodyStart + length else { return nil }
            response.body = Array(bytes[bodyStart..<bodyStart + length])
            return (response, bodyStart + length)
        }
        if response.header("Transfer-Encoding")?.lowercased() == "chunked" {
            var i = bodyStart
            var body: [UInt8] = []
            while true {
                guard
                    let lineEnd = (i..<max(i, bytes.count - 1)).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 })
                else { return nil }
                let sizeText = String(decoding: bytes[i..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
                guard let size = Int(sizeText, radix: 16) else { return nil }
                let dataStart = lineEnd + 2
                if size == 0 {
                    guard bytes.count >= dataStart + 2 else { return nil }
                    response.body = body
                    return (response, dataStart + 2)
                }
                guard bytes.count >= dataStart + size + 2 else { return nil }
                body += bytes[dataStart..<dataStart + size]
                i = dataStart + size + 2
            }
        }
        if status == 204 || status == 304 || (100..<200).contains(status) { return (response, bodyStart) }
        guard closed else { return nil }
        response.body = Array(bytes[bodyStart...])
        return (response, bytes.count)
    }
}

/// A server process's memory high-water mark (`VmHWM`) in KiB, from /proc.
func peakMemoryKiB(_ pid: pid_t) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    }
    return nil
}

/// A server process's open connections to `port` it accepted, from /proc/PID/fd: its sockets
/// minus the listener. Rough, but enough to see a thousand held connections.
func openSocketCount(_ pid: pid_t) -> Int {
    let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
    return fds.filter { fd in
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"))?.hasPrefix("socket:")
            == true
    }.count
}

/// Times `GET` of each of `paths` (one connection each, `Connection: close`) again and again
/// until `deadline`, pausing `pause` seconds between rounds, on a thread of its own with blocking
/// sockets: the figures are the server's, not the wait of a test task for the test process's
/// concurrency pool (which other suites running beside it can fill). nil for a request that
/// failed or did not answer 200.
func timeRequestsOnAThread(_ url: String, paths: [String], until deadline: Date, pause: Double) async -> [Double?] {
    await withCheckedContinuation { (done: CheckedContinuation<[Double?], Never>) in
        let thread = Thread { done.resume(returning: timeRequests(url, paths: paths, until: deadline, pause: pause)) }
        thread.start()
    }
}

/// `timeRequestsOnAThread`'s loop, on the calling thread (which must not be one of the
/// concurrency pool's: each request blocks it).
func timeRequests(_ url: String, paths: [String], until deadline: Date, pause: Double) -> [Double?] {
    var times: [Double?] = []
    while Date() < deadline {
        for path in paths { times.append(blockingGet(url, path)) }
        Thread.sleep(forTimeInterval: pause)
    }
    return times
}

/// One `GET path` on a blocking socket (`timeout` seconds to receive), its time in seconds, or
/// nil unless it answered 200.
func blockingGet(_ url: String, _ path: String, timeout seconds: Int = 30) -> Double? {
    let start = Date()
    guard let s = try? RawConnection.connected(url) else { return nil }
    defer { Glibc.close(s) }
    var timeout = timeval(tv_sec: seconds, tv_usec: 0)
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    let request = Array("GET /\(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
    guard request.withUnsafeBytes({ Glibc.send(s, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count
    else { return nil }
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let n = buffer.withUnsafeMutableBytes { recv(s, $0.baseAddress, $0.count, 0) }
        if n <= 0 { break }
        received += buffer[..<n]
    }
    guard received.starts(with: Array("HTTP/1.1 200".utf8)) else { return nil }
    return Date().timeIntervalSince(start)
}
