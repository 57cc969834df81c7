import Foundation
package import LMDB
import Query
package import Storage

/// What a queued operation call (`RequestRecord.Method.call`) sends: its body, as JSON in the
/// record's `Body`. Everything flush needs is kept here — the name, how it is reached, the
/// parameters with their types — so a call queued before the service's `$metadata` changed is
/// sent as it was made. A bound call is a request of its binding entity (in its chain, moved with
/// it when the service gives a created entity its key); an unbound one has a chain of its own.
package struct OperationCall: Codable, Sendable, Hashable {
    /// The operation's name: qualified for V4 (`Lib.Renew`), the import for V2 (`ReleaseSalesOrder`).
    package var operation: String
    /// Where an unbound operation is reached at the service root (the import's name); nil when bound.
    package var importName: String?
    /// The binding parameter's entity type, for a bound call (V2: the type `sap:action-for` names).
    package var bindingType: String?
    /// `action` or `function` (`ServiceOperation.Kind`).
    package var kind: String
    /// The HTTP method that calls it: V4 POST (action) or GET (function); V2 the import's.
    package var httpMethod: String
    /// The parameters, in the operation's order: name, type (`ServiceOperation.TypeName`'s text),
    /// and the value as OData JSON.
    package var parameters: [Parameter]

    package struct Parameter: Codable, Sendable, Hashable {
        package var name: String
        package var type: String
        package var value: String
    }

    package var isAction: Bool { kind == ServiceOperation.Kind.action.rawValue }

    package var text: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }

    /// The body of a `call` record.
    package static func of(_ r: RequestRecord) throws -> OperationCall {
        guard r.method == .call, let body = r.body,
            let call = try? JSONDecoder().decode(OperationCall.self, from: Data(body.utf8))
        else { throw EntityError.badInput("request \(r.id): not an operation call with a readable body") }
        return call
    }

    /// The parameters' values, read back with their types (`schema` resolves complex and enum types).
    package func values(schema: Schema) throws -> [(name: String, value: Value, type: TypeRef)] {
        try parameters.map { p in
            let type = try Self.typeRef(p.type, schema: schema, what: "parameter '\(p.name)' of \(operation)")
            let value = try ValueJSON(schema: schema).value(from: try JSON.parse(p.value), type: type, property: p.name)
            return (p.name, value, type)
        }
    }

    /// Refuses a parameter `operation` does not declare, naming it and those it has; an
    /// annotation (a name with `@`, `@odata.type`) is not a parameter and passes.
    package static func checkNames(_ names: some Sequence<String>, of operation: ServiceOperation) throws {
        for name in names where !name.contains("@") && !operation.parameters.contains(where: { $0.name == name }) {
            throw EntityError.badInput(
                "\(operation.name) has no parameter '\(QueryError.quoting(name))' (it has: \(operation.parameters.map(\.name).joined(separator: ", ")))"
            )
        }
    }

    /// `operation`'s parameters as properties (their types and facets), for checking and reading values.
    package static func properties(of operation: ServiceOperation, schema: Schema) throws -> [Property] {
        try operation.parameters.map { p in
            Property(
                name: p.name,
                type: try typeRef(
                    p.type.description, schema: schema, what: "parameter '\(p.name)' of \(operation.name)"),
                nullable: p.nullable, maxLength: p.maxLength, precision: p.precision, scale: p.scale)
        }
    }

    /// The store's type for an operation's type name (`Edm.String`, `Collection(NS.Address)`):
    /// primitive, complex and enum types, and collections of them; an entity type is refused.
    static func typeRef(_ text: String, schema: Schema, what: String) throws -> TypeRef {
        if text.hasPrefix("Collection("), text.hasSuffix(")") {
            return .collection(try typeRef(String(text.dropFirst(11).dropLast()), schema: schema, what: what))
        }
        if let p = EDMPrimitive(typeName: text) { return .primitive(p) }
        if schema.complexTypes[text] != nil { return .complex(text) }
        if schema.enumTypes[text] != nil { return .enumeration(text) }
        throw EntityError.badInput("\(what) is of type \(text), which a queued call cannot carry (an entity type?)")
    }
}

extension RequestRecord {
    /// An unbound operation call: no entity; its chain is its own (`RequestQueue.unboundCallKey`).
    package var isUnboundCall: Bool { method == .call && entitySet.isEmpty }

    /// What the request addresses, for people: `Set(key)`; for a call `Set(key)/NS.Action`, or
    /// the import it calls.
    package var resourcePath: String {
        guard method == .call, let call = try? OperationCall.of(self) else { return "\(entitySet)(\(entityKey))" }
        return isUnboundCall ? call.importName ?? call.operation : "\(entitySet)(\(entityKey))/\(call.operation)"
    }
}

extension RequestQueue {
    /// The key bytes of an unbound call's own chain: its id, big-endian.
    static func unboundCallKey(_ id: Int64) -> [UInt8] {
        withUnsafeBytes(of: UInt64(bitPattern: id).bigEndian) { Array($0) }
    }

    /// Queues a call of `operation` — an action, which changes the service's data — as a local
    /// change, in `t`: bound to the entity `key` of `set` (it joins that entity's requests, after
    /// those queued before it; one created here waits for its create, and is named by the key the
    /// service gives it), or unbound (`set` nil). `parameters` are checked against the
    /// operation's (names, types, facets; a parameter left out is null, refused when it is not
    /// nullable). With `options.transactionID` it goes in that change set with the other requests
    /// of the transaction (all or nothing); else alone. A call is never merged with another
    /// request, and makes no change in this store: what it does is the service's to do, and the
    /// next refresh (or the entity read back after it) brings it. Returns the request's id.
    package func call(
        _ t: WriteView, operation: ServiceOperation, set setName: String?, key: [Value]?, parameters: Properties,
        options: ChangeOptions
    ) throws -> Int64 {
        guard operation.kind == .action else {
            throw EntityError.badInput(
                "\(operation.name) is a function: it reads the service's data and changes nothing, so it is not queued; map it to a local query (StoreConfiguration.localFunctions) or call it online"
            )
        }
        let schema = store.schema
        let call = OperationCall(
            operation: operation.name, importName: operation.importName, bindingType: operation.bindingType,
            kind: operation.kind.rawValue, httpMethod: operation.httpMethod,
            parameters: try encode(parameters, of: operation, boundTo: setName))
        let id = try allocateID(t)
        let record: RequestRecord
        if let bindingType = operation.bindingType {
            guard let setName, let key else {
                throw EntityError.badInput(
                    "\(operation.name) is bound to \(bindingType): name the entity it is called on (set and key)")
            }
            let set = try store.set(setName)
            guard !schema.isSystemSet(set.name) else {
                throw EntityError.badInput("'\(set.name)' is one of the store's own sets; nothing is called on it")
            }
            guard set.type.qualifiedName == bindingType, !operation.bindingIsCollection else {
                throw EntityError.badInput(
                    "\(operation.name) is bound to \(operation.bindingIsCollection ? "Collection(\(bindingType))" : bindingType), not to an entity of \(set.name) (\(set.type.qualifiedName))"
                )
            }
            let keyBytes = try set.encodeKey(key)
            guard let entity = try set.get(t.reader, key: key) else {
                throw EntityError.notFound(set: set.name, key: set.describeKey(key))
            }
            _ = try chainForChange(t, set: set, keyBytes: keyBytes, entity: entity)
            record = RequestRecord(
                id: id, method: .call, entitySet: set.name, entityKey: Self.entityKey(set, key), keyBytes: keyBytes,
                body: call.text, options: options, repeatabilityID: EDMGuid.random(), createdAt: .now,
                dependencies: [], localKey: false)
        } else {
            guard setName == nil, key == nil else {
                throw EntityError.badInput("\(operation.name) is unbound: it is not called on an entity")
            }
            record = RequestRecord(
                id: id, method: .call, entitySet: "", entityKey: "", keyBytes: Self.unboundCallKey(id),
                body: call.text, options: options, repeatabilityID: EDMGuid.random(), createdAt: .now,
                dependencies: [], localKey: false)
        }
        var r = record
        r.nonMergeable = true
        try put(t, r, hasDependents: false)
        try t.put(store.meta, Self.lastCallKey, withUnsafeBytes(of: UInt64(bitPattern: id).bigEndian) { Array($0) })
        return id
    }

    /// Whether an operation call was queued after request `id` (nil: none): a later change then
    /// never merges into, cancels or supersedes it, which would move that change to the other
    /// side of the call. Read from the last call's id, kept after the call leaves the queue —
    /// which it does only after every request before it that its flush sent.
    func callQueued(_ t: ReadView, after id: Int64?) throws -> Bool {
        guard let id, let bytes = try t.get(store.meta, Self.lastCallKey), bytes.count == 8 else { return false }
        return Int64(bitPattern: bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }) > id
    }

    /// `parameters` checked against `operation`'s and written as the body keeps them: names it
    /// declares, values of their types and facets, null where left out (refused when not nullable).
    /// A V2 import bound by `sap:action-for` takes the entity's key as parameters: those left out
    /// are the binding entity's key, written in when the call is sent (its key may be a local one
    /// the service replaces before then).
    func encode(
        _ parameters: Properties, of operation: ServiceOperation, boundTo setName: String?
    ) throws -> [OperationCall.Parameter] {
        let schema = store.schema
        try OperationCall.checkNames(parameters.keys, of: operation)
        let bindingKey = Set(setName.flatMap { try? store.set($0).type.key } ?? [])
        var sent: [OperationCall.Parameter] = []
        for var property in try OperationCall.properties(of: operation, schema: schema) {
            if operation.isBound && bindingKey.contains(property.name) { property.nullable = true }
            let value = parameters[property.name] ?? .null
            try Validation.check(value, against: property, schema: schema)
            var text = ""
            ValueJSON(schema: schema).write(value, type: property.type, to: &text)
            sent.append(OperationCall.Parameter(name: property.name, type: property.type.description, value: text))
        }
        return sent
    }

    /// Fixes call `id`, which the service refused (its ErrorArchive entry, not one archived for
    /// depending on another): its parameters become `parameters`, checked as `call` checks them,
    /// and it goes back to pending in its place, with those archived because of it
    /// (`retryError`); the next flush sends it. Returns the ids revived.
    package func fixCall(_ t: WriteView, id: Int64, parameters: Properties) throws -> [Int64] {
        guard let r = try record(t.reader, id: id), r.method == .call else {
            throw EntityError.badInput("request \(id) is not a queued operation call")
        }
        guard r.status == .error else {
            throw EntityError.badInput(
                "request \(id) was not refused: only a refused call is fixed (undo it to drop it)")
        }
        var call = try OperationCall.of(r)
        guard let operation = store.schema.operation(named: call.operation, boundTo: call.bindingType) else {
            throw EntityError.badInput(
                "the service's $metadata no longer declares \(call.operation)\(call.bindingType.map { " bound to \($0)" } ?? ""): give the call up (resolveError)"
            )
        }
        call.parameters = try encode(parameters, of: operation, boundTo: r.isUnboundCall ? nil : r.entitySet)
        var fixed = r
        fixed.body = call.text
        let entry = try chain(t.reader, set: r.entitySet, keyBytes: r.keyBytes).first { $0.id == id }
        try put(t, fixed, hasDependents: entry?.hasDependents ?? false)
        return try retryError(t, id: id)
    }

    /// Unbound call `r` applied by the service: it leaves the queue.
    package func acknowledgeUnboundCall(_ t: WriteView, _ r: RequestRecord) throws {
        try remove(t, r)
    }

    /// Drops unbound call `r` from the queue (undone, given up): it changed nothing here.
    func dropUnboundCall(_ t: WriteView, _ r: RequestRecord) throws {
        guard r.status != .sent else {
            throw EntityError.badInput(
                "request \(r.id) (\(r.method.rawValue)) was already sent to the service and cannot be undone; flush first"
            )
        }
        try remove(t, r)
        try recordOutcome(t, r, r.status == .error ? .givenUp : .undone)
        try t.delete(try store.set(SystemSets.errorArchive).entities, try KeyCodec.encode([.int(r.id)]))
    }
}
