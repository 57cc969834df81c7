import TestSupport
import Testing
import Query

/// Binding errors against the test schema: exact messages, options and columns.
@Suite(.runsOffThePool) struct BinderErrorTests {
    @Test(arguments: [
        // $filter
        ("BusinessPartners?$filter=Countr eq 'US'", "unknown property 'Countr' in $filter at column 1"),
        ("BusinessPartners?$filter=Country eq 12", "cannot compare Edm.String with Edm.Int32 in $filter at column 9"),
        ("BusinessPartners?$filter=Rating eq 'x'", "cannot compare Edm.Int32 with Edm.String in $filter at column 8"),
        ("BusinessPartners?$filter=Country", "expected a Boolean expression, not Edm.String in $filter at column 1"),
        ("BusinessPartners?$filter=Rating", "expected a Boolean expression, not Edm.Int32 in $filter at column 1"),
        (
            "BusinessPartners?$filter=SalesOrders/$count",
            "expected a Boolean expression, not Edm.Int64 in $filter at column 1"
        ),
        (
            "BusinessPartners?$filter=contains(Country)",
            "function 'contains' takes 2 arguments, not 1 in $filter at column 1"
        ),
        (
            "BusinessPartners?$filter=now(Country) eq now()",
            "function 'now' takes 0 arguments, not 1 in $filter at column 1"
        ),
        (
            "BusinessPartners?$filter=contains(Rating, 'x')",
            "argument 1 of 'contains' must be Edm.String, not Edm.Int32 in $filter at column 10"
        ),
        (
            "BusinessPartners?$filter=substring(Country, 'a') eq 'x'",
            "argument 2 of 'substring' must be an integer, not Edm.String in $filter at column 20"
        ),
        (
            "BusinessPartners?$filter=substring(Country) eq 'x'",
            "function 'substring' takes 2 or 3 arguments, not 1 in $filter at column 1"
        ),
        (
            "BusinessPartners?$filter=year(Country) eq 1",
            "argument 1 of 'year' must be Edm.Date or Edm.DateTimeOffset, not Edm.String in $filter at column 6"
        ),
        ("BusinessPartners?$filter=foo(Country)", "unknown function 'foo' in $filter at column 1"),
        (
            "BusinessPartners?$filter=geo.distance(Country, Country) lt 1",
            "function 'geo.distance' is not supported in $filter at column 1"
        ),
        (
            "BusinessPartners?$filter=SalesOrders/GrossAmount gt 1",
            "'SalesOrders' is a collection; use any, all or $count in $filter at column 13"
        ),
        (
            "BusinessPartners?$filter=SalesOrders eq null",
            "'SalesOrders' is a collection; use any, all or $count in $filter at column 1"
        ),
        (
            "BusinessPartners?$filter=Emails eq 'x'",
            "'Emails' is a collection; use any, all or $count in $filter at column 1"
        ),
        ("BusinessPartners?$filter=Country/any(c:c eq 'x')", "'Country' is not a collection in $filter at column 1"),
        (
            "BusinessPartners?$filter=Address eq 'x'",
            "cannot compare Sales.Address with Edm.String in $filter at column 9"
        ),
        (
            "BusinessPartners?$filter=Address eq Address",
            "cannot compare Sales.Address with Sales.Address in $filter at column 9"
        ),
        ("BusinessPartners?$filter=Address/Town eq 'x'", "unknown property 'Town' in $filter at column 9"),
        ("BusinessPartners?$filter=Country/Name eq 'x'", "unknown property 'Name' in $filter at column 9"),
        ("BusinessPartners?$filter=Address/$count gt 1", "$count requires a collection in $filter at column 9"),
        ("BusinessPartners?$filter=SalesOrders/any(o:o/Foo eq 1)", "unknown property 'Foo' in $filter at column 21"),
        (
            "BusinessPartners?$filter=SalesOrders/any(o:o/GrossAmount)",
            "expected a Boolean expression, not Edm.Decimal in $filter at column 19"
        ),
        (
            "BusinessPartners?$filter=SalesOrders/any(o:SalesOrders/any(o:true))",
            "lambda variable 'o' is already defined in $filter at column 35"
        ),
        (
            "BusinessPartners?$filter=SalesOrders/any(o:o/Items/any(i:true)) and o/Currency eq 'x'",
            "unknown property 'o' in $filter at column 44"
        ),
        (
            "BusinessPartners?$filter=Rating add 'x' gt 1",
            "operator 'add' cannot be applied to Edm.Int32 and Edm.String in $filter at column 8"
        ),
        (
            "BusinessPartners?$filter=CreatedAt add 1 gt 2",
            "operator 'add' cannot be applied to Edm.DateTimeOffset and Edm.Int32 in $filter at column 11"
        ),
        (
            "BusinessPartners?$filter=Country and Active",
            "operand of 'and' must be Edm.Boolean, not Edm.String in $filter at column 1"
        ),
        (
            "BusinessPartners?$filter=Active or 1",
            "operand of 'or' must be Edm.Boolean, not Edm.Int32 in $filter at column 11"
        ),
        (
            "BusinessPartners?$filter=not Rating",
            "operand of 'not' must be Edm.Boolean, not Edm.Int32 in $filter at column 5"
        ),
        ("BusinessPartners?$filter=-Country eq 'x'", "cannot negate Edm.String in $filter at column 1"),
        (
            "BusinessPartners?$filter=Status eq 'Bogus'",
            "cannot compare Sales.Status with Edm.String in $filter at column 8"
        ),
        ("BusinessPartners?$filter=Status eq Sales.Nope'x'", "unknown enum type 'Sales.Nope' in $filter at column 11"),
        (
            "BusinessPartners?$filter=Status eq Sales.Status'Bogus'",
            "unknown member 'Bogus' of enum Sales.Status in $filter at column 11"
        ),
        (
            "BusinessPartners?$filter=Status eq Sales.Flags'Red'",
            "cannot compare Sales.Status with Sales.Flags in $filter at column 8"
        ),
        (
            "BusinessPartners?$filter=Rating has 1",
            "'has' requires an enum operand, not Edm.Int32 in $filter at column 8"
        ),
        (
            "BusinessPartners?$filter=Flags has 'Purple'",
            "'has' requires a member of Sales.Flags in $filter at column 11"
        ),
        (
            "BusinessPartners?$filter=Country in (1, 2)",
            "cannot compare Edm.String with Edm.Int32 in $filter at column 13"
        ),
        (
            "BusinessPartners?$filter=Rating in (1.5)",
            "cannot compare Edm.Int32 with Edm.Decimal in $filter at column 12"
        ),
        (
            "BusinessPartners?$filter=cast(Country, Sales.Address) eq 1",
            "cannot cast to 'Sales.Address' in $filter at column 15"
        ),
        (
            "BusinessPartners?$filter=cast(Sales.BusinessPartner)",
            "cast of the current entity is not supported in $filter at column 1"
        ),
        (
            "BusinessPartners?$filter=Model.Type/x eq 1",
            "type cast 'Model.Type' is not supported in $filter at column 1"
        ),
        ("BusinessPartners?$filter=$it eq 1", "'$it' is an entity, not a value in $filter at column 1"),
        (
            "SalesOrders?$filter=BusinessPartner eq null",
            "'BusinessPartner' is an entity, not a value in $filter at column 1"
        ),
        ("Products?$filter=Location eq 'x'", "cannot compare Edm.Untyped with Edm.String in $filter at column 10"),
        // Resource path
        ("Nope", "unknown entity set 'Nope' in resource path at column 1"),
        ("Nope(1)", "unknown entity set 'Nope' in resource path at column 1"),
        ("BusinessPartners(1)", "key value 1 does not match Edm.String in resource path at column 18"),
        ("SalesOrderItems('1')", "SalesOrderItem has 2 key properties, got 1 value in resource path at column 17"),
        (
            "SalesOrderItems(SalesOrderID='1')",
            "SalesOrderItem has 2 key properties, got 1 value in resource path at column 30"
        ),
        (
            "BusinessPartners(BusinessPartnerID='1',Country='x')",
            "BusinessPartner has 1 key property, got 2 values in resource path at column 36"
        ),
        (
            "SalesOrderItems(SalesOrderID='1',Foo=1)",
            "'Foo' is not a key property of SalesOrderItem in resource path at column 38"
        ),
        (
            "SalesOrderItems(SalesOrderID='1',SalesOrderID='2')",
            "duplicate key property 'SalesOrderID' in resource path at column 47"
        ),
        (
            "SalesOrderItems(SalesOrderID='1',ItemPosition='x')",
            "key value 'x' does not match Edm.Int32 in resource path at column 47"
        ),
        (
            "SalesOrderItems(SalesOrderID='1',ItemPosition=99999999999)",
            "key value 99999999999L does not match Edm.Int32 in resource path at column 47"
        ),
        (
            "BusinessPartners/SalesOrders",
            "'SalesOrders' must follow a single entity; add a key to 'BusinessPartners' in resource path at column 18"
        ),
        ("BusinessPartners('1')/Orders", "unknown navigation property 'Orders' in resource path at column 23"),
        ("BusinessPartners('1')/Country", "'Country' is not a navigation property in resource path at column 23"),
        (
            "SalesOrders('1')/BusinessPartner('2')",
            "single-valued navigation 'BusinessPartner' takes no key in resource path at column 18"
        ),
        ("BusinessPartners('1')/$count", "$count requires a collection in resource path at column 1"),
        ("Me('1')", "a singleton has no key in resource path at column 1"),
        // $orderby, $select, $expand, $top
        ("BusinessPartners?$orderby=Countr", "unknown property 'Countr' in $orderby at column 1"),
        ("BusinessPartners?$orderby=Rating,Countr desc", "unknown property 'Countr' in $orderby at column 8"),
        (
            "BusinessPartners?$orderby=SalesOrders",
            "'SalesOrders' is a collection; use any, all or $count in $orderby at column 1"
        ),
        (
            "BusinessPartners?$orderby=Emails",
            "'Emails' is a collection; use any, all or $count in $orderby at column 1"
        ),
        (
            "BusinessPartners?$orderby=SalesOrders/GrossAmount",
            "'SalesOrders' is a collection; use any, all or $count in $orderby at column 13"
        ),
        ("BusinessPartners?$orderby=Address", "cannot order by a value of type Sales.Address in $orderby at column 1"),
        ("BusinessPartners?$select=Countr", "unknown property 'Countr' in $select at column 1"),
        ("BusinessPartners?$select=Address/Town", "unknown property 'Town' in $select at column 9"),
        ("BusinessPartners?$select=Country/x", "unknown property 'x' in $select at column 9"),
        ("BusinessPartners?$select=Model.Action", "type cast 'Model.Action' is not supported in $select at column 1"),
        (
            "BusinessPartners?$select=SalesOrders/GrossAmount",
            "'SalesOrders' must be expanded to select its properties in $select at column 1"
        ),
        (
            "BusinessPartners?$select=SalesOrders/Foo&$expand=SalesOrders",
            "unknown property 'Foo' in $select at column 13"
        ),
        ("BusinessPartners?$expand=Orders", "unknown navigation property 'Orders' in $expand at column 1"),
        ("BusinessPartners?$expand=Country", "'Country' is not a navigation property in $expand at column 1"),
        ("BusinessPartners?$expand=SalesOrders/Itemz", "unknown navigation property 'Itemz' in $expand at column 13"),
        ("BusinessPartners?$expand=SalesOrders($filter=Foo eq 1)", "unknown property 'Foo' in $expand at column 21"),
        (
            "BusinessPartners?$expand=SalesOrders($expand=Items($select=Qty))",
            "unknown property 'Qty' in $expand at column 35"
        ),
        (
            "BusinessPartners?$expand=SalesOrders($orderby=Items)",
            "'Items' is a collection; use any, all or $count in $expand at column 22"
        ),
        (
            "BusinessPartners?$expand=SalesOrders($top=1),SalesOrders($top=2)",
            "'SalesOrders' is expanded more than once in $expand at column 21"
        ),
        ("BusinessPartners?$top=-1", "expected a non-negative integer in $top at column 1"),
    ])
    func message(_ url: String, _ expected: String) {
        #expect(bindError(url) == expected)
    }
}
