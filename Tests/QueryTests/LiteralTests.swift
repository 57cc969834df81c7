import TestSupport
import Testing
import Query
import Storage

/// V4 and V2 literal forms: the parsed value and type.
@Suite(.runsOffThePool) struct LiteralTests {
    /// The literal on the right of `x eq <text>`.
    func literal(_ text: String, version: ODataVersion = .v4) throws -> Literal? {
        let url = try ODataURL.parse("S?$filter=x eq " + text, version: version)
        guard case .binary(.eq, _, let rhs) = url.filter?.kind, case .literal(let l) = rhs.kind else { return nil }
        return l
    }

    @Test(arguments: [
        ("'O''Neil'", "'O''Neil'"),
        ("''", "''"),
        ("'%27%27quoted%27%27'", "'''quoted'''"),
        ("'a+b'", "'a b'"),
        ("'a%2Bb'", "'a+b'"),
        ("'Grüße'", "'Grüße'"),
        ("12", "12"),
        ("-3", "-3"),
        ("%2B42", "42"),
        ("2147483648", "2147483648L"),
        ("1.5", "1.5M"),
        ("-0.25", "-0.25M"),
        ("2.5e3", "2500.0D"),
        ("-0.314e1", "-3.14D"),
        ("1E-2", "0.01D"),
        ("INF", "INF"),
        ("-INF", "-INF"),
        ("NaN", "NaN"),
        ("true", "true"),
        ("FALSE", "false"),
        ("null", "null"),
        ("2021-01-01", "2021-01-01"),
        ("2021-01-01T10:00:00Z", "2021-01-01T10:00:00Z"),
        ("2021-01-01T10:00Z", "2021-01-01T10:00:00Z"),
        ("2021-01-01T10:00:00.1234567%2B02:00", "2021-01-01T10:00:00.1234567+02:00"),
        ("2021-01-01T10:00:00-05:30", "2021-01-01T10:00:00-05:30"),
        ("2012-09-03T23%3A59%2B01%3A00", "2012-09-03T23:59:00+01:00"),
        ("10:00:00", "10:00:00"),
        ("10:00", "10:00:00"),
        ("11:22:33.4444444", "11:22:33.4444444"),
        ("01234567-89ab-cdef-0123-456789abcdef", "01234567-89ab-cdef-0123-456789abcdef"),
        ("ABCDEF01-89AB-CDEF-0123-456789ABCDEF", "abcdef01-89ab-cdef-0123-456789abcdef"),
        ("duration'P1D'", "duration'P1D'"),
        ("duration'-P6DT23H59M59.9999S'", "duration'-P6DT23H59M59.9999S'"),
        ("binary'AQID'", "X'010203'"),
        ("binary'Zm9vYg'", "X'666F6F62'"),
        ("binary'Zm9vYg=='", "X'666F6F62'"),
        ("binary''", "X''"),
        ("Sales.Status'Open'", "Sales.Status'Open'"),
        ("Sales.Flags'Red,Blue'", "Sales.Flags'Red,Blue'"),
        // V2 forms, accepted in any version.
        ("datetime'2021-01-01T10:00'", "datetime'2021-01-01T10:00:00Z'"),
        ("datetime'2021-01-01T10:00:00.5'", "datetime'2021-01-01T10:00:00.5Z'"),
        ("datetimeoffset'2021-01-01T10:00:00%2B01:00'", "2021-01-01T10:00:00+01:00"),
        ("guid'01234567-89ab-cdef-0123-456789abcdef'", "01234567-89ab-cdef-0123-456789abcdef"),
        ("time'PT10H30M'", "time'10:30:00'"),
        ("12L", "12L"),
        ("-12l", "-12L"),
        ("1.5M", "1.5M"),
        ("1.5m", "1.5M"),
        ("2.0d", "2.0D"),
        ("2D", "2.0D"),
        ("1.5f", "1.5F"),
        ("X'0A0B'", "X'0A0B'"),
        ("x'ff'", "X'FF'"),
    ])
    func v4(_ text: String, _ expected: String) throws {
        #expect(try literal(text)?.description == expected)
    }

    @Test func types() throws {
        #expect(try literal("12")?.primitiveType == .int32)
        #expect(try literal("12L")?.primitiveType == .int64)
        #expect(try literal("9223372036854775807")?.primitiveType == .int64)
        #expect(try literal("92233720368547758070")?.primitiveType == .decimal)
        #expect(try literal("1.5")?.primitiveType == .decimal)
        #expect(try literal("1.5e0")?.primitiveType == .double)
        #expect(try literal("1.5f")?.primitiveType == .single)
        #expect(try literal("datetime'2021-01-01T00:00'")?.primitiveType == .dateTime)
        #expect(try literal("datetimeoffset'2021-01-01T00:00Z'")?.primitiveType == .dateTimeOffset)
        #expect(try literal("time'PT1H'")?.primitiveType == .time)
        #expect(try literal("10:00")?.primitiveType == .timeOfDay)
        #expect(try literal("null")?.primitiveType == nil)
        #expect(try literal("1.5") == .primitive(.decimal(EDMDecimal("1.5")!), .decimal))
        #expect(try literal("'x'") == .primitive(.string("x"), .string))
    }

    @Test func binaryIsHexInV2() throws {
        #expect(try literal("binary'0A0B'", version: .v2)?.description == "X'0A0B'")
        #expect(try literal("binary'0A0B'", version: .v4)?.description == "X'D00D01'")
        #expect(
            parseError("S?$filter=x eq binary'0A0'", version: .v2)
                == "invalid binary literal '0A0' in $filter at column 6")
    }

    @Test func keyLiterals() throws {
        let url = try ODataURL.parse(
            "Categories(2018-02-13T23%3A59%3A59Z)/Products(guid'01234567-89ab-cdef-0123-456789abcdef')")
        #expect(
            url.path.description == "Categories(2018-02-13T23:59:59Z)/Products(01234567-89ab-cdef-0123-456789abcdef)")
    }
}
