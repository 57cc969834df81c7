import Foundation
import Testing
@testable import OfflineStore
@testable import Queue
@testable import Sync
import Remote
import Storage

/// `serve` behind a backend that holds back the requests of one entity and answers them 423
/// (locked), as SAP answers a document another user is editing: the service never saw them.
final class LockingBackend: Transport, @unchecked Sendable {
    // @unchecked: the mutable state is guarded by `lock`.
    let inner: HTTPTransport
    let locked: String
    private let lock = NSLock()
    private var _held = 0
    var held: Int { lock.withLock { _held } }

    init(_ serviceRoot: String, locking url: String) {
        inner = HTTPTransport(serviceRoot: serviceRoot, retries: 0)
        locked = url
    }

    var serviceRoot: String { inner.serviceRoot }
    func send(_ request: WireRequest) async throws -> WireResponse { try await inner.send(request) }

    func batch(_ requests: [WireRequest], headers: [(String, String)]) async throws -> [WireResponse] {
        let passed = requests.filter { $0.url != locked }
        var answers = passed.isEmpty ? [] : try await inner.batch(passed, headers: headers)
        var out: [WireResponse] = []
        for r in requests {
            if r.url == locked {
                lock.withLock { _held += 1 }
                let body = #"{"error":{"code":"/IWBEP/CX_MGW_BUSI_EXCEPTION","message":"locked by user OTHER"}}"#
                out.append(WireResponse(status: 423, body: Array(body.utf8)))
            } else {
                out.append(answers.removeFirst())
            }
        }
        return out
    }

    func shutdown() async { try? await inner.shutdown() }
}

/// 423 (locked) leaves the request queued instead of archiving it, and the rest goes through;
/// the next flush, once the lock is gone, sends it — once.
@Suite(.checksStores) struct LockedRequestTests {
    @Test func aLockedRequestStaysQueuedAndTheRestGoesThrough() async throws {
        let (served, store) = try await FlushFixture.pair()
        try await store.update(set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("locked one")])
        try await store.update(set: "Products", key: [.string("HT-1002")], changes: ["Name": .string("free one")])
        try await withServer(served) { http, server in
            let backend = LockingBackend(server.url, locking: "Products('HT-1001')")
            let first = try await store.flush(backend: backend, batchSize: 10)
            await backend.shutdown()
            #expect(first.succeeded == 1 && first.archived == 0 && first.left == 1, "\(first)")
            #expect(backend.held >= 1)
            #expect(try FlushFixture.errors(store).isEmpty)
            #expect((try await http.get("Products('HT-1002')").object["Name"] as? String) == "free one")
            #expect((try await http.get("Products('HT-1001')").object["Name"] as? String) != "locked one")
            // The lock is gone: the next flush sends it.
            let second = try await store.flush(serviceRoot: server.url)
            #expect(second.succeeded == 1 && second.left == 0, "\(second)")
            #expect((try await http.get("Products('HT-1001')").object["Name"] as? String) == "locked one")
        }
        #expect(try store.pendingRequestCount() == 0)
    }
}
