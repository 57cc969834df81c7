import LMDB
import Query
import Foundation
public import Queue
public import Remote
public import Storage
import Sync

extension OfflineStore {
    /// What calling an operation offline did (`call`).
    public enum CallOutcome: Sendable, Hashable {
        /// An action, queued as a request (its id): the next flush calls it, in its place in the queue.
        case queued(Int64)
        /// A function, answered from this store by the local query the configuration maps it to
        /// (`StoreConfiguration.localFunctions`): the entities of `set` it gives.
        case answered(set: String, [Properties])
    }

    /// Calls a service operation offline — `ReleaseSalesOrder`, `Lib.Renew` — bound to the entity
    /// `key` of `set`, or unbound (`set` nil), with `parameters` checked against its declaration.
    ///
    /// - An **action** (a V4 `Action`, a V2 function import called with POST) is queued as a
    ///   request in one durable transaction, after every request queued before it and before
    ///   every one after it: flush sends it alone, once all earlier requests are done, and
    ///   nothing queued later merges across it. Bound to an entity created here, it waits for
    ///   that create and goes with the key the service gave. It changes nothing in this store:
    ///   after it succeeds, flush reads its entity back (the service's version, with what the
    ///   action did), and the next refresh brings the rest. With `options.transactionID` it goes
    ///   in that change set, all or nothing with the other requests of the transaction; on an
    ///   entity created in it whose key the service assigns, it names the entity by its
    ///   Content-ID (`$1/NS.Action`, V4).
    /// - A **function** (a V4 `Function`, a V2 function import called with GET) only reads: it is
    ///   answered from this store when `StoreConfiguration.localFunctions` maps it to a query,
    ///   and otherwise refused with a message that says it needs the service.
    ///
    /// `operation` is the name as `$metadata` has it — qualified or not, or an import's name. A
    /// V4 overload is chosen by its binding: `set`'s entity type, or none. For a V2 import bound
    /// by `sap:action-for`, key parameters left out are the entity's key.
    @discardableResult
    public func call(
        _ operation: String, on set: String? = nil, key: [Value]? = nil, parameters: Properties = [:],
        options: ChangeOptions = .init()
    ) async throws -> CallOutcome {
        let op = try resolveOperation(operation, on: set)
        if op.kind == .function { return try answerLocally(op, on: set, key: key, parameters: parameters) }
        let queue = try queueForCalls(op)
        let (id, length) = try await entities.write { t in
            (
                try queue.call(t, operation: op, set: set, key: key, parameters: parameters, options: options),
                try queue.length(t.reader)
            )
        }
        metrics.queue(length)
        return .queued(id)
    }

    /// `call`, waiting on this thread (for tools and scripts).
    @discardableResult
    public func call(
        _ operation: String, on set: String? = nil, key: [Value]? = nil, parameters: Properties = [:],
        options: ChangeOptions = .init()
    ) throws -> CallOutcome {
        let op = try resolveOperation(operation, on: set)
        if op.kind == .function { return try answerLocally(op, on: set, key: key, parameters: parameters) }
        let queue = try queueForCalls(op)
        let (id, length) = try entities.write { t in
            (
                try queue.call(t, operation: op, set: set, key: key, parameters: parameters, options: options),
                try queue.length(t.reader)
            )
        }
        metrics.queue(length)
        return .queued(id)
    }

    /// The queue an action goes to: an authority has none.
    private func queueForCalls(_ op: ServiceOperation) throws -> RequestQueue {
        guard isOffline else {
            throw EntityError.badInput(
                "this store is an authority: it has no service to call \(op.name) on, and no business logic of its own")
        }
        return requestQueue
    }

    /// Calls function `operation` on the service now, online — what a function needs that no
    /// local query answers (`StoreConfiguration.localFunctions`) — and returns the service's
    /// answer: its JSON text (V2's `d` taken off), as the service wrote it. Writes nothing to the
    /// store. Parameters are checked as `call` checks them; the service is the configured one
    /// unless `serviceRoot` says another, with the configured credentials (or `authorizer`) and
    /// `headers`. An action is refused: queue it with `call`, then flush. An answer that is not a
    /// success throws `EntityError.badInput` with the service's status and message.
    public func callOnline(
        _ operation: String, on set: String? = nil, key: [Value]? = nil, parameters: Properties = [:],
        serviceRoot: String? = nil, headers: [(String, String)] = [], authorizer: (any RequestAuthorizer)? = nil
    ) async throws -> String {
        let op = try resolveOperation(operation, on: set)
        guard op.kind == .function else {
            throw EntityError.badInput(
                "\(op.name) is an action: it changes the service's data, so it is queued (call) and sent in order by flush, not called online"
            )
        }
        try OperationCall.checkNames(parameters.keys, of: op)
        var typed: [(name: String, value: Value, type: TypeRef)] = []
        for p in try OperationCall.properties(of: op, schema: schema) {
            let v = parameters[p.name] ?? .null
            try Validation.check(v, against: p, schema: schema)
            if !v.isNull { typed.append((p.name, v, p.type)) }
        }
        var keyText = ""
        if let set, let key { keyText = try entities.set(set).describeKey(key) }
        var change = OutgoingChange(
            kind: .call, set: set ?? "", key: key ?? [], keyText: keyText, body: nil, etag: nil,
            repeatabilityID: EDMGuid.random(), firstSent: .now, customHeaders: [], id: "1")
        change.call = OutgoingCall(
            operation: op.name, importName: op.importName, isAction: false, httpMethod: op.httpMethod,
            parameters: typed)
        let transport = try readingTransport(serviceRoot: serviceRoot, headers: headers, authorizer: authorizer)
        let answers: [ChangeAnswer]
        do {
            answers = try await ODataBackend(transport: transport, store: entities).send([change], extra: headers)
            try await transport.shutdown()
        } catch {
            try? await transport.shutdown()
            throw Self.redacted(error)
        }
        guard let answer = answers.first else { throw EntityError.badInput("the service gave no answer to \(op.name)") }
        guard answer.isSuccess else {
            throw EntityError.badInput(
                "the service answered \(op.name) with \(answer.status): \(SecretForms.known.scrub(answer.error.message))"
            )
        }
        return answer.entity?.text ?? ""
    }

    /// Fixes an operation call the service refused (an ErrorArchive entry): its parameters
    /// become `parameters`, and it goes back to the queue in its place, with the requests
    /// archived because of it; the next flush sends it. The other ways out are those of any
    /// refused request: `retryError` (unchanged) and `resolveError` (give it up). Returns the ids
    /// revived.
    @discardableResult
    public func fixCall(requestID: Int64, parameters: Properties) throws -> [Int64] {
        let queue = requestQueue
        return try entities.write { t in try queue.fixCall(t, id: requestID, parameters: parameters) }
    }

    /// The operation `name` bound to `set`'s entity type (or unbound, for nil): what `call` calls.
    package func resolveOperation(_ name: String, on set: String?) throws -> ServiceOperation {
        let overloads = schema.operations(named: name)
        guard !overloads.isEmpty else {
            let known = schema.operations.map(\.name)
            throw EntityError.badInput(
                "the service has no operation '\(name)'"
                    + (known.isEmpty ? " (its $metadata declares none)" : " (it has: \(known.joined(separator: ", ")))")
            )
        }
        let bindingType = try set.map { try entities.set($0).type.qualifiedName }
        guard let op = schema.operation(named: name, boundTo: bindingType) else {
            let what = bindingType.map { "bound to \($0) (\(set!))" } ?? "unbound"
            throw EntityError.badInput(
                "\(name) has no overload \(what); it is: \(overloads.map(\.signature).joined(separator: "; "))")
        }
        return op
    }

    /// The parameters of operation `name` (bound to `set`'s type, or unbound) read from an OData
    /// JSON object, checked against their types.
    package func operationParameters(_ name: String, on set: String?, json: [UInt8]) throws -> Properties {
        let op = try resolveOperation(name, on: set)
        let object = try JSON.parse(json)
        guard case .object(let members) = object else {
            throw EntityError.badInput("the parameters of \(op.name) are a JSON object")
        }
        try OperationCall.checkNames(members.map(\.0), of: op)
        return try ValueJSON(schema: schema).properties(
            from: object, properties: try OperationCall.properties(of: op, schema: schema), owner: op.name)
    }

    /// A function's answer from the local query `localFunctions` maps it to (`localFunctionURL`).
    private func answerLocally(
        _ op: ServiceOperation, on set: String?, key: [Value]?, parameters: Properties
    ) throws -> CallOutcome {
        try OperationCall.checkNames(parameters.keys, of: op)
        var literals: [(String, String)] = []
        for p in try OperationCall.properties(of: op, schema: schema) {
            let v = parameters[p.name] ?? .null
            try Validation.check(v, against: p, schema: schema)
            literals.append((p.name, EntitySetHandle.literal(v)))
        }
        let url = try localFunctionURL(op, on: set, key: key, literals: literals)
        let bound = try queries.bind(url)
        return .answered(set: bound.path.entitySet, try queries.entities(bound))
    }

    /// The URL that answers function `op` here: the one `localFunctions` maps it to, its
    /// parameters (`literals`: name and URL literal) given as the URL's parameter aliases, and a
    /// bound call's entity's key properties too. A function that is not mapped needs the
    /// service: `EntityError.badInput` saying so. A parameter `op` does not declare is refused.
    package func localFunctionURL(
        _ op: ServiceOperation, on set: String?, key: [Value]?, literals: [(String, String)]
    ) throws -> String {
        let names = [op.name, op.importName, op.name.split(separator: ".").last.map(String.init)].compactMap { $0 }
        guard let url = names.lazy.compactMap({ self.configuration.localFunctions[$0] }).first else {
            throw EntityError.badInput(
                "\(op.name) is a function: it reads the service's data, which this store answers only for a function mapped to a local query (configuration localFunctions: {\"\(op.name)\": \"Set?$filter=… @Parameter …\"}); unmapped, it needs the service: call it online (callOnline, offline-store call --online)"
            )
        }
        try OperationCall.checkNames(literals.map(\.0), of: op)
        var aliases = literals
        if let set, let key {
            let handle = try entities.set(set)
            guard try get(set: set, key: key) != nil else {
                throw EntityError.notFound(set: set, key: handle.describeKey(key))
            }
            for (name, v) in zip(handle.type.key, key) where !aliases.contains(where: { $0.0 == name }) {
                aliases.append((name, EntitySetHandle.literal(v)))
            }
        }
        // Each value percent-encoded whole (`+`, `&`, `#` and `%` too): the URL is read decoded.
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~'():,")
        let query = aliases.map { name, literal in
            "@\(name)=" + (literal.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")
        }.joined(separator: "&")
        return query.isEmpty ? url : url + (url.contains("?") ? "&" : "?") + query
    }
}
