import Remote
import Sync

/// A test transport around `HTTPTransport` that changes some of its answers: whatever it does not
/// implement itself goes to `inner` unchanged.
protocol WrappingBackend: Transport {
    var inner: HTTPTransport { get }
}

extension WrappingBackend {
    var serviceRoot: String { inner.serviceRoot }

    func send(_ request: WireRequest) async throws -> WireResponse { try await inner.send(request) }

    func batch(_ requests: [WireRequest], headers: [(String, String)]) async throws -> [WireResponse] {
        try await inner.batch(requests, headers: headers)
    }
}
