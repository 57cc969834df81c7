/// Which members of JSON objects a shaped parse (`JSON.parse(_:shape:)`) builds. The members it
/// does not build are still read, so bad JSON anywhere is an error, but they take no memory: a
/// service or a file can send megabytes of values in a member nobody reads (an annotation, a
/// property the local `$metadata` lacks) without the parse building a tree of them.
///
/// The shapes of a schema's entity types are made once (`PayloadReader`) and link to each other
/// through navigation properties; they are complete when made and never change after, which is
/// why the class may be shared across threads.
package final class JSONShape: @unchecked Sendable {
    package enum Member: Sendable {
        /// Built whole, with every member at every depth.
        case whole
        /// Built with this shape for its members (its elements, for an array).
        case shaped(Link)
        /// Read and dropped: an annotation or a member no reader looks at.
        case drop
        /// Read, dropped and reported: a property the shape does not know.
        case unknown
        /// Checked, not built: the parse notes where its bytes are, and the object gets the
        /// number of that note in its place (`JSON.parse(_:shape:dropped:captures:)`).
        case capture
    }

    /// A shape another links to, not owned by the link (shapes link in cycles: a business
    /// partner's sales orders link back to their partner); whoever holds a table of shapes
    /// (`Schema.entityShapes()`) keeps them all alive.
    package struct Link: Sendable {
        package unowned let shape: JSONShape
        package init(_ shape: JSONShape) { self.shape = shape }
    }

    /// What an object of this shape is (an entity set's name): named with a dropped unknown member.
    package let owner: String
    /// Set while the shapes of a schema are made, then only read.
    package var members: [String: Member] = [:]
    /// What a member that `members` does not list is: `.unknown` for a property name; names with
    /// `@` (annotations) and V2's `__` members are always `.drop`.
    package let otherwise: Member

    package init(owner: String, otherwise: Member = .unknown) {
        self.owner = owner
        self.otherwise = otherwise
    }

    @inline(__always) package func member(_ name: String) -> Member {
        if let m = members[name] { return m }
        if name.utf8.contains(UInt8(ascii: "@")) || name.utf8.starts(with: "__".utf8) { return .drop }
        return otherwise
    }
}

/// Members a shaped parse read and dropped because its shape did not know them.
package struct DroppedMembers: Sendable, Equatable {
    /// How many.
    package var count = 0
    /// The first: the owner of its object (`JSONShape.owner`) and its name.
    package var first: (owner: String, name: String)?

    package init() {}

    package static func == (a: DroppedMembers, b: DroppedMembers) -> Bool {
        a.count == b.count && a.first?.owner == b.first?.owner && a.first?.name == b.first?.name
    }
}

extension JSON {
    /// Parses one JSON document, building only the members `shape` asks for (the document is an
    /// object or an array of objects of that shape); the others are checked and dropped, and the
    /// unknown ones counted in `dropped`.
    package static func parse(
        _ bytes: [UInt8], shape: JSONShape, dropped: inout DroppedMembers
    ) throws(JSONError) -> JSON {
        var captures: [Range<Int>] = []
        return try parse(bytes, shape: shape, dropped: &dropped, captures: &captures)
    }

    /// `parse(_:shape:dropped:)`, with the byte ranges of the members the shape captures
    /// (`.capture`): such a member is built as `.number("N")`, N its index in `captures`.
    package static func parse(
        _ bytes: [UInt8], shape: JSONShape, dropped: inout DroppedMembers, captures: inout [Range<Int>]
    ) throws(JSONError) -> JSON {
        var p = _JSONParser(bytes: bytes)
        defer { captures = p.captures }
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { p.i = 3 }
        p.skipSpace()
        let v = try p.value(depth: 0, shape: shape)
        p.skipSpace()
        guard p.i == bytes.count else { throw p.error("unexpected data after the JSON value") }
        dropped.count += p.dropped.count
        if dropped.first == nil { dropped.first = p.dropped.first }
        return v
    }

    /// Checks that `bytes` are one JSON document without building it.
    package static func validate(_ bytes: [UInt8]) throws(JSONError) {
        var p = _JSONParser(bytes: bytes)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { p.i = 3 }
        p.skipSpace()
        try p.skip(depth: 0)
        p.skipSpace()
        guard p.i == bytes.count else { throw p.error("unexpected data after the JSON value") }
    }
}

extension _JSONParser {
    /// The value of member `name` of an object of `shape`: built, dropped or captured.
    mutating func member(
        _ name: String, of shape: JSONShape, depth: Int, into members: inout [(String, JSON)]
    ) throws(JSONError) {
        switch shape.member(name) {
        case .whole: members.append((name, try value(depth: depth)))
        case .shaped(let inner): members.append((name, try value(depth: depth, shape: inner.shape)))
        case .drop: try skip(depth: depth)
        case .unknown:
            try skip(depth: depth)
            dropped.count += 1
            if dropped.first == nil { dropped.first = (shape.owner, name) }
        case .capture:
            let start = i
            try skip(depth: depth)
            captures.append(start..<i)
            members.append((name, .number(String(captures.count - 1))))
        }
    }

    /// Reads past one value, checking it as `value` would, building nothing.
    mutating func skip(depth: Int) throws(JSONError) {
        guard depth < Self.maxDepth else { throw error("nested too deeply") }
        guard i < bytes.count else { throw error("unexpected end of input") }
        switch bytes[i] {
        case UInt8(ascii: "{"):
            i += 1
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return }
            while true {
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw error("expected a member name") }
                try skipString()
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw error("expected ':'") }
                i += 1
                skipSpace()
                try skip(depth: depth + 1)
                skipSpace()
                guard i < bytes.count else { throw error("unexpected end of input in an object") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "}") { i += 1; return }
                throw error("expected ',' or '}'")
            }
        case UInt8(ascii: "["):
            i += 1
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return }
            while true {
                skipSpace()
                try skip(depth: depth + 1)
                skipSpace()
                guard i < bytes.count else { throw error("unexpected end of input in an array") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "]") { i += 1; return }
                throw error("expected ',' or ']'")
            }
        case UInt8(ascii: "\""): try skipString()
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try scanNumber()
        default: throw error("unexpected character")
        }
    }

    /// Reads past a string: plain ASCII without escapes is only scanned; anything else is read
    /// by `string()`, which checks escapes and UTF-8.
    mutating func skipString() throws(JSONError) {
        let start = i
        i += 1
        while i < bytes.count {
            let c = bytes[i]
            if c == UInt8(ascii: "\"") { i += 1; return }
            if c == UInt8(ascii: "\\") || c < 0x20 || c >= 0x80 { break }
            i += 1
        }
        i = start
        _ = try string()
    }
}

extension Schema {
    /// A shape per entity set for what is read from a service or a file: its properties whole,
    /// its navigation properties shaped as their target sets (V2's `{"results":[…]}` and
    /// `__deferred` included), the annotations that readers look at (`@odata.etag`, `@odata.id`,
    /// `@removed`, `@odata.context`, `__metadata`, V4.0's removal `id`) whole; other annotations
    /// dropped, other names dropped as unknown.
    package func entityShapes() -> [String: JSONShape] {
        var shapes: [String: JSONShape] = [:]
        for name in entitySets.keys { shapes[name] = JSONShape(owner: name) }
        for (name, shape) in shapes {
            guard let type = entityType(ofSet: name) else { continue }
            for p in type.properties { shape.members[p.name] = .whole }
            for n in type.navigationProperties where shape.members[n.name] == nil {
                if let target = targetSet(of: n, from: name), let t = shapes[target] {
                    shape.members[n.name] = .shaped(JSONShape.Link(t))
                } else {
                    shape.members[n.name] = .drop
                }
            }
            for a in [
                "@odata.etag", "@etag", "@odata.id", "@id", "@odata.removed", "@removed", "@odata.context", "@context",
                "__metadata", "__deferred", "id",
            ] where shape.members[a] == nil {
                shape.members[a] = .whole
            }
            // What a service says of the streams (`PayloadReader.announcedStreams`).
            let prefixes = (type.hasStream ? [""] : []) + type.streamProperties
            for prefix in prefixes {
                for term in ["mediaReadLink", "mediaEditLink", "mediaContentType", "mediaEtag"] {
                    for name in [prefix + "@odata." + term, prefix + "@" + term] where shape.members[name] == nil {
                        shape.members[name] = .whole
                    }
                }
            }
            if shape.members["results"] == nil { shape.members["results"] = .shaped(JSONShape.Link(shape)) }
        }
        return shapes
    }
}
