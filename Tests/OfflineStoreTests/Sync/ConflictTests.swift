import NIOHTTP1
import Foundation
import Testing
@testable import OfflineStore
import Storage
import Synchronization

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

    /// Keep mine: request `id` sent again, against the service's version; mine is the title there.
    static func keepMine(_ id: Int64, _ http: HTTP, _ url: String, _ served: String, _ mine: OfflineStore) async throws
    {
        try mine.retryError(requestID: id)
        let again = try await mine.flush(serviceRoot: url)
        #expect(again.succeeded == 1 && again.archived == 0, "\(again)")
        #expect(try await http.get("Notes(1)").object["Title"] as? String == "mine")
        try FlushFixture.expectInSync(mine, served)
    }

    /// The ways out over HTTP, on the copy's own `serve` (a sidecar's client has only HTTP):
    /// keep mine is `POST ErrorArchive(ID)/OfflineOData.Retry`, take theirs `DELETE
    /// ErrorArchive(ID)`, merge a `PATCH` of the entity.
    @Test func theWaysOutWorkOverHTTP() async throws {
        try await Self.twoCopies { http, url, served, mine, theirs in
            let id = try await Self.conflict(url, mine, theirs)
            try await withServer(mine.path) { local, _ in
                // No such entry, at Int64's extremes too: 404; a key past Int64 or not a number: 400.
                for key in ["999", "0", "-1", String(Int64.max), String(Int64.min)] {
                    let missing = try await local.send(.POST, "ErrorArchive(\(key))/OfflineOData.Retry", body: "")
                    #expect(missing.status == 404, "\(key): \(missing.status) \(missing.text)")
                }
                for key in ["9223372036854775808", "-9223372036854775809", "abc", ""] {
                    let bad = try await local.send(.POST, "ErrorArchive(\(key))/OfflineOData.Retry", body: "")
                    #expect(bad.status == 400 && bad.text.contains("request id"), "\(key): \(bad.status) \(bad.text)")
                }
                let retried = try await local.send(.POST, "ErrorArchive(\(id))/OfflineOData.Retry", body: "")
                #expect(retried.status == 204, "\(retried.status) \(retried.text)")
            }
            #expect(try FlushFixture.errors(mine).isEmpty)
            let kept = try await mine.flush(serviceRoot: url)
            #expect(kept.succeeded == 1 && kept.archived == 0, "\(kept)")
            #expect(try await http.get("Notes(1)").object["Title"] as? String == "mine")
            // Another round, given up over HTTP.
            _ = try await theirs.refresh(serviceRoot: url)
            let again = try await Self.conflict(url, theirs, mine)
            try await withServer(theirs.path) { local, _ in
                let resolved = try await local.send(.DELETE, "ErrorArchive(\(again))")
                #expect(resolved.status == 204, "\(resolved.status) \(resolved.text)")
            }
            #expect(try theirs.get(set: "Notes", key: [.int(1)])?["Title"] == .string("theirs"))
            try FlushFixture.expectInSync(mine, served)
            try FlushFixture.expectInSync(theirs, served)
        }
    }

    @Test func keepMineSendsTheChangeAgainstTheirVersion() async throws {
        try await Self.twoCopies { http, url, served, mine, theirs in
            let id = try await Self.conflict(url, mine, theirs)
            try await Self.keepMine(id, http, url, served, mine)
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

    // MARK: Conflicts a refresh meets

    /// Theirs renames note 1 and flushes; mine renames it too but refreshes before flushing. The
    /// refresh sees the service's new title under a pending change of the same property: the
    /// conflict is kept whole then, as a 412 would keep it at flush — not rebased away (which
    /// would let mine overwrite theirs with the new ETag, unseen).
    @Test func aRefreshThatMeetsAChangeOfTheSamePropertyKeepsTheConflict() async throws {
        try await Self.twoCopies { http, url, served, mine, theirs in
            try await theirs.update(set: "Notes", key: [.int(1)], changes: ["Title": .string("theirs")])
            #expect(try await theirs.flush(serviceRoot: url).succeeded == 1)
            let id = try #require(
                try await mine.update(
                    set: "Notes", key: [.int(1)],
                    changes: ["Title": .string("mine"), "Amount": .decimal(EDMDecimal("3.00")!)]
                ).requestID)
            let refreshed = try await mine.refresh(serviceRoot: url)
            #expect(refreshed.conflicts == 1, "\(refreshed)")
            #expect(refreshed.description.contains("1 conflict with pending changes"), "\(refreshed)")
            let c = try #require(try mine.conflict(requestID: id))
            #expect(c.base?["Title"] == .string("first") && c.local?["Title"] == .string("mine"))
            #expect(c.server?["Title"] == .string("theirs") && c.differences.contains("Title"), "\(c.differences)")
            // Nothing goes until a person decides.
            let held = try await mine.flush(serviceRoot: url)
            #expect(held.sent == 0, "\(held)")
            #expect(try await http.get("Notes(1)").object["Title"] as? String == "theirs")
            // Keep mine: against the service's version.
            try await Self.keepMine(id, http, url, served, mine)
        }
    }

    /// Changes of different properties are no conflict: the refresh puts theirs under mine, and
    /// the flush keeps both.
    @Test func aRefreshThatMeetsOtherPropertiesRebases() async throws {
        try await Self.twoCopies { http, url, served, mine, theirs in
            try await theirs.update(set: "Notes", key: [.int(1)], changes: ["Amount": .decimal(EDMDecimal("9.99")!)])
            #expect(try await theirs.flush(serviceRoot: url).succeeded == 1)
            try await mine.update(set: "Notes", key: [.int(1)], changes: ["Title": .string("mine")])
            let refreshed = try await mine.refresh(serviceRoot: url)
            #expect(refreshed.conflicts == 0 && refreshed.rebased == 1, "\(refreshed)")
            let here = try #require(try mine.get(set: "Notes", key: [.int(1)]))
            #expect(here["Title"] == .string("mine") && here["Amount"] == .decimal(EDMDecimal("9.99")!), "\(here)")
            let flushed = try await mine.flush(serviceRoot: url)
            #expect(flushed.succeeded == 1 && flushed.archived == 0, "\(flushed)")
            let there = try await http.get("Notes(1)").object
            #expect(there["Title"] as? String == "mine" && "\(there["Amount"] ?? "")" == "9.99", "\(there)")
            try FlushFixture.expectInSync(mine, served)
        }
    }

    /// The set's policy settles a conflict a refresh meets as flush would: server-wins gives
    /// mine up at once, client-wins sends mine over theirs at the next flush.
    @Test(arguments: [StoreConfiguration.ConflictPolicy.serverWins, .clientWins])
    func aPolicySettlesAConflictARefreshMeets(_ policy: StoreConfiguration.ConflictPolicy) async throws {
        try await Self.twoCopies(policy: policy) { http, url, served, mine, theirs in
            try await theirs.update(set: "Notes", key: [.int(1)], changes: ["Title": .string("theirs")])
            #expect(try await theirs.flush(serviceRoot: url).succeeded == 1)
            let id = try #require(
                try await mine.update(set: "Notes", key: [.int(1)], changes: ["Title": .string("mine")]).requestID)
            let refreshed = try await mine.refresh(serviceRoot: url)
            #expect(refreshed.conflicts == 1, "\(refreshed)")
            #expect(try FlushFixture.errors(mine).isEmpty)
            let flushed = try await mine.flush(serviceRoot: url)
            #expect(flushed.archived == 0, "\(flushed)")
            let winner = policy == .serverWins ? "theirs" : "mine"
            #expect(try await http.get("Notes(1)").object["Title"] as? String == winner)
            #expect(try mine.get(set: "Notes", key: [.int(1)])?["Title"] == .string(winner))
            #expect(try mine.outcome(ofRequest: id)?.outcome == (policy == .serverWins ? "given up" : "applied"))
            try FlushFixture.expectInSync(mine, served)
        }
    }

    // MARK: A resolver in code

    /// Joins both titles: what a program decides, with the three versions in hand.
    final class JoinTitles: ConflictResolver {
        let seen = Mutex<[OfflineStore.Conflict]>([])
        func resolve(_ c: OfflineStore.Conflict) -> ConflictResolution {
            seen.withLock { $0.append(c) }
            guard case .string(let mine)? = c.local?["Title"], case .string(let theirs)? = c.server?["Title"] else {
                return .manual
            }
            return .merged(["Title": .string("\(theirs) + \(mine)")])
        }
    }

    /// Decides by a fixed resolution.
    struct Always: ConflictResolver {
        let resolution: ConflictResolution
        func resolve(_ c: OfflineStore.Conflict) -> ConflictResolution { resolution }
    }

    /// The resolver gets the whole conflict at flush (a 412) and its merge is sent in the same
    /// flush against the service's version; it overrides the set's policy.
    @Test func aResolverMergesAConflictAtFlush() async throws {
        try await Self.twoCopies(policy: .serverWins) { http, url, served, mine, theirs in
            let resolver = JoinTitles()
            mine.setConflictResolver(resolver, forSet: "Notes")
            let (id, report) = try await Self.race(url, mine, theirs)
            #expect(report.archived == 0 && report.succeeded == 1 && report.refused.isEmpty, "\(report)")
            let seen = resolver.seen.withLock { $0 }
            #expect(seen.count == 1 && seen.first?.requestID == id && seen.first?.entityKey == "1")
            #expect(seen.first?.base?["Title"] == .string("first") && seen.first?.serverETag != nil)
            #expect(try await http.get("Notes(1)").object["Title"] as? String == "theirs + mine")
            #expect(try mine.get(set: "Notes", key: [.int(1)])?["Title"] == .string("theirs + mine"))
            try FlushFixture.expectInSync(mine, served)
        }
    }

    /// The same resolver decides the conflicts a refresh meets; `manual` leaves them for a person,
    /// `takeTheirs` gives the change up.
    @Test(arguments: [Storage.ConflictResolution.manual, .takeTheirs, .keepMine])
    func aResolverDecidesAConflictARefreshMeets(_ resolution: Storage.ConflictResolution) async throws {
        try await Self.twoCopies { http, url, served, mine, theirs in
            mine.setConflictResolver(Always(resolution: resolution), forSet: "Notes")
            try await theirs.update(set: "Notes", key: [.int(1)], changes: ["Title": .string("theirs")])
            #expect(try await theirs.flush(serviceRoot: url).succeeded == 1)
            let id = try #require(
                try await mine.update(set: "Notes", key: [.int(1)], changes: ["Title": .string("mine")]).requestID)
            #expect(try await mine.refresh(serviceRoot: url).conflicts == 1)
            _ = try await mine.flush(serviceRoot: url)
            let there = try await http.get("Notes(1)").object["Title"] as? String
            switch resolution {
            case .manual:
                #expect(try mine.conflict(requestID: id) != nil && there == "theirs")
                try mine.resolveError(requestID: id)
            case .takeTheirs:
                #expect(try there == "theirs" && mine.outcome(ofRequest: id)?.outcome == "given up")
            default:
                #expect(try there == "mine" && mine.outcome(ofRequest: id)?.outcome == "applied")
            }
            mine.setConflictResolver(nil, forSet: "Notes")
            try FlushFixture.expectInSync(mine, served)
        }
    }
}
