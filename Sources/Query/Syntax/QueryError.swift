/// A syntax, binding or evaluation error in an OData request URL, with where it happened.
///
/// `option` names the query option (`"$filter"`, `"$expand"`, …); nil means the resource path.
/// `column` is 1-based within that option's percent-decoded text (nested `$expand` options count
/// within the whole `$expand` text).
///
/// The message is built from a `Message`: text interpolated into it (names, literals from the URL)
/// is shortened and its control characters escaped, so an error never echoes a 100,000-digit number
/// or puts a terminal escape sequence on a user's screen.
public struct QueryError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public var option: String?
    public var column: Int?

    public init(_ message: Message, option: String?, column: Int?) {
        self.message = message.text
        self.option = option.map { Self.quoting($0) }
        self.column = column
    }

    /// E.g. `unexpected ')' in $filter at column 14`, `unknown entity set 'Foo' in resource path at column 1`.
    public var description: String {
        var out = message
        if let option {
            out += " in " + option
        } else if column != nil {
            out += " in resource path"
        }
        if let column { out += " at column \(column)" }
        return out
    }

    /// Interpolated values longer than this many characters are cut, with `…`.
    public static let maxQuotedLength = 40

    /// `text` safe to print: at most `limit` characters (then `…`), control, format and
    /// line-separator characters written as `\u001B`.
    public static func quoting(_ text: String, limit: Int = maxQuotedLength) -> String {
        var out = ""
        var n = 0
        for c in text.unicodeScalars {
            if n == limit {
                out += "…"
                break
            }
            n += 1
            if isUnsafe(c) {
                let hex = String(c.value, radix: 16, uppercase: true)
                out += c.value <= 0xFFFF ? "\\u" + String(repeating: "0", count: 4 - hex.count) + hex : "\\u{\(hex)}"
            } else {
                out.unicodeScalars.append(c)
            }
        }
        return out
    }

    /// C0 and C1 controls, DEL, and the format characters that reorder or hide text on a terminal
    /// (bidirectional overrides, zero-width characters), and line and paragraph separators.
    static func isUnsafe(_ c: Unicode.Scalar) -> Bool {
        switch c.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }

    /// An error message: its literal text is kept as written, every interpolated value goes
    /// through `QueryError.quoting`.
    ///
    ///     QueryError("unknown property '\(name)'", option: "$filter", column: 3)
    public struct Message: ExpressibleByStringInterpolation, Sendable {
        public var text: String

        public init(stringLiteral value: String) { text = value }

        public init(stringInterpolation: StringInterpolation) { text = stringInterpolation.text }

        public struct StringInterpolation: StringInterpolationProtocol {
            var text = ""

            public init(literalCapacity: Int, interpolationCount: Int) {
                text.reserveCapacity(literalCapacity + 16 * interpolationCount)
            }

            public mutating func appendLiteral(_ literal: String) { text += literal }

            public mutating func appendInterpolation<T>(_ value: T) {
                text += QueryError.quoting(String(describing: value))
            }

            /// A message part built elsewhere (already made of literal text and quoted values).
            public mutating func appendInterpolation(_ message: Message) { text += message.text }
        }
    }
}
