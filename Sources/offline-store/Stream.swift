import ArgumentParser
import CommandSupport
import Foundation
import Glibc
import OfflineStore
import Storage
import Synchronization

struct StreamCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stream",
        abstract: "Read, fetch or store one stream: a media entity's media resource or a stream property.",
        discussion: """
            The stream is named as in a URL: Photos(1) or Photos(1)/$value (a media entity), \
            Albums(1)/Cover (an Edm.Stream property). Without options its bytes go to standard \
            output (or --out FILE), read in pieces; a stream the store has not downloaded is an \
            error saying so. --fetch downloads it now; --replace replaces it with a file as a \
            local change (queued: the next flush sends it, like update); --put stores a file as \
            the store's own (not queued, like load: an authority's media).
            Example: offline-store stream --store s "Photos(1)" --out photo.png
            Example: offline-store stream --store s "Photos(1)" --info
            Example: offline-store stream --store s "Photos(1)" --fetch --service http://127.0.0.1:8080/
            Example: offline-store stream --store s "Photos(1)" --replace photo.png --content-type image/png
            Example: offline-store stream --store s "Photos(1)" --put photo.png --content-type image/png
            """)
    @OptionGroup var options: StoreOption
    @Argument(help: "The stream: Set(key), Set(key)/$value or Set(key)/StreamProperty.") var path: String
    @Option(help: "Write the bytes to this file instead of standard output.") var out: String?
    @Flag(help: "Print what the store knows of the stream as JSON (downloaded, size, sha256, contentType, mediaETag).")
    var info = false
    @Flag(help: "Download the stream from the service now and store it (the entity must be in the store).")
    var fetch = false
    @Option(help: "With --fetch: the service root (default: the configuration's serviceRoot).") var service: String?
    @Option(
        name: .customLong("header"), help: "With --fetch: a header sent with the request, 'Name: value' (repeatable).")
    var headers: [String] = []
    @Option(help: "Store this file as the stream, as the store's own: not queued, like 'load' (an authority's media).")
    var put: String?
    @Option(
        help:
            "Replace the stream with this file as a local change: stored and queued in one transaction, sent by the next flush."
    )
    var replace: String?
    @Option(help: "With --put or --replace: the stream's media type (default application/octet-stream).")
    var contentType: String?

    func run() throws {
        try runReportingErrors {
            if [fetch, put != nil, replace != nil].filter({ $0 }).count > 1 {
                throw CLIError("give one of --fetch, --put and --replace")
            }
            if contentType != nil && put == nil && replace == nil {
                throw CLIError("--content-type goes with --put or --replace")
            }
            if (service != nil || !headers.isEmpty) && !fetch {
                throw CLIError("--service and --header go with --fetch")
            }
            if let put { return try store(put, queued: false) }
            if let replace { return try store(replace, queued: true) }
            if fetch { return try fetchNow() }
            let store = try OfflineStore.open(at: options.store, readOnly: true)
            if info { return try output(Self.json(try store.streamInfo(path))) }
            let stream = try store.openStream(path)
            try write(stream)
        }
    }

    func store(_ file: String, queued: Bool) throws {
        let fd = Glibc.open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CLIError("cannot open \(file): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let store = try OfflineStore.open(at: options.store)
        let (path, type) = (self.path, contentType ?? "application/octet-stream")
        let found = Mutex<StreamInfo?>(nil)
        try blocking {
            let read = { (buffer: UnsafeMutableRawBufferPointer) throws -> Int in
                while true {
                    let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
                    if n >= 0 { return n }
                    if errno != EINTR { throw CLIError("cannot read \(file): \(String(cString: strerror(errno)))") }
                }
            }
            let info =
                queued
                ? try await store.replaceStream(path, contentType: type, read: read)
                : try await store.putStream(path, contentType: type, read: read)
            found.withLock { $0 = info }
        }
        try output(Self.json(found.withLock { $0 }))
    }

    func fetchNow() throws {
        if let service { try ServiceURL.check(service, option: "--service") }
        var hs: [(String, String)] = []
        for h in headers { hs.append(try FlushCommand.header(h)) }
        let store = try OfflineStore.open(at: options.store)
        let (path, service, sendHeaders) = (self.path, self.service, hs)
        let found = Mutex<StreamInfo?>(nil)
        try blocking {
            let info = try await store.fetchStream(path, serviceRoot: service, headers: sendHeaders)
            found.withLock { $0 = info }
        }
        try output(Self.json(found.withLock { $0 }))
    }

    func write(_ stream: StoredStream) throws {
        var fd: Int32 = 1
        if let out {
            fd = Glibc.open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw CLIError("cannot write \(out): \(String(cString: strerror(errno)))") }
        }
        defer { if fd != 1 { close(fd) } }
        try stream.forEachChunk { try Output.write($0, to: fd) }
    }

    static func json(_ info: StreamInfo?) -> String {
        guard let info else { return "null" }
        func text(_ s: String?) -> String {
            guard let s else { return "null" }
            let data =
                (try? JSONSerialization.data(withJSONObject: s, options: [.fragmentsAllowed])) ?? Data("null".utf8)
            return String(decoding: data, as: UTF8.self)
        }
        return "{\"downloaded\":\(info.downloaded),\"size\":\(info.size.map(String.init) ?? "null"),"
            + "\"sha256\":\(text(info.sha256)),\"contentType\":\(text(info.contentType)),"
            + "\"mediaETag\":\(text(info.mediaETag)),\"readLink\":\(text(info.readLink)),\"editLink\":\(text(info.editLink)),"
            + "\"pendingUpload\":\(info.pendingUpload)}"
    }
}
