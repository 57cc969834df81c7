import Foundation
import Query
import Storage
import Testing
import TestSupport

/// Seeded random mutation of valid URLs: parsing and binding must only ever succeed or throw a
/// `QueryError` (a crash fails the run). Set `QUERY_FUZZ_SEED` to replay a printed seed.
@Suite(.runsOffThePool) struct FuzzTests {
    static let corpus = [
        "BusinessPartners?$filter=Country eq 'US' and Rating gt 3&$orderby=CompanyName desc&$top=20&$skip=5",
        "BusinessPartners('0100')/SalesOrders?$filter=GrossAmount gt 1.5 or Items/any(i:i/Quantity ge 2)&$count=true",
        "SalesOrderItems(SalesOrderID='1',ItemPosition=10)/Product?$select=Name,Price",
        "BusinessPartners?$expand=SalesOrders($filter=Status eq Sales.Status'Open';$select=SalesOrderID;$expand=Items($top=2))",
        "BusinessPartners?$expand=SalesOrders/Items/Product&$select=CompanyName,SalesOrders/GrossAmount&$inlinecount=allpages",
        "Products?$filter=substringof('x', Name) and Price mul 2 lt 10M and Guid eq guid'01234567-89ab-cdef-0123-456789abcdef'",
        "SalesOrders?$filter=CreatedAt ge datetime'2021-01-01T00:00' and DeliveryDate lt 2021-02-01 and year(CreatedAt) eq 2021",
        "Products?$filter=ShelfLife gt duration'P1DT2H' and Picture eq binary'AQID' and Level in (1, 2, 3) and -Stock lt 0L",
        "BusinessPartners?$filter=not (Flags has Sales.Flags'Red,Blue') and Emails/all(e:endswith(e,'.com'))&$search=blue",
        "/BusinessPartners/$count?%24filter=Address%2FCity%20eq%20%27Berlin%27+and+SalesOrders%2F%24count+gt+2",
        "Products?$filter=Width gt 2.5e3 and Price ne null and OpensAt lt 10:00:00 and cast(Rank, Edm.String) eq '1'",
    ]

    static let fragments = [
        "(", ")", "'", "''", "/", ",", "$", "=", "&", ";", "%", "%2", "%27", "%28", "%ZZ", "%C3", "+", "-", ":", ".",
        " ",
        "\t", "\"", "[", "]", "{", "}", "@", "*", "#", "?", "\\", " eq ", " and ", " or ", "not ", " in ", " has ",
        " add ",
        "any(", "all(", "d:", "$it", "$count", "$filter=", "$expand=", "$select=", "$top=", "$orderby=", "0", "9",
        "1.5",
        "2021-01-01", "T10:00:00Z", "12L", "1e", "INF", "NaN", "null", "true", "duration'", "binary'", "X'", "guid'",
        "Sales.Status'", "contains(", "substring(", "cast(", "Edm.String", "ü", "€", "\u{0}", "😀", "\u{301}",
    ]

    static func mutate(_ s: String, _ rng: inout SeededRandom) -> String {
        var chars = Array(s.unicodeScalars)
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            let at = chars.isEmpty ? 0 : Int.random(in: 0...chars.count, using: &rng)
            switch Int.random(in: 0..<6, using: &rng) {
            case 0 where !chars.isEmpty:
                let end = min(chars.count, at + Int.random(in: 1...6, using: &rng))
                if at < end { chars.removeSubrange(at..<end) }
            case 1:
                chars.insert(contentsOf: fragments.randomElement(using: &rng)!.unicodeScalars, at: at)
            case 2 where !chars.isEmpty:
                let a = Int.random(in: 0..<chars.count, using: &rng)
                let b = min(chars.count, a + Int.random(in: 1...12, using: &rng))
                chars.insert(contentsOf: chars[a..<b], at: at)
            case 3:
                chars = Array(chars.prefix(at))
            case 4:
                let scalar = Unicode.Scalar(UInt8.random(in: 0...127, using: &rng))
                chars.insert(scalar, at: at)
            default:
                if at < chars.count { chars[at] = fragments.randomElement(using: &rng)!.unicodeScalars.first ?? " " }
            }
        }
        return String(String.UnicodeScalarView(chars))
    }

    @Test func mutatedURLsNeverCrash() {
        let environment = ProcessInfo.processInfo.environment
        let seed = testSeed("QueryTests fuzz", variable: "QUERY_FUZZ_SEED")
        let iterations = environment["QUERY_FUZZ_ITERATIONS"].flatMap { Int($0) } ?? 20_000
        var rng = SeededRandom(seed: seed)
        let binder = Binder(schema: TestSchema.v4)
        var syntaxErrors = 0, bindErrors = 0, bound = 0
        for i in 0..<iterations {
            var input = Self.corpus[i % Self.corpus.count]
            for _ in 0..<Int.random(in: 1...3, using: &rng) { input = Self.mutate(input, &rng) }
            let url: ODataURL
            do {
                url = try ODataURL.parse(input, version: Bool.random(using: &rng) ? .v4 : .v2)
            } catch {
                _ = error.description
                syntaxErrors += 1
                continue
            }
            _ = url.description
            do {
                let query = try binder.bind(url)
                _ = query.filter?.description
                bound += 1
            } catch {
                _ = error.description
                bindErrors += 1
            }
        }
        print("QueryTests fuzz: \(bound) bound, \(bindErrors) binding errors, \(syntaxErrors) syntax errors")
        #expect(bound + bindErrors + syntaxErrors == iterations)
    }

    @Test(arguments: corpus)
    func corpusBinds(_ url: String) {
        #expect(bindError(url) == "ok")
    }

    @Test func randomStringsNeverCrash() {
        var rng = SeededRandom(seed: 0x5EED)
        for _ in 0..<5_000 {
            var s = ""
            for _ in 0..<Int.random(in: 0...12, using: &rng) { s += Self.fragments.randomElement(using: &rng)! }
            _ = parseError("P?$filter=" + s)
            _ = parseError("P(" + s + ")?$expand=a(" + s + ")&$select=" + s + "&$orderby=" + s)
            _ = bindError("BusinessPartners?$filter=" + s)
        }
    }
}
