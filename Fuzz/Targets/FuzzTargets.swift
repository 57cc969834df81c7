import Dispatch
import Foundation
import OfflineStore
import Query
import Samples
import Server
import Storage

/// The inputs a hostile peer controls, each behind one function that must never crash, trap or
/// hang: it may only return (an error is a result). `offline-store-fuzz` runs them under
/// libFuzzer (`scripts/fuzz.sh`); `FuzzCorpusTests` runs the committed corpus through them in
/// every `swift test`.
public enum FuzzTargets {
    public static let names = ["url", "row", "json", "csdl", "batch", "serve"]

    /// Runs target `name` on `data`. Unknown names do nothing. Blocks the calling thread while
    /// `serve` answers (libFuzzer's thread, the replay tool's main thread); from async code (the
    /// corpus test), use the async variant, which does not hold a thread of the concurrency pool.
    public static func run(_ name: String, _ data: UnsafeRawBufferPointer) {
        if name == "serve" {
            let bytes = Array(data)
            let done = DispatchSemaphore(value: 0)
            Task {
                await serve(bytes)
                done.signal()
            }
            done.wait()
            return
        }
        switch name {
        case "url": url(data)
        case "row": row(data)
        case "json": json(data)
        case "csdl": csdl(data)
        case "batch": batch(data)
        default: break
        }
    }

    /// Runs target `name` on `bytes`, awaiting `serve` rather than blocking.
    public static func run(_ name: String, _ bytes: [UInt8]) async {
        if name == "serve" { await serve(bytes) } else { bytes.withUnsafeBytes { run(name, $0) } }
    }

    static let schema: Schema = {
        do { return try CSDL.parse(Array(SampleData.metadata.utf8)).withSystemSets() } catch {
            fatalError("the sample $metadata does not parse: \(error)")
        }
    }()

    /// An OData request URL (resource path and every query option), parsed and bound against the
    /// sample schema.
    static func url(_ data: UnsafeRawBufferPointer) {
        let text = String(decoding: data, as: UTF8.self)
        _ = try? Binder(schema: schema).bind(text)
        _ = try? Binder(schema: schema).bind(text, serviceRoot: "http://127.0.0.1:8080/")
    }

    /// Stored row bytes (a damaged or hostile `data.mdb` value), decoded as each entity type.
    static func row(_ data: UnsafeRawBufferPointer) {
        for name in ["Products", "SalesOrderItems", "BusinessPartners", "RequestQueue"] {
            guard let type = schema.entityType(ofSet: name) else { continue }
            _ = try? RowCodec(schema: schema, entityType: type).decode(data)
        }
    }

    /// A request or load body: JSON parsed, then read as an entity of a set and as a PATCH body;
    /// and streamed as `load` streams a file, which must give the entities parsing it whole gives.
    static func json(_ data: UnsafeRawBufferPointer) {
        stream(Array(data))
        guard let json = try? JSON.parse(Array(data)) else { return }
        let values = ValueJSON(schema: schema)
        for name in ["Products", "SalesOrderItems", "BusinessPartners"] {
            guard let type = schema.entityType(ofSet: name) else { continue }
            let navigation = Set(type.navigationProperties.map(\.name))
            _ = try? values.properties(from: json, properties: type.properties, navigation: navigation, owner: name)
            if case .array(let items)? = json["value"] {
                for item in items.prefix(64) {
                    _ = try? values.properties(
                        from: item, properties: type.properties, navigation: navigation, owner: name)
                }
            }
        }
    }

    /// `EntityObjectStream` with a chunk size taken from the input: a document that parses whole
    /// streams to the same entities (a scalar is refused); one that does not may stream only as
    /// JSON lines.
    static func stream(_ bytes: [UInt8]) {
        var streamed: [JSON] = []
        let ok =
            (try? EntityObjectStream(bytes: bytes, chunkSize: bytes.count % 13 + 1).forEach {
                streamed.append(try $0.parse())
            }) != nil
        guard let doc = try? JSON.parse(bytes) else { return }
        var expected: [JSON]
        switch doc {
        case .array(let a): expected = a
        case .object:
            // With both `value` and `d` the stream takes whichever comes first; whole, `value` wins.
            if doc["value"] != nil && doc["d"] != nil { return }
            expected = [doc]
            if case .array(let a)? = doc["value"] {
                expected = a
            } else if case .array(let a)? = doc["d"]?["results"] {
                expected = a
            } else if let d = doc["d"], case .array(let a) = d {
                expected = a
            } else if let d = doc["d"], case .object = d {
                expected = [d]
            }
        default:
            precondition(!ok, "a scalar document streamed")
            return
        }
        precondition(
            ok && streamed == expected, "the stream gave \(streamed.count) entities, parsing whole \(expected.count)")
    }

    /// A `$metadata` document (CSDL XML).
    static func csdl(_ data: UnsafeRawBufferPointer) {
        guard let schema = try? CSDL.parse(Array(data)) else { return }
        _ = try? schema.checkStorable(indexCount: 0)
        _ = try? schema.withSystemSets()
    }

    /// A JSON `$batch` document, as `serve` reads it before running anything.
    static func batch(_ data: UnsafeRawBufferPointer) {
        _ = try? BatchDocument.parse(Array(data))
    }

    /// One HTTP request to `serve`'s handling (routing, content negotiation, reads, writes,
    /// `$batch`, Prefer and Repeatability headers), with no socket, on the sample store — created
    /// once per process and kept (writes accumulate; the store is removed at exit). Returns the
    /// status and body (the corpus test looks at them); nil when the method is no HTTP method token.
    @discardableResult
    public static func serve(_ bytes: [UInt8]) async -> (status: Int, body: [UInt8])? {
        let request = ServeRequest(bytes)
        return await served.server.respond(
            method: request.method, target: request.target, headers: request.headers, body: request.body)
    }

    static let served: (server: InMemoryServer, path: String) = {
        var template = Array((NSTemporaryDirectory() + "/offline-store-fuzz-XXXXXX").utf8CString)
        guard let dir = mkdtemp(&template) else { fatalError("no temporary directory for the serve target's store") }
        let path = String(cString: dir)
        atexit { try? FileManager.default.removeItem(atPath: FuzzTargets.served.path) }
        var configuration = SampleData.configuration
        configuration.durability = .noSync
        do {
            let store = try OfflineStore.create(
                at: path + "/store", metadata: Array(SampleData.metadata.utf8), configuration: configuration)
            for set in SampleData.setsInLoadOrder { try store.load(set: set, json: Array(SampleData.json(set).utf8)) }
            var options = ServeOptions()
            options.maxRequestBytes = 1 << 20
            return (InMemoryServer(store: store, options: options), path)
        } catch {
            fatalError("the serve target's sample store: \(error)")
        }
    }()
}

/// A fuzz input read as an HTTP request, loosely: `METHOD TARGET`, then `Name: value` header
/// lines, then an empty line and the body (the bytes after it, as they are). `\r` before a line
/// end is dropped; a head with no empty line is a request without a body.
struct ServeRequest: Sendable {
    var method = "GET", target = "/"
    var headers: [(String, String)] = []
    var body: [UInt8] = []

    init(_ bytes: [UInt8]) {
        var headEnd = bytes.count, bodyStart = bytes.count
        var i = 0
        while i + 1 < bytes.count {
            if bytes[i] == 10, bytes[i + 1] == 10 { headEnd = i; bodyStart = i + 2; break }
            if bytes[i] == 10, bytes[i + 1] == 13, i + 2 < bytes.count, bytes[i + 2] == 10 {
                headEnd = i; bodyStart = i + 3; break
            }
            i += 1
        }
        body = Array(bytes[bodyStart...])
        // Lines split on bytes: as a String, "\r\n" is one Character, not a "\n".
        let lines = bytes[..<headEnd].split(separator: 10, omittingEmptySubsequences: false)
            .map { String(decoding: $0.last == 13 ? $0.dropLast() : $0, as: UTF8.self) }
        if let first = lines.first {
            let parts = first.split(separator: " ", maxSplits: 1)
            if let m = parts.first { method = String(m) }
            if parts.count > 1 { target = String(parts[1]) }
        }
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), String(line[line.index(after: colon)...].drop { $0 == " " })))
        }
    }
}
