import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOPosix
package import OfflineStore

/// `serve`'s request handling without a socket, for the fuzzer (`Fuzz/Targets`): a request is
/// routed and answered exactly as `ODataServer` does it — headers, body, `$batch` — and the
/// response body is written out (a streamed read runs while it is written).
package struct InMemoryServer: Sendable {
    let service: ODataService

    package init(store: OfflineStore, options: ServeOptions = ServeOptions()) {
        let roots = ServiceRoot(host: options.host, publicRoot: nil)
        roots.bound(port: options.port)
        service = ODataService(
            store: store, options: options,
            logger: Logger(label: "offline-store.fuzz") { _ in SwiftLogNoOpLogHandler() }, roots: roots,
            queries: .singleton, sync: nil, csrf: nil)
    }

    /// Answers one request. nil when `method` is no HTTP method token; header names that are no
    /// HTTP field names are left out (a socket's HTTP parser would refuse them before `serve`).
    package func respond(
        method: String, target: String, headers: [(String, String)], body: [UInt8]
    ) async -> (status: Int, body: [UInt8])? {
        guard let method = HTTPRequest.Method(method) else { return nil }
        var fields = HTTPFields()
        for (name, value) in headers {
            if let name = HTTPField.Name(name) { fields.append(HTTPField(name: name, value: value)) }
        }
        let head = HTTPRequest(
            method: method, scheme: "http", authority: "\(service.options.host):\(service.options.port)",
            path: target, headerFields: fields)
        let response = await service.respond(
            to: Request(head: head, body: RequestBody(buffer: ByteBuffer(bytes: body))))
        let collector = Collector()
        do { try await response.body.write(collector) } catch { return (response.status.code, collector.bytes) }
        return (response.status.code, collector.bytes)
    }

    /// Collects a response body.
    private final class Collector: ResponseBodyWriter {
        var bytes: [UInt8] = []
        func write(_ buffer: ByteBuffer) async throws { bytes += buffer.readableBytesView }
        func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}
