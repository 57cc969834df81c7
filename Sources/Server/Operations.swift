import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OfflineStore
import Query
import Storage

/// Operations over HTTP (issue 40, item 4): V4 `POST Set(key)/NS.Action` and `POST Import`
/// (parameters a JSON object), `GET Set(key)/NS.Function(…)` and `GET Import(A=1)`; V2 a function
/// import with the method it declares and its parameters as query options (`POST
/// ReleaseSalesOrder?SalesOrderID='1'`).
///
/// - An **action** on an offline store is queued (`OfflineStore.call`) and answered
///   `202 Accepted`, no body, with `Location` naming its request (`RequestQueue(id)`): accepted,
///   not executed — the next flush calls the service. Repeatable as any write
///   (`Repeatability-Request-ID`, SAP's `RequestID`), with the `OfflineOData.*` request options.
/// - An **authority** has no business logic to run: its `$metadata` leaves operations out
///   (`servedMetadata`), and a call of one is answered 501 saying why.
/// - A **function** is answered from the local query the configuration maps it to
///   (`localFunctions`), as that query is answered; unmapped, 501 saying it needs the service.
enum Operations {
    /// A call a request's path names.
    struct Call {
        var operation: ServiceOperation
        /// The entity a bound operation is called on.
        var set: String?
        var key: [Value]?
        /// Its parameters as URL literals, by name: V4 `Fn(A=1)`, V2 the query's options.
        var literals: [(String, String)]
    }

    /// The call `resource` (percent-encoded) and `query` name — nil when they name none (most
    /// requests: a store whose `$metadata` declares no operation answers nil at once).
    static func call(_ store: OfflineStore, resource: String, query: String) throws -> Call? {
        guard !store.schema.operations.isEmpty else { return nil }
        let path = resource.removingPercentEncoding ?? resource
        // The last segment, and its parenthesised parameters (a V4 function's).
        var prefix: String? = nil
        var last = Substring(path)
        if let slash = path.lastIndex(of: "/"), path[..<slash].hasSuffix(")") {
            prefix = String(path[..<slash])
            last = path[path.index(after: slash)...]
        }
        var name = last
        var inParens: Substring? = nil
        if let open = last.firstIndex(of: "("), last.hasSuffix(")") {
            name = last[..<open]
            inParens = last[last.index(after: open)..<last.index(before: last.endIndex)]
        }
        let overloads = store.schema.operations(named: String(name))
        guard !overloads.isEmpty else { return nil }
        var call: Call
        if let prefix {
            guard let (set, key) = try? store.parseEntityPath(prefix) else { return nil }
            let type = store.schema.entityType(ofSet: set)?.qualifiedName
            guard let op = overloads.first(where: { $0.bindingType == type && !$0.bindingIsCollection }) else {
                throw ODataFailure(
                    .notFound,
                    "\(name) has no overload bound to an entity of \(set); it is: \(overloads.map(\.signature).joined(separator: "; "))"
                )
            }
            call = Call(operation: op, set: set, key: key, literals: [])
        } else {
            // At the service root: an import (V4), or a V2 function import, bound or not.
            guard store.schema.entitySet(String(name)) == nil,
                let op = overloads.first(where: { $0.importName == String(name) || store.schema.version != .v4 })
            else { return nil }
            call = Call(operation: op, set: nil, key: nil, literals: [])
        }
        if let inParens, !inParens.isEmpty {
            call.literals = try split(inParens, what: "\(name)'s parameters")
        }
        // V2: the parameters are the query's options (`$format` aside).
        for option in query.split(separator: "&") where !option.isEmpty {
            let (n, v) = try pair(option, what: "a query option")
            if n == "$format" { continue }
            guard !n.hasPrefix("$"), !n.hasPrefix("@") else {
                throw ODataFailure(.badRequest, "a call of \(name) takes no query option '\(QueryError.quoting(n))'")
            }
            call.literals.append((n, v))
        }
        return call
    }

    /// `A=1,B='x,y'` as pairs (commas inside quotes kept).
    private static func split(_ text: Substring, what: String) throws -> [(String, String)] {
        var parts: [Substring] = []
        var start = text.startIndex
        var quoted = false
        for i in text.indices {
            if text[i] == "'" { quoted.toggle() }
            if text[i] == ",", !quoted {
                parts.append(text[start..<i])
                start = text.index(after: i)
            }
        }
        parts.append(text[start...])
        return try parts.map { try pair($0, what: what) }
    }

    private static func pair(_ text: Substring, what: String) throws -> (String, String) {
        guard let eq = text.firstIndex(of: "=") else {
            throw ODataFailure(.badRequest, "\(what): expected Name=value, not '\(QueryError.quoting(String(text)))'")
        }
        let name = String(text[..<eq]).removingPercentEncoding ?? String(text[..<eq])
        let value = String(text[text.index(after: eq)...])
        return (name, (value.replacingOccurrences(of: "+", with: " ")).removingPercentEncoding ?? value)
    }

    /// The parameters a call's literals give, typed as the operation declares them (an action
    /// of a V2 import: its parameters come in the URL).
    static func parameters(_ store: OfflineStore, _ call: Call) throws -> Properties {
        var out = Properties()
        let json = ValueJSON(schema: store.schema)
        for (name, text) in call.literals {
            guard let p = call.operation.parameters.first(where: { $0.name == name }) else {
                throw ODataFailure(
                    .badRequest,
                    "\(call.operation.name) has no parameter '\(QueryError.quoting(name))' (it has: \(call.operation.parameters.map(\.name).joined(separator: ", ")))"
                )
            }
            guard let type = p.type.primitive, !p.type.isCollection else {
                throw ODataFailure(
                    .notImplemented, "parameter \(name) is of type \(p.type): only primitive parameters come in a URL")
            }
            let literal = try Literal.parse(text, version: store.schema.version)
            guard case .primitive(let value, let given) = literal else {
                if case .null = literal { out[name] = .null; continue }
                throw ODataFailure(.badRequest, "parameter \(name): '\(QueryError.quoting(text))' is not a \(type)")
            }
            // Through JSON, as a body would give it: the literal's type made the parameter's.
            var text = ""
            json.write(value, type: .primitive(given), to: &text)
            out[name] = try json.value(from: try JSON.parse(Array(text.utf8)), type: .primitive(type), property: name)
        }
        return out
    }

    /// The write an action call asks for: its parameters from the URL (V2's query, V4's
    /// parentheses) and the JSON `body` (V4), checked against the operation's; a V2 import bound
    /// by `sap:action-for` called on the entity its key parameters name. An authority runs no
    /// action: 501.
    static func write(_ store: OfflineStore, _ call: Call, body: [UInt8]) throws -> WriteOp {
        try requireOffline(store, call.operation)
        var parameters = try Operations.parameters(store, call)
        if !body.isEmpty {
            for (name, value) in try store.operationParameters(call.operation.name, on: call.set, json: body) {
                parameters[name] = value
            }
        }
        var (set, key) = (call.set, call.key)
        if set == nil, call.operation.isBound { (set, key) = try binding(store, call, parameters) }
        return .call(call.operation, set: set, key: key, parameters: parameters)
    }

    /// Refuses an action on an authority (501): it runs no business logic.
    static func requireOffline(_ store: OfflineStore, _ op: ServiceOperation) throws {
        guard store.isOffline else {
            throw ODataFailure(
                .notImplemented,
                "\(op.name) is an action, and this store is the authority for its data: it runs no business logic, so it executes no action (its $metadata lists none)"
            )
        }
    }

    /// The entity a V2 import bound by `sap:action-for` is called on: the import's entity set
    /// (else the first of its binding type), keyed by the key parameters the call gives.
    static func binding(_ store: OfflineStore, _ call: Call, _ parameters: Properties) throws -> (String, [Value]) {
        let op = call.operation
        let sets = store.schema.entitySetNames.filter {
            store.schema.entityType(ofSet: $0)?.qualifiedName == op.bindingType
        }
        guard let set = op.entitySet.flatMap({ sets.contains($0) ? $0 : nil }) ?? sets.first,
            let type = store.schema.entityType(ofSet: set)
        else {
            throw ODataFailure(
                .notImplemented, "\(op.name) acts on \(op.bindingType ?? "?"), which no entity set here holds")
        }
        let key = type.key.map { parameters[$0] ?? .null }
        guard !key.contains(where: \.isNull) else {
            throw ODataFailure(
                .badRequest,
                "\(op.name) acts on an entity of \(set): give its key (\(type.key.joined(separator: ", ")))")
        }
        return (set, key)
    }

    /// `$metadata` as `store` serves it: an authority's without its operations (it runs no
    /// business logic, so it advertises none); an offline store's as the service's.
    static func servedMetadata(_ store: OfflineStore) -> [UInt8] {
        let metadata = store.entities.metadata
        guard !store.isOffline, !store.schema.operations.isEmpty else { return metadata }
        return withoutOperations(metadata)
    }

    /// CSDL without its `Action`, `Function`, `ActionImport` and `FunctionImport` elements
    /// (with any namespace prefix; none of them nests another of the four).
    static func withoutOperations(_ xml: [UInt8]) -> [UInt8] {
        var text = String(decoding: xml, as: UTF8.self)
        let names = "(?:Action|Function|ActionImport|FunctionImport)"
        let patterns = [
            "<((?:[A-Za-z_][\\w.-]*:)?\(names))\\b[^>]*/>",
            "<((?:[A-Za-z_][\\w.-]*:)?\(names))\\b[^>]*>.*?</\\1\\s*>",
        ]
        for pattern in patterns {
            guard let regex = try? NSRegularExpression(pattern: pattern, options: [.dotMatchesLineSeparators]) else {
                continue
            }
            text = regex.stringByReplacingMatches(
                in: text, range: NSRange(text.startIndex..., in: text), withTemplate: "")
        }
        return Array(text.utf8)
    }
}

extension ODataService {
    /// A request that names an operation (`Operations.call`): a function answered from its local
    /// query, an action queued (`Writes.call`), or 501 on an authority.
    func operation(_ request: inout Request, _ call: Operations.Call) async throws -> Response {
        let op = call.operation
        let method = request.method
        if op.kind == .function {
            let allowed: Set<HTTPRequest.Method> = [.get, .head]
            guard allowed.contains(method) else {
                throw ODataFailure.methodNotAllowed(method, "function \(op.name)", allow: "GET")
            }
            let url: String
            do {
                url = try store.localFunctionURL(op, on: call.set, key: call.key, literals: call.literals)
            } catch let e as EntityError {
                throw ODataFailure(.notImplemented, "\(e)")
            }
            let path = String(url.prefix { $0 != "?" })
            return try await Reads(service: self).get(request, url: url, resource: path)
        }
        try Operations.requireOffline(store, op)
        let expected = store.schema.version == .v4 ? "POST" : op.httpMethod
        guard method.rawValue == expected else {
            throw ODataFailure.methodNotAllowed(method, "action \(op.name)", allow: expected)
        }
        return try await Writes(service: self).call(&request, call)
    }
}
