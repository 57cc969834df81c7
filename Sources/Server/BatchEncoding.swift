import Foundation
import HTTPTypes
import OfflineStore
import Query
import Storage

/// The JSON form of `$batch` read and written (`Batch`), and a write unit's answers as its
/// recorded response.
extension Batch {
    // MARK: Encoding

    /// Parses and checks the request: ids unique, methods known, groups adjacent, `dependsOn`
    /// naming earlier requests or groups only, at most `maxWrites` writes and `maxMultipartParts`
    /// reads (else 413).
    static func parse(_ json: JSON, maxWrites: Int = .max) throws -> [Item] {
        guard case .array(let requests)? = json["requests"] else {
            throw ODataFailure(.badRequest, "a JSON batch is an object with a \"requests\" array")
        }
        var items: [Item] = []
        var writeCount = 0, readCount = 0
        var seen = Set<String>(), groups = Set<String>(), closedGroups = Set<String>()
        for (n, r) in requests.enumerated() {
            guard case .object = r else {
                throw ODataFailure(.badRequest, "request \(n + 1) of the batch is not an object")
            }
            guard case .string(let id)? = r["id"], !id.isEmpty else {
                throw ODataFailure(.badRequest, "request \(n + 1) of the batch has no \"id\"")
            }
            guard seen.insert(id).inserted else {
                throw ODataFailure(.badRequest, "request id '\(QueryError.quoting(id))' appears twice in the batch")
            }
            guard case .string(let m)? = r["method"], let method = HTTPRequest.Method(m.uppercased()),
                [.get, .head, .post, .patch, .put, .delete].contains(method)
            else {
                throw ODataFailure(
                    .badRequest, "request '\(QueryError.quoting(id))' has no method, or one this service does not take")
            }
            if writes(method) {
                writeCount += 1
                if writeCount > maxWrites { throw tooManyWrites(maxWrites) }
            } else {
                readCount += 1
                if readCount > maxMultipartParts { throw tooManyReads() }
            }
            guard case .string(let url)? = r["url"] else {
                throw ODataFailure(.badRequest, "request '\(QueryError.quoting(id))' has no \"url\"")
            }
            var headers: [(String, String)] = []
            if let h = r["headers"] {
                guard case .object(let members) = h else {
                    throw ODataFailure(
                        .badRequest, "the headers of request '\(QueryError.quoting(id))' are not an object")
                }
                for (name, value) in members {
                    guard case .string(let v) = value else {
                        throw ODataFailure(
                            .badRequest,
                            "header '\(QueryError.quoting(name))' of request '\(QueryError.quoting(id))' is not a string"
                        )
                    }
                    headers.append((name, v))
                }
            }
            var body: [UInt8] = []
            switch r["body"] {
            case nil, .null?: break
            case .string(let s)?: body = Array(s.utf8)
            case let v?: var text = ""; JSONWriter.write(v, to: &text); body = Array(text.utf8)
            }
            var group: String? = nil
            if let g = r["atomicityGroup"] {
                guard case .string(let name) = g, !name.isEmpty else {
                    throw ODataFailure(
                        .badRequest, "the atomicityGroup of request '\(QueryError.quoting(id))' is not a string")
                }
                if closedGroups.contains(name) {
                    throw ODataFailure(
                        .badRequest, "the requests of atomicity group '\(QueryError.quoting(name))' are not adjacent")
                }
                if seen.contains(name) && !groups.contains(name) {
                    throw ODataFailure(
                        .badRequest, "atomicity group '\(QueryError.quoting(name))' has the name of a request")
                }
                group = name
            }
            if let last = items.last?.group, last != group { closedGroups.insert(last) }
            if let group { groups.insert(group) }
            var dependsOn: [String] = []
            if let d = r["dependsOn"] {
                guard case .array(let names) = d else {
                    throw ODataFailure(.badRequest, "dependsOn of request '\(QueryError.quoting(id))' is not an array")
                }
                for case .string(let name) in names {
                    guard (seen.contains(name) && name != id) || (groups.contains(name) && name != group) else {
                        throw ODataFailure(
                            .badRequest,
                            "request '\(QueryError.quoting(id))' depends on '\(QueryError.quoting(name))', which is not an earlier request or group"
                        )
                    }
                    dependsOn.append(name)
                }
            }
            items.append(
                Item(id: id, method: method, url: url, headers: headers, body: body, group: group, dependsOn: dependsOn)
            )
        }
        return items
    }

    static func render(_ items: [Item], _ answers: [Answer]) -> [UInt8] {
        var out = JSONBuffer()
        out.append("{\"responses\":[")
        for (n, (item, a)) in zip(items, answers).enumerated() {
            if n > 0 { out.append(UInt8(ascii: ",")) }
            out.append("{\"id\":")
            out.appendString(item.id)
            if let g = item.group { out.append(",\"atomicityGroup\":"); out.appendString(g) }
            out.append(",\"status\":")
            out.appendInt(Int64(a.status))
            out.append(",\"headers\":{")
            for (k, (name, value)) in a.headers.enumerated() {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                out.appendString(name.lowercased())
                out.append(UInt8(ascii: ":"))
                out.appendString(value)
            }
            out.append("}")
            if !a.body.isEmpty {
                out.append(",\"body\":")
                let isJSON = a.headers.contains {
                    $0.0.lowercased() == "content-type" && $0.1.hasPrefix("application/json")
                }
                if isJSON {
                    var body = a.body
                    while body.last == UInt8(ascii: "\n") { body.removeLast() }
                    out.bytes.append(contentsOf: body)
                } else {
                    out.appendString(String(decoding: a.body, as: UTF8.self))
                }
            }
            out.append("}")
        }
        out.append("]}\n")
        return out.bytes
    }

    /// A unit's answers as the body of its recorded response: a JSON array of
    /// `{"status","headers":[[name,value]…],"body":"<base64>","entity":url}`.
    static func encodeAnswers(_ answers: [Answer]) -> [UInt8] {
        var out = JSONBuffer()
        out.append("[")
        for (n, a) in answers.enumerated() {
            if n > 0 { out.append(UInt8(ascii: ",")) }
            out.append("{\"status\":")
            out.appendInt(Int64(a.status))
            out.append(",\"headers\":[")
            for (k, (name, value)) in a.headers.enumerated() {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                out.append("[")
                out.appendString(name)
                out.append(UInt8(ascii: ","))
                out.appendString(value)
                out.append("]")
            }
            out.append("],\"body\":")
            out.appendString(Data(a.body).base64EncodedString())
            if let url = a.entityURL { out.append(",\"entity\":"); out.appendString(url) }
            out.append("}")
        }
        out.append("]")
        return out.bytes
    }

    static func decodeAnswers(_ bytes: [UInt8]) throws -> [Answer] {
        guard case .array(let list) = try JSON.parse(bytes) else {
            throw ODataFailure(.internalServerError, "a recorded batch unit is not an array")
        }
        return try list.map { a in
            guard case .number(let s)? = a["status"], let status = Int(s), case .array(let hs)? = a["headers"],
                case .string(let b64)? = a["body"], let body = Data(base64Encoded: b64)
            else {
                throw ODataFailure(.internalServerError, "a recorded batch answer is malformed")
            }
            var headers: [(String, String)] = []
            for case .array(let pair) in hs {
                if pair.count == 2, case .string(let n) = pair[0], case .string(let v) = pair[1] {
                    headers.append((n, v))
                }
            }
            var url: String? = nil
            if case .string(let u)? = a["entity"] { url = u }
            return Answer(status: status, headers: headers, body: Array(body), entityURL: url)
        }
    }
}
