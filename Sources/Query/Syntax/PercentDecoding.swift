/// Decodes `%XX` escapes (and `+` as a space in query strings). Malformed escapes are kept as
/// written; invalid UTF-8 becomes U+FFFD. Never fails.
func percentDecode(_ text: Substring, plusAsSpace: Bool) -> String {
    let bytes = Array(text.utf8)
    guard bytes.contains(UInt8(ascii: "%")) || (plusAsSpace && bytes.contains(UInt8(ascii: "+"))) else {
        return String(text)
    }
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count)
    var i = 0
    while i < bytes.count {
        let b = bytes[i]
        if b == UInt8(ascii: "%"), i + 2 < bytes.count, let hi = hexNibble(bytes[i + 1]), let lo = hexNibble(bytes[i + 2]) {
            out.append(hi << 4 | lo)
            i += 3
            continue
        }
        out.append(plusAsSpace && b == UInt8(ascii: "+") ? UInt8(ascii: " ") : b)
        i += 1
    }
    return String(decoding: out, as: UTF8.self)
}

private func hexNibble(_ b: UInt8) -> UInt8? {
    switch b {
    case 48...57: b - 48
    case 65...70: b - 55
    case 97...102: b - 87
    default: nil
    }
}
