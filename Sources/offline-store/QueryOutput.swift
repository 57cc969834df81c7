import CommandSupport
import OfflineStore

/// What `offline-store query` writes to stdout: one valid answer in its format, whether it comes
/// in one page or several, and whether it completes or fails.
///
/// - Pages are joined: those `--all-pages` follows, and those the engine cuts an answer into
///   where its expansions would pass `limits.maxExpandedEntities`. JSON keeps the first page's
///   envelope (context, `@odata.count`) and puts every page's entities in one `value` array;
///   `table` keeps the first header; `jsonl` runs on.
/// - An entity (a JSON element of `value`, a line of `jsonl` or `table`) goes out only once it
///   is whole. A query that fails part-way (an entity whose expansions alone pass the budget)
///   then ends as valid output: JSON closes its array and adds an `error` member, JSON Lines
///   adds an `{"error":…}` line; a table stops at its last row. A query that fails before any
///   entity wrote nothing. The error goes to stderr as well, and the exit status is 1.
///
/// The engine wrote every byte, so a scan of strings and nesting finds the `value` array: the
/// top-level member named `value` of a collection (a context not ending in `/$entity`).
struct QueryOutput {
    let format: QueryFormat
    let write: ([UInt8]) throws -> Void
    private var page = 0
    private var wrote = false  // any byte written
    private var wroteEntity = false  // any page's entity written (a `,` goes before the next)
    private var held: [UInt8] = []  // the entity being written, until it is whole
    // JSON scan, restarted at each page.
    private var depth = 0
    private var inString = false
    private var escaped = false
    private var string: [UInt8] = []  // a depth-1 string being read (a member name or the context)
    private var lastName = ""
    private var isEntity = false  // a single entity: written as it comes
    private var inValue = false
    private var valueClosed = false
    private var tail: [UInt8] = []  // the first page's bytes after its `value` array
    private var headerLinesToDrop = 0  // a later page's table header

    init(format: QueryFormat, write: @escaping ([UInt8]) throws -> Void) {
        self.format = format
        self.write = write
    }

    /// Starts page `n` (0 first).
    mutating func begin(page n: Int) {
        page = n
        (depth, inString, escaped, inValue, valueClosed, isEntity) = (0, false, false, false, false, false)
        (string, lastName) = ([], "")
        headerLinesToDrop = format == .table && n > 0 ? 2 : 0
    }

    mutating func feed(_ chunk: UnsafeRawBufferPointer) throws {
        switch format {
        case .json: try feedJSON(chunk)
        case .jsonl, .table: try feedLines(chunk)
        }
    }

    /// Ends a complete answer, after its last page.
    mutating func end() throws {
        guard format == .json else { return }
        try emit(page == 0 ? tail : Array("]}\n".utf8))
    }

    /// Ends an answer that failed with `message`: what was written stays valid (see the type).
    mutating func fail(_ message: String) throws {
        held = []
        guard wrote else { return }
        let error = #"{"code":"InStreamError","message":"\#(Self.escaped(message))"}"#
        switch format {
        case .json where inValue || page > 0: try emit(Array(("],\"error\":" + error + "}\n").utf8))
        case .jsonl: try emit(Array(("{\"error\":" + error + "}\n").utf8))
        default: break
        }
    }

    private mutating func emit(_ bytes: [UInt8]) throws {
        guard !bytes.isEmpty else { return }
        wrote = true
        try write(bytes)
    }

    private mutating func feedLines(_ chunk: UnsafeRawBufferPointer) throws {
        var start = 0
        while headerLinesToDrop > 0, start < chunk.count {
            guard let nl = chunk[start...].firstIndex(of: UInt8(ascii: "\n")) else { return }
            start = nl + 1
            headerLinesToDrop -= 1
        }
        guard start < chunk.count else { return }
        held += chunk[start...]
        if let last = held.lastIndex(of: UInt8(ascii: "\n")) {
            try emit(Array(held[...last]))
            held.removeSubrange(...last)
        }
    }

    private mutating func feedJSON(_ chunk: UnsafeRawBufferPointer) throws {
        var out: [UInt8] = []
        for b in chunk {
            if valueClosed {
                if page == 0 { tail.append(b) }
                continue
            }
            let wasDepth = depth
            if inString {
                if escaped {
                    escaped = false
                } else if b == UInt8(ascii: "\\") {
                    escaped = true
                } else if b == UInt8(ascii: "\"") {
                    inString = false
                    if depth == 1 { stringEnded() }
                } else if depth == 1 && string.count < 4_096 {
                    string.append(b)
                }
            } else {
                switch b {
                case UInt8(ascii: "\""):
                    inString = true
                    string = []
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                    if depth == 2 && b == UInt8(ascii: "[") && lastName == "value" && !isEntity && !inValue {
                        inValue = true
                        if page == 0 { out.append(b) }
                        continue
                    }
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if inValue && depth == 1 {
                        valueClosed = true
                        if page == 0 { tail.append(b) }
                        continue
                    }
                default: break
                }
            }
            if inValue {
                // Between entities (depth 2: commas) nothing is kept: a comma goes before each
                // entity once it is whole.
                guard wasDepth >= 3 || depth >= 3 else { continue }
                held.append(b)
                if depth == 2 {  // the entity's closing brace
                    if wroteEntity { out.append(UInt8(ascii: ",")) }
                    out += held
                    held = []
                    wroteEntity = true
                }
            } else if page == 0 {
                out.append(b)
            }
        }
        try emit(out)
    }

    /// A depth-1 string ended: a member name, or the context's value.
    private mutating func stringEnded() {
        let text = String(decoding: string, as: UTF8.self)
        if lastName == "@odata.context" && text.hasSuffix("/$entity") { isEntity = true }
        lastName = text
    }

    /// `text` as the inside of a JSON string.
    static func escaped(_ text: String) -> String {
        var out = ""
        for u in text.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case _ where u.value < 0x20:
                let hex = String(u.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(u)
            }
        }
        return out
    }
}
