/// The URLs a store sends requests to — its `serviceRoot`, an OAuth `tokenURL`, a `--service` —
/// checked where they come in (the configuration's JSON, an `.ini`, an option), so that a URL
/// the HTTP client cannot use is a one-line error naming where it came from, never a trap in the
/// client (a port past 65535 made AsyncHTTPClient's connect die: "Not enough bits to represent
/// the passed value").
package enum ServiceURL {
    /// Throws `EntityError.badInput` naming `option` unless `url` is `http://` or `https://`, a
    /// host (a DNS name, an IPv4 address or a bracketed IPv6 literal), an optional port from 1 to
    /// 65535, and a path without spaces, control characters or a fragment. User information
    /// (`user:password@`) is refused without repeating it: credentials go in the configuration's
    /// `"authentication"`, never in a URL that is stored, logged and shown.
    package static func check(_ url: String, option: String) throws(EntityError) {
        let lower = url.lowercased()
        guard let scheme = ["http://", "https://"].first(where: lower.hasPrefix) else {
            throw .badInput("\(option) '\(excerpt(url))' is not an http:// or https:// URL")
        }
        let rest = url.dropFirst(scheme.count)
        let authority = String(rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" })
        if let at = authority.lastIndex(of: "@") {
            let shown = scheme + "…@" + authority[authority.index(after: at)...]
            throw .badInput(
                "\(option) must not carry a user name or password (\(excerpt(shown))): give the credentials in the configuration's \"authentication\" member (\"type\": \"basic\" with \"passwordEnv\" or \"passwordFile\"), which keeps no secret in the store"
            )
        }
        guard url.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F }), !url.contains("#") else {
            throw .badInput("\(option) '\(excerpt(url))' holds a space, a control character or a fragment (#)")
        }
        guard isValidAuthority(authority) else {
            throw .badInput(
                "\(option) '\(excerpt(url))' has no valid host[:port] (a port is a number from 1 to 65535)")
        }
        if let port = port(of: authority), port == 0 {
            throw .badInput("\(option) '\(excerpt(url))': port 0 cannot be connected to (1 to 65535)")
        }
    }

    /// Whether `value` is `host[:port]`: a DNS name or IPv4 address (letters, digits, `-`, `.`,
    /// `_`), or an IPv6 literal in brackets, with an optional port 0…65535 (the `Host` header
    /// `serve` takes, and a service URL's authority).
    package static func isValidAuthority(_ value: String) -> Bool {
        let bytes = Array(value.utf8)
        guard !bytes.isEmpty, bytes.count <= 261 else { return false }
        var i = 0
        if bytes[0] == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")), close > 1 else { return false }
            for b in bytes[1..<close] {
                guard b == UInt8(ascii: ":") || b == UInt8(ascii: ".") || isHexDigit(b) else { return false }
            }
            i = close + 1
        } else {
            while i < bytes.count, bytes[i] != UInt8(ascii: ":") {
                let b = bytes[i]
                guard isAlphanumeric(b) || b == UInt8(ascii: "-") || b == UInt8(ascii: ".") || b == UInt8(ascii: "_")
                else { return false }
                i += 1
            }
            guard i > 0 else { return false }
        }
        guard i < bytes.count else { return true }
        guard bytes[i] == UInt8(ascii: ":") else { return false }
        let digits = bytes[(i + 1)...]
        guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return false }
        return Int(String(decoding: digits, as: UTF8.self))! <= 65535
    }

    /// The port of a valid `host[:port]`, or nil without one.
    private static func port(of authority: String) -> Int? {
        guard let colon = authority.lastIndex(of: ":"), !authority[colon...].contains("]") else { return nil }
        return Int(authority[authority.index(after: colon)...])
    }

    private static func excerpt(_ url: String) -> String {
        url.count > 200 ? String(url.prefix(200)) + "…" : url
    }

    private static func isHexDigit(_ b: UInt8) -> Bool {
        (b >= 48 && b <= 57) || (b >= 65 && b <= 70) || (b >= 97 && b <= 102)
    }

    private static func isAlphanumeric(_ b: UInt8) -> Bool {
        (b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122)
    }
}
