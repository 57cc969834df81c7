/// One `$orderby` item: an expression and its direction.
public struct OrderByItem: Sendable, Hashable, CustomStringConvertible {
    public var expression: Expr
    public var descending: Bool

    public init(_ expression: Expr, descending: Bool = false) {
        self.expression = expression
        self.descending = descending
    }

    public var description: String { expression.description + (descending ? " desc" : "") }
}

/// One `$select` item: a path (`Name`, `Address/City`) or `*`.
public struct SelectItem: Sendable, Hashable, CustomStringConvertible {
    public var path: [PathSegment]

    public init(_ path: [PathSegment]) { self.path = path }

    public var position: Int { path.first?.position ?? 1 }
    public var description: String { path.map(\.name).joined(separator: "/") }
}

/// One `$expand` item: a path (V4 `Address/Country`, V2 `SalesOrders/Items`, or `*`) and the
/// options nested in parentheses (V4 `SalesOrders($top=2;$expand=Items)`).
public struct ExpandItem: Sendable, Hashable, CustomStringConvertible {
    public var path: [PathSegment]
    public var options: QueryOptions

    public init(_ path: [PathSegment], options: QueryOptions = QueryOptions()) {
        self.path = path
        self.options = options
    }

    public var description: String {
        let name = path.map(\.name).joined(separator: "/")
        let nested = options.description
        return nested.isEmpty ? name : name + "(" + nested + ")"
    }
}

/// The system query options that may appear both at the top level and nested in `$expand`.
public struct QueryOptions: Sendable, Hashable, CustomStringConvertible {
    public var filter: Expr?
    public var orderBy: [OrderByItem] = []
    /// nil when `$select` is absent.
    public var select: [SelectItem]?
    public var expand: [ExpandItem] = []
    public var top: Int?
    public var skip: Int?
    /// `$count=true|false`, or V2 `$inlinecount=allpages|none` at the top level.
    public var count: Bool?
    public var search: String?

    public init() {}

    /// `$filter=…;$orderby=…` in nested-option form, omitting absent options.
    public var description: String {
        var parts: [String] = []
        if let filter { parts.append("$filter=\(filter)") }
        if !orderBy.isEmpty { parts.append("$orderby=" + orderBy.map(\.description).joined(separator: ",")) }
        if let select { parts.append("$select=" + select.map(\.description).joined(separator: ",")) }
        if !expand.isEmpty { parts.append("$expand=" + expand.map(\.description).joined(separator: ",")) }
        if let top { parts.append("$top=\(top)") }
        if let skip { parts.append("$skip=\(skip)") }
        if let count { parts.append("$count=\(count)") }
        if let search { parts.append("$search=\(search)") }
        return parts.joined(separator: ";")
    }
}
