import Foundation
import Metrics
import MetricsTestKit
import Testing
@testable import OfflineStore
import Samples
import Server
import Storage

/// What a store reports through swift-metrics, read back from MetricsTestKit's `TestMetrics`
/// (bootstrapped once for the test process, before these stores are made): commits, their
/// durations and group sizes, the queue's length, a refresh's and a flush's durations and counts,
/// archived errors, failures, and `serve`'s request durations.
@Suite(.checksStores) struct MetricsTests {
    static let metrics: TestMetrics = {
        let m = TestMetrics()
        MetricsSystem.bootstrap(m)
        return m
    }()

    @Test func aStoreReportsCommitsTheQueueRefreshAndFlush() async throws {
        let m = Self.metrics
        let (served, store) = try await FlushFixture.pair()
        let dims = [("store", store.path)]
        let commitsBefore = try m.expectCounter("offline_store_commits", dims).totalValue
        try store.define(name: "Products", url: "Products")
        for n in 0..<3 {
            try await store.update(
                set: "Products", key: [.string("HT-100\(n)")], changes: ["Name": .string("metrics \(n)")])
        }
        #expect(try m.expectCounter("offline_store_commits", dims).totalValue >= commitsBefore + 4)
        #expect(try m.expectTimer("offline_store_commit_duration", dims).values.allSatisfy { $0 > 0 })
        #expect(try m.expectRecorder("offline_store_commit_jobs", dims).values.allSatisfy { $0 >= 1 })
        #expect(try await eventually { try m.expectGauge("offline_store_queue_length", dims).lastValue == 3 })

        let server = try await ServerProcess.start(store: served)
        let refresh = try await store.refresh(serviceRoot: server.url)
        let flush = try await store.flush(serviceRoot: server.url)
        #expect(await server.stop() == 0)
        #expect(
            try m.expectCounter("offline_store_refresh_entities", dims + [("kind", "received")]).totalValue
                == Int64(refresh.received))
        #expect(try m.expectTimer("offline_store_refresh_duration", dims).values.count == 1)
        #expect(try m.expectCounter("offline_store_flush_requests", dims + [("kind", "sent")]).totalValue == 3)
        #expect(try m.expectCounter("offline_store_flush_requests", dims + [("kind", "succeeded")]).totalValue == 3)
        #expect(try m.expectTimer("offline_store_flush_duration", dims).values.count == 1)
        #expect(flush.archived == 0)
        #expect(try m.expectCounter("offline_store_errors_archived", dims).totalValue == 0)
        #expect(try await eventually { try m.expectGauge("offline_store_queue_length", dims).lastValue == 0 })

        // A flush that cannot reach its service: a failure.
        try await store.update(set: "Products", key: [.string("HT-1005")], changes: ["Name": .string("later")])
        let away = try await store.quickFlush(serviceRoot: "http://127.0.0.1:9/", batchSize: 10, connectTimeout: 0.5)
        #expect(away.stopped != nil)
        #expect(try m.expectCounter("offline_store_sync_failures", dims + [("kind", "flush")]).totalValue == 1)
    }

    @Test func servedRequestsAreTimed() async throws {
        let m = Self.metrics
        let (_, store) = try await FlushFixture.pair()
        let server = InMemoryServer(store: store)
        let before =
            m.timers(label: "offline_store_served_request_duration")
            .first {
                $0.dimensions.contains { $0 == ("status", "2xx") } && $0.dimensions.contains { $0 == ("method", "GET") }
            }?
            .values.count ?? 0
        for _ in 0..<3 {
            #expect(await server.respond(method: "GET", target: "/Products", headers: [], body: [])?.status == 200)
        }
        #expect(await server.respond(method: "GET", target: "/NoSuchSet", headers: [], body: [])?.status == 404)
        let ok = try m.expectTimer("offline_store_served_request_duration", [("method", "GET"), ("status", "2xx")])
        #expect(ok.values.count >= before + 3 && ok.values.allSatisfy { $0 > 0 })
        #expect(
            try m.expectTimer("offline_store_served_request_duration", [("method", "GET"), ("status", "4xx")]).values
                .count >= 1)
    }
}
