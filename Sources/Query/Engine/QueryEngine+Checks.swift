import Storage

/// What the engine refuses before it reads a row: options it does not implement (OData: a service
/// MUST reject a request with a system query option it does not support), a skip token it did not
/// write, and requests past its `limits`.
extension QueryEngine {
    /// Throws a `QueryError` for the first thing in `query` this engine will not run.
    func check(_ query: BoundQuery) throws(QueryError) {
        if let format = query.format { try Self.checkFormat(format) }
        _ = try Paging.token(query.skipToken)
        try Self.refuseSearch(query.options, option: nil)
        try refuseUnconstrainedExpand(query.options, set: query.path.entitySet)
        try limits.check(query)
    }

    /// `$expand` of a navigation property without a referential constraint on either side (a
    /// many-to-many, say) is answered from the links a refresh stored (`LinkStore`) when a
    /// defining request expanded it or its partner; otherwise the store cannot say which entities
    /// are related — an error, never an empty list.
    func refuseUnconstrainedExpand(_ options: BoundOptions, set: String) throws(QueryError) {
        for e in options.expand {
            if LinkStore.isUnconstrained(e.navigation), !isLinked(set: set, e.navigation, target: e.entitySet) {
                throw QueryError(
                    "navigation property '\(e.navigation.name)' has no referential constraint and no defining request expands it (or its partner), so the store has no links to answer it with",
                    option: "$expand", column: e.position)
            }
            try refuseUnconstrainedExpand(e.options, set: e.entitySet)
        }
    }

    /// Whether a refresh linked `nav` of `set`, or its partner on `target`.
    func isLinked(set: String, _ nav: NavigationProperty, target: String) -> Bool {
        guard let links = store.links else { return false }
        return
            (try? store.read { t in
                try links.isLinked(t, set: set, nav: nav.name)
                    || (nav.partner.map { try links.isLinked(t, set: target, nav: $0) } ?? false)
            }) ?? false
    }

    /// `json`, or the JSON media type with the parameters that do not change what is written:
    /// `application/json;odata.metadata=minimal;odata.streaming=true;charset=utf-8;IEEE754Compatible=false`.
    static func checkFormat(_ format: String) throws(QueryError) {
        let parts = format.split(separator: ";", omittingEmptySubsequences: false).map {
            String($0).trimmingSpaces.lowercased()
        }
        guard parts[0] == "json" || parts[0] == "application/json" else {
            throw QueryError("$format '\(format)' is not supported; only json is", option: "$format", column: 1)
        }
        let harmless: Set<String> = [
            "odata.metadata=minimal", "odata.streaming=true", "odata.streaming=false",
            "streaming=true", "streaming=false", "metadata=minimal",
            "charset=utf-8", "ieee754compatible=false",
        ]
        for p in parts.dropFirst() where !harmless.contains(p) {
            throw QueryError(
                "$format parameter '\(p)' is not supported; only odata.metadata=minimal output is written",
                option: "$format", column: 1)
        }
    }

    /// `$search` at the top level or nested in `$expand`: there is no search index to answer it.
    static func refuseSearch(_ options: BoundOptions, option: String?) throws(QueryError) {
        if options.search != nil {
            throw QueryError("$search is not supported", option: option, column: nil)
        }
        for e in options.expand { try refuseSearch(e.options, option: "$expand") }
    }
}
