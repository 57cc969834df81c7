import Testing
@testable import Storage

@Suite(.runsOffThePool) struct RowCodecTests {
    static let schema = Fixtures.schema
    static var partnerCodec: RowCodec {
        RowCodec(schema: schema, entityType: schema.entityType(ofSet: "BusinessPartners")!)
    }
    static var itemCodec: RowCodec {
        RowCodec(schema: schema, entityType: schema.entityType(ofSet: "SalesOrderItems")!)
    }

    static let partner: Properties = [
        "PartnerID": .string("0100000000"), "CompanyName": .string("SAP \0 \"quoted\" 中"),
        "Address": .complex(["City": .string("Walldorf"), "Country": .string("DE")]),
        "Emails": .collection([.string("a@sap.com"), .null, .string("")]),
    ]

    @Test func roundTripsEveryKind() throws {
        let item: Properties = [
            "SalesOrderID": .string("0500000001"), "ItemPosition": .int(-2_147_483_648),
            "Quantity": .int(2_147_483_647), "NetAmount": .decimal(EDMDecimal("1249.000")!),
            "DeliveryDate": .date(EDMDate("2021-12-04")!), "Weight": .double(-0.5), "Note": .string(""),
        ]
        #expect(try Self.itemCodec.decode(Self.itemCodec.encode(item)) == item)
        #expect(try Self.partnerCodec.decode(Self.partnerCodec.encode(Self.partner)) == Self.partner)
        // The scale written is kept, not only the value.
        let amount = try Self.itemCodec.decode(Self.itemCodec.encode(item))["NetAmount"]
        if case .decimal(let d)? = amount { #expect(d.description == "1249.000") } else { Issue.record("no decimal") }
    }

    @Test func onePropertyReadsWithoutDecodingTheRest() throws {
        let bytes = Self.partnerCodec.encode(Self.partner)
        try bytes.withUnsafeBytes { b in
            let row = try RowView(b)
            #expect(try row.value(at: 1, type: .primitive(.string), schema: Self.schema) == Self.partner["CompanyName"])
            #expect(try row.slice(2) == nil)  // Country is null
            #expect(try row.slice(99) == nil)  // beyond the row: a property added later reads as null
        }
    }

    /// `RowView` computes where the bitmap, offset table and values start from the property count:
    /// rows of 0 to 300 properties (the count's high byte, bitmaps of several bytes), random nulls,
    /// read one slice at a time, equal what `decode` gives.
    @Test func slicesMatchDecodeForEveryPropertyCount() throws {
        var r = SeededRandom(seed: testSeed("slicesMatchDecodeForEveryPropertyCount"))
        for n in [0, 1, 7, 8, 9, 63, 64, 65, 255, 256, 257, 300] {
            let properties = (0..<n).map { Property(name: "P\($0)", type: .primitive(.int32)) }
            let codec = RowCodec(schema: Self.schema, properties: properties)
            var values = Properties()
            for i in 0..<n where Bool.random(using: &r) { values.appendNew("P\(i)", .int(Int64(i) * 1_000 - 7)) }
            let bytes = codec.encode(values)
            try bytes.withUnsafeBytes { b in
                let row = try RowView(b)
                #expect(row.count == n && row.bytes.count == bytes.count)
                for i in 0..<(n + 2) {
                    let expected = i < n ? values["P\(i)"] ?? .null : .null
                    #expect(
                        try row.value(at: i, type: .primitive(.int32), schema: Self.schema) == expected,
                        "n \(n), i \(i)")
                }
            }
            #expect(try codec.decode(bytes) == values)
        }
    }

    @Test func emptyStringIsNotNull() throws {
        let props: Properties = ["PartnerID": .string(""), "CompanyName": .string("x")]
        #expect(try Self.partnerCodec.decode(Self.partnerCodec.encode(props)) == props)
    }

    @Test func randomByteFlipsThrowOrDecodeNeverCrash() throws {
        var r = SeededRandom(seed: testSeed("randomByteFlipsThrowOrDecodeNeverCrash"))
        let good = Self.partnerCodec.encode(Self.partner)
        var errors = 0
        for _ in 0..<20_000 {
            var bytes = good
            switch Int.random(in: 0..<3, using: &r) {
            case 0:
                for _ in 0..<Int.random(in: 1...4, using: &r) {
                    bytes[Int.random(in: 0..<bytes.count, using: &r)] = UInt8.random(in: 0...255, using: &r)
                }
            case 1: bytes.removeLast(Int.random(in: 1...bytes.count, using: &r))
            default:
                bytes.append(
                    contentsOf: (0..<Int.random(in: 1...8, using: &r)).map { _ in UInt8.random(in: 0...255, using: &r) }
                )
            }
            do { _ = try Self.partnerCodec.decode(bytes) } catch { errors += 1 }
        }
        #expect(errors > 1000)
    }
}

@Suite(.runsOffThePool) struct JSONTests {
    @Test func parsesAndKeepsNumbersExact() throws {
        let j = try JSON.parse(
            #"{"a":1249.000,"b":[true,false,null],"c":"x\"\u00e9\ud83d\ude00","d":12345678901234567890}"#)
        #expect(j["a"] == .number("1249.000"))
        #expect(j["c"] == .string("x\"é😀"))
        #expect(j["d"] == .number("12345678901234567890"))
        #expect(try JSON.parse(j.text) == j)
    }

    @Test func badJSONNamesThePosition() {
        #expect(throws: JSONError.self) { try JSON.parse("{\"a\":}") }
        do { _ = try JSON.parse("{\n \"a\": tru }") } catch {
            #expect(error.line == 2 && error.message == "unexpected character")
        }
        #expect(throws: JSONError.self) { try JSON.parse([0x22, 0xC3, 0x28, 0x22]) }  // invalid UTF-8
        #expect(throws: JSONError.self) { try JSON.parse("\"\\ud800\"") }  // lone surrogate
        #expect(throws: JSONError.self) { try JSON.parse(String(repeating: "[", count: 10_000)) }
        #expect(throws: JSONError.self) { try JSON.parse("01") }
    }

    @Test func escapesControlCharacters() {
        var out = ""
        JSONWriter.writeString("a\u{01}\n\"\\", to: &out)
        #expect(out == #""a\u0001\n\"\\""#)
    }

    @Test func v2AndV4ValueForms() throws {
        let vj = ValueJSON(schema: Fixtures.schema)
        let dto = try vj.value(
            from: .string("/Date(1609459200000+0060)/"), type: .primitive(.dateTimeOffset), property: "p")
        #expect(dto == .dateTimeOffset(EDMDateTimeOffset("2021-01-01T00:00:00Z")!))
        let v4 = try vj.value(
            from: .string("2021-01-01T02:00:00+02:00"), type: .primitive(.dateTimeOffset), property: "p")
        var out = ""
        vj.write(v4, type: .primitive(.dateTimeOffset), to: &out)
        #expect(out == "\"2021-01-01T02:00:00+02:00\"")  // the offset is kept
        #expect(
            try vj.value(from: .string("9007199254740993"), type: .primitive(.int64), property: "p")
                == .int(9007199254740993))
        #expect(throws: EntityError.self) { try vj.value(from: .number("300"), type: .primitive(.byte), property: "p") }
        #expect(throws: EntityError.self) { try vj.value(from: .string("x"), type: .primitive(.int32), property: "p") }
        #expect(try vj.value(from: .string("Paid"), type: .enumeration("EPM.Status"), property: "p") == .enumMember(1))
    }
}

@Suite(.runsOffThePool) struct ValueLayoutTests {
    /// Scalars are stored inline and a value is small: rows decode into arrays of these.
    @Test func valueIsSmall() {
        #expect(MemoryLayout<Value>.stride <= 32, "Value stride \(MemoryLayout<Value>.stride)")
        #expect(MemoryLayout<TypeRef>.stride <= 24, "TypeRef stride \(MemoryLayout<TypeRef>.stride)")
    }
}

@Suite(.runsOffThePool) struct JSONBufferTests {
    /// A GUID's text is the canonical lower-case form whatever case it was parsed from, and its
    /// bytes are big-endian in text order; both round-trip.
    @Test func guidTextAndBytes() {
        let text = "0123abcd-89ab-cdef-0123-456789abcdef"
        let g = EDMGuid(text)!
        #expect(g.description == text)
        #expect(EDMGuid(text.uppercased())?.description == text)
        #expect(
            g.bytes == [0x01, 0x23, 0xAB, 0xCD, 0x89, 0xAB, 0xCD, 0xEF, 0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF])
        #expect(EDMGuid(high: 0, low: 0).description == "00000000-0000-0000-0000-000000000000")
        var r = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let x = EDMGuid(high: r.next(), low: r.next())
            #expect(EDMGuid(x.description) == x)
            #expect(EDMGuid(bytes: x.bytes) == x)
        }
    }

    /// The byte writer formats exactly as the values' descriptions do.
    @Test func formatsLikeDescriptions() {
        var r = SeededRandom(seed: testSeed("formatsLikeDescriptions"))
        for _ in 0..<5_000 {
            var b = JSONBuffer()
            let d = EDMDecimal(
                significand: Int128(Int64.random(in: -10_000_000...10_000_000, using: &r))
                    * (Bool.random(using: &r) ? 1 : 1_000_000_000_000),
                scale: Int16.random(in: -3...12, using: &r))
            b.appendDecimal(d)
            #expect(b.string == d.description)
            b.removeAll()
            let t = EDMDateTimeOffset(
                ticks: Int64.random(in: -(1 << 56)...(1 << 56), using: &r),
                offsetMinutes: Int16.random(in: -840...840, using: &r))
            b.appendDateTimeOffset(t)
            #expect(b.string == t.description)
            b.removeAll()
            let g = EDMGuid(high: r.next(), low: r.next())
            b.appendGuid(g)
            #expect(b.string == g.description)
            b.removeAll()
            let i = Int64.random(in: Int64.min...Int64.max, using: &r) >> UInt64.random(in: 0...63, using: &r)
            b.appendInt(i)
            #expect(b.string == String(i))
        }
        var b = JSONBuffer()
        b.appendString("a\u{01}\n\"\\é")
        #expect(b.string == #""a\u0001\n\"\\é""#)
    }
}
