/// The lines of an `.ini` file as SAP's offline application configuration file writes them:
/// `[section]` headers, `key=value` entries, `#` or `;` comment lines and blank lines. Keys and
/// section names are matched without regard to case (SAP writes them in lower case); values are
/// kept as written, without the blanks around them, and a `#` or `;` inside a value is part of it
/// (a defining request's URL may hold either).
struct INIFile {
    struct Entry {
        var line: Int
        var key: String
        var value: String
    }

    struct Section {
        var line: Int
        /// Lower case: `endpoint`, `defining_request`, …
        var kind: String
        var entries: [Entry]

        /// The entries with key `key`, in file order.
        func all(_ key: String) -> [Entry] { entries.filter { $0.key == key } }
    }

    var sections: [Section]

    /// Reads `bytes` (UTF-8, an optional byte order mark, LF or CRLF line ends).
    /// - Throws: `StoreConfiguration.INIError` with the line of the first syntax error.
    init(_ bytes: [UInt8]) throws(StoreConfiguration.INIError) {
        var body = bytes[...]
        if body.starts(with: [0xEF, 0xBB, 0xBF]) { body = body.dropFirst(3) }
        sections = []
        var number = 0
        for raw in body.split(separator: 0x0A, omittingEmptySubsequences: false) {
            number += 1
            guard let text = String(validating: raw, as: UTF8.self) else {
                throw .init(line: number, message: "not UTF-8 text")
            }
            let line = Self.trimmed(text)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]"), line.count > 2 else {
                    throw .init(line: number, message: "expected a section header such as [endpoint], not '\(line)'")
                }
                let name = Self.trimmed(String(line.dropFirst().dropLast()))
                guard !name.isEmpty, !name.contains("["), !name.contains("]") else {
                    throw .init(line: number, message: "expected a section header such as [endpoint], not '\(line)'")
                }
                sections.append(Section(line: number, kind: name.lowercased(), entries: []))
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw .init(line: number, message: "expected 'key=value', a [section] or a # comment, not '\(line)'")
            }
            let key = Self.trimmed(String(line[..<equals])).lowercased()
            guard !key.isEmpty, key.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" || $0 == "." })
            else {
                throw .init(line: number, message: "expected a key (letters, digits, '_') before '=' in '\(line)'")
            }
            guard !sections.isEmpty else {
                throw .init(line: number, message: "'\(key)' comes before any section: start with [endpoint]")
            }
            let value = Self.trimmed(String(line[line.index(after: equals)...]))
            sections[sections.count - 1].entries.append(Entry(line: number, key: key, value: value))
        }
    }

    static func trimmed(_ s: String) -> String {
        var t = Substring(s)
        while let f = t.first, f == " " || f == "\t" || f == "\r" { t.removeFirst() }
        while let l = t.last, l == " " || l == "\t" || l == "\r" { t.removeLast() }
        return String(t)
    }
}
