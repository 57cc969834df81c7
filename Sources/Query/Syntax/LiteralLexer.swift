import Storage

/// Literal scanning: strings, numbers, dates, times, GUIDs and `prefix'…'` forms.
extension Lexer {
    /// Scans a literal starting at `pos`, or returns nil (consuming nothing) when none starts here.
    mutating func scanLiteralIfAny() throws(QueryError) -> Literal? {
        guard let c = scalar(pos) else { return nil }
        if c == "'" {
            let start = pos
            return .primitive(.string(try scanQuoted(start: start)), .string)
        }
        if let guid = scanGuid() { return .primitive(.guid(guid), .guid) }
        if c == "-" || c == "+" {
            if isDigit(scalar(pos + 1)) { return try scanNumber() }
            if c == "-", matches("INF", at: pos + 1), !isIdentifierCharAt(pos + 4) {
                pos += 4
                return .primitive(.double(-.infinity), .double)
            }
            return nil
        }
        guard isDigit(c) else { return nil }
        if digitsAt(pos, 4), scalar(pos + 4) == "-", digitsAt(pos + 5, 2), scalar(pos + 7) == "-", digitsAt(pos + 8, 2)
        {
            return try scanDate()
        }
        if digitsAt(pos, 2), scalar(pos + 2) == ":", digitsAt(pos + 3, 2) {
            let start = pos
            let text = scanWhile { isDigit($0) || $0 == ":" || $0 == "." }
            guard let t = EDMTimeOfDay(text), !isIdentifierCharAt(pos) else {
                throw error("invalid time-of-day literal '\(excerpt(start, pos))'", at: start)
            }
            return .primitive(.timeOfDay(t), .timeOfDay)
        }
        return try scanNumber()
    }

    /// The content of `'…'` starting at `start` (a quote), with `''` unescaped.
    mutating func scanQuoted(start: Int) throws(QueryError) -> String {
        pos = start + 1
        var out = String.UnicodeScalarView()
        while pos < end {
            let c = text[pos]
            pos += 1
            if c == "'" {
                if pos < end, text[pos] == "'" {
                    out.append("'")
                    pos += 1
                    continue
                }
                return String(out)
            }
            out.append(c)
        }
        throw error("unterminated string literal", at: start)
    }

    /// `prefix'…'` after the prefix identifier has been scanned (`pos` is at the quote).
    mutating func prefixedLiteral(_ prefix: String, start: Int) throws(QueryError) -> Literal {
        let body = try scanQuoted(start: pos)
        func invalid(_ what: String) -> QueryError { error("invalid \(what) literal '\(body)'", at: start) }
        switch prefix.lowercased() {
        case "duration":
            guard let d = EDMDuration(body) else { throw invalid("duration") }
            return .primitive(.duration(d), .duration)
        case "binary":
            let bytes = version == .v4 ? decodeBase64URL(body) : decodeHex(body)
            guard let bytes else { throw invalid("binary") }
            return .primitive(.binary(bytes), .binary)
        case "x":
            guard let bytes = decodeHex(body) else { throw invalid("binary") }
            return .primitive(.binary(bytes), .binary)
        case "datetime":
            guard let d = EDMDateTimeOffset(body, offsetOptional: true) else { throw invalid("datetime") }
            return .primitive(.dateTimeOffset(d), .dateTime)
        case "datetimeoffset":
            guard let d = EDMDateTimeOffset(body) else { throw invalid("datetimeoffset") }
            return .primitive(.dateTimeOffset(d), .dateTimeOffset)
        case "guid":
            guard let g = EDMGuid(body) else { throw invalid("guid") }
            return .primitive(.guid(g), .guid)
        case "time":
            if let d = EDMDuration(body), d.ticks >= 0, d.ticks < ticksPerDay {
                return .primitive(.timeOfDay(EDMTimeOfDay(ticks: d.ticks)), .time)
            }
            guard let t = EDMTimeOfDay(body) else { throw invalid("time") }
            return .primitive(.timeOfDay(t), .time)
        case "geography", "geometry":
            throw error("spatial literals are not supported", at: start)
        default:
            guard prefix.contains(".") else { throw error("unknown literal prefix '\(prefix)'", at: start) }
            guard !body.isEmpty else { throw invalid("enum") }
            return .enumeration(type: prefix, members: body)
        }
    }

    private mutating func scanDate() throws(QueryError) -> Literal {
        let start = pos
        pos += 10
        if let t = scalar(pos), t == "T" || t == "t", isDigit(scalar(pos + 1)) {
            pos += 1
            _ = scanWhile { isDigit($0) || $0 == ":" || $0 == "." || $0 == "+" || $0 == "-" || $0 == "Z" || $0 == "z" }
            guard let d = EDMDateTimeOffset(slice(start, pos)), !isIdentifierCharAt(pos) else {
                throw error("invalid date-time literal '\(excerpt(start, pos))'", at: start)
            }
            return .primitive(.dateTimeOffset(d), .dateTimeOffset)
        }
        guard let d = EDMDate(slice(start, pos)), !isIdentifierCharAt(pos), scalar(pos) != "-" else {
            throw error("invalid date literal '\(excerpt(start, max(pos, scanEnd(from: pos))))'", at: start)
        }
        return .primitive(.date(d), .date)
    }

    /// Numbers with optional sign, fraction, exponent and V2 type suffix (`L`, `M`, `D`, `F`).
    private mutating func scanNumber() throws(QueryError) -> Literal {
        let start = pos
        if scalar(pos) == "-" || scalar(pos) == "+" { pos += 1 }
        _ = scanWhile(isDigit)
        var isInteger = true, hasExponent = false
        if scalar(pos) == ".", isDigit(scalar(pos + 1)) {
            pos += 1
            _ = scanWhile(isDigit)
            isInteger = false
        }
        if let e = scalar(pos), e == "e" || e == "E" {
            let signed = scalar(pos + 1) == "+" || scalar(pos + 1) == "-"
            if isDigit(scalar(pos + (signed ? 2 : 1))) {
                pos += signed ? 2 : 1
                _ = scanWhile(isDigit)
                isInteger = false
                hasExponent = true
            }
        }
        let number = slice(start, pos)
        var suffix: Unicode.Scalar?
        if let s = scalar(pos), "LlMmDdFf".unicodeScalars.contains(s), !isIdentifierCharAt(pos + 1) {
            suffix = s
            pos += 1
        }
        guard !isIdentifierCharAt(pos), scalar(pos) != "." else {
            throw error("invalid number literal '\(excerpt(start, scanEnd(from: pos)))'", at: start)
        }
        func invalid(_ type: String) -> QueryError {
            error("invalid \(type) literal '\(excerpt(start, pos))'", at: start)
        }
        switch suffix {
        case "L", "l":
            guard isInteger, let i = Int64(number) else { throw invalid("Int64") }
            return .primitive(.int(i), .int64)
        case "M", "m":
            guard let d = EDMDecimal(number) else { throw invalid("Decimal") }
            return .primitive(.decimal(d), .decimal)
        case "D", "d":
            guard let d = Double(number) else { throw invalid("Double") }
            return .primitive(.double(d), .double)
        case "F", "f":
            guard let f = Float(number) else { throw invalid("Single") }
            return .primitive(.double(Double(f)), .single)
        default:
            if isInteger, let i = Int64(number) {
                return .primitive(.int(i), Int32(exactly: i) != nil ? .int32 : .int64)
            }
            if !hasExponent, let d = EDMDecimal(number) { return .primitive(.decimal(d), .decimal) }
            guard let d = Double(number) else { throw invalid("number") }
            return .primitive(.double(d), .double)
        }
    }

    /// `8-4-4-4-12` hex digits not followed by an identifier character.
    private mutating func scanGuid() -> EDMGuid? {
        guard pos + 36 <= end, !isIdentifierCharAt(pos + 36), scalar(pos + 36) != "-" else { return nil }
        for i in 0..<36 {
            let c = text[pos + i]
            if i == 8 || i == 13 || i == 18 || i == 23 {
                guard c == "-" else { return nil }
            } else {
                guard c.isASCII, c.properties.isASCIIHexDigit else { return nil }
            }
        }
        guard let g = EDMGuid(String(String.UnicodeScalarView(text[pos..<pos + 36]))) else { return nil }
        pos += 36
        return g
    }

    func matches(_ word: String, at i: Int) -> Bool {
        var k = i
        for c in word.unicodeScalars {
            guard scalar(k) == c else { return false }
            k += 1
        }
        return true
    }

    func isIdentifierCharAt(_ i: Int) -> Bool { scalar(i).map(isIdentifierChar) ?? false }

    func digitsAt(_ i: Int, _ n: Int) -> Bool { (i..<i + n).allSatisfy { isDigit(scalar($0)) } }

    /// Where a run of identifier, digit and `.` characters starting at `i` ends (for messages).
    func scanEnd(from i: Int) -> Int {
        var k = i
        while let c = scalar(k), isIdentifierChar(c) || c == "." || c == "-" || c == ":" { k += 1 }
        return k
    }

    mutating func scanWhile(_ accept: (Unicode.Scalar) -> Bool) -> String {
        let start = pos
        while let c = scalar(pos), accept(c) { pos += 1 }
        return String(String.UnicodeScalarView(text[start..<pos]))
    }
}

/// Hex digits (`0A0B`), two per byte.
func decodeHex(_ s: String) -> [UInt8]? {
    let digits = Array(s.unicodeScalars)
    guard digits.count % 2 == 0 else { return nil }
    var out: [UInt8] = []
    out.reserveCapacity(digits.count / 2)
    var i = 0
    while i < digits.count {
        guard let hi = hexValue(digits[i]), let lo = hexValue(digits[i + 1]) else { return nil }
        out.append(hi << 4 | lo)
        i += 2
    }
    return out
}

private func hexValue(_ c: Unicode.Scalar) -> UInt8? {
    switch c {
    case "0"..."9": UInt8(c.value - 48)
    case "a"..."f": UInt8(c.value - 87)
    case "A"..."F": UInt8(c.value - 55)
    default: nil
    }
}

/// Base64url (also accepting `+` and `/`), padding optional.
func decodeBase64URL(_ s: String) -> [UInt8]? {
    var chars = Array(s.unicodeScalars)
    var padding = 0
    while chars.last == "=" { chars.removeLast(); padding += 1 }
    guard padding <= 2, chars.count % 4 != 1, padding == 0 || (chars.count + padding) % 4 == 0 else { return nil }
    var out: [UInt8] = []
    var buffer: UInt32 = 0, bits = 0
    for c in chars {
        let v: UInt32
        switch c {
        case "A"..."Z": v = c.value - 65
        case "a"..."z": v = c.value - 71
        case "0"..."9": v = c.value + 4
        case "-", "+": v = 62
        case "_", "/": v = 63
        default: return nil
        }
        buffer = buffer << 6 | v
        bits += 6
        if bits >= 8 {
            bits -= 8
            out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            buffer &= (1 << UInt32(bits)) - 1
        }
    }
    return out
}
