import Remote
import Sync

/// A test backend around `HTTPBackend` that changes some of its answers: whatever it does not
/// implement itself goes to `inner` unchanged.
protocol WrappingBackend: Backend {
    var inner: HTTPBackend { get }
}

extension WrappingBackend {
    var serviceRoot: String { inner.serviceRoot }

    func send(_ request: BackendRequest) async throws -> BackendResponse { try await inner.send(request) }

    func batch(_ requests: [BackendRequest], headers: [(String, String)]) async throws -> [BackendResponse] {
        try await inner.batch(requests, headers: headers)
    }
}
