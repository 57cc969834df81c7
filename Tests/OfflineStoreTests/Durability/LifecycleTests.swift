import Foundation
import Synchronization
import Testing
@testable import OfflineStore
import Samples

/// The lifecycle stream (`opening → initializing → open`, `populating`, `downloading`,
/// `uploading`, `closed`) and cancellation of refresh and flush against a real `serve` process:
/// a cancelled one leaves a consistent store (`.checksStores`), and the next one finishes.
@Suite(.checksStores) struct LifecycleTests {
    /// Collects a stream's events on a task of its own.
    final class Recorder: Sendable {
        final class Log: Sendable { let events = Mutex<[LifecycleEvent]>([]) }
        let log = Log()
        let done: Task<Void, Never>
        func events<R>(_ body: ([LifecycleEvent]) -> R) -> R { log.events.withLock { body($0) } }

        init(_ stream: AsyncStream<LifecycleEvent>) {
            let log = self.log
            done = Task { for await e in stream { log.events.withLock { $0.append(e) } } }
        }

        var states: [LifecycleState] { events { $0.map(\.state) } }

        /// The states with repeats of the same state (progress) folded into one.
        var transitions: [LifecycleState] {
            states.reduce(into: []) { out, s in if out.last != s { out.append(s) } }
        }

        /// Waits (at most 10 s) until `predicate` holds for the events so far.
        func wait(until predicate: ([LifecycleEvent]) -> Bool) async {
            let deadline = Date().addingTimeInterval(10)
            while !events({ predicate($0) }) && Date() < deadline { try? await Task.sleep(for: .milliseconds(5)) }
        }
    }

    @Test func createLoadAndReleaseReportTheirStates() async throws {
        let lifecycle = Lifecycle()
        let recorder = Recorder(lifecycle.events())
        var store: OfflineStore? = try OfflineStore.create(
            at: tempDir() + "/s", metadata: Array(SampleData.metadata.utf8),
            configuration: SampleData.configuration, lifecycle: lifecycle)
        _ = try store!.load(set: "Products", json: Array(SampleData.json("Products").utf8))
        #expect(lifecycle.current.state == .open)
        let loaded = try store!.count(set: "Products")
        let late = Recorder(lifecycle.events())  // a stream opened later starts at the current state
        store = nil
        await recorder.done.value  // the stream ends after `closed`
        await late.done.value
        #expect(recorder.transitions == [.opening, .initializing, .open, .populating, .open, .closed])
        let populating = recorder.events { $0.filter { $0.state == .populating } }
        #expect(populating.last?.entities == loaded && populating.last?.detail == "Products")
        #expect(late.states == [.open, .closed])
        #expect(Array(lifecycle.history.map(\.state).suffix(2)) == [.open, .closed])
        // Closed is final: a stream asked for now gets `closed` and ends.
        let after = Recorder(lifecycle.events())
        await after.done.value
        #expect(after.states == [.closed])
    }

    @Test func openReportsOpeningThenOpen() async throws {
        let path = tempDir() + "/s"
        _ = try OfflineStore.create(
            at: path, metadata: Array(SampleData.metadata.utf8), configuration: SampleData.configuration)
        let lifecycle = Lifecycle()
        let recorder = Recorder(lifecycle.events())
        do {
            let store = try OfflineStore.open(at: path, lifecycle: lifecycle)
            #expect(store.lifecycle.current.state == .open)
        }
        await recorder.done.value
        #expect(recorder.transitions == [.opening, .open, .closed])
    }

    /// A refresh reports `downloading` with entities and bytes; cancelled after its first group
    /// of pages (16 pages of one entity: `Refresher.groupParts`), it throws `CancellationError`,
    /// logs a cancelled download, leaves a consistent store holding that group and no delta link;
    /// the next refresh reads in full and gives the service's data.
    @Test func refreshReportsDownloadingAndCanBeCancelled() async throws {
        let servedPath = try await ServeTests.sampleStore()
        let request = DefiningRequest(name: "AllProducts", url: "Products")
        let offline = try await RefreshTests.offlineStore([request])
        let recorder = Recorder(offline.lifecycle.events())
        try await withServer(servedPath) { _, server in
            let cancelled = Task {
                try await offline.refresh(serviceRoot: server.url, pageSize: 1) { p in
                    if p.pages > 0 { withUnsafeCurrentTask { $0?.cancel() } }
                }
            }
            let outcome = await cancelled.result
            #expect(throws: CancellationError.self) { try outcome.get() }
            #expect(offline.lifecycle.current.state == .open)
            let partial = try offline.count(set: "Products")
            #expect(partial == 16, "one group of 16 pages of one written before the cancel")
            #expect(try offline.check().isConsistent)
            let events = try offline.entities("EventLog?$filter=Type eq 'Download'")
            #expect(events.last?["Outcome"] == .string("cancelled"), "\(events)")

            let report = try await offline.refresh(serviceRoot: server.url, pageSize: 2)
            #expect(report.requests.first?.mode == .full)
            RefreshTests.expectSame(
                try RefreshTests.contents(offline),
                try RefreshTests.union(try RefreshTests.served(servedPath), [request]),
                "after the refresh that followed the cancelled one")
        }
        let downloading = recorder.events { $0.filter { $0.state == .downloading } }
        #expect(downloading.contains { $0.entities > 0 && $0.bytes > 0 && $0.detail == "AllProducts" })
        #expect(recorder.transitions == [.open, .downloading, .open, .downloading, .open])
    }

    /// A store with `refreshGroupRows` refreshing `items` SalesOrderItems in pages of `pageSize`,
    /// cancelled once its first group is written: the items it then holds (`check` passes), and
    /// the refresh after it must bring the rest.
    static func itemsAfterFirstGroup(items: Int, groupRows: Int, pageSize: Int) async throws -> (OfflineStore, Int) {
        let servedPath = try await ServeTests.sampleStore(items: items)
        var configuration = SampleData.configuration
        configuration.refreshGroupRows = groupRows
        // What is tested is the cancellation, not the idle timeout (30 s), which a whole test run
        // on two cores has reached while serve built the first page of a large count.
        configuration.timeouts.idleSeconds = 600
        configuration.timeouts.requestSeconds = 1_200
        let offline = try OfflineStore.create(
            at: tempDir() + "/offline", metadata: Array(SampleData.metadata.utf8), configuration: configuration)
        try offline.define(name: "Items", url: "SalesOrderItems")
        var first = 0
        try await withServer(servedPath) { _, server in
            let cancelled = Task {
                try await offline.refresh(serviceRoot: server.url, pageSize: pageSize) { p in
                    if p.pages > 0 { withUnsafeCurrentTask { $0?.cancel() } }
                }
            }
            let outcome = await cancelled.result
            #expect(throws: CancellationError.self) { try outcome.get() }
            first = try offline.count(set: "SalesOrderItems")
            #expect(try offline.check().isConsistent)
            let report = try await offline.refresh(serviceRoot: server.url, pageSize: pageSize)
            #expect(report.requests.first?.written == items - first, "the first group's items were there already")
            #expect(try offline.count(set: "SalesOrderItems") == items)
        }
        return (offline, first)
    }

    /// The configuration's `refreshGroupRows` is the size of a full read's transaction: with 200,
    /// a refresh of 1,000 items in pages of 50 cancelled after its first group holds 200 items
    /// (4 pages), where the default (5,000 rows or 16 parts) would hold 800. Out of its range,
    /// or not a whole number, the member is refused; a value other than the default is kept in
    /// the stored configuration, the default is not written.
    @Test func refreshGroupRowsIsTheTransactionOfAFullRead() async throws {
        let (offline, first) = try await Self.itemsAfterFirstGroup(items: 1_000, groupRows: 200, pageSize: 50)
        #expect(first == 200, "one group of 200 rows before the cancel")
        #expect(offline.configuration.refreshGroupRows == 200)
        #expect(offline.configuration.jsonText.contains(#""refreshGroupRows":200"#))
        #expect(!SampleData.configuration.jsonText.contains("refreshGroupRows"))
        let extremes = ["-9223372036854775808", "9223372036854775807", "99999999999999999999", "-1", "0", "1e4"]
        for bad in ["99", "1000001", "5000.5", "\"5000\"", "null"] + extremes {
            #expect("refreshGroupRows \(bad)") {
                try StoreConfiguration(json: Array(#"{"refreshGroupRows":\#(bad)}"#.utf8))
            } throws: { $0 is EntityError && "\($0)".contains("refreshGroupRows must be a whole number of rows") }
        }
        #expect(try StoreConfiguration(json: Array(#"{"refreshGroupRows":100}"#.utf8)).refreshGroupRows == 100)
        #expect(
            try StoreConfiguration(json: Array(#"{"refreshGroupRows":1000000}"#.utf8)).refreshGroupRows == 1_000_000)
    }

    /// Large groups ramp up (`PagePipe`): with `refreshGroupRows` 50,000 the first group of a read
    /// is 5,000 rows, so a read of 12,000 is not one transaction at its end — cancelled after its
    /// first group, the store holds 5,000 items, not 12,000.
    @Test func largeRefreshGroupsRampUp() async throws {
        let (_, first) = try await Self.itemsAfterFirstGroup(items: 12_000, groupRows: 50_000, pageSize: 1_000)
        #expect(first == 5_000, "the first group is 5,000 rows")
    }

    /// A flush reports `uploading` with requests sent; cancelled when its first round trip is
    /// settled (the second one is on its way then: it went when the first was answered), it lets
    /// the second come back, settles it and throws `CancellationError`, with the rest still
    /// queued, none of it marked sent, and a cancelled upload logged; the next flush sends the
    /// rest and the two stores agree.
    @Test func flushReportsUploadingAndCanBeCancelled() async throws {
        let (served, offline) = try await FlushFixture.pair()
        for (n, p) in try offline.entities("Products?$top=6").enumerated() {
            try await offline.update(
                set: "Products", key: [p["ProductID"]!], changes: ["Name": .string("renamed \(n)")])
        }
        #expect(try FlushFixture.queue(offline).count == 6)
        let recorder = Recorder(offline.lifecycle.events())
        let server = try await ServerProcess.start(store: served)
        let cancelled = Task {
            try await offline.flush(serviceRoot: server.url, batchSize: 2) { report in
                if report.succeeded == 2 { withUnsafeCurrentTask { $0?.cancel() } }
            }
        }
        let outcome = await cancelled.result
        #expect(throws: CancellationError.self) { try outcome.get() }
        let left = try FlushFixture.queue(offline)
        #expect(left.count == 2, "two round trips of two settled: the first, and the one on its way at the cancel")
        #expect(
            left.allSatisfy { $0.status == .pending && $0.attempts == 0 }, "the third round's marking is taken back")
        #expect(try offline.check().isConsistent)
        let uploads = try offline.entities("EventLog?$filter=Type eq 'Upload'")
        #expect(uploads.last?["Outcome"] == .string("cancelled"), "\(uploads)")

        let rest = try await offline.flush(serviceRoot: server.url, batchSize: 2)
        #expect(rest.succeeded == 2 && rest.left == 0 && rest.stopped == nil, "\(rest)")
        try FlushFixture.expectInSync(offline, served, "after the flush that followed the cancelled one")
        #expect(await server.stop() == 0)
        let uploading = recorder.events { $0.filter { $0.state == .uploading } }
        #expect(uploading.map(\.requests).contains(2))
        #expect(recorder.transitions == [.open, .uploading, .open, .uploading, .open])
    }
}
