/// Row counts from a request — `$skip`, `$top`, `$skiptoken`, a page size — checked in one place.
///
/// A skip token or page size that is not a count fails with an error naming it. Sums of counts
/// saturate at `Int.max` instead of overflowing: no store holds that many rows, so a capped sum
/// gives the same answer (`$skip=9223372036854775800&$top=100` is simply past the end).
enum Paging {
    /// The offset a `$skiptoken` stands for: the number of entities earlier pages delivered, as this
    /// engine writes it in `@odata.nextLink`. 0 without a token.
    static func offset(skipToken: String?) throws(QueryError) -> Int {
        guard let token = skipToken else { return 0 }
        guard !token.isEmpty, token.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let n = Int(token)
        else {
            throw QueryError(
                "invalid skip token '\(token)': expected a token from an @odata.nextLink of this store (a non-negative integer)",
                option: "$skiptoken", column: 1)
        }
        return n
    }

    /// Refuses a page size below 1 (a page of nothing would page forever).
    static func check(pageSize: Int?) throws(QueryError) {
        if let pageSize, pageSize < 1 {
            throw QueryError("the page size must be a positive integer, not \(pageSize)", option: nil, column: nil)
        }
    }

    /// `a + b` for non-negative row counts, at most `Int.max`.
    static func sum(_ a: Int, _ b: Int) -> Int {
        let (r, o) = a.addingReportingOverflow(b)
        return o ? .max : r
    }

    /// `url` with its `$skiptoken` (any spelling: `$SkipToken`, `%24skiptoken`) set to `offset`.
    static func nextLink(_ url: String, offset: Int) -> String {
        let parts = url.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        var params = parts.count > 1 ? parts[1].split(separator: "&").map(String.init) : []
        params.removeAll { param in
            let name = param.prefix { $0 != "=" }.lowercased()
            return name == "$skiptoken" || name == "%24skiptoken"
        }
        params.append("$skiptoken=\(offset)")
        return parts[0] + "?" + params.joined(separator: "&")
    }
}
