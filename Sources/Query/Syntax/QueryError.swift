/// A syntax or binding error in an OData request URL, with where it happened.
///
/// `option` names the query option (`"$filter"`, `"$expand"`, …); nil means the resource path.
/// `column` is 1-based within that option's percent-decoded text (nested `$expand` options count
/// within the whole `$expand` text).
public struct QueryError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public var option: String?
    public var column: Int?

    public init(_ message: String, option: String?, column: Int?) {
        self.message = message
        self.option = option
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
}
