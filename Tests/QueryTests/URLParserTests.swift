import TestSupport
import Testing
import Query

/// Resource paths, query options, percent-decoding, `$expand`/`$select`/`$orderby` forms.
@Suite(.runsOffThePool) struct URLParserTests {
    @Test(arguments: [
        ("BusinessPartners", "BusinessPartners"),
        ("/BusinessPartners", "BusinessPartners"),
        ("BusinessPartners/", "BusinessPartners"),
        ("BusinessPartners('0100000000')", "BusinessPartners('0100000000')"),
        ("Customers('O''Neil')", "Customers('O''Neil')"),
        ("Customers(%27O%27%27Neil%27)", "Customers('O''Neil')"),
        ("Customers%28%27O%27%27Neil%27%29", "Customers('O''Neil')"),
        ("Categories('Smartphone%2FTablet')", "Categories('Smartphone/Tablet')"),
        ("Categories(11)", "Categories(11)"),
        ("Categories(ID=1)", "Categories(ID=1)"),
        ("SalesOrderItems(SalesOrderID='1',ItemPosition=10)", "SalesOrderItems(SalesOrderID='1',ItemPosition=10)"),
        ("SalesOrderItems(SalesOrderID='1', ItemPosition=10)", "SalesOrderItems(SalesOrderID='1',ItemPosition=10)"),
        ("Products(guid'01234567-89ab-cdef-0123-456789abcdef')", "Products(01234567-89ab-cdef-0123-456789abcdef)"),
        ("BusinessPartners('1')/SalesOrders", "BusinessPartners('1')/SalesOrders"),
        ("BusinessPartners('1')/SalesOrders('2')/Items", "BusinessPartners('1')/SalesOrders('2')/Items"),
        ("BusinessPartners/$count", "BusinessPartners/$count"),
        ("BusinessPartners('1')/SalesOrders/$count", "BusinessPartners('1')/SalesOrders/$count"),
    ])
    func paths(_ url: String, _ expected: String) throws {
        #expect(try ODataURL.parse(url).path.description == expected)
    }

    @Test func pathStructure() throws {
        let path = try ODataURL.parse("SalesOrderItems(SalesOrderID='1',ItemPosition=10)/Product/$count").path
        #expect(path.isCount)
        #expect(path.segments.map(\.name) == ["SalesOrderItems", "Product"])
        #expect(path.segments[0].key?.map(\.name) == ["SalesOrderID", "ItemPosition"])
        #expect(path.segments[0].key?.map(\.position) == [30, 47])
        #expect(path.segments[1].position == 51)
    }

    @Test func serviceRoot() throws {
        let root = "http://host/service/"
        #expect(
            try ODataURL.parse("http://host/service/Products(1)?$top=2", serviceRoot: root).description
                == "Products(1)?$top=2")
        #expect(
            try ODataURL.parse("HTTP://HOST/service/Products", serviceRoot: "http://host/service").path.description
                == "Products")
        #expect(try ODataURL.parse("/service/Products", serviceRoot: root).path.description == "Products")
        #expect(try ODataURL.parse("Products", serviceRoot: root).path.description == "Products")
        #expect(parseError("http://other/service/Products") == "an absolute URL needs a service root")
        #expect(throws: QueryError.self) { try ODataURL.parse("http://other/x/Products", serviceRoot: root) }
    }

    @Test func queryOptions() throws {
        let url = try ODataURL.parse(
            "BusinessPartners?$filter=Country eq 'US'&$orderby=CompanyName&$top=20&$skip=40&$count=true"
                + "&$select=CompanyName,Address/City&$search=blue green&$skiptoken=abc==&$format=json&sap-client=100&!flag"
        )
        #expect(
            url.description
                == "BusinessPartners?$filter=(eq Country 'US')&$orderby=CompanyName&$select=CompanyName,Address/City"
                + "&$top=20&$skip=40&$count=true&$search=blue green&$skiptoken=abc==&$format=json&sap-client=100&!flag")
        #expect(url.top == 20)
        #expect(url.skip == 40)
        #expect(url.count == true)
        #expect(
            url.customOptions == [
                CustomOption(name: "sap-client", value: "100"), CustomOption(name: "!flag", value: nil),
            ])
    }

    @Test func percentEncodingAndPlus() throws {
        let url = try ODataURL.parse(
            "Products?%24filter=Name%20eq%20%27O%27%27Neil%27+and+Price+lt+5&%24TOP=3&x=a%2Bb+c")
        #expect(url.filter?.description == "(and (eq Name 'O''Neil') (lt Price 5))")
        #expect(url.top == 3)
        #expect(url.customOptions == [CustomOption(name: "x", value: "a+b c")])
        #expect(try ODataURL.parse("P?$filter=a eq '100%'").filter?.description == "(eq a '100%')")
        #expect(try ODataURL.parse("P?$filter=a eq '%zz%4'").filter?.description == "(eq a '%zz%4')")
        #expect(try ODataURL.parse("P?$filter=a eq '%E2%82%AC'").filter?.description == "(eq a '€')")
        #expect(try ODataURL.parse("P?$filter=a eq 'x'#fragment").filter?.description == "(eq a 'x')")
        #expect(try ODataURL.parse("P?&&$top=1&").top == 1)
    }

    @Test func optionNamesAreCaseInsensitive() throws {
        let url = try ODataURL.parse("P?$OrderBy=Name desc&$FILTER=true&$Top=1")
        #expect(url.orderBy.map(\.description) == ["Name desc"])
        #expect(url.top == 1)
    }

    @Test func inlineCount() throws {
        #expect(try ODataURL.parse("P?$inlinecount=allpages").count == true)
        #expect(try ODataURL.parse("P?$inlinecount=none").count == false)
        #expect(try ODataURL.parse("P?$count=false").count == false)
        #expect(try ODataURL.parse("P").count == nil)
    }

    @Test(arguments: [
        ("Name", ["Name"]),
        ("Name asc", ["Name"]),
        ("Name\tasc", ["Name"]),
        ("Name desc,Price", ["Name desc", "Price"]),
        ("Name asc, Rating ,ReleaseDate desc", ["Name", "Rating", "ReleaseDate desc"]),
        ("Address/City DESC", ["Address/City desc"]),
        ("tolower(Name)", ["(tolower Name)"]),
        ("Cost ge Revenue asc", ["(ge Cost Revenue)"]),
        ("Products/$count", ["Products/$count"]),
    ])
    func orderBy(_ text: String, _ expected: [String]) throws {
        #expect(try ODataURL.parse("P?$orderby=" + text).orderBy.map(\.description) == expected)
    }

    @Test(arguments: [
        ("*", ["*"]),
        ("Name,Price", ["Name", "Price"]),
        ("Name, Address/City", ["Name", "Address/City"]),
        ("SalesOrders/Items/Quantity", ["SalesOrders/Items/Quantity"]),
        ("Model.ActionName", ["Model.ActionName"]),
    ])
    func select(_ text: String, _ expected: [String]) throws {
        #expect(try ODataURL.parse("P?$select=" + text).select?.map(\.description) == expected)
    }

    @Test(arguments: [
        ("Items", "Items"),
        ("Customer,Items", "Customer,Items"),
        ("SalesOrders/Items,ToProduct", "SalesOrders/Items,ToProduct"),
        ("*", "*"),
        ("Items()", "Items"),
        ("Items($top=2)", "Items($top=2)"),
        (
            "SalesOrders($filter=GrossAmount gt 100;$select=SalesOrderID,GrossAmount;$orderby=GrossAmount desc;$top=3;$skip=1;$count=true;$expand=Items($top=2))",
            "SalesOrders($filter=(gt GrossAmount 100);$orderby=GrossAmount desc;$select=SalesOrderID,GrossAmount;$expand=Items($top=2);$top=3;$skip=1;$count=true)"
        ),
        ("Items($filter=Name eq 'a;b)';$top=1)", "Items($filter=(eq Name 'a;b)');$top=1)"),
        ("Items($filter=(a eq 1) or (b eq 2))", "Items($filter=(or (eq a 1) (eq b 2)))"),
        ("Customer,Items(expand=Product)", "Customer,Items($expand=Product)"),
        ("Items($search=blue)", "Items($search=blue)"),
        (
            "Items($expand=Product($expand=Supplier($select=Name)))",
            "Items($expand=Product($expand=Supplier($select=Name)))"
        ),
    ])
    func expand(_ text: String, _ expected: String) throws {
        #expect(try ODataURL.parse("P?$expand=" + text).expand.map(\.description).joined(separator: ",") == expected)
    }

    @Test func nestedPositionsCountWithinExpand() throws {
        let url = try ODataURL.parse("P?$expand=Items($filter=Qty gt 1)")
        #expect(url.expand[0].options.filter?.position == 19)
        #expect(parseError("P?$expand=Items($filter=Qty gt )") == "unexpected ')' in $expand at column 22")
    }
}
