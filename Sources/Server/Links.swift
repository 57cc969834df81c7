import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OfflineStore
import Storage

/// Link writes over HTTP, for navigations without a referential constraint: V4
/// `POST Set(key)/Nav/$ref` (`{"@odata.id": …}`; `PUT` for a single-valued navigation) and
/// `DELETE Set(key)/Nav/$ref?$id=…` (OData 4.01 Part 1 §11.4.6), V2 `POST`/`PUT
/// Set(key)/$links/Nav` (`{"uri": …}`) and `DELETE Set(key)/$links/Nav(key)` ([MS-ODATA]
/// §2.2.7.1.3) — on their own or in a `$batch`, repeatable as any write. An authority changes its
/// own links; an offline copy queues the change (`RequestQueue.changeLink`) with the
/// `OfflineOData.*` headers of any other write (`ServedTransaction.changeLink`). Answered 204. A
/// navigation with a referential constraint is changed through its foreign key: 400 saying so.
enum Links {
    /// Whether `resource` with `method` is a link write (`…/Nav/$ref`, V2 `…/$links/Nav`).
    static func isLinkWrite(_ method: HTTPRequest.Method, _ resource: String) -> Bool {
        guard method == .post || method == .put || method == .delete else { return false }
        let path = resource.removingPercentEncoding ?? resource
        return path.contains("/$links/") || path.hasSuffix("/$ref")
    }

    /// The link write `method` on `resource` (with `query` and `body`) asks for; nil when it is
    /// not one. The dialect is the path's: `$ref` is V4's, `$links` V2's.
    static func operation(
        _ store: OfflineStore, method: HTTPRequest.Method, resource given: String, query: String, body: [UInt8]
    ) throws -> WriteOp? {
        guard isLinkWrite(method, given) else { return nil }
        let resource = given.removingPercentEncoding ?? given
        let v2 = resource.contains("/$links/")
        // The source entity, the navigation, and (for a V2 DELETE) the target its path names.
        let path: String
        var navigation: String
        var named: String? = nil
        if v2 {
            let parts = resource.components(separatedBy: "/$links/")
            guard parts.count == 2, !parts[1].isEmpty, !parts[1].contains("/") else {
                throw ODataFailure(.badRequest, "a $links path is Set(key)/$links/Navigation")
            }
            path = parts[0]
            navigation = parts[1]
            if let open = parts[1].firstIndex(of: "("), method == .delete {
                navigation = String(parts[1][..<open])
                named = String(parts[1][open...])
            }
        } else {
            let trimmed = String(resource.dropLast("/$ref".count))
            guard let slash = trimmed.lastIndex(of: "/") else {
                throw ODataFailure(.badRequest, "a $ref path is Set(key)/Navigation/$ref")
            }
            path = String(trimmed[..<slash])
            navigation = String(trimmed[trimmed.index(after: slash)...])
        }
        let (set, key) = try store.parseEntityPath(path)
        let type = try store.entities.set(set).type
        guard let nav = type.navigationProperties.first(where: { $0.name == navigation }) else {
            throw ODataFailure(.notFound, "\(set) has no navigation property '\(QueryError.quoting(navigation))'")
        }
        guard let targetSet = store.schema.targetSet(of: nav, from: set) else {
            throw ODataFailure(.notImplemented, "the entity set \(navigation) of \(set) leads to is not known")
        }
        for option in query.split(separator: "&") where !option.hasPrefix("$id=") || method != .delete {
            throw ODataFailure(
                .badRequest,
                "a link write takes no query options but $id on a DELETE ('\(QueryError.quoting(String(option)))')")
        }
        // The target: the body's id (POST, PUT), `$id` (a V4 DELETE), the path's key (a V2 DELETE).
        var target: [Value]? = nil
        switch method {
        case .post, .put:
            guard let json = try? JSON.parse(body),
                case .string(let id)? = json[v2 ? "uri" : "@odata.id"] ?? json["d"]?["uri"]
            else {
                throw ODataFailure(
                    .badRequest, v2 ? "the body is {\"uri\": \"…\"}" : "the body is {\"@odata.id\": \"…\"}")
            }
            target = try self.target(store, id, set: targetSet)
        default:
            if let named {
                target = try self.target(store, targetSet + named, set: targetSet)
            } else if let id = option("$id", in: query) {
                target = try self.target(store, id, set: targetSet)
            } else if nav.isCollection {
                throw ODataFailure(.badRequest, "a DELETE of a collection's link names its target ($id)")
            }
        }
        return .link(set: set, key: key, navigation: navigation, target: target, adding: method != .delete)
    }

    /// The key of the entity of `set` an id names: `Tags(3)`, `http://host/service/Tags(3)`.
    static func target(_ store: OfflineStore, _ id: String, set: String) throws -> [Value] {
        let decoded = id.removingPercentEncoding ?? id
        guard let start = decoded.range(of: set + "(", options: .backwards)?.lowerBound else {
            throw ODataFailure(.badRequest, "'\(QueryError.quoting(id))' is not an entity of \(set)")
        }
        let (named, key) = try store.parseEntityPath(String(decoded[start...]))
        guard named == set else {
            throw ODataFailure(.badRequest, "'\(QueryError.quoting(id))' is not an entity of \(set)")
        }
        return key
    }

    /// The value of query option `name` (percent-decoded), or nil.
    static func option(_ name: String, in query: String) -> String? {
        for part in query.split(separator: "&") {
            let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
            if pair.count == 2, (pair[0].removingPercentEncoding ?? pair[0]) == name {
                return pair[1].removingPercentEncoding ?? pair[1]
            }
        }
        return nil
    }
}
