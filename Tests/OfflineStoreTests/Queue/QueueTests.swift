import Foundation
import Testing
import TestSupport
@testable import OfflineStore
import Samples
@testable import Queue
@testable import Sync
@testable import Storage

/// The request queue through the public API: each change and its request in one transaction,
/// the collapse rules, dependencies, undo, bad input.
@Suite(.checksStores) struct QueueTests {
    static let pen: Properties = [
        "ProductID": .string("N-1"), "Name": .string("Pen"), "Price": .decimal(EDMDecimal("1.50")!),
    ]

    func requests(_ store: OfflineStore) throws -> [RequestRecord] {
        try store.entities("RequestQueue?$orderby=RequestID").map { try RequestRecord($0) }
    }

    @Test(.runsOffThePool) func changesAreStoredAndQueuedTogether() throws {
        let store = try makeSampleStore(optimize: false)
        let created = try store.create(set: "Products", entity: Self.pen, options: .init(customTag: "new"))
        let updated = try store.update(
            set: "Products", key: [.string("HT-1001")], changes: ["Price": .decimal(EDMDecimal("700.00")!)],
            options: .init(customHeaders: ["X-Why": "sale"]))
        let deleted = try store.delete(
            set: "Products", key: [.string("HT-1002")], options: .init(transactionID: "t1", uploadCategory: "c"))
        #expect(created.requestID == 1 && updated.requestID == 2 && deleted.requestID == 3)
        // Reads see local changes at once.
        #expect(try store.get(set: "Products", key: [.string("N-1")])?["Name"] == .string("Pen"))
        #expect(try store.get(set: "Products", key: [.string("HT-1001")])?["Price"] == .decimal(EDMDecimal("700.00")!))
        #expect(try store.get(set: "Products", key: [.string("HT-1002")]) == nil)
        let q = try requests(store)
        #expect(q.map(\.method) == [.create, .update, .delete])
        #expect(q.map(\.entityKey) == ["'N-1'", "'HT-1001'", "'HT-1002'"])
        #expect(q[0].customTag == "new" && q[0].body?.contains(#""Price":1.50"#) == true)
        #expect(q[1].body == #"{"Price":700.00}"#)
        #expect(q[1].customHeaders == ["X-Why": "sale"])
        #expect(q[2].body == nil && q[2].transactionID == "t1" && q[2].uploadCategory == "c")
        #expect(Set(q.map(\.repeatabilityID)).count == 3)
        #expect(q.allSatisfy { $0.status == .pending && $0.attempts == 0 })
        // The queue is an ordinary set for the query engine.
        let tagged = try store.entities(
            "RequestQueue?$filter=CustomTag eq 'new' or Method eq 'DELETE'&$orderby=RequestID desc&$select=RequestID")
        #expect(tagged.map { $0["RequestID"] } == [.int(3), .int(1)])
        #expect(
            try store.entities("RequestQueue?$filter=EntitySet eq 'Products' and startswith(EntityKey,'''HT')").count
                == 2)
    }

    @Test(.runsOffThePool) func requestIDsOnlyGrowEvenAfterTheQueueEmpties() throws {
        let store = try makeSampleStore()
        #expect(try store.create(set: "Products", entity: Self.pen).requestID == 1)
        #expect(try store.delete(set: "Products", key: [.string("N-1")]).requestID == nil)  // cancelled
        #expect(try store.pendingRequestCount() == 0)
        #expect(try store.create(set: "Products", entity: Self.pen).requestID == 2)
    }

    @Test(.runsOffThePool) func badInputChangesNothingAndQueuesNothing() throws {
        let store = try makeSampleStore()
        try store.update(set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("x")])
        let before = try store.stats().sets.map(\.entities)
        let queued = try requests(store)
        let bad: [OfflineStore.Change] = [
            .create(set: "Products", entity: ["ProductID": .string("HT-1001")]),  // duplicate key
            .create(set: "Products", entity: ["ProductID": .int(5)]),  // key of the wrong type
            .create(set: "Products", entity: ["ProductID": .string("X"), "Pric": .int(1)]),  // unknown property
            .create(set: "Products", entity: ["ProductID": .string("X"), "Price": .string("1")]),  // type mismatch
            .create(set: "Products", entity: ["ProductID": .string(String(repeating: "x", count: 600))]),  // too long
            .update(set: "Products", key: [.string("nope")], changes: ["Name": .string("x")]),  // no such entity
            .update(set: "Products", key: [.string("HT-1001")], changes: ["ProductID": .string("Y")]),  // key change
            .update(set: "Products", key: [.null], changes: ["Name": .string("x")]),  // null key
            .replace(set: "Products", key: [.string("nope")], entity: ["Name": .string("x")]),
            .delete(set: "Products", key: [.string("nope")]),
            .delete(set: "Nope", key: [.string("x")]),
            .create(set: "RequestQueue", entity: ["RequestID": .int(99)]),  // the store's own set
        ]
        for change in bad {
            #expect(throws: (any Error).self, "\(change)") { try store.apply([change]) }
            // And in a batch after a good change: the good one is undone with it.
            #expect(throws: (any Error).self) {
                try store.apply([.create(set: "Products", entity: ["ProductID": .string("OK-1")]), change])
            }
        }
        #expect(try store.stats().sets.map(\.entities) == before)
        #expect(try requests(store) == queued)
        #expect(try store.get(set: "Products", key: [.string("OK-1")]) == nil)
    }

    @Test func batchIsOneTransaction() async throws {
        let store = try await makeSampleStore()
        let commits = store.entities.environment.commitCount
        let receipts = try await store.apply(
            (0..<100).map { .create(set: "Products", entity: ["ProductID": .string("B-\($0)")]) })
        #expect(receipts.compactMap(\.requestID) == Array(1...100))
        #expect(store.entities.environment.commitCount == commits + 1)
    }

    // MARK: Collapse, end to end

    /// Every row of the collapse table, on a real store: the queue after two changes of one entity.
    @Test(
        .runsOffThePool,
        arguments: [
            // (first, second, methods left in the queue, which bodies)
            ("create", "update", ["POST"]),
            ("create", "replace", ["POST"]),
            ("create", "delete", []),
            ("update", "update", ["PATCH"]),
            ("update", "replace", ["PUT"]),
            ("update", "delete", ["DELETE"]),
            ("replace", "update", ["PUT"]),
            ("replace", "replace", ["PUT"]),
            ("replace", "delete", ["DELETE"]),
            ("delete", "create", ["PUT"]),
        ])
    func collapseTable(first: String, second: String, expected: [String]) throws {
        for optimize in [true, false] {
            let store = try makeSampleStore(optimize: optimize)
            let key: [Value] = [.string(first == "create" ? "N-1" : "HT-1001")]
            func change(_ kind: String, _ tag: String) throws {
                let options = ChangeOptions(customTag: tag, customHeaders: ["H": tag, "H-\(tag)": "1"])
                switch kind {
                case "create":
                    try store.create(
                        set: "Products", entity: ["ProductID": key[0], "Name": .string("created")], options: options)
                case "update":
                    try store.update(
                        set: "Products", key: key, changes: ["Name": .string("updated-\(tag)")], options: options)
                case "replace":
                    try store.replace(
                        set: "Products", key: key, entity: ["Name": .string("replaced-\(tag)")], options: options)
                default: try store.delete(set: "Products", key: key, options: options)
                }
            }
            try change(first, "a")
            try change(second, "b")
            let q = try requests(store)
            if optimize {
                #expect(q.map(\.method.rawValue) == expected, "\(first) + \(second)")
                if let r = q.first, r.method != .delete {
                    #expect(r.customTag == "a#b", "\(first) + \(second): tags")
                    #expect(r.customHeaders == ["H": "b", "H-a": "1", "H-b": "1"], "\(first) + \(second): headers")
                    // The surviving request carries the entity as it now is.
                    let stored = try store.get(set: "Products", key: key)!
                    let body = try store.requestQueue.body(of: r)
                    for (k, v) in body { #expect(stored[k] ?? .null == v, "\(first) + \(second): \(k)") }
                }
            } else {
                #expect(q.count == 2, "\(first) + \(second) without optimization")
            }
        }
    }

    @Test(.runsOffThePool) func collapseNeverTouchesSentNonMergeableOrOtherTransactions() throws {
        let store = try makeSampleStore()
        let key: [Value] = [.string("HT-1001")]
        try store.update(set: "Products", key: key, changes: ["Name": .string("1")], options: .init(nonMergeable: true))
        try store.update(set: "Products", key: key, changes: ["Name": .string("2")])
        try store.update(set: "Products", key: key, changes: ["Name": .string("3")], options: .init(nonMergeable: true))
        try store.update(set: "Products", key: key, changes: ["Name": .string("4")], options: .init(transactionID: "t"))
        try store.update(
            set: "Products", key: key, changes: ["Name": .string("5")], options: .init(uploadCategory: "c"))
        #expect(try requests(store).count == 5)
        let last = try requests(store).last!.id
        try store.entities.write { t in try RequestQueue(store: store.entities).markSent(t, id: last) }
        try store.update(
            set: "Products", key: key, changes: ["Name": .string("6")], options: .init(uploadCategory: "c"))
        #expect(try requests(store).count == 6)
        #expect(try requests(store).map(\.status) == [.pending, .pending, .pending, .pending, .sent, .pending])
    }

    // MARK: Dependencies

    @Test(.runsOffThePool) func childCreatesDependOnTheirParentsCreate() throws {
        let store = try makeSampleStore()
        let parent = try store.create(
            set: "BusinessPartners", entity: ["BusinessPartnerID": .string("P-1"), "CompanyName": .string("New")])
        let child = try store.create(
            set: "Products", entity: ["ProductID": .string("C-1"), "SupplierID": .string("P-1")])
        let r = try requests(store)
        #expect(r.first { $0.id == child.requestID }?.dependencies == [parent.requestID!])
        // The parent's create has a dependent: deleting the parent does not cancel it away.
        try store.delete(set: "BusinessPartners", key: [.string("P-1")])
        #expect(try requests(store).map(\.method) == [.create, .create, .delete])
        // A child created first, then pointed at a parent created after it: the update stays behind the parent.
        try store.create(set: "Products", entity: ["ProductID": .string("C-2")])
        let p2 = try store.create(
            set: "BusinessPartners", entity: ["BusinessPartnerID": .string("P-2"), "CompanyName": .string("Later")])
        try store.update(set: "Products", key: [.string("C-2")], changes: ["SupplierID": .string("P-2")])
        let tail = try requests(store).suffix(3)
        #expect(tail.map(\.method) == [.create, .create, .update])
        #expect(tail.last!.dependencies == [p2.requestID!])
        #expect(tail.last!.id > p2.requestID!)
    }

    // MARK: Undo

    @Test(.runsOffThePool) func undoRestoresTheServerImage() throws {
        let store = try makeSampleStore()
        let original = try store.get(set: "Products", key: [.string("HT-1001")])!
        try store.update(set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("x")])
        try store.update(
            set: "Products", key: [.string("HT-1001")], changes: ["Price": .null], options: .init(nonMergeable: true))
        try store.delete(set: "Products", key: [.string("HT-1002")])
        let deleted = try #require(try store.entities("Products?$filter=ProductID eq 'HT-1003'").first)
        try store.delete(set: "Products", key: [.string("HT-1003")])
        // delete + create = PUT
        try store.create(set: "Products", entity: ["ProductID": .string("HT-1003"), "Name": .string("again")])
        try store.create(set: "Products", entity: Self.pen)
        #expect(try store.undo(set: "Products", key: [.string("HT-1001")]).count == 2)
        #expect(try store.get(set: "Products", key: [.string("HT-1001")]) == original)
        try store.undo(set: "Products", key: [.string("HT-1002")])
        #expect(try store.get(set: "Products", key: [.string("HT-1002")]) != nil)
        try store.undo(set: "Products", key: [.string("HT-1003")])
        #expect(try store.get(set: "Products", key: [.string("HT-1003")]) == deleted)
        try store.undo(set: "Products", key: [.string("N-1")])
        #expect(try store.get(set: "Products", key: [.string("N-1")]) == nil)
        #expect(try store.pendingRequestCount() == 0)
        #expect(try store.undo(set: "Products", key: [.string("HT-1001")]).isEmpty)
    }

    @Test(.runsOffThePool) func undoTakesDependentsAlongAndRefusesSentRequests() throws {
        let store = try makeSampleStore()
        try store.create(
            set: "BusinessPartners", entity: ["BusinessPartnerID": .string("P-1"), "CompanyName": .string("New")])
        try store.create(set: "Products", entity: ["ProductID": .string("C-1"), "SupplierID": .string("P-1")])
        try store.update(set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("unrelated")])
        #expect(try store.undo(set: "BusinessPartners", key: [.string("P-1")]) == [1, 2])
        #expect(try store.get(set: "Products", key: [.string("C-1")]) == nil)
        #expect(try requests(store).map(\.id) == [3])
        try store.entities.write { t in try RequestQueue(store: store.entities).markSent(t, id: 3) }
        #expect(throws: EntityError.self) { try store.undo(set: "Products", key: [.string("HT-1001")]) }
    }

    // MARK: Local state, ErrorArchive, EventLog

    @Test(.runsOffThePool) func localStateFunctionsInFilter() throws {
        let store = try makeSampleStore()
        try store.create(set: "Products", entity: Self.pen)
        try store.update(set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("x")])
        let failed = try store.update(set: "Products", key: [.string("HT-1003")], changes: ["Name": .string("y")])
        try store.archiveError(requestID: failed.requestID!, httpStatus: 400, message: "bad name")
        func ids(_ filter: String) throws -> [String] {
            try store.entities("Products?$filter=\(filter)&$orderby=ProductID").map { "\($0["ProductID"]!)" }
        }
        let s = { (x: String) in "string(\"\(x)\")" }
        #expect(try ids("offline.isLocal()") == [s("N-1")])
        #expect(try ids("sap.isLocal()") == [s("N-1")])
        #expect(try ids("offline.hasPendingChanges()") == [s("HT-1001"), s("HT-1003"), s("N-1")])
        #expect(try ids("offline.inErrorState()") == [s("HT-1003")])
        #expect(try ids("not offline.hasPendingChanges() and startswith(ProductID,'HT-100')").count == 8)
        #expect(
            try ids("offline.hasPendingChanges() and not offline.isLocal() and not sap.inErrorState()") == [
                s("HT-1001")
            ])
        // Inside $expand too (entities reached by navigation).
        var text = ""
        try store.query(
            "BusinessPartners('0100000001')?$expand=Products($filter=offline.hasPendingChanges();$select=ProductID)"
        ) { text += $0 }
        #expect(text.contains("HT-1001") && !text.contains("HT-1017"), "\(text)")
        #expect(throws: QueryError.self) { try store.entities("Products?$filter=offline.isLocal(1)") }
    }

    @Test(.runsOffThePool) func errorArchiveHoldsRefusalsAndTheirDependentsUntilResolved() throws {
        let store = try makeSampleStore()
        let parent = try store.create(
            set: "BusinessPartners", entity: ["BusinessPartnerID": .string("P-1"), "CompanyName": .string("New")],
            options: .init(customTag: "parent"))
        let child = try store.create(
            set: "Products", entity: ["ProductID": .string("C-1"), "SupplierID": .string("P-1")])
        let later = try store.update(
            set: "BusinessPartners", key: [.string("P-1")], changes: ["Country": .string("US")],
            options: .init(nonMergeable: true))
        let other = try store.update(set: "Products", key: [.string("HT-1001")], changes: ["Name": .string("fine")])
        let archived = try store.archiveError(
            requestID: parent.requestID!, httpStatus: 409, message: "conflict", code: "DUP")
        #expect(archived == [parent.requestID!, child.requestID!, later.requestID!])
        let rows = try store.entities("ErrorArchive?$orderby=RequestID")
        #expect(rows.count == 3)
        #expect(
            rows[0]["HTTPStatusCode"] == .int(409) && rows[0]["Code"] == .string("DUP")
                && rows[0]["CustomTag"] == .string("parent"))
        #expect(
            rows[0]["AffectedEntity"] == .string("BusinessPartners('P-1')")
                && rows[0]["RequestMethod"] == .string("POST"))
        #expect(rows[1]["CausedBy"] == .int(parent.requestID!) && rows[2]["CausedBy"] == .int(parent.requestID!))
        #expect(try requests(store).first { $0.id == other.requestID }?.status == .pending)
        // Resolving gives the change up: the parent, its child and its later update go; the rest stays.
        let dropped = try store.resolveError(requestID: parent.requestID!)
        #expect(dropped == [parent.requestID!, child.requestID!, later.requestID!])
        #expect(try store.get(set: "BusinessPartners", key: [.string("P-1")]) == nil)
        #expect(try store.get(set: "Products", key: [.string("C-1")]) == nil)
        #expect(try store.entities("ErrorArchive").isEmpty)
        #expect(try requests(store).map(\.id) == [other.requestID!])
        // resolveAll, on a refused update of a server entity: its server image returns.
        let original = try store.get(set: "Products", key: [.string("HT-1002")])
        let refused = try store.update(
            set: "Products", key: [.string("HT-1002")], changes: ["Name": .string("refused")])
        try store.archiveError(requestID: refused.requestID!, httpStatus: 400, message: "no")
        #expect(try store.resolveAllErrors() == [refused.requestID!])
        #expect(try store.get(set: "Products", key: [.string("HT-1002")]) == original)
    }

    @Test(.runsOffThePool) func eventLogKeepsTheLastHundred() throws {
        let store = try makeSampleStore(data: false)
        let queue = store.requestQueue
        try store.entities.write { t in
            for n in 0..<130 {
                try queue.logEvent(
                    t, type: n % 2 == 0 ? "Upload" : "Download", startedAt: .now, finishedAt: .now,
                    outcome: "succeeded", requests: n)
            }
        }
        let events = try store.entities("EventLog?$orderby=EventID")
        #expect(events.count == 100)
        #expect(events.first?["EventID"] == .int(31) && events.last?["EventID"] == .int(130))
    }

    // MARK: Concurrency

    /// Many tasks change data at once: every acknowledged change is there, each task's own order
    /// is kept in the queue, and the writer shows it grouped them (fewer commits than changes).
    @Test func concurrentWritersAreGroupCommittedInOrder() async throws {
        let store = try await makeSampleStore(optimize: false)
        let tasks = 12, perTask = 40
        let commitsBefore = store.entities.environment.commitCount
        let acknowledged = try await withThrowingTaskGroup(of: [(Int, Int64)].self) { group in
            for task in 0..<tasks {
                group.addTask {
                    var acks: [(Int, Int64)] = []
                    for n in 0..<perTask {
                        let key = "T\(task)-\(n % 5)"
                        let r: OfflineStore.ChangeReceipt
                        if n < 5 {
                            r = try await store.create(
                                set: "Products", entity: ["ProductID": .string(key), "Name": .string("\(n)")])
                        } else {
                            r = try await store.update(
                                set: "Products", key: [.string(key)], changes: ["Name": .string("\(n)")])
                        }
                        acks.append((n, r.requestID!))
                    }
                    return acks
                }
            }
            var all: [[(Int, Int64)]] = []
            for try await acks in group { all.append(acks) }
            return all
        }
        let commits = store.entities.environment.commitCount - commitsBefore
        #expect(acknowledged.count == tasks)
        for acks in acknowledged {
            #expect(acks.map(\.1) == acks.map(\.1).sorted(), "a task's requests are out of order")
        }
        let q = try requests(store)
        #expect(q.count == tasks * perTask)
        for task in 0..<tasks {
            for k in 0..<5 {
                let e = try store.get(set: "Products", key: [.string("T\(task)-\(k)")])
                #expect(e?["Name"] == .string("\(perTask - 5 + k)"))
            }
        }
        #expect(commits < tasks * perTask, "\(commits) commits for \(tasks * perTask) changes: nothing was grouped")
        print("group commit: \(tasks * perTask) changes from \(tasks) tasks in \(commits) commits")
    }

    // MARK: Record fields

    /// The record's `EntityKey`, built without Foundation for plain keys, is exactly what
    /// `describeKey` writes, for random keys: strings with quotes, combining marks after a quote,
    /// non-ASCII, integers at their extremes, and the other key types (which take `describeKey`).
    @Test(.runsOffThePool) func entityKeyIsDescribeKey() throws {
        let store = try makeSampleStore(data: false)
        let items = try store.entities.set("SalesOrderItems"), products = try store.entities.set("Products")
        var rng = SeededRandom(seed: testSeed("entityKeyIsDescribeKey"))
        let pieces = [
            "a", "'", "''", "\u{301}", "é", "e\u{301}", "ü", "🙂", " ", "%", "\\", "\"", "=", ",", "\u{0}", "\u{FF07}",
            "x",
        ]
        func string() -> String {
            (0..<Int.random(in: 0...6, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
        }
        func int() -> Int64 {
            [Int64.min, Int64.max, 0, -1, Int64.random(in: -1_000_000...1_000_000, using: &rng)].randomElement(
                using: &rng)!
        }
        for _ in 0..<2_000 {
            let one: [Value] = [Bool.random(using: &rng) ? .string(string()) : .int(int())]
            let two: [Value] = [.string(string()), Bool.random(using: &rng) ? .int(int()) : .string(string())]
            let other: [Value] = [
                [.decimal(EDMDecimal("1.50")!), .bool(true), .null, .guid(EDMGuid(high: 1, low: 2))].randomElement(
                    using: &rng)!
            ]
            #expect(RequestQueue.entityKey(products, one) == products.describeKey(one))
            #expect(RequestQueue.entityKey(items, two) == items.describeKey(two))
            #expect(RequestQueue.entityKey(items, [two[0]] + other) == items.describeKey([two[0]] + other))
            #expect(RequestQueue.entityKey(products, other) == products.describeKey(other))
        }
    }

    // MARK: Format

    @Test(.runsOffThePool) func formatOneStoresAreUpgradedAndNewerOnesRefused() throws {
        let store = try makeSampleStore(data: false)
        let path = store.path
        let meta = store.entities.meta
        try store.entities.write { t in try t.put(meta, EntityStore.formatKey, Array("offline-store 1".utf8)) }
        #expect(throws: EntityError.self) { try OfflineStore.open(at: path, readOnly: true) }
        let upgraded = try OfflineStore.open(at: path)
        try upgraded.create(set: "Products", entity: Self.pen)
        #expect(
            try upgraded.entities.read { t in try t.get(meta, EntityStore.formatKey).map { Array($0) } }
                == EntityStore.formatText(EntityStore.formatVersion))
        try upgraded.entities.write { t in try t.put(meta, EntityStore.formatKey, Array("offline-store 9".utf8)) }
        #expect { try OfflineStore.open(at: path) } throws: {
            "\($0)".contains("format 9, made by a newer offline-store")
        }
        try upgraded.entities.write { t in
            try t.put(meta, EntityStore.formatKey, EntityStore.formatText(EntityStore.formatVersion))
        }
    }
}

/// The collapse table as a pure function: every pair, and every reason not to merge.
@Suite(.checksStores) struct CollapseRuleTests {
    typealias M = RequestRecord.Method

    @Test(.runsOffThePool) func everyPair() {
        let p = { (m: M) in Collapse.Pending(id: 10, method: m) }
        let expected: [M: [M: Collapse.Decision]] = [
            .create: [
                .create: .append, .update: .merge(into: 10, method: .create),
                .replace: .merge(into: 10, method: .create), .delete: .cancel(10),
            ],
            .update: [
                .create: .append, .update: .merge(into: 10, method: .update),
                .replace: .merge(into: 10, method: .replace), .delete: .supersede(10),
            ],
            .replace: [
                .create: .append, .update: .merge(into: 10, method: .replace),
                .replace: .merge(into: 10, method: .replace), .delete: .supersede(10),
            ],
            .delete: [
                .create: .merge(into: 10, method: .replace), .update: .append, .replace: .append, .delete: .append,
            ],
        ]
        for (old, row) in expected {
            for (new, decision) in row {
                #expect(
                    Collapse.decide(pending: p(old), new: new, dependencies: [], options: .init(), optimize: true)
                        == decision, "\(old) + \(new)")
                #expect(
                    Collapse.decide(pending: p(old), new: new, dependencies: [], options: .init(), optimize: false)
                        == .append)
            }
        }
        #expect(
            Collapse.decide(pending: nil, new: .update, dependencies: [], options: .init(), optimize: true) == .append)
    }

    @Test(.runsOffThePool) func reasonsNotToMerge() {
        let base = Collapse.Pending(id: 10, method: .update)
        func decide(_ p: Collapse.Pending, _ o: ChangeOptions = .init(), deps: [Int64] = []) -> Collapse.Decision {
            Collapse.decide(pending: p, new: .update, dependencies: deps, options: o, optimize: true)
        }
        var sent = base; sent.status = .sent
        var failed = base; failed.status = .error
        var pinned = base; pinned.nonMergeable = true
        var inTransaction = base; inTransaction.transactionID = "t"
        var inCategory = base; inCategory.uploadCategory = "c"
        #expect(decide(sent) == .append)
        #expect(decide(failed) == .append)
        #expect(decide(pinned) == .append)
        #expect(decide(base, .init(nonMergeable: true)) == .append)
        #expect(decide(inTransaction) == .append)
        #expect(decide(inTransaction, .init(transactionID: "t")) == .merge(into: 10, method: .update))
        #expect(decide(inCategory) == .append)
        #expect(decide(base, deps: [9]) == .merge(into: 10, method: .update))
        #expect(decide(base, deps: [11]) == .append)  // it needs request 11, which comes after 10
        var parent = Collapse.Pending(id: 10, method: .create); parent.hasDependents = true
        #expect(
            Collapse.decide(pending: parent, new: .delete, dependencies: [], options: .init(), optimize: true)
                == .append)
    }

    @Test(.runsOffThePool) func tags() {
        #expect(Collapse.joinTags(nil, "b") == "b")
        #expect(Collapse.joinTags("a", nil) == "a")
        #expect(Collapse.joinTags("a", "b") == "a#b")
        #expect(Collapse.joinTags("a#b", "b") == "a#b")
        #expect(Collapse.joinTags("a#b", "c") == "a#b#c")
    }
}

/// Adding an index while writers run: the backfill installs the new index before it commits, so
/// no concurrent write is missing from it (the integrity check compares entries with entities).
@Suite(.checksStores) struct IndexWhileWritingTests {
    @Test func addIndexDuringConcurrentWrites() async throws {
        for round in 0..<5 {
            let store = try await makeSampleStore(optimize: false)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for w in 0..<4 {
                    group.addTask {
                        for n in 0..<60 {
                            try await store.create(
                                set: "Products",
                                entity: ["ProductID": .string("W\(w)-\(n)"), "Name": .string("n\(n % 7)")])
                        }
                    }
                }
                group.addTask {
                    try await Task.sleep(nanoseconds: UInt64(round) * 3_000_000)
                    try store.addIndex(set: "Products", definition: "Name")
                }
                try await group.waitForAll()
            }
            let report = try store.check()
            #expect(report.isConsistent, "round \(round): \(report)")
            #expect(try store.find(set: "Products", index: "Name", where: .equals([.string("n3")])).count >= 4 * 8)
        }
    }
}
