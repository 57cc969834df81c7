/// The origin of a URL — scheme, host and port (RFC 6454) — the boundary that credentials and
/// followed links do not cross.
package enum Origin {
    /// Whether `url` is absolute (has a scheme): `http://…`, `https://…`, or any `scheme:`.
    package static func isAbsolute(_ url: String) -> Bool {
        guard let colon = url.firstIndex(of: ":") else { return false }
        let scheme = url[..<colon]
        guard let first = scheme.first, first.isLetter else { return false }
        return scheme.allSatisfy { $0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == "." }
            && !scheme.contains("/") && !scheme.contains("?") && !scheme.contains("(")
    }

    /// `scheme://host:port`, lowercased, with the scheme's default port made explicit; nil for a
    /// URL that is not http(s) or has no host. User information (`user@`) is not part of it, and a
    /// URL that carries some gets nil: it is never followed.
    package static func of(_ url: String) -> String? {
        let lower = url.lowercased()
        let scheme: String, defaultPort: String
        if lower.hasPrefix("http://") {
            (scheme, defaultPort) = ("http", "80")
        } else if lower.hasPrefix("https://") {
            (scheme, defaultPort) = ("https", "443")
        } else {
            return nil
        }
        let rest = lower.dropFirst(scheme.count + 3)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !authority.isEmpty, !authority.contains("@"), !authority.contains("\\") else { return nil }
        var host = Substring(authority), port = defaultPort
        if let colon = authority.lastIndex(of: ":"), !authority[colon...].contains("]") {
            host = authority[..<colon]
            port = String(authority[authority.index(after: colon)...])
            guard !port.isEmpty, port.allSatisfy(\.isNumber), let n = Int(port), n <= 65_535 else { return nil }
            port = String(n)
        }
        guard !host.isEmpty else { return nil }
        return "\(scheme)://\(host):\(port)"
    }
}
