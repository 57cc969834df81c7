import Storage

/// An error answer as OData services write it, V4 and V2 (SAP Gateway's envelope):
///
/// ```json
/// {"error":{"code":"…","message":"text","details":[{"code":"…","message":"…"}]}}                 // V4
/// {"error":{"code":"/IWBEP/CX_MGW_BUSI_EXCEPTION","message":{"lang":"en","value":"text"},
///           "innererror":{"errordetails":[{"code":"…","message":"…","severity":"error"}]}}}      // V2
/// ```
package struct ServiceMessage: Sendable, Hashable {
    /// `error.code` (`/IWBEP/CX_MGW_BUSI_EXCEPTION`), when the service gave one.
    package var code: String?
    /// `error.message` (V4) or `error.message.value` (V2).
    package var message: String
    /// The details' messages, in order (V4 `error.details`, V2 `error.innererror.errordetails`),
    /// those that only repeat `message` left out.
    package var details: [String]

    /// The largest error body read as JSON: a service's error is a few lines, and one of
    /// megabytes of small values would take many times its size as a tree.
    package static let maxBytes = 1 << 20

    /// Reads `body`; nil when it is not an OData error object, or larger than `maxBytes`.
    package static func parse(_ body: [UInt8]) -> ServiceMessage? {
        guard body.count <= maxBytes, body.first(where: { $0 > 0x20 }) == UInt8(ascii: "{"),
            let doc = try? JSON.parse(body),
            let error = doc["error"]
        else { return nil }
        func text(_ j: JSON?) -> String? {
            switch j {
            case .string(let s)?: s
            case .object?: if case .string(let s)? = j?["value"] { s } else { nil }
            default: nil
            }
        }
        guard let message = text(error["message"]) else { return nil }
        var code: String? = nil
        if case .string(let c)? = error["code"], !c.isEmpty { code = c }
        var details: [String] = []
        for list in [error["details"], error["innererror"]?["errordetails"]] {
            guard case .array(let items)? = list else { continue }
            for item in items {
                if let m = text(item["message"]), m != message, !details.contains(m) { details.append(m) }
            }
        }
        return ServiceMessage(code: code, message: message, details: details)
    }

    /// `message` (`code`), then the details: one line for an error report.
    package var summary: String {
        var s = message
        if let code { s += " (\(code))" }
        if !details.isEmpty { s += "; " + details.joined(separator: "; ") }
        return s
    }
}
