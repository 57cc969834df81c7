import TestSupport
import Foundation
import Logging
import ServiceLifecycle
import Testing
@testable import OfflineStore
import Samples
import Storage

/// `SyncService` against a real `serve`: rounds of refresh and flush in a `ServiceGroup`, a
/// graceful shutdown that leaves the store consistent, longer waits while the service is away, and
/// `syncNow()`. Waits allow 300 s: in a full CI run beside the soak suites a round once took over
/// 20 s.
@Suite(.checksStores) struct SyncServiceTests {

    static let logger = Logger(label: "SyncServiceTests")

    @Test func roundsRefreshAndFlushUntilAGracefulShutdown() async throws {
        let (served, store) = try await FlushFixture.pair()
        try store.define(name: "Products", url: "Products")
        try await store.update(
            set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("from the service")])
        let server = try await ServerProcess.start(store: served)
        let sync = SyncService(store: store, serviceRoot: server.url, interval: .milliseconds(50), logger: Self.logger)
        let group = ServiceGroup(services: [sync], logger: Self.logger)
        let running = Task { try await group.run() }
        #expect(try await eventually(within: 300) { sync.status.rounds >= 1 })
        let s = sync.status
        #expect(s.failures == 0 && s.lastError == nil && s.nextDelay == .milliseconds(50), "\(s)")
        #expect(s.lastFlush?.succeeded == 1 && s.lastRefresh != nil, "the change went in the first round: \(s)")
        #expect(try store.pendingRequestCount() == 0)
        await group.triggerGracefulShutdown()
        try await running.value
        let rounds = sync.status.rounds
        try await Task.sleep(for: .milliseconds(200))
        #expect(sync.status.rounds == rounds, "a round after the shutdown")
        #expect(try store.check().isConsistent)
        #expect(await server.stop() == 0)
        try FlushFixture.expectInSync(store, served)
    }

    @Test func aServiceThatIsAwayIsTriedLessOften() async throws {
        let (_, store) = try await FlushFixture.pair()
        try store.define(name: "Products", url: "Products")
        let sync = SyncService(
            store: store, serviceRoot: "http://127.0.0.1:9/", interval: .milliseconds(20),
            maxBackoff: .milliseconds(50), logger: Self.logger, connectTimeout: 0.5)
        let running = Task { try await sync.run() }
        #expect(try await eventually(within: 300) { sync.status.failures >= 1 })
        #expect(sync.status.nextDelay == .milliseconds(40) || sync.status.failures > 1, "20 ms doubled: \(sync.status)")
        #expect(try await eventually(within: 300) { sync.status.failures >= 2 })
        let s = sync.status
        #expect(s.lastError != nil && s.nextDelay == .milliseconds(50), "20 ms doubled twice, at most 50: \(s)")
        running.cancel()
        try await running.value
        #expect(try store.check().isConsistent)
    }

    @Test func syncNowRunsARoundWithoutWaitingForTheInterval() async throws {
        let (served, store) = try await FlushFixture.pair()
        try store.define(name: "Products", url: "Products")
        let server = try await ServerProcess.start(store: served)
        let sync = SyncService(store: store, serviceRoot: server.url, interval: .seconds(3600), logger: Self.logger)
        let running = Task { try await sync.run() }
        #expect(try await eventually(within: 300) { sync.status.rounds == 1 })
        try await store.update(set: "Products", key: [.string("HT-1002")], changes: ["Name": .string("now")])
        sync.syncNow()
        #expect(try await eventually(within: 300) { sync.status.rounds == 2 })
        #expect(sync.status.lastFlush?.succeeded == 1)
        running.cancel()
        try await running.value
        #expect(await server.stop() == 0)
    }

    /// Extreme intervals: zero and negative ones are taken as `shortestInterval`, a `maxBackoff`
    /// below the interval as the interval, and the longest waits do not overflow.
    @Test(.runsOffThePool) func extremeIntervalsAreBounded() throws {
        let (_, store) = try FlushFixture.pair()
        for bad in [Duration.zero, .seconds(-5), .nanoseconds(1)] {
            let s = SyncService(store: store, interval: bad)
            #expect(s.interval == SyncService.shortestInterval && s.status.nextDelay == SyncService.shortestInterval)
        }
        let s = SyncService(store: store, interval: .seconds(60), maxBackoff: .seconds(1))
        #expect(s.maxBackoff == .seconds(60))
        let huge = SyncService(store: store, interval: .seconds(Int64.max / 4), maxBackoff: .seconds(Int64.max / 2))
        #expect(huge.maxBackoff >= huge.interval)
    }
}
