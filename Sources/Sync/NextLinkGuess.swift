import Storage

/// A page's next link read from the end of its body before the page is parsed, so that the next
/// page is asked for while this one is parsed and written (`Refresher.fetchPages`).
///
/// A service that streams its entities can write the next link only after them (`serve` does), so
/// it is usually in the body's last bytes; a service that writes it first gets no guess and is read
/// page after page, as before. (mock-sap does not page, so no SAP-shaped service here shows where
/// Gateway puts `__next`.) The guess is only a guess: the
/// parse still reads the link, and a prefetch whose URL differs from it is dropped and the real
/// link fetched — a wrong guess costs one GET, never a wrong page. A GET has no effect on the
/// service, and the request goes through the same backend, which refuses another origin.
package enum NextLinkGuess {
    /// Bytes at the end of a body searched.
    static let window = 16 * 1024

    static let names: [[UInt8]] = [
        "\"@odata.nextLink\"", "\"@nextLink\"", "\"odata.nextLink\"", "\"__next\"",
    ].map { Array($0.utf8) }

    /// The value of the last next-link member in `tail` (the body's last bytes), or nil.
    package static func guess(_ tail: [UInt8]) -> String? {
        var best: (at: Int, link: String)? = nil
        for name in names {
            guard let at = lastIndex(of: name, in: tail), at > (best?.at ?? -1),
                let link = stringValue(tail, after: at + name.count)
            else { continue }
            best = (at, link)
        }
        return best?.link
    }

    /// The JSON string after `: ` at `start`, unescaped.
    static func stringValue(_ bytes: [UInt8], after start: Int) -> String? {
        var i = start
        func skipSpace() { while i < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[i]) { i += 1 } }
        skipSpace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { return nil }
        i += 1
        skipSpace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { return nil }
        let open = i
        i += 1
        while i < bytes.count {
            switch bytes[i] {
            case UInt8(ascii: "\\"): i += 2
            case UInt8(ascii: "\""):
                guard case .string(let s)? = try? JSON.parse(Array(bytes[open...i])) else { return nil }
                return s
            default: i += 1
            }
        }
        return nil
    }

    static func lastIndex(of needle: [UInt8], in bytes: [UInt8]) -> Int? {
        guard needle.count <= bytes.count else { return nil }
        var i = bytes.count - needle.count
        while i >= 0 {
            if bytes[i] == needle[0], bytes[i..<(i + needle.count)].elementsEqual(needle) { return i }
            i -= 1
        }
        return nil
    }
}
