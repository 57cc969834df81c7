/// Cases ported from the OASIS "OData ABNF Test Cases Version 4.01" (odata-abnf-testcases.yaml,
/// 17 September 2020, https://github.com/oasis-tcs/odata-abnf): those about `$filter`,
/// `$orderby`, `$select`, `$expand`, `$top`/`$skip`, literals and key predicates. Inputs are
/// copied verbatim; `outcome` records the ABNF verdict and, where this parser deliberately
/// differs, why.
struct ABNFCase: Sendable, CustomStringConvertible {
    enum Outcome: Sendable {
        /// Valid per the ABNF, and parsed.
        case parses
        /// Invalid per the ABNF, and rejected.
        case fails
        /// Valid per the ABNF, but a feature this parser rejects with a `QueryError`.
        case unsupported(String)
        /// Invalid per the ABNF, but accepted here.
        case lenient(String)
    }

    let name: String
    let rule: String
    let input: String
    let outcome: Outcome

    init(_ name: String, _ rule: String, _ input: String, _ outcome: Outcome) {
        self.name = name
        self.rule = rule
        self.input = input
        self.outcome = outcome
    }

    /// The URL the case is parsed as: expressions go in `$filter`, literals in `x eq <literal>`,
    /// query options after `S?`, resource paths and relative URLs as they are.
    var url: String {
        switch rule {
        case "commonExpr", "boolCommonExpr", "boolcommonExpr", "firstMemberExpr", "notExpr", "anyExpr",
            "propertyPathExpr", "isofExpr":
            "S?$filter=" + input
        case "filter", "orderby", "orderBy", "select", "expand", "queryOptions", "skiptoken", "search",
            "systemQueryOption":
            "S?" + input
        case "resourcePath", "odataRelativeUri":
            input
        default:
            "S?$filter=x eq " + input
        }
    }

    var description: String { "\(name) [\(rule)] \(input)" }
}

let abnfCases: [ABNFCase] = [
    ABNFCase("Binary with X", "binaryLiteral", "X'1a2B3c4D'", .lenient("V2 binary literal X'…' is accepted")),
    ABNFCase("Binary - empty", "binaryLiteral", "binary''", .parses),
    ABNFCase("Binary - f", "binaryLiteral", "binary'Zg=='", .parses),
    ABNFCase("Binary - f (pad character is optional)", "binaryLiteral", "binary'Zg'", .parses),
    ABNFCase("Binary - fo", "binaryLiteral", "binary'Zm8='", .parses),
    ABNFCase("Binary - fo (pad character is optional)", "binaryLiteral", "binary'Zm8='", .parses),
    ABNFCase("Binary - foo", "binaryLiteral", "binary'Zm9v'", .parses),
    ABNFCase("Binary - foob", "binaryLiteral", "binary'Zm9vYg=='", .parses),
    ABNFCase("Binary - fooba", "binaryLiteral", "binary'Zm9vYmE='", .parses),
    ABNFCase("Binary - foobar", "binaryLiteral", "binary'Zm9vYmFy'", .parses),
    ABNFCase("Boolean - true", "boolean", "true", .parses),
    ABNFCase("Boolean - false", "boolean", "false", .parses),
    ABNFCase("Boolean - literals are case-insensitive", "boolean", "tRUe", .parses),
    ABNFCase("Date in URL", "date", "2012-09-03", .parses),
    ABNFCase("Date", "date", "2012-09-20", .parses),
    ABNFCase("Date", "date", "2012-09-03", .parses),
    ABNFCase("Date: year zero", "date", "0000-01-01", .parses),
    ABNFCase("Date: negative", "date", "-10000-04-01", .unsupported("negative years")),
    ABNFCase("DateTimeOffset: no seconds", "dateTimeOffsetValue", "2012-09-03T13:52Z", .parses),
    ABNFCase("DateTimeOffset: seconds", "dateTimeOffsetValue", "2012-09-03T22:09:02Z", .parses),
    ABNFCase(
        "DateTimeOffset: leap second", "dateTimeOffsetValue", "1972-06-30T23:59:60Z", .unsupported("leap seconds")),
    ABNFCase("DateTimeOffset: subseconds", "dateTimeOffsetValue", "2012-08-31T18:19:22.1Z", .parses),
    ABNFCase("DateTimeOffset: year zero", "dateTimeOffsetValue", "0000-01-01T00:00Z", .parses),
    ABNFCase("DateTimeOffset: Midnight this day", "dateTimeOffsetValue", "2011-12-31T24:00Z", .fails),
    ABNFCase("DateTimeOffset: Midnight this day with seconds", "dateTimeOffsetValue", "2011-12-31T24:00:00Z", .fails),
    ABNFCase("DateTimeOffset: CEST", "dateTimeOffsetValue", "2012-09-03T14:53+02:00", .parses),
    ABNFCase("DateTimeOffset: UTC", "dateTimeOffsetValue", "2012-09-03T12:53Z", .parses),
    ABNFCase("DateTimeOffset: 24:00", "dateTimeOffsetValue", "2012-09-03T24:00-03:00", .fails),
    ABNFCase(
        "DateTimeOffset: no percent-encoding in payloads", "dateTimeOffsetValue", "2012-09-03T23%3A59Z",
        .lenient("percent-encoded ':' is decoded first")),
    ABNFCase(
        "DateTimeOffset: with percent-encoding in URLs", "dateTimeOffsetLiteral", "2012-09-03T23%3A59%2B01%3A00",
        .parses),
    ABNFCase("Decimal", "decimalValue", "3.14", .parses),
    ABNFCase("Decimal - exponential notation", "decimalValue", "-1.234567e3", .parses),
    ABNFCase("Decimal - exponential notation", "decimalValue", "1e-101", .parses),
    ABNFCase("Decimal - negative infinity", "decimalValue", "-INF", .parses),
    ABNFCase("Decimal - positive infinity", "decimalValue", "INF", .parses),
    ABNFCase("Decimal - not a number", "decimalValue", "NaN", .parses),
    ABNFCase("Duration in URL", "durationLiteral", "duration'P6DT23H59M59.9999S'", .parses),
    ABNFCase("Duration in URL without prefix", "durationLiteral", "'P6DT23H59M59.9999S'", .parses),
    ABNFCase("Decimal - negative integer", "decimalValue", "-2", .parses),
    ABNFCase("Decimal - positive integer in URL", "primitiveLiteral", "%2B42", .parses),
    ABNFCase("Decimal - positive integer", "decimalValue", "+42", .parses),
    ABNFCase("Decimal - trailing dot", "decimalValue", "42.", .fails),
    ABNFCase("Decimal: no digit before decimal point", "decimalValue", ".1", .fails),
    ABNFCase("Decimal in URL", "decimalLiteral", "3.14", .parses),
    ABNFCase("Double", "doubleValue", "3.14", .parses),
    ABNFCase("Double with exponent", "doubleValue", "-0.314e1", .parses),
    ABNFCase("Double with at most one exponent", "doubleValue", "-0.314e1e2", .fails),
    ABNFCase("Negative infinity", "doubleValue", "-INF", .parses),
    ABNFCase("Positive infinity", "doubleValue", "INF", .parses),
    ABNFCase("Not a Number", "doubleValue", "NaN", .parses),
    ABNFCase("Double in URL", "doubleLiteral", "-0.314e1", .parses),
    ABNFCase("Single in URL", "singleLiteral", "%2B0.314e%2B1", .parses),
    ABNFCase("Byte", "byteValue", "255", .parses),
    ABNFCase("SByte in URL", "sbyteLiteral", "%2B128", .parses),
    ABNFCase("SByte", "sbyteValue", "-128", .parses),
    ABNFCase("Int16 in URL", "int16Literal", "%2B32000", .parses),
    ABNFCase("Int16", "int16Value", "+32000", .parses),
    ABNFCase("Int32 in URL", "int32Literal", "%2B2000000000", .parses),
    ABNFCase("Int32", "int32Value", "-2000000000", .parses),
    ABNFCase("Int64 in URL", "int64Literal", "%2B1234567890123456789", .parses),
    ABNFCase("Int64", "int64Value", "1234567890123456789", .parses),
    ABNFCase("Null: unqualified", "null", "null", .parses),
    ABNFCase(
        "String", "stringLiteral",
        "'ABCDEFGHIHJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&('')*+,;=:@'",
        .unsupported("'&' and '#' must be percent-encoded inside a URL")),
    ABNFCase("String", "stringLiteral", "'O''Neil'", .parses),
    ABNFCase("String", "stringLiteral", "%27O'%27Neil'", .parses),
    ABNFCase("String", "stringLiteral", "'O'Neil'", .fails),
    ABNFCase("String", "stringLiteral", "'O%27Neil'", .fails),
    ABNFCase("String", "stringLiteral", "'%26%28'", .parses),
    ABNFCase("Resource Path - Entity Set", "resourcePath", "Categories", .parses),
    ABNFCase("Resource Path - Entity", "resourcePath", "Categories(11)", .parses),
    ABNFCase("Resource Path - Entity", "resourcePath", "Categories(ID=1)", .parses),
    ABNFCase("Key", "stringLiteral", "'Hugo''s%20Tavern'", .parses),
    ABNFCase("Resource Path - Entity", "resourcePath", "Categories(ID=1,Size=5)", .parses),
    ABNFCase("Correct Guid", "guid", "01234567-89ab-cdef-0123-456789abcdef", .parses),
    ABNFCase("Guid with wrong character", "guid", "01234g67-89ab-cdef-0123-456789abcdef", .fails),
    ABNFCase("Guid with less than 32 digits", "guid", "01234567-89ab-cdef-456789abcdef", .fails),
    ABNFCase("TimeOfDay", "timeOfDayValue", "11:22:33", .parses),
    ABNFCase("TimeOfDay - percent-encoded colon", "timeOfDayLiteral", "11%3A22%3a33", .parses),
    ABNFCase(
        "TimeOfDay - no percent-encoding in payloads", "timeOfDayValue", "11%3A22%3a33",
        .lenient("percent-encoded ':' is decoded first")),
    ABNFCase("TimeOfDay: no seconds", "timeOfDayValue", "11:22", .parses),
    ABNFCase("TimeOfDay: fractional seconds", "timeOfDayValue", "11:22:33.4444444", .parses),
    ABNFCase("TimeOfDay: 24:00", "timeOfDayValue", "24:00:00", .fails),
    ABNFCase("Entity Set", "resourcePath", "Products", .parses),
    ABNFCase("2 URL Components - resource path", "resourcePath", "Categories(1)/Products", .parses),
    ABNFCase("2 URL Components - resource path", "resourcePath", "Categories(1)/Products", .parses),
    ABNFCase("2 URL Components - key with key property alias", "resourcePath", "Categories(KeyAlias=1)", .parses),
    ABNFCase("2 URL Components - query options", "queryOptions", "$top=2&$orderby=Name", .parses),
    ABNFCase(
        "2 URL Components - resource path and query options", "odataRelativeUri",
        "Categories(1)/Products?$top=2&$orderby=Name", .parses),
    ABNFCase(
        "2 URL Components - unencoded forward slash", "odataRelativeUri", "Categories('Smartphone/Tablet')",
        .lenient("'/' inside a quoted key is accepted")),
    ABNFCase("2 URL Components - empty query options", "odataRelativeUri", "Customers?", .parses),
    ABNFCase("4.3 Addressing entities - single entity (short)", "resourcePath", "Categories(1)", .parses),
    ABNFCase("4.3 Addressing entities - single entity (long)", "resourcePath", "Categories(ID=1)", .parses),
    ABNFCase("4.3 Addressing entities - single entity (string)", "resourcePath", "Categories('Tablet')", .parses),
    ABNFCase(
        "4.3 Addressing entities - single entity (string)", "resourcePath", "Categories('7''''%20Tablet')", .parses),
    ABNFCase(
        "4.3 Addressing entities - single entity (string)", "resourcePath", "Categories%28%27Tablet%27%29", .parses),
    ABNFCase(
        "4.3 Addressing entities - single entity (string)", "resourcePath", "Categories('Tablet%2FSlate')", .parses),
    ABNFCase(
        "4.3 Addressing entities - single entity (wrong)", "resourcePath", "Categories('Tablet/Slate')",
        .lenient("'/' inside a quoted key is accepted")),
    ABNFCase(
        "4.3 Addressing entities - single entity (string)", "resourcePath", "Categories('Tablet%20%28small%29')",
        .parses),
    ABNFCase(
        "4.3 Addressing entities - single entity (string)", "resourcePath", "Categories('Tablet%20(small)')", .parses),
    ABNFCase(
        "4.3 Addressing entities - single entity (string)", "resourcePath", "Categories('Tablet%20)small(')", .parses),
    ABNFCase(
        "4.3 Addressing entities - single entity (timestamp)", "resourcePath", "Categories(2018-02-13T23:59:59Z)",
        .parses),
    ABNFCase(
        "4.3 Addressing entities - single entity (timestamp, percent-encoded colon)", "resourcePath",
        "Categories(2018-02-13T23%3A59%3A59Z)", .parses),
    ABNFCase("4.3 Addressing entities - single entity (time)", "resourcePath", "Categories(23:59:59)", .parses),
    ABNFCase(
        "4.3 Addressing entities - single entity (time, percent-encoded colon)", "resourcePath",
        "Categories(23%3A59%3A59)", .parses),
    ABNFCase("4.3 Addressing entities - single entity (wrong)", "resourcePath", "Categories(ID=wrong)", .fails),
    ABNFCase(
        "4.3 Addressing entities - single entity (multi-part key)", "resourcePath", "OrderItems(OrderID=1,ItemID='a')",
        .parses),
    ABNFCase(
        "4.3 Addressing entities - single entity (wrong multi-part key)", "resourcePath",
        "OrderItems(OrderID=1;ItemID='a')", .fails),
    ABNFCase("4.3 Addressing entities - follow navigation property", "resourcePath", "Products(1)/Supplier", .parses),
    ABNFCase(
        "4.8 Addressing entities - entity set with $count", "odataRelativeUri", "Products/$count?$filter=Price gt 5.00",
        .parses),
    ABNFCase(
        "4.8 Addressing the Count - in $filter with navigation", "filter", "$filter=Products/$count gt 0", .parses),
    ABNFCase(
        "4.8 Addressing the Count - in $filter with complex collection", "filter", "$filter=Addresses/$count gt 0",
        .parses),
    ABNFCase(
        "4.8 Addressing the Count - in $filter with primitive collection", "filter", "$filter=Sizes/$count gt 0",
        .parses),
    ABNFCase(
        "4.8 Addressing the Count - in $filter with filtered collection", "filter",
        "$filter=Products/$count($filter=Price gt 5.00) gt 2", .unsupported("$count with nested options")),
    ABNFCase(
        "4.8 Addressing the Count - collection navigation property with $count in $orderby", "orderby",
        "$orderby=Products/$count", .parses),
    ABNFCase(
        "4.8 Addressing the Count - collection property with $count in $orderby", "orderby",
        "$orderby=Addresses/$count", .parses),
    ABNFCase(
        "4.8 Addressing the Count - collection property with $count in $orderby", "orderby", "$orderby=Sizes/$count",
        .parses),
    ABNFCase(
        "4.11 Inheritance - expressions: complex type", "propertyPathExpr", "Address/Model.AddressWithLocation", .parses
    ),
    ABNFCase(
        "4.11 Inheritance - expressions: complex type with path", "propertyPathExpr",
        "Address/Model.AddressWithLocation/Street", .parses),
    ABNFCase(
        "4.11 Inheritance - expressions: complex type with path, no namespace", "propertyPathExpr",
        "Address/AddressWithLocation/Street", .parses),
    ABNFCase(
        "4.11 Inheritance - expressions: collection of complex type", "propertyPathExpr",
        "Addresses/Model.AddressWithLocation", .parses),
    ABNFCase(
        "4.11 Inheritance - $expand", "odataRelativeUri", "Categories?$expand=Products/Model.BestSellingProduct",
        .parses),
    ABNFCase(
        "4.11 Inheritance - $expand, no namespace", "odataRelativeUri",
        "Categories?$expand=Products/BestSellingProduct", .parses),
    ABNFCase(
        "4.11 Inheritance - $expand", "odataRelativeUri", "Products?$expand=Model.BestSellingProduct/Sales", .parses),
    ABNFCase(
        "4.11 Inheritance - $expand, no namespace", "odataRelativeUri", "Products?$expand=BestSellingProduct/Sales",
        .parses),
    ABNFCase(
        "4.11 Inheritance - $expand", "odataRelativeUri",
        "Categories?$expand=Products/Model.BestSellingProduct($select=Name)", .parses),
    ABNFCase(
        "4.12 Filter expression in query", "filter", "$filter=Addresses/$filter(endswith(Street,'St'))/$count lt 10",
        .unsupported("$filter path segments")),
    ABNFCase("5.1.1 Filter", "filter", "$filter=true", .parses),
    ABNFCase("5.1.1 Filter: no spaces", "filter", "$filter =true", .fails),
    ABNFCase(
        "5.1.1 Filter: no spaces", "filter", "$filter= true", .lenient("whitespace around an expression is skipped")),
    ABNFCase("5.1.1 Filter", "filter", "$filter=Completed", .parses),
    ABNFCase("5.1.1 Filter - member expressions", "firstMemberExpr", "Product", .parses),
    ABNFCase("5.1.1 Filter - member expressions - single navigation", "firstMemberExpr", "Product/Supplier", .parses),
    ABNFCase(
        "5.1.1 Filter - member expressions - single-complex", "firstMemberExpr", "Product/Supplier/Address", .parses),
    ABNFCase(
        "5.1.1 Filter - member expressions - single-complex-primitive", "firstMemberExpr",
        "Product/Supplier/Address/Street", .parses),
    ABNFCase(
        "5.1.1 Filter - member expressions - single-complex-single", "firstMemberExpr",
        "Product/Supplier/Address/Country", .parses),
    ABNFCase(
        "5.1.1 Filter - member expressions - single-complex-collection", "firstMemberExpr",
        "Product/Supplier/Address/Products", .parses),
    ABNFCase("5.1.1 Filter - member expressions - stream", "firstMemberExpr", "Product/Thumbnail", .parses),
    ABNFCase("5.1.1 Filter - member expressions - stream", "firstMemberExpr", "Address/Thumbnail", .parses),
    ABNFCase(
        "5.1.1 Filter - member expressions - stream", "firstMemberExpr", "Thumbnail/Model.Available()",
        .unsupported("bound functions in paths")),
    ABNFCase(
        "5.1.1 Filter - member expressions - single-colComplex", "firstMemberExpr", "Product/Supplier/Addresses",
        .parses),
    ABNFCase(
        "5.1.1 Filter - member expressions - single-primitive", "firstMemberExpr", "Product/Supplier/CompanyName",
        .parses),
    ABNFCase(
        "5.1.1 Filter - member expressions - single-colPrimitive", "firstMemberExpr", "Product/Supplier/EmailAddresses",
        .parses),
    ABNFCase(
        "5.1.1 Filter - member expressions - collection navigation", "firstMemberExpr", "Supplier/Products", .parses),
    ABNFCase("5.1.1 Filter - member expressions - collection navigation", "firstMemberExpr", "Products", .parses),
    ABNFCase(
        "5.1.1 Filter - member expressions - collection navigation - count", "firstMemberExpr", "Products/$count",
        .parses),
    ABNFCase("5.1.1.1.1 Equals", "boolCommonExpr", "true eq false", .parses),
    ABNFCase("5.1.1.1.1 Equals - Property", "firstMemberExpr", "Size", .parses),
    ABNFCase("5.1.1.1.1 Equals", "boolCommonExpr", "Size eq true", .parses),
    ABNFCase("5.1.1.1.1 Equals - Literal", "primitiveLiteral", "4.0", .parses),
    ABNFCase("5.1.1.1.1 Equals - Literal", "primitiveLiteral", "'Huge'", .parses),
    ABNFCase("5.1.1.1.1 Equals", "boolCommonExpr", "Size eq 4.0", .parses),
    ABNFCase("5.1.1.1.1 Equals", "boolCommonExpr", "Street eq 'Hugo'", .parses),
    ABNFCase("5.1.1.1.1 Equals - property path argument", "firstMemberExpr", "Address/Street", .parses),
    ABNFCase(
        "5.1.1.1.1 Equals - property path argument", "firstMemberExpr", "Address/Model.AddressWithLocation/Location",
        .parses),
    ABNFCase("5.1.1.1.1 Equals", "boolCommonExpr", "Address/Street eq 'Hugo'", .parses),
    ABNFCase(
        "5.1.1.1.1 comparing complex types", "filter",
        "$filter=Address eq {\"Street\":\"NE 40th\",\"City\":\"Redmond\",\"State\":\"WA\",\"ZipCode\":\"98052\"}",
        .unsupported("JSON object literals")),
    ABNFCase("5.1.1.1.2 Not Equals", "boolCommonExpr", "Name ne 'Milk'", .parses),
    ABNFCase("5.1.1.1.2 Not Equals", "boolCommonExpr", "true ne false", .parses),
    ABNFCase("5.1.1.1.3 Greater Than", "boolCommonExpr", "Name gt 'Milk'", .parses),
    ABNFCase("5.1.1.1.4 Greater Than or Equal", "boolCommonExpr", "Name ge 'Milk'", .parses),
    ABNFCase("5.1.1.1.5 Less Than", "boolCommonExpr", "Name lt 'Milk'", .parses),
    ABNFCase("5.1.1.1.6 Less Than or Equal", "boolCommonExpr", "Name le 'Milk'", .parses),
    ABNFCase("5.1.1.1.7 Logical And", "boolCommonExpr", "true and false", .parses),
    ABNFCase("5.1.1.1.8 Logical Or", "boolCommonExpr", "true or false", .parses),
    ABNFCase("5.1.1.1.9 Logical Negation", "notExpr", "not false", .parses),
    ABNFCase("5.1.1.1.12 Logical Operator Examples", "boolCommonExpr", "Name eq 'Milk'", .parses),
    ABNFCase("5.1.1.1.12 Logical Operator Examples", "boolCommonExpr", "Supplier/Name eq 'Milk'", .parses),
    ABNFCase("5.1.1.1.12 Logical Operator Examples", "boolCommonExpr", "Name EQ 'Milk' AND Price LT 2.55", .parses),
    ABNFCase("5.1.1.1.12 Logical Operator Examples", "boolCommonExpr", "Name Eq 'Milk' OR Price Lt 2.55", .parses),
    ABNFCase("5.1.1.1.12 Logical Operator Examples", "boolCommonExpr", "not endswith(Name,'ilk')", .parses),
    ABNFCase("5.1.1.1.12 Logical Operator Examples", "boolCommonExpr", "style has Sales.Pattern'Yellow'", .parses),
    ABNFCase("5.1.1.1.12 Logical Operator Examples", "boolCommonExpr", "Name in ('Milk', 'Cheese')", .parses),
    ABNFCase("5.1.1.1.12 Logical Operator Examples", "boolCommonExpr", "Name in [\"Milk\", \"Cheese\"]", .parses),
    ABNFCase("5.1.1.2.1 Addition", "commonExpr", "Price add 2.45", .parses),
    ABNFCase("5.1.1.2.1 Addition", "commonExpr", "(Price add 2.45) mod 2", .parses),
    ABNFCase("5.1.1.2.2 Subtraction", "commonExpr", "Price sub 0.55", .parses),
    ABNFCase("5.1.1.2.3 Negate", "commonExpr", "-Price", .parses),
    ABNFCase("5.1.1.2.4 Multiplication", "commonExpr", "Price mul 2", .parses),
    ABNFCase("5.1.1.2.5 Division", "commonExpr", "Price div 2", .parses),
    ABNFCase("5.1.1.2.5 Division", "commonExpr", "Price divby 2", .parses),
    ABNFCase("5.1.1.2.6 Modulo", "commonExpr", "Price mod 5", .parses),
    ABNFCase("5.1.1.2.7 Arithmetic Operator Examples", "boolCommonExpr", "Price add 2.45 eq 5.00", .parses),
    ABNFCase("5.1.1.2.7 Arithmetic Operator Examples", "boolCommonExpr", "Price sub 0.55 eq 2.00", .parses),
    ABNFCase("5.1.1.2.7 Arithmetic Operator Examples", "boolCommonExpr", "Price mul 2.0 eq 5.10", .parses),
    ABNFCase("5.1.1.2.7 Arithmetic Operator Examples", "boolCommonExpr", "Price div 2.55 eq 1", .parses),
    ABNFCase("5.1.1.2.7 Arithmetic Operator Examples", "boolCommonExpr", "Rating divby 2 eq 2.5", .parses),
    ABNFCase("5.1.1.2.7 Arithmetic Operator Examples", "boolCommonExpr", "Rating mod 5 eq 0", .parses),
    ABNFCase("5.1.1.3 Parenthesis", "commonExpr", "(true)", .parses),
    ABNFCase("5.1.1.3 Parenthesis", "boolCommonExpr", "( true )", .parses),
    ABNFCase("5.1.1.3 Parenthesis", "boolCommonExpr", "(Name eq 'Milk')", .parses),
    ABNFCase("5.1.1.3 Parenthesis", "boolCommonExpr", "(false)", .parses),
    ABNFCase("5.1.1.3 Parenthesis", "commonExpr", "(4 add 5) mod (4 sub 1)", .parses),
    ABNFCase("5.1.1.3 Parenthesis", "boolcommonExpr", "(4 add 5) mod (4 sub 1) eq 0", .parses),
    ABNFCase("5.1.1.5.1 concat", "commonExpr", "concat(CompanyName, Name)", .parses),
    ABNFCase("5.1.1.5.1 concat", "commonExpr", "concat(concat(Street,'-'),City)", .parses),
    ABNFCase("5.1.1.5.2 contains", "boolCommonExpr", "contains(CompanyName,'lfreds')", .parses),
    ABNFCase(
        "5.1.1.5.2 contains", "boolCommonExpr", "contains(Names,[\"Fred\",\"George\"])",
        .unsupported("JSON array arguments")),
    ABNFCase("5.1.1.5.3 endswith", "boolCommonExpr", "endswith(CompanyName,'Futterkiste')", .parses),
    ABNFCase("5.1.1.5.3 indexof", "commonExpr", "indexof(CompanyName,'lfreds')", .parses),
    ABNFCase("5.1.1.5.5 length", "boolCommonExpr", "length(CompanyName) eq 19", .parses),
    ABNFCase("5.1.1.5.6 startswith", "boolCommonExpr", "startswith(CompanyName,'Futterkiste')", .parses),
    ABNFCase("5.1.1.5.6 startswith", "boolCommonExpr", "startswith(Supplier/Name,'Futterkiste')", .parses),
    ABNFCase("5.1.1.5.7 substring", "commonExpr", "substring(CompanyName, 5)", .parses),
    ABNFCase("5.1.1.5.7 substring with length", "commonExpr", "substring(CompanyName,5,2)", .parses),
    ABNFCase("5.1.1.7.1 matchesPattern ^A.*e$", "commonExpr", "matchesPattern(CompanyName,'%5EA.*e$')", .parses),
    ABNFCase("5.1.1.7.2 tolower", "commonExpr", "tolower(CompanyName)", .parses),
    ABNFCase("5.1.1.7.3 toupper", "commonExpr", "toupper(CompanyName)", .parses),
    ABNFCase("5.1.1.7.4 trim", "commonExpr", "trim(CompanyName)", .parses),
    ABNFCase("5.1.1.8.1", "commonExpr", "date(LifeTime)", .parses),
    ABNFCase("5.1.1.8.2", "commonExpr", "day(BirthDate)", .parses),
    ABNFCase("5.1.1.8.3", "commonExpr", "fractionalseconds(LifeTime)", .parses),
    ABNFCase("5.1.1.8.4", "commonExpr", "hour(BirthDate)", .parses),
    ABNFCase("5.1.1.8.5", "commonExpr", "maxdatetime()", .parses),
    ABNFCase("5.1.1.8.5 - non-canonical percent-encoding", "commonExpr", "maxdatetime%28%20%29", .parses),
    ABNFCase("5.1.1.8.6", "commonExpr", "mindatetime()", .parses),
    ABNFCase("5.1.1.8.6 - non-canonical percent-encoding", "commonExpr", "mindatetime%28%20%29", .parses),
    ABNFCase("5.1.1.8.7", "commonExpr", "minute(BirthDate)", .parses),
    ABNFCase("5.1.1.8.8", "commonExpr", "month(BirthDate)", .parses),
    ABNFCase("5.1.1.8.9", "commonExpr", "now()", .parses),
    ABNFCase("5.1.1.8.9 - non-canonical percent-encoding", "commonExpr", "now%28%20%29", .parses),
    ABNFCase("5.1.1.8.10", "commonExpr", "second(BirthDate)", .parses),
    ABNFCase("5.1.1.8.11", "commonExpr", "time(ReleaseDate)", .parses),
    ABNFCase("5.1.1.8.12 - totaloffsetminutes", "commonExpr", "totaloffsetminutes(ReleaseDate)", .parses),
    ABNFCase("5.1.1.8.13", "commonExpr", "totalseconds(LifeTime)", .parses),
    ABNFCase("5.1.1.8.14 year", "commonExpr", "year(BirthDate)", .parses),
    ABNFCase("5.1.1.9.1", "commonExpr", "ceiling(Price)", .parses),
    ABNFCase("5.1.1.9.2", "commonExpr", "floor(Price)", .parses),
    ABNFCase("5.1.1.9.3", "commonExpr", "round(Price)", .parses),
    ABNFCase("5.1.1.10.1 cast(1)", "commonExpr", "cast(Model.Customer)", .parses),
    ABNFCase("5.1.1.10.1 cast(1), no nanmespace", "commonExpr", "cast(Customer)", .parses),
    ABNFCase("5.1.1.10.1 cast(2)", "commonExpr", "cast(Category,Model.Customer)", .parses),
    ABNFCase("5.1.1.10.1 cast(2), no namespace", "commonExpr", "cast(Category,Customer)", .parses),
    ABNFCase("5.1.1.10.1 cast(3)", "commonExpr", "cast(Category,Edm.Boolean)", .parses),
    ABNFCase("5.1.1.10.2 isof(1)", "isofExpr", "isof(Model.Customer)", .parses),
    ABNFCase("5.1.1.10.2 isof(1), no namespace", "isofExpr", "isof(Customer)", .parses),
    ABNFCase("5.1.1.10.2 isof(2)", "isofExpr", "isof(Category,Model.Customer)", .parses),
    ABNFCase("5.1.1.10.2 isof(2), no namespace", "isofExpr", "isof(Category,Customer)", .parses),
    ABNFCase("5.1.1.10.2 isof(2)", "isofExpr", "isof(Location,Edm.GeographyPoint)", .parses),
    ABNFCase("5.1.1.11.1 geo.distance", "commonExpr", "geo.distance(Supplier/Location,Product/Location)", .parses),
    ABNFCase(
        "5.1.1.11.3 geo.intersects", "boolCommonExpr", "geo.intersects(Supplier/SalesArea,Product/Location)", .parses),
    ABNFCase("5.1.1.11.3 geo.length", "commonExpr", "geo.length(Line)", .parses),
    ABNFCase(
        "5.1.1.11.3 geo.length", "commonExpr", "geo.length(geography'SRID=0;LineString(142.1 64.1,3.14 2.78)')",
        .unsupported("spatial literals")),
    ABNFCase("5.1.1.13 Lambda Operators", "firstMemberExpr", "lambda/Completed", .parses),
    ABNFCase("5.1.1.13 Lambda Operators", "boolCommonExpr", "lambda/Name eq $it/Name", .parses),
    ABNFCase("5.1.1.13.1 any()", "commonExpr", "Products/any(lambda:true)", .parses),
    ABNFCase("5.1.1.13.1 any() - requires a path prefix", "boolCommonExpr", "any()", .fails),
    ABNFCase(
        "5.1.1.13.1 any() - collection with type cast", "commonExpr", "DirectReports/Sales.Manager/any()", .parses),
    ABNFCase("5.1.1.13.1 any()", "commonExpr", "Supplier/Products/any(lambda:true)", .parses),
    ABNFCase("5.1.1.13.1 any()", "commonExpr", "Products/any(lambda:lambda/Completed)", .parses),
    ABNFCase("5.1.1.13.1 any()", "commonExpr", "Products/any(lambda:$it/Completed)", .parses),
    ABNFCase("5.1.1.13.2 all()", "boolCommonExpr", "Products/all(lambda:true)", .parses),
    ABNFCase("5.1.1.13.2 all() - requires path prefix", "boolCommonExpr", "all(lambda:true)", .fails),
    ABNFCase("5.1.1.13.2 all() - must contain a lambda expression", "boolCommonExpr", "Products/all()", .fails),
    ABNFCase("5.1.1.13.2 all()", "commonExpr", "Products/all(lambda:true)", .parses),
    ABNFCase("5.1.1.13.2 all()", "commonExpr", "EmailAddresses/all(lambda:true)", .parses),
    ABNFCase("5.1.1.14.1 primitive literal", "filter", "$filter=ReleaseDate gt 2013-05-24", .parses),
    ABNFCase("5.1.1.14.2 simple array", "commonExpr", "FirstName in [\"Miller\",\"Smith\"]", .parses),
    ABNFCase(
        "5.1.1.14.2 array with single-quoted OData strings", "commonExpr", "FirstName in [\"Miller\",'Smith']", .parses),
    ABNFCase("5.1.1.14.2 empty array", "commonExpr", "FirstName in []", .parses),
    ABNFCase(
        "5.1.1.14.2 array in array of arrays", "boolCommonExpr",
        "[\"Joe\",\"Smith\"] in [[\"John\",\"Doe\"],[\"Jane\",\"Smith\"]]", .unsupported("array expressions")),
    ABNFCase(
        "5.1.1.14.2 mixed array", "commonExpr", "[\"Hello\",42,true,false,null,'World']",
        .unsupported("array expressions")),
    ABNFCase("5.1.1.14.4 $it", "firstMemberExpr", "$it/Completed", .parses),
    ABNFCase("5.1.1.14.4 $it", "filter", "$filter=endswith($it,'.com')", .parses),
    ABNFCase(
        "5.1.1.14.4 $it with alias for entity reference", "queryOptions",
        "$filter=$it eq @ref&@ref={\"@odata.id\":\"http://host/service/ZqV5t\"}",
        .unsupported("JSON object alias values")),
    ABNFCase("5.1.1.14.5 $root with entity set", "commonExpr", "$root/SalesOrganizations", .unsupported("$root")),
    ABNFCase("5.1.1.14.6 $this", "boolCommonExpr", "$this eq 'Hugo'", .unsupported("$this")),
    ABNFCase("5.1.1.15 Path expressions", "commonExpr", "Items", .parses),
    ABNFCase(
        "5.1.1.16 Annotation Values", "filter", "$filter=Price/@Measures.Currency eq 'EUR'",
        .unsupported("annotations in paths")),
    ABNFCase("5.1.2 Expand - single navigation property", "expand", "$expand=Items", .parses),
    ABNFCase(
        "5.1.2 Expand - single navigation property", "expand", "$expand=Items/$ref", .unsupported("$ref in $expand")),
    ABNFCase("5.1.2 Expand - multiple navigation properties", "expand", "$expand=Customer,Items", .parses),
    ABNFCase(
        "5.1.2 Expand - multiple navigation properties, nested", "expand", "$expand=Customer,Items($expand=Product)",
        .parses),
    ABNFCase("5.1.2 Expand - recursive expansion", "expand", "$expand=Customer($levels=4)", .unsupported("$levels")),
    ABNFCase("5.1.2 Expand - no $level after $ref", "expand", "$expand=Customer/$ref($levels=4)", .fails),
    ABNFCase("5.1.2 Expand - no $select after $ref", "expand", "$expand=Customer/$ref($select=Name)", .fails),
    ABNFCase("5.1.2 Expand - no $expand after $ref", "expand", "$expand=Customer,Items/$ref($expand=Product)", .fails),
    ABNFCase("5.1.2 Expand - $count", "expand", "$expand=Items($count=true)", .parses),
    ABNFCase("5.1.2 Expand - $count", "expand", "$expand=Items/$count", .unsupported("$count in $expand")),
    ABNFCase("5.1.2 Expand - no $count after $count", "expand", "$expand=Items/$count($count=true)", .fails),
    ABNFCase(
        "5.1.2 Expand - multiple nested options", "expand",
        "$expand=Items($select=Quantity;$expand=Product($select=Name,Price);@c=15)",
        .unsupported("parameter aliases in nested options")),
    ABNFCase("5.1.2 Expand - navigation property in complex type", "expand", "$expand=Address/Country", .parses),
    ABNFCase(
        "5.1.2 Expand - navigation property in collection of complex type", "expand", "$expand=Addresses/Country",
        .parses),
    ABNFCase("5.1.2 Expand - levels without leading zeroes", "expand", "$expand=Category($levels=04)", .fails),
    ABNFCase(
        "5.1.2 Expand - star on complex path", "expand",
        "$expand=Address/*,Address/Address/*,Addresses/*,Address/Model.AddressWithLocation/*,Model.VipCustomer/Address/*",
        .parses),
    ABNFCase(
        "5.1.2 Expand - annotation", "expand", "$expand=@Namespace.EntityTerm", .unsupported("annotations in $expand")),
    ABNFCase("5.1.3 Select - simple", "select", "$select=Rating,ReleaseDate", .parses),
    ABNFCase("5.1.3 Select - with star", "select", "$select=*", .parses),
    ABNFCase("5.1.3 Select - with property of complex property", "select", "$select=Address/Street", .parses),
    ABNFCase("5.1.3 Select - with property of complex property", "select", "$select=Address/Country", .parses),
    ABNFCase("5.1.3 Select - with cast", "select", "$select=Address/Model.AddressWithLocation", .parses),
    ABNFCase(
        "5.1.3 Select - with cast and property of complex property", "select",
        "$select=Address/Model.AddressWithLocation/Location", .parses),
    ABNFCase(
        "5.1.3 Select - with cast and property of complex property, no namespace", "select",
        "$select=Address/AddressWithLocation/Location", .parses),
    ABNFCase(
        "5.1.3 Select on complex resource - with cast and property of sub-type", "select",
        "$select=Model.AddressWithLocation/Location", .parses),
    ABNFCase(
        "5.1.3 Select on complex resource - with cast and property of sub-type, no namespace", "select",
        "$select=AddressWithLocation/Location", .parses),
    ABNFCase("5.1.3 Select - with expand", "queryOptions", "$expand=Category($select=Name)", .parses),
    ABNFCase("5.1.3 Select - qualifiedEntityTypeName", "select", "$select=Model.PreferredSupplier/Name", .parses),
    ABNFCase(
        "5.1.3 Select - actions by namespace", "select", "$select=Model.ActionName,Model.MostPopularName,Model.*",
        .unsupported("operations in $select")),
    ABNFCase(
        "5.1.3 Select - actions and functions with signature", "select",
        "$select=Model.ActionName,Model.MostPopularName(Location,Kind)", .unsupported("operations in $select")),
    ABNFCase(
        "5.1.3 Select - tricky", "select",
        "$select=Namespace.PreferredSupplier/AccountRepresentative,Address/Street,Address/Namespace.AddressWithLocation/Location",
        .parses),
    ABNFCase(
        "5.1.3 Select - tricky, no namespace", "select",
        "$select=PreferredSupplier/AccountRepresentative,Address/Street,Address/AddressWithLocation/Location", .parses),
    ABNFCase(
        "5.1.3 Select - nested select", "select",
        "$select=Address($select=Street,City,Namespace.AddressWithLocation/Location)",
        .unsupported("nested options in $select")),
    ABNFCase("5.1.4 OrderBy", "orderby", "$orderby=Name", .parses),
    ABNFCase("5.1.4 OrderBy - case-insensitive", "orderby", "$OrderBy=Name", .parses),
    ABNFCase("5.1.4 OrderBy asc", "orderby", "$orderby=Name\tasc", .parses),
    ABNFCase("5.1.4 OrderBy mixed", "orderby", "$orderby=Name asc,Rating,ReleaseDate desc", .parses),
    ABNFCase("5.1.4 OrderBy expression", "orderby", "$orderby=Cost ge Revenue asc", .parses),
    ABNFCase("5.1.5 Top and Skip", "queryOptions", "$top=5&$skip=10", .parses),
    ABNFCase("5.1.6 Inlinecount", "queryOptions", "$count=true", .parses),
    ABNFCase("5.1.6 Inlinecount", "queryOptions", "$count=false", .parses),
    ABNFCase("5.1.6 Inlinecount", "queryOptions", "$count", .fails),
    ABNFCase("5.1.7 Search - simple term", "queryOptions", "$search=blue", .parses),
    ABNFCase("5.1.7 Search - simple term with dollar", "queryOptions", "$search=$search", .parses),
    ABNFCase(
        "5.1.7 Search - NOT is an operator here, search for items that do not match blue", "queryOptions",
        "$search=NOT blue", .parses),
    ABNFCase("5.1.7 Search - simple phrase", "queryOptions", "$search=\"blue%20green\"", .parses),
    ABNFCase(
        "5.1.7 Search - phrase with unbalanced double-quotes", "search", "$search=\"blue",
        .lenient("$search is kept verbatim")),
    ABNFCase("5.1.7 Search - implicit AND", "queryOptions", "$search=blue green", .parses),
    ABNFCase("5.1.7 Search - grouping", "queryOptions", "$search=foo AND (bar OR baz)", .parses),
    ABNFCase(
        "5.1.7 Search - UTF-8 characters: Greek Capital Letter Delta (Δ)", "queryOptions", "$search=%CE%94", .parses),
    ABNFCase(
        "5.1.7 Search - nested $search may contain balanced parentheses", "queryOptions",
        "$expand=Manager($search=(green))", .parses),
    ABNFCase(
        "5.1.7 Search - nested $search must not contain unbalanced parentheses", "queryOptions",
        "$expand=Manager($search=gr(een)", .fails),
    ABNFCase(
        "5.1.7 Search - nested $search must not contain unbalanced parentheses unless single-quoted", "queryOptions",
        "$expand=Manager($search='gr(een')", .parses),
    ABNFCase(
        "5.1.7 Search - nested $search simple term with percent-encoded semicolon", "queryOptions",
        "$expand=Manager($search=a%3Bb)", .unsupported("nested options are split after percent-decoding")),
    ABNFCase(
        "5.1.7 Search - nested $search simple term with percent-encoded semicolon", "queryOptions",
        "$expand=Manager($search='a%3Bb')", .parses),
    ABNFCase(
        "5.1.8 Format", "queryOptions", "$format=json&$Format=atom&$format=xml&$format=text/html",
        .unsupported("repeated system query options")),
    ABNFCase("5.1.8 Format - media type", "queryOptions", "$format=text/html", .parses),
    ABNFCase("5.1.9 Index", "queryOptions", "$index=42", .unsupported("$index")),
    ABNFCase("5.1.9 Index", "queryOptions", "$index=fortytwo", .fails),
    ABNFCase("5.1.10 Compute", "queryOptions", "$compute=Amount mul Product/TaxRate as Tax", .unsupported("$compute")),
    ABNFCase("Next Link", "skiptoken", "$skiptoken=Start@Next_Chunk:From?=Here!", .parses),
    ABNFCase(
        "Next Link: no Ampersand", "skiptoken", "$skiptoken=Not&this", .lenient("'&this' becomes a custom option")),
    ABNFCase("5.2 Custom Query Option", "queryOptions", "find=O%27Neil&!special", .parses),
    ABNFCase("5.2 Custom Query Option", "queryOptions", "$orderby=Name&!deltatoken=0412312321", .parses),
    ABNFCase("5.3 Parameter Aliases", "queryOptions", "$filter=contains(Title,@word)&@word='Black'", .parses),
    ABNFCase("Enumeration literal in URI", "enumLiteral", "Sales.Pattern'Yellow'", .parses),
    ABNFCase("Enumeration literal in URI - without prefix", "enumLiteral", "'Yellow'", .parses),
    ABNFCase(
        "Enumeration literal in URI - multiple flag values", "enumLiteral", "Sales.Pattern'Solid,Yellow'", .parses),
    ABNFCase(
        "Enumeration literal in URI - multiple flag values", "enumLiteral", "Sales.Pattern'Solid%2CYellow,%2B42'",
        .parses),
    ABNFCase(
        "Enumeration literal in URI - multiple flag values without prefix", "enumLiteral", "'Solid,Yellow,-42'", .parses
    ),
    ABNFCase("Enumeration literal - in filter", "filter", "$filter=style eq Sales.Pattern'Yellow'", .parses),
    ABNFCase("Enumeration literal - in filter without prefix", "filter", "$filter=style eq 'Yellow'", .parses),
    ABNFCase("Enumeration literal - in filter with has", "filter", "$filter=style has Sales.Pattern'Yellow'", .parses),
    ABNFCase(
        "Enumeration literal - undefined value as numeric constant", "filter", "$filter=style has Sales.Pattern'32'",
        .parses),
    ABNFCase(
        "Enumeration literal - undefined value as numeric constant", "odataRelativeUri",
        "Products?$filter=style eq Sales.Pattern'Yellow,32'", .parses),
    ABNFCase(
        "Enumeration literal - undefined value as numeric constant", "odataRelativeUri",
        "Products?$filter=style eq cast(eyeColor,Sales.Pattern)", .parses),
    ABNFCase(
        "$filter with geometry", "filter",
        "$filter=geo.intersects(geometry'SRID=0;Point(142.1 64.1)',geometry'SRID=0;Polygon((1 1,1 1),(1 1,2 2,3 3,1 1))')",
        .unsupported("spatial literals")),
    ABNFCase("Functions in commonExpr", "commonExpr", "Model.Available()", .parses),
    ABNFCase(
        "Functions in commonExpr", "commonExpr", "Model.Available",
        .lenient("a qualified name parses as a path; binding rejects it")),
    ABNFCase("Functions in commonExpr - directly call function", "commonExpr", "Model.MostPopularName()", .parses),
    ABNFCase(
        "Functions in commonExpr - after collection navigation", "commonExpr", "Products/Model.Available()",
        .unsupported("bound functions in paths")),
    ABNFCase(
        "Functions in commonExpr - complex JSON parameter", "commonExpr",
        "Model.Available(complex={\"Name\":\"Value\"})", .unsupported("JSON parameters")),
    ABNFCase(
        "Functions in commonExpr - property as parameter", "commonExpr",
        "Model.PhoneticallySimilar(Word1=Name,Word2=Supplier/Name)", .unsupported("named function parameters")),
    ABNFCase("in operator with list of primitives", "commonExpr", "FirstName in ('Miller','Smith')", .parses),
    ABNFCase("lists can only contain primitive literals", "commonExpr", "FirstName in (FirstName,LastName)", .fails),
    ABNFCase(
        "right operand is not a list, it's a complicated way of writing FirstName", "commonExpr",
        "FirstName in (FirstName)", .unsupported("non-literal in lists")),
    ABNFCase("in operator with empty literal list", "commonExpr", "FirstName in ()", .parses),
    ABNFCase("common expression cannot be empty", "commonExpr", "", .fails),
    ABNFCase("lists only allowed right of in operator", "commonExpr", "EmailAddresses eq ('Miller','Smith')", .fails),
    ABNFCase("Schema Version - numeric", "systemQueryOption", "$schemaversion=0001", .unsupported("$schemaversion")),
]
