import LMDB
import Foundation

/// One entity object of an input, as bytes, with where it starts.
package struct EntityObjectBytes {
    package var bytes: [UInt8]
    /// Byte offset (0-based) of its first byte in the input; its line and column (1-based).
    package var offset: Int
    package var line: Int
    package var column: Int
    /// Its place among the input's entity objects (1-based).
    package var number: Int
    /// An object larger than the stream's `largeObjectBytes`, parsed as it streamed by with the
    /// stream's `shape` (then `bytes` is empty), and the unknown members that parse dropped.
    package var parsed: JSON? = nil
    package var dropped = DroppedMembers()
    /// Bytes of the input it spans.
    package var length: Int

    init(bytes: [UInt8], offset: Int, line: Int, column: Int, number: Int) {
        (self.bytes, self.offset, self.line, self.column, self.number) = (bytes, offset, line, column, number)
        length = bytes.count
    }

    /// Parses it; a `JSONError` gets the position in the whole input, not in the object.
    package func parse() throws(JSONError) -> JSON {
        if let parsed { return parsed }
        do { return try JSON.parse(bytes) } catch { throw placed(error) }
    }

    /// Parses it, building only what `shape` asks for (`JSON.parse(_:shape:dropped:)`).
    package func parse(shape: JSONShape, dropped: inout DroppedMembers) throws(JSONError) -> JSON {
        if let parsed {
            dropped.count += self.dropped.count
            if dropped.first == nil { dropped.first = self.dropped.first }
            return parsed
        }
        do { return try JSON.parse(bytes, shape: shape, dropped: &dropped) } catch { throw placed(error) }
    }

    /// Checks it without building it.
    package func validate() throws(JSONError) {
        do { try JSON.validate(bytes) } catch { throw placed(error) }
    }

    /// The error at its position in the whole input.
    private func placed(_ error: JSONError) -> JSONError {
        JSONError(
            message: error.message, offset: offset + error.offset, line: line + error.line - 1,
            column: error.line == 1 ? column + error.column - 1 : error.column)
    }
}

/// Reads the entity objects of an OData JSON payload — `{"value":[…]}`, V2's `{"d":{"results":[…]}}`
/// or `{"d":[…]}`, a top-level array, one entity object — or of JSON lines (objects one after
/// another), a chunk at a time: memory holds one chunk and one entity object, whatever the size
/// of the input.
///
/// The array of entities is scanned here; everything else (each entity object, and every other
/// member of the document, such as `@odata.context` or `@odata.count`) is checked by `JSON.parse`,
/// so bad JSON anywhere is an error with its line and column. A document whose entity array this
/// reader cannot stream (say `{"d":{…one entity…}}`) is held whole and read as `JSON`.
package final class EntityObjectStream {
    /// Reads up to `count` bytes into the buffer at `offset` of the input; returns 0 at the end.
    package typealias Source = (_ into: UnsafeMutableRawBufferPointer, _ offset: Int) throws -> Int

    private let source: Source
    /// The source reads any offset again (a file, memory; not a pipe read once).
    private let rereadable: Bool
    private let chunkSize: Int
    private var buf: [UInt8] = []
    /// The next byte to look at, as an index into `buf`; `base` is the input offset of `buf[0]`.
    private var pos = 0
    private var base = 0
    private var atEnd = false
    /// Bytes from this input offset on are kept when the buffer is refilled (a value being captured).
    private var keep: Int?
    private var line = 1
    /// The input offset of the first byte of the current line. Columns count characters, as
    /// `JSON.parse` does: `continuations` UTF-8 continuation bytes lie between the start of the
    /// line `countedLine` and the offset `countedTo` (counted as positions are asked for, and
    /// before bytes are dropped from the buffer).
    private var lineStart = 0
    private var countedLine = 0
    private var countedTo = 0
    private var continuations = 0
    private var emitted = 0

    /// Bytes consumed from the input so far.
    package var bytesRead: Int { base + buf.count }

    /// Names of the document's members (and of `d`'s, in V2) to keep in `annotations` when
    /// their value is a string or a number: `@odata.nextLink`, `__count`. Every other member
    /// that is not the entity array is checked and dropped as it streams by, building nothing.
    package var wanted: Set<String> = []
    /// The `wanted` members met, in document order.
    package private(set) var annotations: [(String, JSON)] = []
    /// Refuse a document that is not a collection (`{"value":[…]}`, `{"d":{"results":[…]}}`,
    /// `{"d":[…]}`): a service's answer to a read. Then nothing before the entity array is kept
    /// in memory either; otherwise the members before it are, as bytes, in case the document
    /// turns out to be one entity object.
    package var collectionOnly = false
    /// The shape of the entity objects (`JSONShape`). With it, an entity object of the array
    /// larger than `largeObjectBytes` is not held whole: it is parsed as it streams by, its
    /// dropped members never in memory (`EntityObjectBytes.parsed`).
    package var shape: JSONShape?
    package var largeObjectBytes = 4 << 20

    /// - Parameters:
    ///   - source: reads the input at an offset (a `pread`, or a copy from memory).
    ///   - rereadable: `source` can read an offset again (false for a pipe read in order). Then
    ///     the members a document starts with are not kept in memory in case it turns out to
    ///     be one entity object: they are read again if it does.
    package init(chunkSize: Int = 1 << 20, rereadable: Bool = false, source: @escaping Source) {
        self.chunkSize = max(chunkSize, 1)
        self.source = source
        self.rereadable = rereadable
    }

    /// Bytes in memory.
    /// Bytes in memory: read in chunks of `chunkSize` (the tests' way to try every boundary),
    /// or, when they fit one chunk, used as the buffer as they are, with no copy.
    package convenience init(bytes: [UInt8], chunkSize: Int = 1 << 20) {
        self.init(chunkSize: chunkSize, rereadable: true) { into, offset in
            let n = max(0, min(into.count, bytes.count - offset))
            if n > 0 {
                bytes.withUnsafeBytes {
                    into.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<offset + n]))
                }
            }
            return n
        }
        if bytes.count <= chunkSize { (buf, atEnd) = (bytes, true) }
    }

    /// Calls `body` with each entity object, in order, as it is read. Throws `JSONError` for bad
    /// JSON, `EntityError.badInput` for a document of another shape, and whatever `source` or
    /// `body` throws.
    package func forEach(_ body: (EntityObjectBytes) throws -> Void) throws {
        if try peek() == 0xEF {
            // A UTF-8 byte order mark (RFC 8259 §8.1 lets a parser ignore it).
            for b: UInt8 in [0xEF, 0xBB, 0xBF] {
                guard try peek() == b else { throw error("invalid UTF-8") }
                pos += 1
            }
        }
        try skipSpace()
        switch try peek() {
        case UInt8(ascii: "[")? where !collectionOnly:
            try array(body)
            try end()
        case UInt8(ascii: "{")?:
            if try document(body) { return try end() }
            if collectionOnly { throw EntityError.badInput(Self.notACollection) }
            // Not a wrapper: one entity object, or the first of JSON lines. A line that is not an
            // object is what follows a document, as parsing the whole file says.
            while true {
                try skipSpace()
                guard let next = try peek() else { return }
                guard next == UInt8(ascii: "{") else { throw error("unexpected data after the JSON value") }
                try emit(try capture(), body)
            }
        case nil:
            throw error("unexpected end of input")
        case UInt8(ascii: "[")?:
            try skip(depth: 0)
            try end()
            throw EntityError.badInput(Self.notACollection)
        default:
            // A scalar: parsed for its error, or refused for its shape.
            _ = try parse(try capture())
            try end()
            throw EntityError.badInput(
                "expected {\"value\":[…]}, {\"d\":{\"results\":[…]}}, an entity object or JSON lines")
        }
    }

    // MARK: The document

    /// Reads an object at the top level. If it is an OData wrapper whose entity array it
    /// streams, returns true once the object is read; else emits what it stands for (the
    /// object itself, or the entities `d` holds) and returns false.
    static let notACollection = "the service's answer is not a collection ({\"value\":[…]})"

    private func document(_ body: (EntityObjectBytes) throws -> Void) throws -> Bool {
        let start = position
        keep = collectionOnly || rereadable ? nil : start.offset
        var streamed = false
        try members { key in
            let next = try peek()
            switch key {
            case "value" where !streamed && next == UInt8(ascii: "["):
                keep = nil
                try array(body)
                streamed = true
            case "d" where !streamed && next == UInt8(ascii: "["):
                keep = nil
                try array(body)
                streamed = true
            case "d" where !streamed && next == UInt8(ascii: "{"):
                // `{"d":{"results":[…]}}`, or `{"d":{…one entity…}}` (then the document is read whole below).
                let outer = keep
                try members { inner in
                    let next = try peek()
                    if inner == "results" && !streamed && next == UInt8(ascii: "[") {
                        keep = nil
                        try array(body)
                        streamed = true
                    } else {
                        try other(inner)
                    }
                }
                if !streamed { keep = outer }
            default:
                try other(key)
            }
        }
        if streamed || collectionOnly { return streamed }
        // Read whole: the shapes `OfflineStore.load` took before streaming.
        let whole = rereadable ? try reread(start.offset..<(base + pos)) : Array(buf[(start.offset - base)..<pos])
        keep = nil
        let doc = try EntityObjectBytes(
            bytes: whole, offset: start.offset, line: start.line, column: start.column, number: 0
        ).parse()
        try skipSpace()
        if try peek() != nil {
            // More follows: JSON lines, and this object is the first entity.
            try emit(
                EntityObjectBytes(
                    bytes: whole, offset: start.offset, line: start.line, column: start.column, number: 0), body)
            return false
        }
        var entities: [JSON] = [doc]
        if let d = doc["value"], case .array(let a) = d {
            entities = a
        } else if let d = doc["d"] {
            if case .array(let a)? = d["results"] { entities = a } else if case .object = d { entities = [d] }
        }
        for entity in entities {
            emitted += 1
            var text = ""
            JSONWriter.write(entity, to: &text)
            try body(
                EntityObjectBytes(
                    bytes: Array(text.utf8), offset: start.offset, line: start.line, column: start.column,
                    number: emitted))
        }
        return true
    }

    /// Bytes of the input read again from the source.
    private func reread(_ range: Range<Int>) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: range.count)
        var done = 0
        while done < range.count {
            let n = try out.withUnsafeMutableBytes {
                try source(UnsafeMutableRawBufferPointer(rebasing: $0[done...]), range.lowerBound + done)
            }
            guard n > 0 else { throw error("the input changed while it was read") }
            done += n
        }
        return out
    }

    /// A member that is not the entity array: kept if it is wanted and a scalar, else checked and dropped.
    private func other(_ key: String) throws {
        let next = try peek()
        if wanted.contains(key), next != UInt8(ascii: "{"), next != UInt8(ascii: "[") {
            annotations.append((key, try parse(try capture())))
        } else {
            try skip(depth: 1)
        }
    }

    /// Reads past one value, checking it, with one scalar of it at a time in memory (and what
    /// `keep` keeps): a member of megabytes of small values costs no more than one of them.
    private func skip(depth: Int) throws {
        guard depth < _JSONParser.maxDepth else { throw error("nested too deeply") }
        switch try peek() {
        case UInt8(ascii: "{")?:
            try members { _ in try skip(depth: depth + 1) }
        case UInt8(ascii: "[")?:
            pos += 1
            try skipSpace()
            if try peek() == UInt8(ascii: "]") { pos += 1; return }
            while true {
                try skip(depth: depth + 1)
                try skipSpace()
                switch try peek() {
                case UInt8(ascii: ",")?: pos += 1; try skipSpace()
                case UInt8(ascii: "]")?: pos += 1; return
                default: throw error("expected ',' or ']'")
                }
            }
        case nil:
            throw error("unexpected end of input")
        default:
            try skipScalar()
        }
    }

    /// Reads past a scalar. The common ones — a number, a literal, a string of plain ASCII
    /// without escapes — are checked here byte by byte; anything else, or anything wrong, is read
    /// again from its start by `JSON.parse` (which names the error as a whole parse would).
    private func skipScalar() throws {
        let startOffset = base + pos
        let outer = keep
        keep = min(outer ?? startOffset, startOffset)
        defer { keep = outer }
        if try scannedScalar() { return }
        pos = startOffset - base
        try capture().validate()
    }

    /// True when a plain scalar was read past; false when it needs the parser.
    private func scannedScalar() throws -> Bool {
        guard let first = try peek() else { return false }
        func digits() throws -> Int {
            var n = 0
            while let b = try peek(), b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") { pos += 1; n += 1 }
            return n
        }
        switch first {
        case UInt8(ascii: "\""):
            pos += 1
            while let b = try peek() {
                pos += 1
                if b == UInt8(ascii: "\"") { return true }
                if b == UInt8(ascii: "\\") || b < 0x20 || b >= 0x80 { return false }
            }
            return false
        case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
            let word: [UInt8] =
                first == UInt8(ascii: "t")
                ? Array("true".utf8) : first == UInt8(ascii: "f") ? Array("false".utf8) : Array("null".utf8)
            for c in word {
                guard try peek() == c else { return false }
                pos += 1
            }
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            if first == UInt8(ascii: "-") { pos += 1 }
            if try peek() == UInt8(ascii: "0") { pos += 1 } else if try digits() == 0 { return false }
            if try peek() == UInt8(ascii: ".") {
                pos += 1
                if try digits() == 0 { return false }
            }
            if let e = try peek(), e == UInt8(ascii: "e") || e == UInt8(ascii: "E") {
                pos += 1
                if let sign = try peek(), sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") { pos += 1 }
                if try digits() == 0 { return false }
            }
        default:
            return false
        }
        // A scalar ends at white space or punctuation; anything else glued to it is the parser's to name.
        guard let next = try peek() else { return true }
        switch next {
        case 0x20, 0x0A, 0x0D, 0x09, UInt8(ascii: ","), UInt8(ascii: "]"), UInt8(ascii: "}"): return true
        default: return false
        }
    }

    /// Reads one value with `shape` as `JSON.parse(_:shape:dropped:)` would, from the stream:
    /// the members it drops are read past, never kept; the members it builds are captured and
    /// parsed one by one, so an error names its place in the input.
    private func shaped(_ shape: JSONShape, depth: Int, dropped: inout DroppedMembers) throws -> JSON {
        guard depth < _JSONParser.maxDepth else { throw error("nested too deeply") }
        switch try peek() {
        case UInt8(ascii: "{")?:
            var out: [(String, JSON)] = []
            try members { key in
                switch shape.member(key) {
                case .whole, .capture: out.append((key, try parse(try capture())))
                case .shaped(let link): out.append((key, try shaped(link.shape, depth: depth + 1, dropped: &dropped)))
                case .drop: try skip(depth: depth + 1)
                case .unknown:
                    try skip(depth: depth + 1)
                    dropped.count += 1
                    if dropped.first == nil { dropped.first = (shape.owner, key) }
                }
            }
            return .object(out)
        case UInt8(ascii: "[")?:
            var out: [JSON] = []
            pos += 1
            try skipSpace()
            if try peek() == UInt8(ascii: "]") { pos += 1; return .array(out) }
            while true {
                out.append(try shaped(shape, depth: depth + 1, dropped: &dropped))
                try skipSpace()
                switch try peek() {
                case UInt8(ascii: ",")?: pos += 1; try skipSpace()
                case UInt8(ascii: "]")?: pos += 1; return .array(out)
                default: throw error("expected ',' or ']'")
                }
            }
        case nil:
            throw error("unexpected end of input")
        default:
            return try parse(try capture())
        }
    }

    /// Reads the members of the object at the current position, calling `value` with each key
    /// when the position is at the member's value (which `value` must consume).
    private func members(_ value: (String) throws -> Void) throws {
        pos += 1  // {
        try skipSpace()
        if try peek() == UInt8(ascii: "}") { pos += 1; return }
        while true {
            guard try peek() == UInt8(ascii: "\"") else { throw error("expected a member name") }
            guard case .string(let key) = try parse(try capture()) else { throw error("expected a member name") }
            try skipSpace()
            guard try peek() == UInt8(ascii: ":") else { throw error("expected ':'") }
            pos += 1
            try skipSpace()
            try value(key)
            try skipSpace()
            switch try peek() {
            case UInt8(ascii: ",")?: pos += 1; try skipSpace()
            case UInt8(ascii: "}")?: pos += 1; return
            default: throw error("expected ',' or '}'")
            }
        }
    }

    /// Emits each element of the array at the current position.
    private func array(_ body: (EntityObjectBytes) throws -> Void) throws {
        pos += 1  // [
        try skipSpace()
        if try peek() == UInt8(ascii: "]") { pos += 1; return }
        while true {
            guard let shape else {
                try emit(try capture(), body)
                try skipSpace()
                switch try peek() {
                case UInt8(ascii: ",")?: pos += 1; try skipSpace()
                case UInt8(ascii: "]")?: pos += 1; return
                default: throw error("expected ',' or ']'")
                }
                continue
            }
            // Where it starts, as an input offset (a refill during the capture may move the
            // buffer), with the line's characters counted up to there: the bytes before it may
            // be dropped by then, those after it are kept.
            count(to: base + pos)
            let mark = (base + pos, line, lineStart, countedLine, countedTo, continuations)
            let object: EntityObjectBytes
            do {
                object = try capture(limit: largeObjectBytes)
            } catch is TooLarge {
                // Back to its start (still in the buffer) and read it again, shaped, as it streams.
                let offset: Int
                (offset, line, lineStart, countedLine, countedTo, continuations) = mark
                pos = offset - base
                let start = position
                var dropped = DroppedMembers()
                let json = try shaped(shape, depth: 0, dropped: &dropped)
                var o = EntityObjectBytes(
                    bytes: [], offset: start.offset, line: start.line, column: start.column, number: 0)
                (o.parsed, o.dropped, o.length) = (json, dropped, base + pos - start.offset)
                object = o
            }
            try emit(object, body)
            try skipSpace()
            switch try peek() {
            case UInt8(ascii: ",")?: pos += 1; try skipSpace()
            case UInt8(ascii: "]")?: pos += 1; return
            default: throw error("expected ',' or ']'")
            }
        }
    }

    private func emit(_ object: EntityObjectBytes, _ body: (EntityObjectBytes) throws -> Void) throws {
        emitted += 1
        var object = object
        object.number = emitted
        try body(object)
    }

    /// Only white space may follow.
    private func end() throws {
        try skipSpace()
        if try peek() != nil { throw error("unexpected data after the JSON value") }
    }

    // MARK: Bytes

    private var position: (offset: Int, line: Int, column: Int) {
        count(to: base + pos)
        return (base + pos, line, base + pos - lineStart - continuations + 1)
    }

    /// Brings the count of the current line's continuation bytes up to `offset` (in the buffer).
    private func count(to offset: Int) {
        if countedLine != lineStart { (countedLine, countedTo, continuations) = (lineStart, lineStart, 0) }
        guard offset > countedTo else { return }
        for b in buf[(countedTo - base)..<(offset - base)] where b & 0xC0 == 0x80 { continuations += 1 }
        countedTo = offset
    }

    private func error(_ message: String) -> JSONError {
        let p = position
        return JSONError(message: message, offset: p.offset, line: p.line, column: p.column)
    }

    private func parse(_ value: EntityObjectBytes) throws(JSONError) -> JSON { try value.parse() }

    /// The byte at the position, reading more of the input when the buffer is used up; nil at the end.
    private func peek() throws -> UInt8? {
        if pos == buf.count {
            try refill()
            if pos == buf.count { return nil }
        }
        return buf[pos]
    }

    private func refill() throws {
        guard !atEnd else { return }
        // Drop what is read and not kept, once it is at least half the buffer (so a long
        // capture is not moved again at every chunk).
        let drop = (keep.map { $0 - base } ?? pos)
        if drop > 0 && drop >= buf.count / 2 {
            count(to: base + drop)
            buf.removeFirst(drop)
            base += drop
            pos -= drop
        }
        let old = buf.count
        buf += [UInt8](repeating: 0, count: chunkSize)
        let n = try buf.withUnsafeMutableBytes {
            try source(UnsafeMutableRawBufferPointer(rebasing: $0[old...]), base + old)
        }
        buf.removeLast(chunkSize - n)
        if n == 0 { atEnd = true }
    }

    private func skipSpace() throws {
        while let b = try peek(), b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 {
            if b == 0x0A { line += 1; lineStart = base + pos + 1 }
            pos += 1
        }
    }

    /// A value being captured passed the limit it was given.
    private struct TooLarge: Error {}

    /// Reads past one JSON value (its structure only: `JSON.parse` checks the bytes) and returns
    /// them; throws `TooLarge` once it needs more input past `limit` bytes of it.
    private func capture(limit: Int = .max) throws -> EntityObjectBytes {
        let start = position
        let outer = keep
        keep = min(outer ?? start.offset, start.offset)
        defer { keep = outer }
        var depth = 0
        var inString = false
        scan: while true {
            if pos == buf.count {
                if base + pos - start.offset > limit { throw TooLarge() }
                try refill()
                if pos == buf.count {
                    if depth == 0 && !inString && base + pos > start.offset { break scan }
                    // Cut short: the parser names the first thing wrong in it, as it would in the whole input.
                    let partial = Array(buf[(start.offset - base)..<pos])
                    _ = try EntityObjectBytes(
                        bytes: partial, offset: start.offset, line: start.line, column: start.column, number: 0
                    ).parse()
                    throw error("unexpected end of input")
                }
            }
            let b = buf[pos]
            if inString {
                if b == UInt8(ascii: "\\") {
                    pos += 1
                    if try peek() == 0x0A { line += 1; lineStart = base + pos + 1 }
                    if pos < buf.count { pos += 1 }
                    continue
                }
                if b == UInt8(ascii: "\"") {
                    inString = false
                    pos += 1
                    if depth == 0 { break scan }
                    continue
                }
                if b == 0x0A { line += 1; lineStart = base + pos + 1 }
                pos += 1
                continue
            }
            switch b {
            case UInt8(ascii: "\""):
                inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if depth == 0 { break scan }  // ends a scalar: not part of it
                depth -= 1
                if depth == 0 { pos += 1; break scan }
            case 0x20, 0x09, 0x0D, UInt8(ascii: ","):
                if depth == 0 { break scan }
            case 0x0A:
                if depth == 0 { break scan }
                line += 1
                lineStart = base + pos + 1
            default:
                break
            }
            pos += 1
        }
        if base + pos == start.offset { throw error("expected a JSON value") }
        let bytes = Array(buf[(start.offset - base)..<pos])
        return EntityObjectBytes(bytes: bytes, offset: start.offset, line: start.line, column: start.column, number: 0)
    }
}
