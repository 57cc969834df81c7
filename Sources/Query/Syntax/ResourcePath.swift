/// One key value in a key predicate: `Set(12)` has an unnamed value, `Set(A=1,B='x')` named ones.
/// A value may be a parameter alias (`Set(@k)`, `Set(A=@a,B=2)`): then `alias` is its name (without
/// `@`) and `value` is `.null` until the binder puts the alias's value in.
public struct KeyValue: Sendable, Hashable, CustomStringConvertible {
    public var name: String?
    public var value: Literal
    public var alias: String?
    public var position: Int

    public init(name: String?, value: Literal, alias: String? = nil, at position: Int) {
        self.name = name
        self.value = value
        self.alias = alias
        self.position = position
    }

    public var description: String { (name.map { $0 + "=" } ?? "") + (alias.map { "@" + $0 } ?? value.description) }
}

/// A resource path segment: an entity set or navigation property name and an optional key.
public struct ResourceSegment: Sendable, Hashable, CustomStringConvertible {
    public var name: String
    public var key: [KeyValue]?
    public var position: Int

    public init(_ name: String, key: [KeyValue]? = nil, at position: Int) {
        self.name = name
        self.key = key
        self.position = position
    }

    public var description: String {
        name + (key.map { "(" + $0.map(\.description).joined(separator: ",") + ")" } ?? "")
    }
}

/// The resource path: `Set`, `Set(key)`, `Set(key)/Nav/…`, optionally ending in `/$count`.
/// Columns count within the percent-decoded path (without service root or leading `/`).
public struct ResourcePath: Sendable, Hashable, CustomStringConvertible {
    public var segments: [ResourceSegment]
    public var isCount: Bool

    public init(_ segments: [ResourceSegment], isCount: Bool = false) {
        self.segments = segments
        self.isCount = isCount
    }

    public var description: String {
        segments.map(\.description).joined(separator: "/") + (isCount ? "/$count" : "")
    }
}
