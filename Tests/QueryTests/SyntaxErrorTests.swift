import TestSupport
import Testing
import Query

/// Syntax errors: exact messages, options and 1-based columns within the decoded option text.
@Suite(.runsOffThePool) struct SyntaxErrorTests {
    @Test(arguments: [
        ("P?$filter=Country eq 'US')", "unexpected ')' in $filter at column 16"),
        ("P?$filter=Name eq 'abc", "unterminated string literal in $filter at column 9"),
        ("P?$filter=a eq 'x''", "unterminated string literal in $filter at column 6"),
        ("P?$filter=", "unexpected end of input in $filter at column 1"),
        ("P?$filter=Name eq", "unexpected end of input in $filter at column 8"),
        ("P?$filter=a eq 1 and", "unexpected end of input in $filter at column 11"),
        ("P?$filter=not", "unexpected end of input in $filter at column 4"),
        ("P?$filter=-", "unexpected end of input in $filter at column 2"),
        ("P?$filter=(a eq 1", "expected ')' in $filter at column 8"),
        ("P?$filter=a eq 1 b", "unexpected 'b' in $filter at column 8"),
        ("P?$filter=a eq {}", "unexpected '{' in $filter at column 6"),
        ("P?$filter=a eq .5", "unexpected '.' in $filter at column 6"),
        ("P?$filter=a eq 2021-13-01", "invalid date literal '2021-13-01' in $filter at column 6"),
        ("P?$filter=a eq 12abc", "invalid number literal '12abc' in $filter at column 6"),
        ("P?$filter=a eq 42.", "invalid number literal '42.' in $filter at column 6"),
        ("P?$filter=a eq 1.5q", "invalid number literal '1.5q' in $filter at column 6"),
        ("P?$filter=a eq 1.5L", "invalid Int64 literal '1.5L' in $filter at column 6"),
        ("P?$filter=a eq 25:00:00", "invalid time-of-day literal '25:00:00' in $filter at column 6"),
        ("P?$filter=a eq 2021-01-01T25:00Z", "invalid date-time literal '2021-01-01T25:00Z' in $filter at column 6"),
        ("P?$filter=a eq duration'P1Y'", "invalid duration literal 'P1Y' in $filter at column 6"),
        ("P?$filter=a eq guid'xyz'", "invalid guid literal 'xyz' in $filter at column 6"),
        ("P?$filter=a eq datetime'2021-01-01'", "invalid datetime literal '2021-01-01' in $filter at column 6"),
        ("P?$filter=a eq binary'!!'", "invalid binary literal '!!' in $filter at column 6"),
        ("P?$filter=a eq X'0'", "invalid binary literal '0' in $filter at column 6"),
        ("P?$filter=a eq foo'x'", "unknown literal prefix 'foo' in $filter at column 6"),
        ("P?$filter=a eq NS.E''", "invalid enum literal '' in $filter at column 6"),
        ("P?$filter=a eq geography'SRID=0;Point(1 2)'", "spatial literals are not supported in $filter at column 6"),
        ("P?$filter=any()", "'any' must follow a collection path in $filter at column 1"),
        ("P?$filter=Orders/all()", "'all' requires a lambda expression in $filter at column 12"),
        ("P?$filter=Orders/any(d d/x)", "expected ':' in $filter at column 14"),
        ("P?$filter=Orders/any(:true)", "expected a lambda variable name after 'any(' in $filter at column 12"),
        ("P?$filter=Orders/any(d:d/x eq 1", "expected ')' in $filter at column 22"),
        ("P?$filter=a in 'x'", "expected '(' after 'in' in $filter at column 6"),
        ("P?$filter=a in (b, c)", "expected a literal in list in $filter at column 7"),
        ("P?$filter=a in ('x' 'y')", "expected ')' in $filter at column 11"),
        ("P?$filter=EmailAddresses eq ('Miller','Smith')", "expected ')' in $filter at column 28"),
        ("P?$filter=contains(a,", "unexpected end of input in $filter at column 12"),
        ("P?$filter=contains(a b)", "expected ')' in $filter at column 12"),
        ("P?$filter=$root/X", "'$root' is not supported in $filter at column 1"),
        ("P?$filter=a/", "expected a property name after '/' in $filter at column 3"),
        ("P?$filter=Orders/$count/x", "unexpected '/' in $filter at column 14"),
        ("P?$filter=Model.Fn()/x", "unexpected '/' in $filter at column 11"),
        ("P?$filter=a/Model.Fn()", "function calls in paths are not supported in $filter at column 3"),
        ("P?$filter=a eq \"x\"", "unexpected '\"x\"' in $filter at column 6"),
        ("P?$filter=a%20eq%20'x", "unterminated string literal in $filter at column 6"),
        ("P?%24filter=a+eq+1+)", "unexpected ')' in $filter at column 8"),
        ("P?$top=-1", "expected a non-negative integer in $top at column 1"),
        ("P?$top=abc", "expected a non-negative integer in $top at column 1"),
        ("P?$skip=1.5", "expected a non-negative integer in $skip at column 1"),
        ("P?$top=99999999999999999999999", "expected a non-negative integer in $top at column 1"),
        ("P?$count=yes", "expected true or false in $count at column 1"),
        ("P?$count", "missing value in $count"),
        ("P?$inlinecount=all", "expected allpages or none in $inlinecount at column 1"),
        ("P?$top=1&$top=2", "duplicate system query option in $top"),
        ("P?$TOP=1&$top=2", "duplicate system query option in $top"),
        ("P?$count=true&$inlinecount=allpages", "$count and $inlinecount cannot both be given in $inlinecount"),
        ("P?$foo=1", "unknown system query option $foo"),
        ("P?$apply=groupby(x)", "system query option $apply is not supported"),
        ("P?$select=", "expected a property name in $select at column 1"),
        ("P?$select=a,", "expected a property name in $select at column 3"),
        ("P?$select=a/*/b", "unexpected '/' in $select at column 4"),
        ("P?$select=a(b)", "unexpected '(' in $select at column 2"),
        ("P?$orderby=", "unexpected end of input in $orderby at column 1"),
        ("P?$orderby=a,", "unexpected end of input in $orderby at column 3"),
        ("P?$orderby=a asc desc", "unexpected 'desc' in $orderby at column 7"),
        ("P?$expand=", "expected a navigation property in $expand at column 1"),
        ("P?$expand=a(", "expected a query option in $expand at column 3"),
        ("P?$expand=a($top=1", "expected ')' in $expand at column 9"),
        ("P?$expand=a($top=-1)", "expected a non-negative integer in $expand at column 8"),
        ("P?$expand=a($top=1;$top=2)", "duplicate option $top in $expand at column 10"),
        ("P?$expand=a($levels=2)", "unsupported nested option '$levels' in $expand at column 3"),
        ("P?$expand=a($skiptoken=x)", "unsupported nested option '$skiptoken' in $expand at column 3"),
        ("P?$expand=a($filter)", "expected '=' in $expand at column 10"),
        ("P?$expand=a/$ref", "'$ref' is not supported in $expand at column 3"),
        ("P?$expand=a($filter=b eq 'x)", "unterminated string literal in $expand at column 16"),
        ("P?$expand=a($filter=b eq)", "unexpected ')' in $expand at column 15"),
        ("P?$expand=a;b", "unexpected ';' in $expand at column 2"),
        ("", "missing entity set name in resource path at column 1"),
        ("/", "missing entity set name in resource path at column 1"),
        ("?$top=1", "missing entity set name in resource path at column 1"),
        ("P(", "expected a key value in resource path at column 3"),
        ("P()", "empty key predicate in resource path at column 3"),
        ("P(1", "expected ')' in resource path at column 4"),
        ("P(1,2)", "expected ')' in resource path at column 4"),
        ("P(a=)", "expected a key value in resource path at column 5"),
        ("P(ID=wrong)", "expected a key value in resource path at column 6"),
        ("P(a=1;b=2)", "expected ')' in resource path at column 6"),
        ("P('a'", "expected ')' in resource path at column 6"),
        ("P('a", "unterminated string literal in resource path at column 3"),
        ("P(1)x", "unexpected 'x' in resource path at column 5"),
        ("P//Q", "unexpected '/' in resource path at column 3"),
        ("P/$count/x", "unexpected 'x' in resource path at column 10"),
        ("$metadata", "path segment '$metadata' is not supported in resource path at column 1"),
        ("P/$value", "path segment '$value' is not supported in resource path at column 3"),
        ("Products.('foo')", "unexpected '.' in resource path at column 9"),
        (".Products", "unexpected '.' in resource path at column 1"),
        ("P/1", "unexpected '1' in resource path at column 3"),
    ])
    func message(_ url: String, _ expected: String) {
        #expect(parseError(url) == expected)
    }

    @Test func errorFields() {
        do {
            _ = try ODataURL.parse("P?$filter=Name eq 'abc")
            Issue.record("expected an error")
        } catch {
            #expect(error.message == "unterminated string literal")
            #expect(error.option == "$filter")
            #expect(error.column == 9)
        }
    }

    @Test func nestingLimit() {
        let deep = "P?$filter=" + String(repeating: "(", count: 5000) + "a" + String(repeating: ")", count: 5000)
        #expect(parseError(deep) == "expression nested too deeply in $filter at column 101")
        let negations = "P?$filter=" + String(repeating: "not ", count: 5000) + "a"
        #expect(parseError(negations).hasPrefix("expression nested too deeply in $filter"))
        let sums = "P?$filter=" + Array(repeating: "1", count: 5000).joined(separator: " add ")
        #expect(parseError(sums).hasPrefix("expression nested too deeply in $filter"))
        let expands =
            "P?$expand=" + String(repeating: "a($expand=", count: 100) + "b" + String(repeating: ")", count: 100)
        #expect(parseError(expands).hasPrefix("$expand nested too deeply in $expand"))
        let longPath = "P?$select=" + Array(repeating: "a", count: 1000).joined(separator: "/")
        #expect(parseError(longPath).hasPrefix("path too long in $select"))
    }
}
