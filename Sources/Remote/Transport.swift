import Storage
package import Sync

/// HTTP exchanges with one OData service: what `ODataBackend` renders its changes and reads into.
/// `HTTPTransport` is the real one; a test puts its own around it to watch or change what passes.
package protocol Transport: Sendable {
    /// The service root, ending in `/` (`http://127.0.0.1:8080/`).
    var serviceRoot: String { get }
    /// Sends one request. `url` is relative to the service root (`Products('HT-1')`) or absolute
    /// (an `@odata.nextLink`). Throws `BackendError.transport` when no answer came (connection
    /// refused or reset, timeout): the request may or may not have been applied.
    func send(_ request: WireRequest) async throws -> WireResponse
    /// Sends `requests` as one `$batch` in the service's dialect — a JSON batch (OData 4.01) to a V4
    /// service, `multipart/mixed` to a V2 one; requests with the same `group` form one atomicity
    /// group (a V2 change set). One response per request, in order (a V2 change set that failed
    /// answers every member with its one error). Throws as `send` does, and
    /// `BackendError.badResponse` when the `$batch` itself is not answered 200 (202 for V2).
    func batch(_ requests: [WireRequest], headers: [(String, String)]) async throws -> [WireResponse]
}

/// One HTTP request to the service.
package struct WireRequest: Sendable {
    package var method: String
    package var url: String
    package var headers: [(String, String)]
    package var body: [UInt8]?
    /// The atomicity group of the request inside a `$batch` (nil: none).
    package var group: String?
    /// Its `id` inside a `$batch` (nil: its position, 1-based). Ids must be unique in a batch.
    package var id: String?
    /// Inside a `$batch`: the ids of earlier requests (or groups) that must succeed first; the
    /// service answers 424 without running this one when one of them failed.
    package var dependsOn: [String]
    /// The answer may be large (a page of a read): a body past the transport's limit for memory
    /// goes to a temporary file (`WireResponse.spooled`) instead.
    package var largeAnswer = false
    /// Where a success's body goes as it arrives, instead of into the response (a stream's
    /// download): at most `sinkLimit` bytes, the whole-answer deadline not applying (the idle
    /// timeout bounds each wait).
    package var sink: (any StreamSink)?
    package var sinkLimit = Int.max
    /// The body, read in pieces as it is sent, instead of `body` (a stream's upload): the
    /// whole-exchange deadline grows by a second for each MiB of it.
    package var source: (any StreamSource)?

    package init(
        method: String, url: String, headers: [(String, String)] = [], body: [UInt8]? = nil, group: String? = nil,
        id: String? = nil, dependsOn: [String] = []
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.group = group
        self.id = id
        self.dependsOn = dependsOn
    }

    package func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }
}

/// One HTTP answer of the service.
package struct WireResponse: Sendable {
    package var status: Int
    package var headers: [(String, String)]
    /// The body, unless it is `spooled`.
    package var body: [UInt8]
    /// A large answer to a request that allowed it (`WireRequest.largeAnswer`): the body is
    /// in this unlinked temporary file, and `body` is empty.
    package var spooled: LoadInput?

    package init(status: Int, headers: [(String, String)] = [], body: [UInt8] = [], spooled: LoadInput? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.spooled = spooled
    }

    /// Bytes in the body.
    package var size: Int { spooled?.size ?? body.count }

    /// The body's first `count` bytes at most (from the file, when it is spooled).
    package func head(_ count: Int) -> [UInt8] {
        PageAnswer(status: status, body: body, spooled: spooled).head(count)
    }

    package func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    package var isSuccess: Bool { (200..<300).contains(status) }
}
