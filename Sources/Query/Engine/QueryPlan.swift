package import Storage

/// How a plan puts its results in `$orderby` order.
package enum SortStrategy: CustomStringConvertible {
    /// The access path already yields the requested order (or none was requested): stream, and
    /// stop after `$skip + $top` rows.
    case stream
    /// The access path yields `$orderby` order but ties by an index's further columns: each group
    /// of equal sort keys is put in primary-key order, then emitted; stops after `$skip + $top`.
    case streamInTieGroups
    /// Keep the best `n` (= `$skip + $top`) in a heap of sort keys.
    case topN(Int)
    /// Sort every match by its sort key (`ExternalSort`): past a memory limit, sorted runs go to a
    /// scratch file and are merged.
    case sort

    package var description: String {
        switch self {
        case .stream: "streamed in access order"
        case .streamInTieGroups: "streamed in index order, ties put in key order"
        case .topN(let n): "top-\(n) heap on the $orderby key"
        case .sort: "sort on the $orderby key (merges sorted runs from a scratch file when large)"
        }
    }
}

/// A chosen plan for one collection request: where candidates come from, what is checked on each
/// row, and how the result is ordered and cut.
package struct QueryPlan: CustomStringConvertible {
    package var set: EntitySetHandle
    package var access: AccessPath
    /// Conditions checked on each candidate's row bytes (those the access path does not guarantee).
    package var residual: TypedExpr?
    /// Equalities from the resource path (`Parent(k)/Children`) not guaranteed by the access path.
    package var residualEqualities: [(String, Value)]
    package var orderBy: [BoundOrderBy]
    package var sort: SortStrategy
    package var skip: Int
    package var top: Int?
    /// The access is an index scan whose entries carry every property the query reads (`INCLUDE`):
    /// candidates are the entries' carried values, and no entity row is read.
    package var covering = false
    /// Keyset paging: start strictly after this primary key (a `$skiptoken` of this engine's
    /// keyset form). Honoured by the forward key-ordered access paths (`keysetPageable`).
    package var after: [UInt8]? = nil

    /// Whether the plan yields its results in primary-key order, forward, with nothing cut by the
    /// client: a page can then continue after the last key it sent (`after`) instead of skipping
    /// every entity before it, and costs only its own rows.
    package var keysetPageable: Bool {
        guard orderBy.isEmpty, case .stream = sort, skip == 0, top == nil, !covering else { return false }
        switch access {
        case .fullScan(reverse: false), .keyRange(_, _, reverse: false): return true
        default: return false
        }
    }

    package var description: String {
        var lines = [
            "entity set: \(set.name)", "access: \(access)" + (covering ? ", covering (no entity rows read)" : ""),
        ]
        var checks: [String] = residualEqualities.map { "\($0.0) eq \(EntitySetHandle.literal($0.1))" }
        if let residual { checks.append(residual.description) }
        lines.append("residual filter: " + (checks.isEmpty ? "none" : checks.joined(separator: " and ")))
        if !orderBy.isEmpty {
            lines.append(
                "order: "
                    + orderBy.map { $0.expression.description + ($0.descending ? " desc" : "") }.joined(separator: ", ")
                    + " — \(sort)")
        }
        if skip > 0 || top != nil { lines.append("skip \(skip), top \(top.map(String.init) ?? "all")") }
        return lines.joined(separator: "\n")
    }
}
