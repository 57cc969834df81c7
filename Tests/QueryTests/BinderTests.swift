import TestSupport
import Testing
import Query
import Storage

/// Binding against the test schema: typed trees, numeric promotion, literal conversion, paths.
@Suite(.runsOffThePool) struct BinderTests {
    @Test(arguments: [
        ("Country eq 'US'", "(eq Country 'US')"),
        ("Rating gt 3", "(gt Rating 3)"),
        ("Rating eq 12L", "(eq Rating 12)"),
        ("Rating gt 1.5", "(gt (Edm.Decimal Rating) 1.5M)"),
        ("Rating ge 2.0", "(ge Rating 2)"),
        ("Rating eq 2.5e3", "(eq Rating 2500)"),
        ("CreditLimit gt 100", "(gt CreditLimit 100M)"),
        ("CreditLimit gt 2.5e3", "(gt CreditLimit 2500.0M)"),
        ("CreditLimit add 1.5 gt Rating", "(gt (add CreditLimit 1.5M) (Edm.Decimal Rating))"),
        ("Rating add 1 gt 2", "(gt (add Rating 1) 2)"),
        ("Rating add 12L gt 2", "(gt (add Rating 12L) 2L)"),
        ("Rating div 2 eq 1", "(eq (div Rating 2) 1)"),
        ("Rating divby 2 eq 1.5", "(eq (divby (Edm.Decimal Rating) 2M) 1.5M)"),
        ("-Rating lt 0", "(lt (- Rating) 0)"),
        ("-CreditLimit lt -1.5", "(lt (- CreditLimit) -1.5M)"),
        ("Address/City eq 'Berlin'", "(eq Address/City 'Berlin')"),
        ("Address/Location/Lat gt 50", "(gt Address/Location/Lat 50.0D)"),
        ("$it/Country eq 'US'", "(eq Country 'US')"),
        ("Country eq null", "(isnull Country)"),
        ("null ne Country", "(not (isnull Country))"),
        ("Address eq null", "(isnull Address)"),
        ("Country eq 'x' or Rating eq 1 or Active", "(or (eq Country 'x') (eq Rating 1) Active)"),
        ("not (Country eq 'US')", "(not (eq Country 'US'))"),
        ("Active and Rating eq 1", "(and Active (eq Rating 1))"),
        ("Status eq Sales.Status'Open'", "(eq Status Sales.Status'1')"),
        ("Status eq Sales.Status'Closed,1'", "(eq Status Sales.Status'3')"),
        ("Status eq 'Open'", "(eq Status Sales.Status'1')"),
        ("Status eq 1", "(eq Status Sales.Status'1')"),
        ("Flags has Sales.Flags'Red,Blue'", "(has Flags 5)"),
        ("Flags has 'Green'", "(has Flags 2)"),
        ("Country in ('US', 'DE')", "(in Country ('US' 'DE'))"),
        ("Rating in (1, 2L, 3.0)", "(in Rating (1 2 3))"),
        ("Status in ('New', Sales.Status'Open')", "(in Status (Sales.Status'0' Sales.Status'1'))"),
        ("SalesOrders/any(o:o/GrossAmount gt 1000)", "(any SalesOrders o (gt o/GrossAmount 1000M))"),
        ("SalesOrders/any()", "(any SalesOrders)"),
        (
            "SalesOrders/all(o:o/Items/any(i:i/Quantity gt 2 and o/Currency eq 'EUR' and $it/Country eq 'US'))",
            "(all SalesOrders o (any o/Items i (and (gt i/Quantity 2) (eq o/Currency 'EUR') (eq Country 'US'))))"
        ),
        ("Emails/any(e:endswith(e,'.com'))", "(any Emails e (endswith e '.com'))"),
        ("Addresses/any(a:a/City eq 'Paris')", "(any Addresses a (eq a/City 'Paris'))"),
        ("SalesOrders/$count gt 2", "(gt (count SalesOrders) 2L)"),
        ("Emails/$count eq 0", "(eq (count Emails) 0L)"),
        ("contains(CompanyName,'SAP')", "(contains CompanyName 'SAP')"),
        ("substringof('SAP', CompanyName)", "(contains CompanyName 'SAP')"),
        ("substringof('SAP', CompanyName) eq true", "(eq (contains CompanyName 'SAP') true)"),
        ("length(CompanyName) gt 3", "(gt (length CompanyName) 3)"),
        ("substring(CompanyName, 1, 2) eq 'AP'", "(eq (substring CompanyName 1 2) 'AP')"),
        ("indexof(CompanyName, 'x') eq -1", "(eq (indexof CompanyName 'x') -1)"),
        ("tolower(CompanyName) eq 'sap'", "(eq (tolower CompanyName) 'sap')"),
        ("concat(Country, Address/City) eq 'x'", "(eq (concat Country Address/City) 'x')"),
        ("contains(Country, null)", "(contains Country null)"),
        ("year(CreatedAt) eq 2021", "(eq (year CreatedAt) 2021)"),
        ("date(CreatedAt) eq 2021-01-01", "(eq (date CreatedAt) 2021-01-01)"),
        ("CreatedAt gt 2021-01-01T00:00:00Z", "(gt CreatedAt 2021-01-01T00:00:00Z)"),
        ("CreatedAt gt 2021-01-01", "(gt CreatedAt 2021-01-01T00:00:00Z)"),
        ("CreatedAt gt datetime'2021-01-01T00:00'", "(gt CreatedAt 2021-01-01T00:00:00Z)"),
        ("CreatedAt lt now()", "(lt CreatedAt (now))"),
        ("CreatedAt add duration'P1D' gt now()", "(gt (add CreatedAt duration'P1D') (now))"),
        (
            "CreatedAt sub 2021-01-01T00:00:00Z gt duration'P1D'",
            "(gt (sub CreatedAt 2021-01-01T00:00:00Z) duration'P1D')"
        ),
        ("round(CreditLimit) eq 5", "(eq (round CreditLimit) 5M)"),
        ("cast(Rating, Edm.String) eq '3'", "(eq (cast Rating Edm.String) '3')"),
        ("isof(Rating, Edm.Int32)", "(not (isnull Rating))"),
        ("isof(Rating, Edm.String)", "false"),
    ])
    func partners(_ input: String, _ expected: String) throws {
        #expect(try boundFilter(input) == expected)
    }

    @Test(arguments: [
        ("SalesOrderItems", "Quantity gt 1.5", "(gt (Edm.Decimal Quantity) 1.5M)"),
        ("SalesOrderItems", "Weight gt 1", "(gt Weight 1.0D)"),
        ("SalesOrderItems", "Weight gt 1.5", "(gt Weight 1.5D)"),
        ("SalesOrderItems", "NetAmount mul Quantity gt 100", "(gt (mul NetAmount (Edm.Decimal Quantity)) 100M)"),
        ("SalesOrderItems", "Weight add NetAmount gt 1", "(gt (add Weight (Edm.Double NetAmount)) 1.0D)"),
        ("SalesOrderItems", "DeliveryTime lt 10:00", "(lt DeliveryTime 10:00:00)"),
        ("SalesOrderItems", "DeliveryTime lt duration'PT10H'", "(lt DeliveryTime 10:00:00)"),
        ("SalesOrderItems", "hour(DeliveryTime) eq 10", "(eq (hour DeliveryTime) 10)"),
        ("SalesOrderItems", "Product/Price gt 5", "(gt Product/Price 5M)"),
        (
            "SalesOrderItems", "SalesOrder/BusinessPartner/Address/City eq 'x'",
            "(eq SalesOrder/BusinessPartner/Address/City 'x')"
        ),
        ("SalesOrders", "CreatedAt ge datetime'2021-01-01T00:00'", "(ge CreatedAt datetime'2021-01-01T00:00:00Z')"),
        ("SalesOrders", "CreatedAt ge 2021-01-01T00:00:00Z", "(ge CreatedAt datetime'2021-01-01T00:00:00Z')"),
        ("SalesOrders", "DeliveryDate lt 2021-02-01", "(lt DeliveryDate 2021-02-01)"),
        (
            "SalesOrders", "DeliveryDate sub 2021-01-01 gt duration'P7D'",
            "(gt (sub DeliveryDate 2021-01-01) duration'P7D')"
        ),
        ("Products", "Stock gt 5", "(gt Stock 5L)"),
        ("Products", "Rank eq 3", "(eq Rank 3)"),
        ("Products", "Level eq 300", "(eq Level 300)"),
        ("Products", "Level add 1 gt 2", "(gt (add Level 1) 2)"),
        ("Products", "Width gt 1.5", "(gt Width 1.5F)"),
        ("Products", "Guid eq 01234567-89ab-cdef-0123-456789abcdef", "(eq Guid 01234567-89ab-cdef-0123-456789abcdef)"),
        ("Products", "Picture eq X'0A'", "(eq Picture X'0A')"),
        ("Products", "ShelfLife gt duration'P1D'", "(gt ShelfLife duration'P1D')"),
        ("Products", "OpensAt lt time'PT8H'", "(lt OpensAt time'08:00:00')"),
        ("Products", "OpensAt lt 08:00", "(lt OpensAt time'08:00:00')"),
        ("Products", "Price gt 5 and Stock lt 2.5", "(and (gt Price 5M) (lt (Edm.Decimal Stock) 2.5M))"),
        ("Products", "Stock mod 2 eq 0", "(eq (mod Stock 2L) 0L)"),
        ("Products", "floor(Width) eq 1", "(eq (floor Width) 1.0F)"),
        ("Products", "Supplier/Emails/any(e:e eq 'x')", "(any Supplier/Emails e (eq e 'x'))"),
    ])
    func otherSets(_ set: String, _ input: String, _ expected: String) throws {
        #expect(try boundFilter(input, set: set) == expected)
    }

    @Test func typesAndValues() throws {
        let query = try Binder(schema: TestSchema.v4).bind("SalesOrderItems?$filter=Quantity gt 1.5 and Weight lt 2")
        guard case .and(let items) = query.filter?.kind else { Issue.record("not and"); return }
        #expect(query.filter?.type == .primitive(.boolean))
        guard case .compare(.gt, let lhs, let rhs) = items[0].kind else { Issue.record("not gt"); return }
        #expect(lhs.type == .primitive(.decimal))
        #expect(rhs.kind == .literal(.decimal(EDMDecimal("1.5")!)))
        guard case .convert(let inner) = lhs.kind, case .property(let path) = inner.kind else {
            Issue.record("not convert"); return
        }
        #expect(inner.type == .primitive(.int32))
        #expect(path.variable == nil)
        #expect(path.steps.map(\.name) == ["Quantity"])
        guard case .compare(.lt, _, let two) = items[1].kind else { Issue.record("not lt"); return }
        #expect(two.kind == .literal(.double(2)))
        #expect(two.position == 31)
    }

    @Test func pathSteps() throws {
        let query = try Binder(schema: TestSchema.v4).bind(
            "SalesOrderItems?$filter=SalesOrder/BusinessPartner/Address/City eq 'x'")
        guard case .compare(_, let lhs, _) = query.filter?.kind, case .property(let path) = lhs.kind else {
            Issue.record("shape"); return
        }
        #expect(path.steps.count == 4)
        guard case .navigation(let nav, let set) = path.steps[1] else { Issue.record("not navigation"); return }
        #expect(nav.name == "BusinessPartner")
        #expect(set == "BusinessPartners")
        guard case .property(let city) = path.steps[3] else { Issue.record("not property"); return }
        #expect(city.type == .primitive(.string))
    }

    @Test func resourcePath() throws {
        let binder = Binder(schema: TestSchema.v4)
        let q = try binder.bind("BusinessPartners('0100')/SalesOrders('5')/Items/$count")
        #expect(q.path.isCount)
        #expect(q.path.entitySet == "SalesOrderItems")
        #expect(!q.path.isSingle)
        #expect(q.path.segments.map(\.entitySet) == ["BusinessPartners", "SalesOrders", "SalesOrderItems"])
        #expect(q.path.segments[0].key == [KeyComponent(name: "BusinessPartnerID", value: .string("0100"))])
        #expect(q.path.segments[1].navigation?.name == "SalesOrders")
        #expect(q.path.segments[1].isSingle)
        let item = try binder.bind("SalesOrderItems(ItemPosition=10,SalesOrderID='5')")
        #expect(
            item.path.segments[0].key == [
                KeyComponent(name: "SalesOrderID", value: .string("5")),
                KeyComponent(name: "ItemPosition", value: .int(10)),
            ])
        #expect(item.path.isSingle)
        let product = try binder.bind("SalesOrderItems(SalesOrderID='5',ItemPosition=10)/Product")
        #expect(product.path.isSingle)
        #expect(product.path.entitySet == "Products")
        #expect(try binder.bind("Me/SalesOrders").path.entitySet == "SalesOrders")
        #expect(try binder.bind("http://h/s/Products('1')", serviceRoot: "http://h/s").path.isSingle)
    }

    @Test func options() throws {
        let q = try Binder(schema: TestSchema.v4).bind(
            "BusinessPartners?$orderby=Address/City desc,Rating&$top=10&$skip=5&$count=true&$search=x&$select=CompanyName,Address/City"
                + "&$skiptoken=t&$format=json&sap-client=100")
        #expect(
            q.orderBy.map { $0.expression.description + ($0.descending ? " desc" : "") } == [
                "Address/City desc", "Rating",
            ])
        #expect(q.orderBy[1].expression.type == .primitive(.int32))
        #expect(q.top == 10 && q.skip == 5 && q.count && q.search == "x")
        #expect(q.select?.properties.map(\.description) == ["CompanyName", "Address/City"])
        #expect(q.skipToken == "t" && q.format == "json")
        #expect(q.customOptions == [CustomOption(name: "sap-client", value: "100")])
        let all = try Binder(schema: TestSchema.v4).bind("BusinessPartners?$select=*,Country")
        #expect(all.select == nil)
        #expect(try Binder(schema: TestSchema.v2).bind("BusinessPartners?$inlinecount=allpages").count)
    }

    @Test func expandV4() throws {
        let q = try Binder(schema: TestSchema.v4).bind(
            "BusinessPartners?$expand=SalesOrders($filter=GrossAmount gt 100;$select=SalesOrderID;$orderby=CreatedAt desc;$top=3;$skip=1;$count=true;$expand=Items($top=2))"
        )
        #expect(q.expand.count == 1)
        let orders = q.expand[0]
        #expect(orders.navigation.name == "SalesOrders")
        #expect(orders.entitySet == "SalesOrders")
        #expect(orders.entityType == "Sales.SalesOrder")
        #expect(orders.options.filter?.description == "(gt GrossAmount 100M)")
        #expect(orders.options.select?.properties.map(\.description) == ["SalesOrderID"])
        #expect(orders.options.orderBy.map(\.descending) == [true])
        #expect(orders.options.top == 3 && orders.options.skip == 1 && orders.options.count)
        #expect(orders.options.expand.map(\.navigation.name) == ["Items"])
        #expect(orders.options.expand[0].options.top == 2)
    }

    @Test func expandV2PathsMerge() throws {
        let q = try Binder(schema: TestSchema.v2).bind(
            "BusinessPartners?$expand=SalesOrders/Items/Product,SalesOrders/BusinessPartner,SalesOrders&$select=CompanyName,SalesOrders/GrossAmount,SalesOrders/Items/Quantity"
        )
        #expect(q.expand.map(\.navigation.name) == ["SalesOrders"])
        let orders = q.expand[0]
        #expect(orders.options.expand.map(\.navigation.name) == ["Items", "BusinessPartner"])
        #expect(orders.options.expand[0].options.expand.map(\.navigation.name) == ["Product"])
        #expect(q.select?.properties.map(\.description) == ["CompanyName"])
        #expect(q.select?.navigations == ["SalesOrders"])
        #expect(orders.options.select?.properties.map(\.description) == ["GrossAmount"])
        #expect(orders.options.select?.navigations == ["Items"])
        #expect(orders.options.expand[0].options.select?.properties.map(\.description) == ["Quantity"])
        #expect(orders.options.expand[1].options.select == nil)
    }

    @Test func expandStar() throws {
        let q = try Binder(schema: TestSchema.v4).bind("SalesOrders?$expand=*")
        #expect(q.expand.map(\.navigation.name) == ["BusinessPartner", "Items"])
        let merged = try Binder(schema: TestSchema.v4).bind("SalesOrders?$expand=Items($top=1),*")
        #expect(merged.expand.map(\.navigation.name) == ["Items", "BusinessPartner"])
        #expect(merged.expand[0].options.top == 1)
    }

    @Test func v2Forms() throws {
        let binder = Binder(schema: TestSchema.v2)
        let q = try binder.bind(
            "Products?$filter=Picture eq binary'0A0B' and substringof('x',Name) and Stock gt 5L and Price le 9.5M"
                + "&$inlinecount=allpages&$expand=Supplier/SalesOrders")
        #expect(q.filter?.description == "(and (eq Picture X'0A0B') (contains Name 'x') (gt Stock 5L) (le Price 9.5M))")
        #expect(q.count)
        #expect(q.expand.map(\.navigation.name) == ["Supplier"])
        #expect(q.expand[0].options.expand.map(\.navigation.name) == ["SalesOrders"])
        let orders = try binder.bind("SalesOrders?$filter=CreatedAt ge datetime'2021-01-01T00:00' and Status eq 'Open'")
        #expect(
            orders.filter?.description
                == "(and (ge CreatedAt datetime'2021-01-01T00:00:00Z') (eq Status Sales.Status'1'))")
    }

    @Test func filterOnItsOwn() throws {
        let binder = Binder(schema: TestSchema.v4)
        let expr = try ODataURL.parse("x?$filter=Quantity gt 2").filter!
        #expect(try binder.bindFilter(expr, entitySet: "SalesOrderItems").description == "(gt Quantity 2)")
        #expect(throws: QueryError.self) { try binder.bindFilter(expr, entitySet: "Nope") }
    }
}
