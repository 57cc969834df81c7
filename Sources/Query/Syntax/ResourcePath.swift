/// One key value in a key predicate: `Set(12)` has an unnamed value, `Set(A=1,B='x')` named ones.
/// A value may be a parameter alias (`Set(@k)`, `Set(A=@a,B=2)`): then `alias` is its name (without
/// `@`) and `value` is `.null` until the binder puts the alias's value in.
package struct KeyValue: Sendable, Hashable, CustomStringConvertible {
    package var name: String?
    package var value: Literal
    package var alias: String?
    package var position: Int

    package init(name: String?, value: Literal, alias: String? = nil, at position: Int) {
        self.name = name
        self.value = value
        self.alias = alias
        self.position = position
    }

    package var description: String { (name.map { $0 + "=" } ?? "") + (alias.map { "@" + $0 } ?? value.description) }
}

/// A resource path segment: an entity set or navigation property name and an optional key.
package struct ResourceSegment: Sendable, Hashable, CustomStringConvertible {
    package var name: String
    package var key: [KeyValue]?
    package var position: Int

    package init(_ name: String, key: [KeyValue]? = nil, at position: Int) {
        self.name = name
        self.key = key
        self.position = position
    }

    package var description: String {
        name + (key.map { "(" + $0.map(\.description).joined(separator: ",") + ")" } ?? "")
    }
}

/// The resource path: `Set`, `Set(key)`, `Set(key)/Nav/…`, optionally ending in `/$count`.
/// Columns count within the percent-decoded path (without service root or leading `/`).
package struct ResourcePath: Sendable, Hashable, CustomStringConvertible {
    package var segments: [ResourceSegment]
    package var isCount: Bool

    package init(_ segments: [ResourceSegment], isCount: Bool = false) {
        self.segments = segments
        self.isCount = isCount
    }

    package var description: String {
        segments.map(\.description).joined(separator: "/") + (isCount ? "/$count" : "")
    }
}
