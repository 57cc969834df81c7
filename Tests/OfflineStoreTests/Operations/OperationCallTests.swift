import Foundation
import LMDB
import Testing
@testable import OfflineStore
@testable import Queue
@testable import Remote
@testable import Storage
@testable import Sync
import TestSupport

/// Parameters as a test's arguments give them.
typealias CallParameters = [String: Value]

/// Calling operations offline (issue 40, items 2 and 3): an action is queued in order with the
/// changes around it — never merged across, never in a change set, sent alone once everything
/// before it is done — and written in each dialect; a function is answered only from a local
/// query the configuration maps it to. The flush against a real service is in
/// `OperationCallODataPyTests`.
@Suite(.checksStores) struct OperationCallTests {
    /// A library: a bound action that returns its book, an unbound action (an import) and a
    /// function (an import).
    static let metadata = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:DataServices>
            <Schema Namespace="Lib" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <EntityType Name="Book">
                <Key><PropertyRef Name="BookID"/></Key>
                <Property Name="BookID" Type="Edm.Int32" Nullable="false"/>
                <Property Name="Title" Type="Edm.String"/>
                <Property Name="Status" Type="Edm.String"/>
                <Property Name="Days" Type="Edm.Int32"/>
              </EntityType>
              <EntityType Name="Loan">
                <Key><PropertyRef Name="LoanID"/></Key>
                <Property Name="LoanID" Type="Edm.Int32" Nullable="false"><Annotation Term="Org.OData.Core.V1.Computed" Bool="true"/></Property>
                <Property Name="Reader" Type="Edm.String"/>
                <Property Name="Status" Type="Edm.String"/>
              </EntityType>
              <Action Name="Close" IsBound="true">
                <Parameter Name="loan" Type="Lib.Loan" Nullable="false"/>
                <Parameter Name="Status" Type="Edm.String"/>
                <Parameter Name="Fail" Type="Edm.Boolean"/>
              </Action>
              <Action Name="Renew" IsBound="true">
                <Parameter Name="book" Type="Lib.Book" Nullable="false"/>
                <Parameter Name="Days" Type="Edm.Int32" Nullable="false"/>
                <Parameter Name="Fail" Type="Edm.Boolean"/>
                <ReturnType Type="Lib.Book"/>
              </Action>
              <Action Name="Recall">
                <Parameter Name="Status" Type="Edm.String" MaxLength="10"/>
              </Action>
              <Function Name="Overdue">
                <Parameter Name="Days" Type="Edm.Int32"/>
                <ReturnType Type="Collection(Lib.Book)"/>
              </Function>
              <EntityContainer Name="Container">
                <EntitySet Name="Books" EntityType="Lib.Book"/>
                <EntitySet Name="Loans" EntityType="Lib.Loan"/>
                <ActionImport Name="Recall" Action="Lib.Recall"/>
                <FunctionImport Name="Overdue" Function="Lib.Overdue" EntitySet="Books"/>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    static let books =
        #"{"value":[{"BookID":1,"Title":"Dune","Status":"out","Days":14},{"BookID":2,"Title":"Emma","Status":"in","Days":0}]}"#

    /// An offline copy of the library (its service root never reached here), with two books.
    static func copy(
        _ root: String = "http://127.0.0.1:9/", configure: (inout StoreConfiguration) -> Void = { _ in }
    )
        throws -> OfflineStore
    {
        var config = StoreConfiguration()
        config.serviceRoot = root
        config.definingRequests = [.init(name: "books", url: "Books")]
        configure(&config)
        let store = try OfflineStore.create(
            at: tempDir() + "/library", metadata: Array(metadata.utf8), configuration: config)
        try store.load(set: "Books", json: Array(books.utf8))
        return store
    }

    static func records(_ store: OfflineStore) throws -> [RequestRecord] {
        try store.entities("RequestQueue?$orderby=RequestID").map { try RequestRecord($0) }
    }

    @Test func anActionIsQueuedAndChangesNothingHere() throws {
        let store = try Self.copy()
        let before = try store.get(set: "Books", key: [.int(1)])
        let outcome = try store.call("Renew", on: "Books", key: [.int(1)], parameters: ["Days": .int(30)])
        guard case .queued(let id) = outcome else { Issue.record("not queued: \(outcome)"); return }
        #expect(try store.get(set: "Books", key: [.int(1)]) == before)
        let r = try #require(try Self.records(store).first)
        #expect(r.id == id && r.method == .call && r.nonMergeable && r.entitySet == "Books")
        let call = try OperationCall.of(r)
        #expect(call.operation == "Lib.Renew" && call.bindingType == "Lib.Book" && call.isAction)
        #expect(call.parameters.map(\.name) == ["Days", "Fail"])
        #expect(r.resourcePath == "Books(1)/Lib.Renew")
        // Unbound, through its import.
        guard case .queued = try store.call("Recall", parameters: ["Status": .string("lost")]) else {
            Issue.record("the unbound call was not queued")
            return
        }
        let unbound = try #require(try Self.records(store).last)
        #expect(unbound.isUnboundCall && unbound.resourcePath == "Recall")
        #expect(try store.check().isConsistent)
    }

    @Test(arguments: [
        ("NoSuch", nil as String?, ["Days": Value.int(1)], "no operation 'NoSuch'"),
        ("Renew", nil, ["Days": .int(1)], "no overload unbound"),
        ("Renew", "Books", [:], "Days"),
        ("Renew", "Books", ["Days": .string("x")], "Days"),
        ("Renew", "Books", ["Days": .int(1), "Weeks": .int(2)], "no parameter 'Weeks'"),
        ("Recall", nil, ["Status": .string("far too long a status")], "Status"),
        ("Overdue", nil, [:], "needs the service"),
    ])
    func aCallThatDoesNotFitIsRefusedAndQueuesNothing(
        name: String, set: String?, parameters: CallParameters, fragment: String
    ) throws {
        let store = try Self.copy()
        do {
            try store.call(name, on: set, key: set == nil ? nil : [.int(1)], parameters: Properties(parameters))
            Issue.record("\(name) \(parameters) was taken")
        } catch {
            #expect("\(error)".contains(fragment), "\(error)")
        }
        #expect(try store.pendingRequestCount() == 0)
    }

    @Test func aCallOnAnAuthorityIsRefused() throws {
        let store = try Self.copy()
        let authority = try OfflineStore.create(at: tempDir() + "/authority", metadata: Array(Self.metadata.utf8))
        try authority.load(set: "Books", json: Array(Self.books.utf8))
        do {
            try authority.call("Recall", parameters: [:])
            Issue.record("an authority queued a call")
        } catch {
            #expect("\(error)".contains("authority"), "\(error)")
        }
        #expect(try store.pendingRequestCount() == 0)
    }

    @Test func aFunctionMappedToALocalQueryIsAnsweredHere() throws {
        let store = try Self.copy { $0.localFunctions = ["Lib.Overdue": "Books?$filter=Days gt @Days&$orderby=BookID"] }
        guard case .answered("Books", let rows) = try store.call("Overdue", parameters: ["Days": .int(7)]) else {
            Issue.record("not answered")
            return
        }
        #expect(rows.map { $0["BookID"] } == [.int(1)])
        guard case .answered(_, let none) = try store.call("Overdue", parameters: ["Days": .int(20)]) else { return }
        #expect(none.isEmpty)
        #expect(try store.pendingRequestCount() == 0)
    }

    /// A change after a call never merges into one before it: that would move it to the other
    /// side of the call. Without the call, the two updates are one request.
    @Test func nothingMergesAcrossACall() throws {
        let store = try Self.copy()
        try store.update(set: "Books", key: [.int(2)], changes: ["Title": .string("a")])
        try store.call("Recall", parameters: ["Status": .string("x")])
        try store.update(set: "Books", key: [.int(2)], changes: ["Title": .string("b")])
        try store.call("Renew", on: "Books", key: [.int(2)], parameters: ["Days": .int(3)])
        try store.update(set: "Books", key: [.int(2)], changes: ["Status": .string("c")])
        #expect(try Self.records(store).map(\.method) == [.update, .call, .update, .call, .update])
        let merged = try Self.copy()
        try merged.update(set: "Books", key: [.int(2)], changes: ["Title": .string("a")])
        try merged.update(set: "Books", key: [.int(2)], changes: ["Title": .string("b")])
        #expect(try Self.records(merged).map(\.method) == [.update])
    }

    /// The flush plan: a call goes alone, once every request before it is done, and every
    /// request after it waits for it — also while it is on its way.
    @Test func aCallGoesAloneAfterEverythingBeforeIt() throws {
        let store = try Self.copy()
        try store.update(set: "Books", key: [.int(1)], changes: ["Title": .string("a")])
        try store.update(set: "Books", key: [.int(2)], changes: ["Title": .string("b")])
        try store.call("Recall", parameters: [:])
        try store.update(set: "Books", key: [.int(2)], changes: ["Status": .string("c")])
        let ids = try Self.records(store).map(\.id)
        let queue = store.requestQueue
        let options = Flush.Options(batchSize: 10)
        func plan(excluding: Set<Int64> = []) throws -> [Int64] {
            try store.entities.read { t in try Flush.plan(t, queue: queue, options: options, excluding: excluding) }
                .map(\.id)
        }
        #expect(try plan() == [ids[0], ids[1]])
        #expect(try plan(excluding: [ids[0], ids[1]]).isEmpty, "the call waits for the round on its way")
        try store.entities.write { t in
            for id in ids[0...1] {
                _ = try queue.markSent(t, id: id)
                try queue.acknowledge(t, id: id, serverImage: nil)
            }
        }
        #expect(try plan() == [ids[2]])
        #expect(try plan(excluding: [ids[2]]).isEmpty, "what follows the call waits for it")
        try store.entities.write { t in
            let r = try queue.markSent(t, id: ids[2])
            try queue.acknowledgeUnboundCall(t, r)
        }
        #expect(try plan() == [ids[3]])
    }

    @Test func theDialectsWriteACall() throws {
        let store = try Self.copy()
        try store.call("Renew", on: "Books", key: [.int(1)], parameters: ["Days": .int(30)])
        try store.call("Recall", parameters: ["Status": .string("a&b")])
        let records = try Self.records(store)
        let bound = try Flush.change(records[0], queue: store.requestQueue, etag: "W/\"1\"")
        let unbound = try Flush.change(records[1], queue: store.requestQueue, etag: nil)
        let v4 = try V4Dialect().request(for: bound, store: store.entities)
        #expect(v4.method == "POST" && v4.url == "Books(1)/Lib.Renew")
        #expect(String(decoding: v4.body ?? [], as: UTF8.self) == #"{"Days":30,"Fail":null}"#)
        #expect(v4.headers.contains { $0.0 == "Repeatability-Request-ID" })
        #expect(!v4.headers.contains { $0.0 == "If-Match" }, "an action is not a change of the entity's representation")
        let v4Unbound = try V4Dialect().request(for: unbound, store: store.entities)
        #expect(v4Unbound.method == "POST" && v4Unbound.url == "Recall")
        #expect(String(decoding: v4Unbound.body ?? [], as: UTF8.self) == #"{"Status":"a&b"}"#)
        let v2 = try V2Dialect().request(for: unbound, store: store.entities)
        #expect(v2.method == "POST" && v2.url == "Recall?Status='a%26b'" && v2.body == nil)
        #expect(v2.headers.contains { $0.0 == "RequestID" })
    }

    /// A function called online (`callOnline`) is a GET, its parameters inline (V4) or in the
    /// query (V2), without the repeatability headers of a change.
    @Test func aFunctionOnlineIsAGetWithItsParameters() throws {
        let store = try Self.copy()
        var change = OutgoingChange(
            kind: .call, set: "", key: [], keyText: "", body: nil, etag: nil, repeatabilityID: EDMGuid.random(),
            firstSent: .now, customHeaders: [], id: "1")
        change.call = OutgoingCall(
            operation: "Lib.Overdue", importName: "Overdue", isAction: false, httpMethod: "GET",
            parameters: [("Days", .int(7), .primitive(.int32))])
        let v4 = try V4Dialect().request(for: change, store: store.entities)
        #expect(v4.method == "GET" && v4.url == "Overdue(Days=7)" && v4.body == nil, "\(v4.url)")
        #expect(!v4.headers.contains { $0.0.hasPrefix("Repeatability") })
        let v2 = try V2Dialect().request(for: change, store: store.entities)
        #expect(v2.method == "GET" && v2.url == "Overdue?Days=7" && !v2.headers.contains { $0.0 == "RequestID" })
    }

    /// A V2 import bound by `sap:action-for` takes the entity's key as its key parameters: left
    /// out, they are the entity's key when the call is sent.
    @Test func aV2ImportBoundByActionForTakesTheKeyAsParameters() throws {
        let store = try OfflineStore.create(
            at: tempDir() + "/gw", metadata: Array(OperationSchemaTests.v2.utf8),
            configuration: {
                var c = StoreConfiguration()
                c.serviceRoot = "http://127.0.0.1:9/"
                return c
            }())
        try store.load(set: "SalesOrderSet", json: Array(#"{"d":{"results":[{"SalesOrderID":"0500000001"}]}}"#.utf8))
        let op = try store.resolveOperation("SalesOrder_Confirm", on: "SalesOrderSet")
        #expect(op.httpMethod == "POST")
        try store.call("SalesOrder_Confirm", on: "SalesOrderSet", key: [.string("0500000001")])
        let r = try #require(try Self.records(store).first)
        let change = try Flush.change(r, queue: store.requestQueue, etag: nil)
        let wire = try V2Dialect().request(for: change, store: store.entities)
        #expect(wire.method == "POST" && wire.url == "SalesOrder_Confirm?SalesOrderID='0500000001'", "\(wire.url)")
    }

    @Test func undoAndGiveUpDropACallAndFixSendsItAgain() throws {
        let store = try Self.copy()
        try store.call("Renew", on: "Books", key: [.int(1)], parameters: ["Days": .int(3)])
        #expect(try store.undo(set: "Books", key: [.int(1)]).count == 1)
        guard case .queued(let id) = try store.call("Recall", parameters: [:]) else { return }
        try store.entities.write { t in _ = try store.requestQueue.markSent(t, id: id) }
        try store.archiveError(requestID: id, httpStatus: 400, message: "no")
        // Fixed: new parameters, pending again.
        #expect(try store.fixCall(requestID: id, parameters: ["Status": .string("ok")]) == [id])
        let fixed = try #require(try Self.records(store).first)
        #expect(fixed.status == .pending)
        #expect(try OperationCall.of(fixed).parameters.first?.value == #""ok""#)
        #expect(throws: EntityError.self) { try store.fixCall(requestID: id, parameters: [:]) }
        // Given up: gone.
        try store.entities.write { t in _ = try store.requestQueue.markSent(t, id: id) }
        try store.archiveError(requestID: id, httpStatus: 400, message: "no again")
        #expect(try store.resolveError(requestID: id) == [id])
        #expect(try store.pendingRequestCount() == 0)
        #expect(try store.check().isConsistent)
    }
}

#if DEBUG  // the fault hook exists in debug builds only
/// Queueing a call with each of its LMDB calls failed in turn (`EIO`): the request whole, or
/// nothing — and `check` passes after every trial.
@Suite(.checksStores, .runsOffThePool) struct OperationCallFaultTests {
    @Test(arguments: [true, false])
    func everyLMDBCallOfQueueingACallCanFail(bound: Bool) async throws {
        let store = try OperationCallTests.copy()
        let env = store.entities.environment
        let queue = store.requestQueue
        func call() async throws {
            if bound {
                try await store.call("Renew", on: "Books", key: [.int(1)], parameters: ["Days": .int(2)])
            } else {
                try await store.call("Recall", parameters: ["Status": .string("x")])
            }
        }
        func drop() throws {
            if bound {
                _ = try store.undo(set: "Books", key: [.int(1)])
            } else {
                try store.entities.write { t in
                    for r in try OperationCallTests.records(store) { try queue.dropUnboundCall(t, r) }
                }
            }
        }
        FaultInjection.countCalls(in: env)
        try await call()
        let calls = FaultInjection.stop(env).calls
        try drop()
        #expect(calls.count > 5, "\(calls)")
        for n in 1...calls.count {
            let what = "call \(n) (\(calls[n - 1]))"
            FaultInjection.fail(callNumber: n, with: EIO, in: env)
            let result = await Result { try await call() }
            FaultInjection.stop(env)
            let pending = try store.pendingRequestCount()
            if case .success = result {
                #expect(pending == 1, "\(what)")
            } else {
                #expect(pending == 0, "\(what): half a call")
            }
            let report = try store.check()
            #expect(report.isConsistent, "\(what): \(report)")
            try drop()
        }
        print(
            "OperationCallFaultTests: \(calls.count) fault trials of queueing \(bound ? "a bound" : "an unbound") call")
    }
}
#endif

/// `offline-store call`: an action queued with its tag, a mapped function's entities printed as
/// OData JSON, a parameter the operation does not declare refused with one line naming it.
@Suite(.checksStores, .runsOffThePool) struct OperationCallCLITests {
    @Test func theToolQueuesAnActionAndAnswersAMappedFunction() async throws {
        let store = try OperationCallTests.copy {
            $0.localFunctions = ["Overdue": "Books?$filter=Days gt @Days&$orderby=BookID&$select=BookID,Title"]
        }
        let path = store.path
        let renew = try await ChildProcess.run(
            ["call", "--store", path, "Lib.Renew", #"{"Days":30}"#, "--on", "Books(1)", "--tag", "t"], timeout: 60)
        #expect(renew.status == 0 && renew.stdout.contains("request 1 queued"), "\(renew.stdout)\(renew.stderr)")
        let overdue = try await ChildProcess.run(["call", "--store", path, "Overdue", #"{"Days":7}"#], timeout: 60)
        #expect(overdue.status == 0, "\(overdue.stderr)")
        #expect(
            overdue.stdout.contains(#""BookID":1"#) && !overdue.stdout.contains(#""BookID":2"#), "\(overdue.stdout)")
        let wrong = try await ChildProcess.run(["call", "--store", path, "Recall", #"{"Nope":1}"#], timeout: 60)
        #expect(wrong.status != 0 && wrong.stderr.contains("no parameter 'Nope'"), "\(wrong.stderr)")
        let reopened = try OfflineStore.open(at: path)
        let records = try OperationCallTests.records(reopened)
        #expect(records.map(\.method) == [.call] && records.first?.customTag == "t")
    }
}
