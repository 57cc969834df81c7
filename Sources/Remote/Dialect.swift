import Foundation
import Queue
package import Storage
package import Sync

/// How one version of OData writes what flush and refresh mean: the request a change becomes,
/// an entity's address, a page read. `V4Dialect` and `V2Dialect` are the two; `ODataBackend`
/// picks one by the store's `$metadata` and unwraps the answers.
package protocol Dialect: Sendable {
    /// What a service of this dialect offers.
    var capabilities: BackendCapabilities { get }
    /// The request that sends `change` (its `$batch` group, id and `dependsOn` are set by the caller).
    func request(for change: OutgoingChange, store: EntityStore) throws -> WireRequest
    /// `Set(key)` of an entity, in this dialect's literals, percent-encoded.
    func entityPath(set: String, key: [Value], keyText: String, store: EntityStore) throws -> String
    /// The headers of a page read (`Prefer`).
    func pageHeaders(_ page: PageRequest) -> [(String, String)]
    /// The query option that asks the service to count a collection.
    var countOption: String { get }
    /// `v` as a literal of this dialect in a URL (`$filter`), not yet percent-encoded.
    func literal(_ v: Value, type: EDMPrimitive?) -> String
}

/// What the two dialects share.
package enum Wire {
    /// Headers flush sets itself: a request's custom headers of these names are not sent.
    static let ownHeaders: Set<String> = [
        "repeatability-request-id", "repeatability-first-sent", "if-match", "content-type", "requestid",
        "repeatabilitycreation",
    ]

    /// `change`'s custom headers but those flush sets itself, in name order.
    static func customHeaders(_ change: OutgoingChange) -> [(String, String)] {
        change.customHeaders.filter { !ownHeaders.contains($0.0.lowercased()) }
    }

    /// The method of `kind` (a V2 partial update is `MERGE` unless configured otherwise: `V2Dialect`).
    static func method(_ kind: OutgoingChange.Kind) -> String {
        switch kind {
        case .create: "POST"
        case .update: "PATCH"
        case .replace: "PUT"
        case .delete: "DELETE"
        case .putStream: "PUT"
        case .createMedia: "POST"
        case .link: "POST"
        case .unlink: "DELETE"
        case .call: "POST"
        }
    }

    /// A media create's `Slug` (RFC 5023 §9.7), percent-encoded as that RFC asks of what is not
    /// printable ASCII (and of `%`).
    static func slug(_ change: OutgoingChange) -> [(String, String)] {
        guard let slug = change.stream?.slug, !slug.isEmpty else { return [] }
        var allowed = CharacterSet(charactersIn: " "..."~")
        allowed.remove("%")
        return [("Slug", slug.addingPercentEncoding(withAllowedCharacters: allowed) ?? slug)]
    }

    /// Where stream replacement `change` goes: the stream's edit link, else `entity/$value` or
    /// `entity/Name`.
    static func streamPath(_ change: OutgoingChange, entity: String) -> String {
        guard let stream = change.stream else { return entity }
        if let link = stream.editLink, !link.isEmpty { return link }
        return entity + (stream.name.isEmpty ? "/$value" : "/" + percentEncoded(stream.name))
    }

    /// The properties `change`'s body carries, read from the store's JSON.
    static func properties(_ change: OutgoingChange, store: EntityStore) throws -> Properties {
        guard let text = change.body else { return [:] }
        let set = try store.set(change.set)
        return try ValueJSON(schema: store.schema).properties(
            from: try JSON.parse(text), properties: set.type.properties, owner: change.set)
    }

    package static func percentEncoded(_ path: String) -> String {
        // Most paths (`Products('HT-1000')`) need nothing: return them without Foundation's pass.
        if path.utf8.allSatisfy({ pathAllowed[Int($0)] }) { return path }
        return path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? path
    }

    /// A query option's value, percent-encoded for a URL's query (`&`, `=`, `+` and `#` too).
    static func queryEncoded(_ value: String) -> String {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&=+#")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }

    /// The bytes `CharacterSet.urlPathAllowed` leaves as they are (RFC 3986 pchar and `/`, no `%`).
    private static let pathAllowed: [Bool] = (0..<256).map { b in
        guard b < 0x80, let scalar = Unicode.Scalar(b) else { return false }
        return CharacterSet.urlPathAllowed.contains(scalar)
    }

    /// An IMF-fixdate (RFC 9110 §5.6.7): `Sun, 06 Nov 1994 08:49:37 GMT`.
    package static func imfDate(_ at: EDMDateTimeOffset) -> String {
        var seconds = time_t(at.ticks / ticksPerSecond)
        var tm = tm()
        gmtime_r(&seconds, &tm)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return
            "\(days[Int(tm.tm_wday)]), \(two(tm.tm_mday)) \(months[Int(tm.tm_mon)]) \(tm.tm_year + 1900) \(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec)) GMT"
    }

    /// SAP's `sap-message` header (a JSON object: `code`, `message`, `severity`, `target`,
    /// `details` with more of the same), one line per message: `warning V1/302: text (target X)`.
    /// A header that is not such JSON is kept as its text.
    static func sapMessages(_ response: WireResponse) -> [String] {
        guard let header = response.header("sap-message"), !header.isEmpty else { return [] }
        guard let json = try? JSON.parse(Array(header.utf8)), case .object = json else {
            return ["info: " + String(header.prefix(500))]
        }
        func line(_ j: JSON) -> String? {
            guard case .string(let text)? = j["message"] else { return nil }
            var severity = "info"
            if case .string(let s)? = j["severity"], !s.isEmpty { severity = s.lowercased() }
            var out = severity
            if case .string(let c)? = j["code"], !c.isEmpty { out += " " + c }
            out += ": " + text
            if case .string(let target)? = j["target"], !target.isEmpty { out += " (target \(target))" }
            return out
        }
        var out: [String] = []
        if let first = line(json) { out.append(first) }
        if case .array(let details)? = json["details"] { out += details.compactMap(line) }
        return out
    }

    /// How the service handled a change's repeatability: OASIS `Repeatability-Result` (V4) or SAP
    /// Gateway's `RepeatabilityResult` (V2). `accepted` (and `serve`'s `replayed`, an answer from
    /// its record): executed once, whatever the attempts; nil when the service said nothing.
    static func repeatability(_ response: WireResponse) -> RepeatabilityResult? {
        guard let value = response.header("Repeatability-Result") ?? response.header("RepeatabilityResult") else {
            return nil
        }
        switch value.trimmingCharacters(in: .whitespaces).lowercased() {
        case "accepted", "replayed": return .accepted
        case "rejected": return .rejected
        default: return .unsupported
        }
    }

    /// The service's error as ErrorArchive keeps it (`{"error":{"code","message","innererror"}}`).
    static func serviceError(_ response: WireResponse) -> ServiceError {
        var e = ServiceError(httpStatus: response.status, message: "HTTP \(response.status)")
        guard response.body.count <= ServiceMessage.maxBytes, let json = try? JSON.parse(response.body),
            let error = json["error"]
        else {
            if !response.body.isEmpty { e.message = String(decoding: response.body.prefix(2000), as: UTF8.self) }
            return e
        }
        if case .string(let c)? = error["code"] { e.code = c }
        // V4 `error.message`, V2 (SAP Gateway) `error.message.value`.
        if let m = ServiceMessage.parse(response.body)?.message { e.message = m }
        if let inner = error["innererror"] ?? error["details"], inner != .null, inner != .array([]) {
            e.innerError = inner.text
        }
        return e
    }

    /// The entity of an answer: V2 wraps it in `d` (`{"d":{…}}`), V4 does not.
    static func entityJSON(_ json: JSON) -> JSON {
        if case .object(let members) = json, members.count == 1, let d = json["d"], case .object = d { return d }
        return json
    }

    /// The ETag an entity carries: V4 `@odata.etag`, V2 `__metadata.etag`.
    static func etag(in json: JSON) -> String? {
        if case .string(let tag)? = json["@odata.etag"] { return tag }
        if case .string(let tag)? = json["__metadata"]?["etag"] { return tag }
        return nil
    }
}
