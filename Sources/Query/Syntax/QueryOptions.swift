/// One `$orderby` item: an expression and its direction.
package struct OrderByItem: Sendable, Hashable, CustomStringConvertible {
    package var expression: Expr
    package var descending: Bool

    package init(_ expression: Expr, descending: Bool = false) {
        self.expression = expression
        self.descending = descending
    }

    package var description: String { expression.description + (descending ? " desc" : "") }
}

/// One `$select` item: a path (`Name`, `Address/City`) or `*`.
package struct SelectItem: Sendable, Hashable, CustomStringConvertible {
    package var path: [PathSegment]

    package init(_ path: [PathSegment]) { self.path = path }

    package var position: Int { path.first?.position ?? 1 }
    package var description: String { path.map(\.name).joined(separator: "/") }
}

/// One `$expand` item: a path (V4 `Address/Country`, V2 `SalesOrders/Items`, or `*`) and the
/// options nested in parentheses (V4 `SalesOrders($top=2;$expand=Items)`).
package struct ExpandItem: Sendable, Hashable, CustomStringConvertible {
    package var path: [PathSegment]
    package var options: QueryOptions

    package init(_ path: [PathSegment], options: QueryOptions = QueryOptions()) {
        self.path = path
        self.options = options
    }

    package var description: String {
        let name = path.map(\.name).joined(separator: "/")
        let nested = options.description
        return nested.isEmpty ? name : name + "(" + nested + ")"
    }
}

/// The system query options that may appear both at the top level and nested in `$expand`.
package struct QueryOptions: Sendable, Hashable, CustomStringConvertible {
    package var filter: Expr?
    package var orderBy: [OrderByItem] = []
    /// nil when `$select` is absent.
    package var select: [SelectItem]?
    package var expand: [ExpandItem] = []
    package var top: Int?
    package var skip: Int?
    /// `$count=true|false`, or V2 `$inlinecount=allpages|none` at the top level.
    package var count: Bool?
    package var search: String?

    package init() {}

    /// `$filter=…;$orderby=…` in nested-option form, omitting absent options.
    package var description: String {
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
