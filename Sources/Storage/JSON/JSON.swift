import LMDB
/// A parsed JSON value. Numbers keep their text, so `1249.000` and 20-digit integers stay exact.
package indirect enum JSON: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSON])
    /// Members in document order.
    case object([(String, JSON)])

    package static func == (a: JSON, b: JSON) -> Bool {
        switch (a, b) {
        case (.null, .null): true
        case (.bool(let x), .bool(let y)): x == y
        case (.number(let x), .number(let y)): x == y
        case (.string(let x), .string(let y)): x == y
        case (.array(let x), .array(let y)): x == y
        case (.object(let x), .object(let y)):
            x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    package func hash(into h: inout Hasher) {
        switch self {
        case .null: h.combine(0)
        case .bool(let b): h.combine(b)
        case .number(let n): h.combine(n)
        case .string(let s): h.combine(s)
        case .array(let a): h.combine(a)
        case .object(let o): for (k, v) in o { h.combine(k); h.combine(v) }
        }
    }

    /// The member named `key` of an object.
    package subscript(key: String) -> JSON? {
        if case .object(let members) = self { return members.first { $0.0 == key }?.1 }
        return nil
    }

    /// Parses one JSON document from UTF-8 bytes. Throws `JSONError` with the byte offset.
    /// A leading UTF-8 byte order mark is skipped (RFC 8259 §8.1 lets a parser ignore it, and
    /// files saved by some editors start with one).
    package static func parse(_ bytes: [UInt8]) throws(JSONError) -> JSON {
        var p = _JSONParser(bytes: bytes)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { p.i = 3 }
        p.skipSpace()
        let v = try p.value(depth: 0)
        p.skipSpace()
        guard p.i == bytes.count else { throw p.error("unexpected data after the JSON value") }
        return v
    }

    package static func parse(_ text: String) throws(JSONError) -> JSON { try parse(Array(text.utf8)) }

    /// Serializes compactly, with correct escaping.
    package var text: String {
        var out = ""
        JSONWriter.write(self, to: &out)
        return out
    }
}

/// Bad JSON, with where it went wrong.
public struct JSONError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    /// Byte offset (0-based) in the input; `line` and `column` are 1-based.
    public var offset: Int
    public var line: Int
    public var column: Int

    public init(message: String, offset: Int, line: Int, column: Int) {
        self.message = message
        self.offset = offset
        self.line = line
        self.column = column
    }

    public var description: String { "bad JSON at line \(line), column \(column): \(message)" }
}

struct _JSONParser {
    let bytes: [UInt8]
    var i = 0
    /// Members a shaped parse dropped as unknown (`JSONShape`).
    var dropped = DroppedMembers()
    /// Byte ranges of the members a shaped parse captured.
    var captures: [Range<Int>] = []
    static let maxDepth = 512

    func error(_ message: String) -> JSONError {
        var line = 1, col = 1
        for b in bytes[..<min(i, bytes.count)] {
            if b == 10 { line += 1; col = 1 } else if b & 0xC0 != 0x80 { col += 1 }
        }
        return JSONError(message: message, offset: i, line: line, column: col)
    }

    mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    /// A value; with a shape, its objects are built as the shape says (`JSONShape`).
    mutating func value(depth: Int, shape: JSONShape? = nil) throws(JSONError) -> JSON {
        guard depth < Self.maxDepth else { throw error("nested too deeply") }
        guard i < bytes.count else { throw error("unexpected end of input") }
        switch bytes[i] {
        case UInt8(ascii: "{"):
            i += 1
            var members: [(String, JSON)] = []
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
            while true {
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw error("expected a member name") }
                let k = try string()
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw error("expected ':'") }
                i += 1
                skipSpace()
                if let shape {
                    try member(k, of: shape, depth: depth + 1, into: &members)
                } else {
                    members.append((k, try value(depth: depth + 1)))
                }
                skipSpace()
                guard i < bytes.count else { throw error("unexpected end of input in an object") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
                throw error("expected ',' or '}'")
            }
        case UInt8(ascii: "["):
            i += 1
            var items: [JSON] = []
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
            while true {
                skipSpace()
                items.append(try value(depth: depth + 1, shape: shape))
                skipSpace()
                guard i < bytes.count else { throw error("unexpected end of input in an array") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
                throw error("expected ',' or ']'")
            }
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw error("unexpected character")
        }
    }

    mutating func literal(_ word: StaticString) throws(JSONError) {
        let n = word.utf8CodeUnitCount
        guard i + n <= bytes.count else { throw error("unexpected end of input") }
        for k in 0..<n where bytes[i + k] != word.utf8Start[k] { throw error("unexpected character") }
        i += n
    }

    mutating func number() throws(JSONError) -> String {
        let start = i
        try scanNumber()
        return String(decoding: bytes[start..<i], as: UTF8.self)
    }

    /// Reads past a number, checking its grammar.
    mutating func scanNumber() throws(JSONError) {
        func digits() -> Int {
            let s = i
            while i < bytes.count, bytes[i] >= 48, bytes[i] <= 57 { i += 1 }
            return i - s
        }
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard i < bytes.count, bytes[i] >= 48, bytes[i] <= 57 else { throw error("bad number") }
        if bytes[i] == 48 { i += 1 } else { _ = digits() }
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            guard digits() > 0 else { throw error("bad number: digits expected after '.'") }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard digits() > 0 else { throw error("bad number: digits expected in exponent") }
        }
    }

    mutating func hex4() throws(JSONError) -> UInt32 {
        guard i + 4 <= bytes.count else { throw error("bad \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[i]
            let d: UInt32
            switch c {
            case 48...57: d = UInt32(c - 48)
            case 97...102: d = UInt32(c - 87)
            case 65...70: d = UInt32(c - 55)
            default: throw error("bad \\u escape")
            }
            v = v << 4 | d
            i += 1
        }
        return v
    }

    mutating func string() throws(JSONError) -> String {
        i += 1
        let start = i
        // Fast path: no escapes. ASCII needs no validation; other bytes are validated in place.
        var ascii = true
        while i < bytes.count {
            let c = bytes[i]
            if c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") || c < 0x20 { break }
            if c >= 0x80 { ascii = false }
            i += 1
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "\"") {
            let s = bytes.withUnsafeBufferPointer { b in
                let text = UnsafeBufferPointer(rebasing: b[start..<i])
                return ascii ? String(decoding: text, as: UTF8.self) : String(validating: text, as: UTF8.self)
            }
            guard let s else {
                i = start
                throw error("invalid UTF-8 in string")
            }
            i += 1
            return s
        }
        var out = Array(bytes[start..<i])
        while true {
            guard i < bytes.count else { throw error("unterminated string") }
            let c = bytes[i]
            if c == UInt8(ascii: "\"") { i += 1; break }
            if c < 0x20 { throw error("control character in string") }
            if c != UInt8(ascii: "\\") { out.append(c); i += 1; continue }
            i += 1
            guard i < bytes.count else { throw error("unterminated string") }
            let e = bytes[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if scalar >= 0xD800 && scalar < 0xDC00 {
                    guard i + 2 <= bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                        throw error("unpaired surrogate in \\u escape")
                    }
                    i += 2
                    let low = try hex4()
                    guard low >= 0xDC00 && low < 0xE000 else { throw error("unpaired surrogate in \\u escape") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if scalar >= 0xDC00 && scalar < 0xE000 {
                    throw error("unpaired surrogate in \\u escape")
                }
                out.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
            default: throw error("bad escape sequence")
            }
        }
        guard let s = String(validating: out, as: UTF8.self) else {
            i = start
            throw error("invalid UTF-8 in string")
        }
        return s
    }
}

/// Writes JSON text with correct escaping.
package enum JSONWriter {
    package static func write(_ v: JSON, to out: inout String) {
        switch v {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n): out += n
        case .string(let s): writeString(s, to: &out)
        case .array(let items):
            out += "["
            for (k, item) in items.enumerated() {
                if k > 0 { out += "," }
                write(item, to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (k, (name, item)) in members.enumerated() {
                if k > 0 { out += "," }
                writeString(name, to: &out)
                out += ":"
                write(item, to: &out)
            }
            out += "}"
        }
    }

    /// Appends `s` as a JSON string literal: quotes, backslashes and control characters escaped.
    package static func writeString(_ s: String, to out: inout String) {
        out += "\""
        var needsEscape = false
        for b in s.utf8 where b < 0x20 || b == 0x22 || b == 0x5C { needsEscape = true; break }
        if !needsEscape {
            out += s
        } else {
            for u in s.unicodeScalars {
                switch u {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                case "\u{08}": out += "\\b"
                case "\u{0C}": out += "\\f"
                default:
                    if u.value < 0x20 {
                        let h = String(u.value, radix: 16)
                        out += "\\u" + String(repeating: "0", count: 4 - h.count) + h
                    } else {
                        out.unicodeScalars.append(u)
                    }
                }
            }
        }
        out += "\""
    }
}
