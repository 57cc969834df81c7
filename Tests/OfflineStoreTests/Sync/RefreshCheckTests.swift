import Remote
import LMDB
import Foundation
import Testing
@testable import OfflineStore
import Queue
import Sync
import Samples
import Storage

/// A `Backend` that answers every GET of a set with the sample data of that set, in one page.
struct SampleBackend: Transport {
    var serviceRoot: String { "http://sample.invalid/" }

    func send(_ request: WireRequest) async throws -> WireResponse {
        let set = String(request.url.prefix { $0 != "?" && $0 != "(" })
        guard SampleData.setsInLoadOrder.contains(set) else { return WireResponse(status: 404) }
        return WireResponse(status: 200, body: Array(SampleData.json(set).utf8))
    }

    func batch(_ requests: [WireRequest], headers: [(String, String)]) async throws -> [WireResponse] {
        throw BackendError.badResponse("no batches here")
    }
}

/// `check` reports each kind of damage to the defining requests' membership and refresh state.
@Suite struct RefreshCheckTests {
    /// An offline store whose request "P" (all products) was refreshed from the sample data.
    static func refreshedStore() async throws -> OfflineStore {
        let store = try OfflineStore.create(
            at: tempDir() + "/offline", metadata: Array(SampleData.metadata.utf8),
            configuration: SampleData.configuration)
        try store.define(name: "P", url: "Products")
        let report = try await store.refresh(backend: SampleBackend())
        #expect(report.requests.first?.written == 24)
        #expect(try store.check().isConsistent)
        return store
    }

    static func damage(_ body: @escaping @Sendable (EntityStore, WriteView) throws -> Void) async throws -> [String] {
        let store = try await refreshedStore()
        let entities = store.entities
        _ = try await entities.write { t in try body(entities, t) }
        return try store.check().problems
    }

    static let product = EntityStore.entityKey(set: "Products", keyBytes: try! KeyCodec.encode([.string("HT-1000")]))

    @Test func aMembershipEntryWithoutItsByEntityTwin() async throws {
        let problems = try await Self.damage { s, t in
            try t.delete(s.membershipByEntity, Self.product + Array("P".utf8))
        }
        #expect(problems.contains { $0.contains("has no membership/by-entity entry") }, "\(problems)")
    }

    @Test func aByEntityEntryWithoutItsMembershipTwin() async throws {
        let problems = try await Self.damage { s, t in
            try t.put(s.membershipByEntity, Self.product + Array("Q".utf8), [])
        }
        #expect(problems.contains { $0.contains("has no membership entry") }, "\(problems)")
    }

    @Test func anEntryOfAnUndefinedRequest() async throws {
        let problems = try await Self.damage { s, t in
            try t.put(s.membership, Array("Gone".utf8) + [0] + Self.product, [0, 0, 0, 0, 0, 0, 0, 1])
            try t.put(s.membershipByEntity, Self.product + Array("Gone".utf8), [])
        }
        #expect(problems.contains { $0.contains("'Gone', which is not a defining request") }, "\(problems)")
    }

    @Test func anEntryThatDoesNotDecode() async throws {
        let problems = try await Self.damage { s, t in
            try t.put(s.membership, Array("P".utf8) + [0, 0x7F, 1, 2], [0, 0, 0, 0, 0, 0, 0, 1])
            try t.put(s.membership, Array("P".utf8) + [0] + Self.product, [1, 2, 3])
            try t.put(s.membershipByEntity, [0x7F, 0x7F], [])
            try t.put(s.membership, Array("P-without-separator".utf8), [])
        }
        #expect(problems.contains { $0.contains("does not decode as an entity set and key") }, "\(problems)")
        #expect(problems.contains { $0.contains("not a generation") }, "\(problems)")
        #expect(problems.contains { $0.contains("membership/by-entity: an entry does not decode") }, "\(problems)")
        #expect(problems.contains { $0.contains("has no name separator") }, "\(problems)")
    }

    @Test func anEntryOfAMissingEntity() async throws {
        let problems = try await Self.damage { s, t in _ = try s.set("Products").delete(t, key: [.string("HT-1000")]) }
        #expect(problems.contains { $0.contains("which does not exist and has no pending delete") }, "\(problems)")
    }

    @Test func aMissingEntityWithAPendingDeleteIsFine() async throws {
        let store = try await Self.refreshedStore()
        try await store.delete(set: "Products", key: [.string("HT-1000")])
        #expect(try store.check().isConsistent)
    }

    @Test func refreshStateOfAnUndefinedRequest() async throws {
        let problems = try await Self.damage { s, t in
            try t.put(s.meta, Array("delta/Nope".utf8), Array("Products?$deltatoken=1".utf8))
            try t.put(s.meta, Array("refresh/generation/Nope".utf8), [0, 0, 0, 0, 0, 0, 0, 1])
            try t.put(s.meta, Array("refresh/generation/P".utf8), [1])
        }
        #expect(problems.contains { $0.contains("'delta/Nope' names no defining request") }, "\(problems)")
        #expect(problems.contains { $0.contains("'refresh/generation/Nope' names no defining request") }, "\(problems)")
        #expect(problems.contains { $0.contains("'refresh/generation/P' is not a generation") }, "\(problems)")
    }

    /// `refresh/untracked/<name>`: the status with which the service refused change tracking.
    @Test func untrackedStateOfAnUndefinedRequestOrNotAStatus() async throws {
        let problems = try await Self.damage { s, t in
            try t.put(s.meta, Array("refresh/untracked/Nope".utf8), Array("400".utf8))
            try t.put(s.meta, Array("refresh/untracked/P".utf8), Array("tracked".utf8))
        }
        #expect(problems.contains { $0.contains("'refresh/untracked/Nope' names no defining request") }, "\(problems)")
        #expect(problems.contains { $0.contains("'refresh/untracked/P' is not an HTTP status") }, "\(problems)")
        let fine = try await Self.damage { s, t in
            try t.put(s.meta, Array("refresh/untracked/P".utf8), Array("501".utf8))
        }
        #expect(fine.isEmpty, "\(fine)")
    }

    @Test func theToolsCheckReportsIt() async throws {
        let store = try await Self.refreshedStore()
        let entities = store.entities
        _ = try await entities.write { t in try t.delete(entities.membershipByEntity, Self.product + Array("P".utf8)) }
        let path = store.path
        let result = try await CLI.run(["check", "--store", path])
        #expect(result.status == 1 && result.stdout.contains("membership"), "\(result.stdout)")
    }
}
