import TestSupport
import Testing
import Query

/// Positive parses of the `$filter` grammar, checked through the S-expression description.
@Suite(.runsOffThePool) struct ExpressionParserTests {
    @Test(arguments: [
        ("Country eq 'US'", "(eq Country 'US')"),
        ("Price ne 5", "(ne Price 5)"),
        ("Price gt 5 and Price lt 10", "(and (gt Price 5) (lt Price 10))"),
        ("a eq 1 or b eq 2 or c eq 3", "(or (eq a 1) (eq b 2) (eq c 3))"),
        ("a eq 1 and b eq 2 and c eq 3", "(and (eq a 1) (eq b 2) (eq c 3))"),
        ("a or b and c", "(or a (and b c))"),
        ("(a or b) and c", "(and (or a b) c)"),
        ("not a eq 1", "(not (eq a 1))"),
        ("not a eq 1 and b", "(and (not (eq a 1)) b)"),
        ("not not a", "(not (not a))"),
        ("not (a or b)", "(not (or a b))"),
        ("not(a)", "(not a)"),
        ("a ge 1 and b le 2", "(and (ge a 1) (le b 2))"),
        ("a add 1 eq b sub 2", "(eq (add a 1) (sub b 2))"),
        ("a add b mul c", "(add a (mul b c))"),
        ("a mul b add c", "(add (mul a b) c)"),
        ("a sub b sub c", "(sub (sub a b) c)"),
        ("a div b divby c mod d", "(mod (divby (div a b) c) d)"),
        ("(a add b) mul c", "(mul (add a b) c)"),
        ("-Price lt 0", "(lt (- Price) 0)"),
        ("- 3 eq x", "(eq (- 3) x)"),
        ("-(a add b)", "(- (add a b))"),
        ("Price mul -2", "(mul Price -2)"),
        ("Address/City eq 'Berlin'", "(eq Address/City 'Berlin')"),
        ("Address/Location/Lat gt 50.0", "(gt Address/Location/Lat 50.0M)"),
        ("$it/Name eq 'x'", "(eq $it/Name 'x')"),
        ("Flags has Sales.Flags'Red'", "(has Flags Sales.Flags'Red')"),
        ("Flags has Sales.Flags'Red,Blue'", "(has Flags Sales.Flags'Red,Blue')"),
        ("Name in ('Milk', 'Cheese')", "(in Name ('Milk' 'Cheese'))"),
        ("Name in ()", "(in Name ())"),
        ("Id in (1,-2, 3L)", "(in Id (1 -2 3L))"),
        ("Name in [\"Milk\", 'Cheese']", "(in Name ('Milk' 'Cheese'))"),
        ("Name in ('a') and b", "(and (in Name ('a')) b)"),
        ("Orders/any(d:d/Total gt 5)", "(any Orders d (gt d/Total 5))"),
        ("Orders/any( d : d/Total gt 5 )", "(any Orders d (gt d/Total 5))"),
        ("Orders/all(d:d/Total gt 5)", "(all Orders d (gt d/Total 5))"),
        ("Orders/any()", "(any Orders)"),
        ("Orders/any( )", "(any Orders)"),
        (
            "Customer/Orders/any(o:o/Items/all(i:i/Qty gt o/Min))",
            "(any Customer/Orders o (all o/Items i (gt i/Qty o/Min)))"
        ),
        ("Emails/any(e:endswith(e,'.com'))", "(any Emails e (endswith e '.com'))"),
        ("Orders/$count gt 2", "(gt Orders/$count 2)"),
        ("contains(Name,'x')", "(contains Name 'x')"),
        ("startswith(Name, 'x') eq true", "(eq (startswith Name 'x') true)"),
        ("substringof('x', Name)", "(substringof 'x' Name)"),
        ("substring(Name,1) eq 'x'", "(eq (substring Name 1) 'x')"),
        ("substring(Name,1,2) eq 'x'", "(eq (substring Name 1 2) 'x')"),
        ("concat(concat(City,', '),Country) eq 'x'", "(eq (concat (concat City ', ') Country) 'x')"),
        ("length(trim(tolower(toupper(Name)))) eq 3", "(eq (length (trim (tolower (toupper Name)))) 3)"),
        ("indexof(Name,'a') eq 1", "(eq (indexof Name 'a') 1)"),
        (
            "year(d) eq 2021 and month(d) eq 1 and day(d) eq 2",
            "(and (eq (year d) 2021) (eq (month d) 1) (eq (day d) 2))"
        ),
        (
            "hour(t) eq 1 or minute(t) eq 2 or second(t) eq 3",
            "(or (eq (hour t) 1) (eq (minute t) 2) (eq (second t) 3))"
        ),
        ("fractionalseconds(t) gt 0", "(gt (fractionalseconds t) 0)"),
        ("date(t) eq 2021-01-01", "(eq (date t) 2021-01-01)"),
        ("time(t) le 10:00", "(le (time t) 10:00:00)"),
        ("d lt now()", "(lt d (now))"),
        (
            "round(p) eq 1 and floor(p) eq 1 and ceiling(p) eq 2",
            "(and (eq (round p) 1) (eq (floor p) 1) (eq (ceiling p) 2))"
        ),
        ("cast(Price, Edm.String) eq '1'", "(eq (cast Price Edm.String) '1')"),
        ("isof(Price, Edm.Decimal)", "(isof Price Edm.Decimal)"),
        ("geo.distance(a, b) lt 5", "(lt (geo.distance a b) 5)"),
        ("Model.Custom(a)", "(Model.Custom a)"),
        ("NAME EQ 'Milk' AND Price LT 2.55", "(and (eq NAME 'Milk') (lt Price 2.55M))"),
        ("Name Eq 'Milk' Or Price Lt 2.55", "(or (eq Name 'Milk') (lt Price 2.55M))"),
        ("Name\teq\t'x'", "(eq Name 'x')"),
        ("true", "true"),
        ("(true)", "true"),
        ("( ( a ) )", "a"),
        ("Completed", "Completed"),
        ("_id eq 1", "(eq _id 1)"),
        ("Größe gt 1", "(gt Größe 1)"),
        ("not endswith(Name,'ilk')", "(not (endswith Name 'ilk'))"),
        ("a eq null", "(eq a null)"),
        ("null eq a", "(eq null a)"),
    ])
    func parses(_ input: String, _ expected: String) throws {
        #expect(try filter(input) == expected)
    }

    @Test func positions() throws {
        let url = try ODataURL.parse("S?$filter=Name eq 'x' and Orders/any(d:d/Qty gt 1)")
        guard case .and(let items) = url.filter?.kind else { Issue.record("not an and"); return }
        #expect(url.filter?.position == 13)
        #expect(items[0].position == 6)
        guard case .binary(.eq, let lhs, let rhs) = items[0].kind else { Issue.record("not eq"); return }
        #expect(lhs.position == 1)
        #expect(rhs.position == 9)
        guard case .lambda(.any, let path, let variable, let predicate) = items[1].kind else {
            Issue.record("not any"); return
        }
        #expect(items[1].position == 17)
        #expect(path.map(\.position) == [17])
        #expect(variable?.position == 28)
        #expect(predicate?.position == 36)
    }

    @Test func depthLimitAllowsReasonableNesting() throws {
        let nested = String(repeating: "(", count: 90) + "a eq 1" + String(repeating: ")", count: 90)
        #expect(try filter(nested) == "(eq a 1)")
        let longOr = (0..<2000).map { "Id eq \($0)" }.joined(separator: " or ")
        #expect(try filter(longOr).hasPrefix("(or (eq Id 0) (eq Id 1)"))
    }
}
