/// Row counts from a request — `$skip`, `$top`, `$skiptoken`, a page size — checked in one place.
///
/// A skip token or page size that is not a count fails with an error naming it. Sums of counts
/// saturate at `Int.max` instead of overflowing: no store holds that many rows, so a capped sum
/// gives the same answer (`$skip=9223372036854775800&$top=100` is simply past the end).
enum Paging {
    /// What a `$skiptoken` of this engine stands for.
    enum Token {
        /// The number of entities earlier pages delivered (a page skips them).
        case offset(Int)
        /// The primary key of the last entity earlier pages delivered, in a plan read in key order
        /// (`QueryPlan.keysetPageable`): the page starts after it, whatever was written before it
        /// meanwhile. Written `k` and the key's bytes in hex.
        case after([UInt8])
    }

    /// The `$skiptoken` as this engine writes it in `@odata.nextLink`: an offset, or `k<hex>`.
    static func token(_ skipToken: String?) throws(QueryError) -> Token {
        guard let token = skipToken, token.first == "k" else { return .offset(try offset(skipToken: skipToken)) }
        let hex = Array(token.utf8.dropFirst())
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hex.count / 2)
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            default: nil
            }
        }
        var i = 0
        while i + 1 < hex.count, let hi = nibble(hex[i]), let lo = nibble(hex[i + 1]) {
            bytes.append(hi << 4 | lo)
            i += 2
        }
        guard !hex.isEmpty, i == hex.count, hex.count <= 2 * 2048 else {
            throw QueryError(
                "invalid skip token '\(token.prefix(100))': expected a token from an @odata.nextLink of this store",
                option: "$skiptoken", column: 1)
        }
        return .after(bytes)
    }

    /// `k` and `key`'s bytes in hex: a keyset `$skiptoken`.
    static func keysetToken(_ key: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = [UInt8(ascii: "k")]
        out.reserveCapacity(1 + 2 * key.count)
        for b in key { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 0xF)]) }
        return String(decoding: out, as: UTF8.self)
    }

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
    static func nextLink(_ url: String, offset: Int) -> String { nextLink(url, token: String(offset)) }

    /// `url` with its `$skiptoken` set to `token`.
    static func nextLink(_ url: String, token: String) -> String {
        let parts = url.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        var params = parts.count > 1 ? parts[1].split(separator: "&").map(String.init) : []
        params.removeAll { param in
            let name = param.prefix { $0 != "=" }.lowercased()
            return name == "$skiptoken" || name == "%24skiptoken"
        }
        params.append("$skiptoken=\(token)")
        return parts[0] + "?" + params.joined(separator: "&")
    }
}
