/// Decodes `%XX` escapes, and `+` as a space in query strings — except a `+` between two digits,
/// which stays a plus so `2022-02-02T15:50:00+02:00` and `1e+5` read as written. Malformed escapes
/// are kept as written. Throws when the decoded bytes are not valid UTF-8, naming `part`.
package func percentDecode(_ text: Substring, plusAsSpace: Bool, part: String?) throws(QueryError) -> String {
    let bytes = Array(text.utf8)
    guard bytes.contains(UInt8(ascii: "%")) || (plusAsSpace && bytes.contains(UInt8(ascii: "+"))) else {
        return String(text)
    }
    func isDigit(_ i: Int) -> Bool { i >= 0 && i < bytes.count && bytes[i] >= 48 && bytes[i] <= 57 }
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count)
    var i = 0
    while i < bytes.count {
        let b = bytes[i]
        if b == UInt8(ascii: "%"), i + 2 < bytes.count, let hi = hexNibble(bytes[i + 1]),
            let lo = hexNibble(bytes[i + 2])
        {
            out.append(hi << 4 | lo)
            i += 3
            continue
        }
        let plusIsSpace = plusAsSpace && b == UInt8(ascii: "+") && !(isDigit(i - 1) && isDigit(i + 1))
        out.append(plusIsSpace ? UInt8(ascii: " ") : b)
        i += 1
    }
    guard let s = String(validating: out, as: UTF8.self) else {
        throw QueryError("percent-encoded text is not valid UTF-8", option: part, column: nil)
    }
    return s
}

private func hexNibble(_ b: UInt8) -> UInt8? {
    switch b {
    case 48...57: b - 48
    case 65...70: b - 55
    case 97...102: b - 87
    default: nil
    }
}
