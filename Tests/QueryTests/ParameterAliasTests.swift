import TestSupport
import Testing
import Query
import Storage

/// Parameter aliases (OData URL Conventions 5.1.1.13) in plain URLs, and prepared statements.
@Suite(.runsOffThePool) struct ParameterAliasTests {
    @Test(arguments: [
        // An alias binds as its value would where the alias stands.
        ("Country eq @c&@c='US'", "(eq Country 'US')"),
        ("@c eq Country&@c='US'", "(eq 'US' Country)"),
        ("CreditLimit gt @n&@n=100", "(gt CreditLimit 100M)"),
        ("Rating gt @n&@n=1.5", "(gt (Edm.Decimal Rating) 1.5M)"),
        ("contains(CompanyName,@w)&@w='SAP'", "(contains CompanyName 'SAP')"),
        ("substring(CompanyName,@i) eq 'AP'&@i=1", "(eq (substring CompanyName 1) 'AP')"),
        ("Status eq @s&@s=Sales.Status'Open'", "(eq Status Sales.Status'1')"),
        ("Status eq @s&@s='Open'", "(eq Status Sales.Status'1')"),
        // A value may be an expression, used once or many times.
        ("Rating gt @r&@r=1 add 2", "(gt Rating (add 1 2))"),
        ("@b&@b=Country eq 'US'", "(eq Country 'US')"),
        ("Country eq @c or CompanyName eq @c&@c='X'", "(or (eq Country 'X') (eq CompanyName 'X'))"),
        // An alias with no value is null.
        ("Country eq @missing", "(isnull Country)"),
        ("Country ne @missing", "(not (isnull Country))"),
        ("Rating gt @missing", "(gt Rating null)"),
        // Percent-encoded and with spaces around.
        ("Country eq @c&%40c=%27US%27", "(eq Country 'US')"),
        ("Country eq @c&@c= 'US' ", "(eq Country 'US')"),
    ])
    func plainAliases(_ text: String, _ expected: String) throws {
        #expect(try boundFilter(text) == expected)
    }

    @Test func aliasInOrderByAndKey() throws {
        let q = try Binder(schema: TestSchema.v4).bind("BusinessPartners?$orderby=@o desc&@o=Rating")
        #expect(q.orderBy.map(\.expression.description) == ["Rating"])
        #expect(q.orderBy.first?.descending == true)
        let k = try Binder(schema: TestSchema.v4).bind(
            "SalesOrderItems(SalesOrderID=@id,ItemPosition=@pos)?@id='0500000001'&@pos=10")
        #expect(k.path.segments[0].key?.map(\.value) == [.string("0500000001"), .int(10)])
        let single = try Binder(schema: TestSchema.v4).bind("BusinessPartners(@k)?@k='BP1'")
        #expect(single.path.segments[0].key?.map(\.value) == [.string("BP1")])
        // Nested in $expand.
        let e = try Binder(schema: TestSchema.v4).bind(
            "BusinessPartners?$expand=SalesOrders($filter=Currency eq @cur)&@cur='EUR'")
        #expect(e.expand.first?.options.filter?.description == "(eq Currency 'EUR')")
    }

    @Test(arguments: [
        ("BusinessPartners?$filter=Country eq @c&@c=", "missing value of parameter alias in @c"),
        ("BusinessPartners?$filter=Country eq @c&@c", "missing value of parameter alias in @c"),
        ("BusinessPartners?$filter=Country eq @c&@c='US'&@c='DE'", "parameter alias given twice in @c"),
        (
            "BusinessPartners?$filter=Country eq @c&@1c='US'",
            "a parameter alias name must start with a letter or '_' after '@' in @1c"
        ),
        (
            "BusinessPartners?$filter=Country eq @c&@=1",
            "a parameter alias name must start with a letter or '_' after '@' in @"
        ),
        ("BusinessPartners?$filter=Country eq @c&@c-d=1", "unexpected '-' in parameter alias name (column 3) in @c-d"),
        ("BusinessPartners?$filter=Country eq @c&@c='US' eq", "unexpected end of input in @c at column 8"),
        ("BusinessPartners?$filter=Country eq @c&@c='US", "unterminated string literal in @c at column 1"),
        (
            "BusinessPartners?$filter=Country eq @c&@c=@d&@d='US'",
            "an alias value cannot refer to another alias ('@d') in @c at column 1"
        ),
        (
            "BusinessPartners?$filter=Country eq @c&@c=[1,2]",
            "JSON array and object alias values are not supported in @c at column 1"
        ),
        ("BusinessPartners?$filter=Country eq @ c", "unexpected '@' in $filter at column 12"),
    ])
    func malformedAliases(_ url: String, _ message: String) {
        #expect(bindError(url) == message)
    }

    @Test(arguments: [
        (
            "BusinessPartners?$filter=Rating eq @r&@r='x'",
            "cannot compare Edm.Int32 with Edm.String in $filter at column 8"
        ),
        ("BusinessPartners?$filter=Rating eq @r&@r=Nope", "unknown property 'Nope' in @r at column 1"),
        (
            "BusinessPartners(@k)",
            "alias '@k' used as a key value has no value in the URL in resource path at column 18"
        ),
        (
            "BusinessPartners(@k)?@k=Country",
            "the value of alias '@k', used as a key value, must be a literal in resource path at column 18"
        ),
        ("BusinessPartners(@k)?@k=12", "key value 12 does not match Edm.String in resource path at column 18"),
    ])
    func aliasBindErrors(_ url: String, _ message: String) {
        #expect(bindError(url) == message)
    }

    @Test func aliasExpansionIsBounded() {
        let value = Array(repeating: "1", count: 60).joined(separator: " add ")  // 119 nodes
        let uses = Array(repeating: "Rating eq @v", count: 100).joined(separator: " or ")
        #expect(
            bindError("BusinessPartners?$filter=\(uses)&@v=\(value)")
                == "parameter alias values put in place of their uses exceed 10000 nodes in @v")
        let few = Array(repeating: "Rating eq @v", count: 10).joined(separator: " or ")
        #expect(bindError("BusinessPartners?$filter=\(few)&@v=\(value)") == "ok")
    }

    // MARK: Prepared statements

    func prepare(_ url: String) throws(QueryError) -> PreparedStatement {
        try Binder(schema: TestSchema.v4).prepare(url)
    }

    @Test func preparedParametersTakeTheirUsesType() throws {
        let s = try prepare(
            "BusinessPartners?$filter=Country eq @c and Rating gt @r and CreditLimit lt @l and contains(CompanyName,@w) and substring(CompanyName,@i) eq 'x' and @b&$orderby=Rating"
        )
        #expect(
            s.parameters == [
                "c": .primitive(.string), "r": .primitive(.int32), "l": .primitive(.decimal),
                "w": .primitive(.string), "i": .primitive(.int32), "b": .primitive(.boolean),
            ])
        let q = try s.bind([
            "c": .string("US"), "r": .int(3), "l": .int(100), "w": .string("SAP"), "i": .int(1), "b": .bool(true),
        ])
        #expect(
            q.filter?.description
                == "(and (eq Country 'US') (gt Rating 3) (lt CreditLimit 100M) (contains CompanyName 'SAP') (eq (substring CompanyName 1) 'x') true)"
        )
        let literal = try Binder(schema: TestSchema.v4).bind(
            "BusinessPartners?$filter=Country eq 'US' and Rating gt 3 and CreditLimit lt 100 and contains(CompanyName,'SAP') and substring(CompanyName,1) eq 'x' and true&$orderby=Rating"
        )
        // positions differ
        #expect(q.filter?.description == literal.filter?.description && q.orderBy == literal.orderBy)
    }

    @Test func preparedNullAndFixedAliases() throws {
        let s = try prepare("BusinessPartners?$filter=Country eq @c and Rating ne @r and Status eq @s&@s='Open'")
        #expect(s.parameters == ["c": .primitive(.string), "r": .primitive(.int32)])
        let q = try s.bind(["r": .null])
        #expect(q.filter?.description == "(and (isnull Country) (not (isnull Rating)) (eq Status Sales.Status'1'))")
    }

    @Test func preparedKeys() throws {
        let s = try prepare("SalesOrderItems(SalesOrderID=@id,ItemPosition=@pos)")
        #expect(s.parameters == ["id": .primitive(.string), "pos": .primitive(.int32)])
        let q = try s.bind(["id": .string("0500000001"), "pos": .int(10)])
        #expect(
            q == (try Binder(schema: TestSchema.v4).bind("SalesOrderItems(SalesOrderID='0500000001',ItemPosition=10)")))
    }

    @Test(arguments: [
        (["c": Value.int(5)], "value 5 does not fit the alias's type Edm.String in @c"),
        (["r": .int(1 << 40)], "value 1099511627776 does not fit the alias's type Edm.Int32 in @r"),
        (["r": .decimal(EDMDecimal("1.5")!)], "value 1.5M does not fit the alias's type Edm.Int32 in @r"),
        (["x": .int(1)], "the query has no alias '@x' (it has @c, @r) in @x"),
    ])
    func preparedValueErrors(_ values: [String: Value], _ message: String) throws {
        let s = try prepare("BusinessPartners?$filter=Country eq @c and Rating gt @r")
        do {
            _ = try s.bind(values)
            Issue.record("bound \(values)")
        } catch {
            #expect(error.description == message)
        }
    }

    @Test func preparedKeyCannotBeNull() throws {
        let s = try prepare("BusinessPartners(@k)")
        #expect(throws: QueryError.self) { try s.bind([:]) }
        #expect(try s.bind(["k": .string("BP1")]).path.segments[0].key?.first?.value == .string("BP1"))
    }

    @Test(arguments: [
        (
            "BusinessPartners?$filter=@a eq @b",
            "cannot tell the type of alias '@a' here: compare it with a property or pass it to a function in $filter at column 1"
        ),
        (
            "BusinessPartners?$filter=round(@p) eq 1",
            "cannot tell the type of alias '@p' here: compare it with a property or pass it to a function in $filter at column 7"
        ),
        (
            "BusinessPartners?$orderby=@o",
            "cannot tell the type of alias '@o' here: compare it with a property or pass it to a function in $orderby at column 1"
        ),
        (
            "BusinessPartners?$filter=Country eq @p and Rating eq @p",
            "alias '@p' is used as Edm.String and as Edm.Int32 in $filter at column 29"
        ),
        (
            "BusinessPartners?$filter=Flags has @f",
            "a prepared alias cannot be the operand of 'has' in $filter at column 11"
        ),
    ])
    func preparedTypeErrors(_ url: String, _ message: String) {
        do {
            _ = try prepare(url)
            Issue.record("prepared \(url)")
        } catch {
            #expect(error.description == message)
        }
    }
}
