import Query
import Storage

/// The `$filter` of `Set?$filter=<text>` as an S-expression.
func filter(_ text: String, version: ODataVersion = .v4) throws(QueryError) -> String {
    try ODataURL.parse("Set?$filter=" + text, version: version).filter?.description ?? "nil"
}

/// The error description of parsing `url`, or "ok" when it parses.
func parseError(_ url: String, version: ODataVersion = .v4) -> String {
    do {
        _ = try ODataURL.parse(url, version: version)
        return "ok"
    } catch {
        return error.description
    }
}

/// The error description of parsing and binding `url` against the test schema, or "ok".
func bindError(_ url: String, schema: Schema = TestSchema.v4) -> String {
    do {
        _ = try Binder(schema: schema).bind(url)
        return "ok"
    } catch {
        return error.description
    }
}

/// The bound `$filter` of `Set?$filter=<text>` as an S-expression.
func boundFilter(
    _ text: String, set: String = "BusinessPartners", schema: Schema = TestSchema.v4
) throws(QueryError) -> String {
    try Binder(schema: schema).bind(set + "?$filter=" + text).filter?.description ?? "nil"
}
