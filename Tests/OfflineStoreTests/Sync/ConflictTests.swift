import Foundation
import Testing
@testable import OfflineStore
import Storage

/// Issue 38, items 1–4, against `serve`: two offline copies change the same property of one
/// entity; the second to flush meets 412. Its ErrorArchive entry keeps the conflict whole — the
/// version the change was made on, the local one, the service's (read back when the refusal
/// came) and the properties that differ — in the Swift API, `errors --show` and over HTTP. Each
/// way out works without a refresh: keep mine (retry), take theirs (resolve), merge (change the
/// entity); each leaves the service and the store as the docs say. A delete another copy did
/// first counts as done.
@Suite(.checksStores) struct ConflictTests {
    /// A served store and two offline copies that have refreshed from it (so they hold ETags);
    /// `body` runs while it serves.
    static func twoCopies(
        policy: StoreConfiguration.ConflictPolicy? = nil,
        _ body: (_ http: HTTP, _ url: String, _ served: String, _ mine: OfflineStore, _ theirs: OfflineStore)
            async throws -> Void
    ) async throws {
        let (served, _) = try await FlushFixture.pair(notes: true)
        var configuration = StoreConfiguration(
            definingRequests: FlushFixture.notesSets.map { DefiningRequest(name: $0, url: $0) })
        let theirs = try FlushFixture.notesCopy(configuration, name: "theirs")
        if let policy { configuration.conflictPolicies = ["Notes": policy] }
        let mine = try FlushFixture.notesCopy(configuration, name: "mine")
        try await withServer(served) { http, server in
            _ = try await mine.refresh(serviceRoot: server.url)
            _ = try await theirs.refresh(serviceRoot: server.url)
            #expect(try mine.serverETag(set: "Notes", key: [.int(1)]) != nil)
            try await body(http, server.url, served, mine, theirs)
        }
    }

    /// Both change note 1's title; theirs reaches the service first. Returns my refused request.
    static func conflict(_ url: String, _ mine: OfflineStore, _ theirs: OfflineStore) async throws -> Int64 {
        let (id, report) = try await Self.race(url, mine, theirs)
        #expect(report.archived == 1 && report.refused.count == 1, "\(report)")
        #expect(report.refused.first?.contains("412") == true && report.refused.first?.contains("conflict") == true)
        return id
    }

    /// Both change note 1; theirs is flushed first, then mine. Returns my request and my flush's report.
    static func race(
        _ url: String, _ mine: OfflineStore, _ theirs: OfflineStore
    ) async throws -> (Int64, FlushReport) {
        try await theirs.update(set: "Notes", key: [.int(1)], changes: ["Title": .string("theirs")])
        let id = try #require(
            try await mine.update(
                set: "Notes", key: [.int(1)],
                changes: ["Title": .string("mine"), "Amount": .decimal(EDMDecimal("3.00")!)]
            ).requestID)
        #expect(try await theirs.flush(serviceRoot: url).succeeded == 1)
        return (id, try await mine.flush(serviceRoot: url))
    }

    @Test func theLoserSeesBothVersionsEverywhere() async throws {
        try await Self.twoCopies { http, url, _, mine, theirs in
            let id = try await Self.conflict(url, mine, theirs)
            let c = try #require(try mine.conflict(requestID: id))
            #expect(c.base?["Title"] == .string("first"))
            #expect(c.local?["Title"] == .string("mine") && c.server?["Title"] == .string("theirs"))
            #expect(c.differences == ["Title", "Amount"], "\(c.differences)")
            let kept = try mine.serverETag(set: "Notes", key: [.int(1)])
            #expect(c.serverETag != nil && c.serverETag == kept, "the service's ETag, which a retry sends")
            // The CLI, side by side.
            let shown = try await CLI.run(["errors", "--store", mine.path, "--show", String(id)])
            #expect(shown.status == 0, "\(shown.stderr)")
            #expect(
                shown.stdout.contains("* Title") && shown.stdout.contains("mine") && shown.stdout.contains("theirs"),
                "\(shown.stdout)")
            print(shown.stdout)
            // Over HTTP: the offline store's own serve exposes the ErrorArchive entry.
            _ = http
            try await withServer(mine.path) { local, _ in
                let entry = try await local.get("ErrorArchive(\(id))").object
                #expect((entry["ServerEntity"] as? String)?.contains("theirs") == true, "\(entry)")
                #expect(entry["Differences"] as? String == "Title,Amount")
            }
        }
    }

    @Test func keepMineSendsTheChangeAgainstTheirVersion() async throws {
        try await Self.twoCopies { http, url, served, mine, theirs in
            let id = try await Self.conflict(url, mine, theirs)
            try mine.retryError(requestID: id)
            let again = try await mine.flush(serviceRoot: url)
            #expect(again.succeeded == 1 && again.archived == 0, "\(again)")
            #expect(try await http.get("Notes(1)").object["Title"] as? String == "mine")
            try FlushFixture.expectInSync(mine, served)
        }
    }

    @Test func takeTheirsAdoptsTheServicesVersion() async throws {
        try await Self.twoCopies { _, url, served, mine, theirs in
            let id = try await Self.conflict(url, mine, theirs)
            try mine.resolveError(requestID: id)
            #expect(try mine.get(set: "Notes", key: [.int(1)])?["Title"] == .string("theirs"))
            #expect(try mine.pendingRequestCount() == 0)
            try FlushFixture.expectInSync(mine, served)
        }
    }

    @Test func mergingIsChangingTheEntity() async throws {
        try await Self.twoCopies { http, url, served, mine, theirs in
            _ = try await Self.conflict(url, mine, theirs)
            try await mine.update(set: "Notes", key: [.int(1)], changes: ["Title": .string("theirs and mine")])
            #expect(try FlushFixture.errors(mine).isEmpty, "the change revived the refused request")
            let again = try await mine.flush(serviceRoot: url)
            #expect(again.succeeded == 1 && again.archived == 0, "\(again)")
            let there = try await http.get("Notes(1)").object
            #expect(there["Title"] as? String == "theirs and mine")
            try FlushFixture.expectInSync(mine, served)
        }
    }

    @Test func aDeleteAnotherCopyDidFirstIsDone() async throws {
        try await Self.twoCopies { _, url, served, mine, theirs in
            try await theirs.delete(set: "Tags", key: [.string("red")])
            try await mine.delete(set: "Tags", key: [.string("red")])
            #expect(try await theirs.flush(serviceRoot: url).succeeded == 1)
            let report = try await mine.flush(serviceRoot: url)
            #expect(report.succeeded == 1 && report.archived == 0, "\(report)")
            let outcome = try mine.requestHistory().first
            #expect(outcome?.outcome == "found applied" && outcome?.httpStatus == 404, "\(String(describing: outcome))")
            try FlushFixture.expectInSync(mine, served)
        }
    }

    /// `server-wins` on the set: the conflict resolves itself — mine given up, theirs kept.
    @Test func serverWinsNeedsNoPerson() async throws {
        try await Self.twoCopies(policy: .serverWins) { http, url, served, mine, theirs in
            let (id, report) = try await Self.race(url, mine, theirs)
            #expect(report.archived == 0 && report.resolvedByPolicy == 1 && report.refused.isEmpty, "\(report)")
            #expect(try await http.get("Notes(1)").object["Title"] as? String == "theirs")
            #expect(try mine.get(set: "Notes", key: [.int(1)])?["Title"] == .string("theirs"))
            #expect(try mine.outcome(ofRequest: id)?.outcome == "given up")
            try FlushFixture.expectInSync(mine, served)
        }
    }

    /// `client-wins` on the set: mine is sent again against theirs in the same flush.
    @Test func clientWinsNeedsNoPerson() async throws {
        try await Self.twoCopies(policy: .clientWins) { http, url, served, mine, theirs in
            let (id, report) = try await Self.race(url, mine, theirs)
            #expect(report.archived == 0 && report.succeeded == 1 && report.refused.isEmpty, "\(report)")
            let there = try await http.get("Notes(1)").object
            #expect(there["Title"] as? String == "mine", "\(there)")
            #expect(try mine.outcome(ofRequest: id)?.outcome == "applied")
            try FlushFixture.expectInSync(mine, served)
        }
    }

    /// A set whose `$metadata` declares no concurrency control is warned of at `init` and
    /// `define` (its updates are last-writer-wins); one that declares it is not.
    @Test func aSetWithoutConcurrencyControlIsWarnedOf() async throws {
        let dir = tempDir()
        let annotated = FlushFixture.notesMetadata.replacingOccurrences(
            of: #"<EntitySet Name="Comments" EntityType="Notes.Comment">"#,
            with:
                #"<EntitySet Name="Comments" EntityType="Notes.Comment"><Annotation Term="Org.OData.Core.V1.OptimisticConcurrency"><Collection/></Annotation>"#
        )
        #expect(annotated != FlushFixture.notesMetadata)
        try Data(annotated.utf8).write(to: URL(fileURLWithPath: dir + "/metadata.xml"))
        try Data(#"{"definingRequests":[{"name":"notes","url":"Notes"},{"name":"comments","url":"Comments"}]}"#.utf8)
            .write(to: URL(fileURLWithPath: dir + "/config.json"))
        let made = try await CLI.run([
            "init", "--store", dir + "/s", "--metadata", dir + "/metadata.xml", "--config", dir + "/config.json",
        ])
        #expect(made.status == 0, "\(made.stderr)")
        #expect(made.stderr.contains("declares no concurrency control for Notes ("), "\(made.stderr)")
        #expect(!made.stderr.contains("Comments"), "\(made.stderr)")
        let tags = try await CLI.run(["define", "--store", dir + "/s", "tags", "Tags"])
        #expect(tags.status == 0 && tags.stderr.contains("no concurrency control for Tags"), "\(tags.stderr)")
        let again = try await CLI.run(["define", "--store", dir + "/s", "comments2", "Comments"])
        #expect(again.status == 0 && !again.stderr.contains("concurrency"), "\(again.stderr)")
    }
}
