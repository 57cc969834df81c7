import Testing
import TestSupport
@testable import Storage

/// The row decoder's fast paths: its table of primitive types, the name array it shares for rows
/// without nulls, word loads, and strings checked by decoding and comparing.
@Suite(.runsOffThePool) struct RowDecodeTests {
    /// A type with one property of every primitive kind, then an enum, a complex value and a collection.
    static let schema: Schema = {
        let box = ComplexType(
            name: "Box", qualifiedName: "T.Box",
            properties: [
                Property(name: "Label", type: .primitive(.string)),
                Property(name: "Weight", type: .primitive(.double)),
            ])
        let color = EnumType(name: "Color", qualifiedName: "T.Color", members: [("Red", 0), ("Blue", 1)])
        var properties = [Property(name: "ID", type: .primitive(.int64), nullable: false)]
        for p in EDMPrimitive.allCases {
            properties.append(Property(name: "P_" + String(p.rawValue.dropFirst(4)), type: .primitive(p)))
        }
        properties += [
            Property(name: "Color", type: .enumeration("T.Color")), Property(name: "Box", type: .complex("T.Box")),
            Property(name: "Tags", type: .collection(.primitive(.string))),
        ]
        let all = EntityType(name: "All", qualifiedName: "T.All", key: ["ID"], properties: properties)
        return Schema(
            version: .v4, entityTypes: [all.qualifiedName: all], complexTypes: [box.qualifiedName: box],
            enumTypes: [color.qualifiedName: color], entitySets: [EntitySet(name: "Alls", entityType: "T.All")])
    }()
    static let codec = RowCodec(schema: schema, entityType: schema.entityTypes["T.All"]!)

    static func randomString(_ r: inout SeededRandom) -> String {
        let alphabet: [String] = ["a", "Z", "0", " ", "é", "中", "😀", "\u{FFFD}", "\0", "ß"]
        return String((0..<Int.random(in: 0...40, using: &r)).map { _ in alphabet.randomElement(using: &r)! }.joined())
    }

    static func randomValue(_ p: EDMPrimitive, _ r: inout SeededRandom) -> Value {
        switch p {
        case .string: return .string(randomString(&r))
        case .json: return .json("{\"a\":\"" + randomString(&r) + "\"}")
        case .boolean: return .bool(Bool.random(using: &r))
        case .byte: return .int(Int64.random(in: 0...255, using: &r))
        case .sbyte: return .int(Int64.random(in: -128...127, using: &r))
        case .int16: return .int(Int64.random(in: Int64(Int16.min)...Int64(Int16.max), using: &r))
        case .int32: return .int(Int64.random(in: Int64(Int32.min)...Int64(Int32.max), using: &r))
        case .int64: return .int(Int64(bitPattern: r.next()))
        case .single: return .double(Double(Float(bitPattern: UInt32.random(in: 0...0x7F7F_FFFF, using: &r))))
        case .double: return .double(Double(bitPattern: r.next() & 0x7FEF_FFFF_FFFF_FFFF))
        case .decimal:
            return .decimal(
                EDMDecimal(
                    significand: Int128(Int64(bitPattern: r.next())) * 1_000_003,
                    scale: Int16.random(in: -5...20, using: &r)))
        case .date: return .date(EDMDate(days: Int32.random(in: -700_000...2_900_000, using: &r)))
        case .dateTimeOffset, .dateTime:
            return .dateTimeOffset(
                EDMDateTimeOffset(
                    ticks: Int64.random(in: 0...(1 << 60), using: &r),
                    offsetMinutes: Int16.random(in: -840...840, using: &r)))
        case .timeOfDay, .time: return .timeOfDay(EDMTimeOfDay(ticks: Int64.random(in: 0..<864_000_000_000, using: &r)))
        case .duration: return .duration(EDMDuration(ticks: Int64(bitPattern: r.next()) >> 2))
        case .guid: return .guid(EDMGuid(high: r.next(), low: r.next()))
        case .binary:
            return .binary((0..<Int.random(in: 0...20, using: &r)).map { _ in UInt8.random(in: 0...255, using: &r) })
        }
    }

    /// Random entities, each property null with probability 1/4 (none null in a quarter of them):
    /// decoding gives back exactly what was encoded, nulls left out, names in declaration order.
    @Test func everyKindRoundTripsWithNullsAnywhere() throws {
        var r = SeededRandom(seed: testSeed("everyKindRoundTripsWithNullsAnywhere"))
        let type = Self.schema.entityTypes["T.All"]!
        for round in 0..<3_000 {
            var e = Properties()
            for p in type.properties {
                if p.name != "ID" && round % 4 != 0 && Int.random(in: 0..<4, using: &r) == 0 { continue }
                switch p.type {
                case .primitive(let k):
                    e.appendNew(p.name, p.name == "ID" ? .int(Int64(round)) : Self.randomValue(k, &r))
                case .enumeration: e.appendNew(p.name, .enumMember(Int64.random(in: 0...1, using: &r)))
                case .complex:
                    e.appendNew(p.name, .complex(["Label": .string(Self.randomString(&r)), "Weight": .double(1.5)]))
                case .collection:
                    e.appendNew(p.name, .collection([.string(Self.randomString(&r)), .null, .string("")]))
                }
            }
            let decoded = try Self.codec.decode(Self.codec.encode(e))
            #expect(decoded == e)
            #expect(decoded.keys == e.keys, "names in declaration order")
        }
    }

    /// Byte strings from an alphabet of lone continuation bytes, overlong and surrogate leads,
    /// truncated sequences and valid characters: `_decodeUTF8` accepts exactly what the standard
    /// library's validating decoder accepts, with the same string. Sequences the repairing decoder
    /// replaces by one U+FFFD of the same length (F1 80 80) are among them.
    @Test func stringsAreAcceptedExactlyWhenValid() throws {
        var r = SeededRandom(seed: testSeed("stringsAreAcceptedExactlyWhenValid"))
        let valid: [[UInt8]] = [
            [0x41], [0x7F], [0x00], [0xC2, 0xA9], [0xE2, 0x82, 0xAC], [0xEF, 0xBF, 0xBD], [0xF0, 0x9F, 0x98, 0x80],
            [0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68],
        ]
        let invalidPieces: [[UInt8]] = [
            [0x80], [0xBF], [0xC0, 0xAF], [0xC3], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80],
            [0xF1, 0x80, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xF5], [0xFF],
        ]
        var invalid = 0
        for n in 0..<20_000 {
            var bytes: [UInt8] = []
            for _ in 0..<Int.random(in: 0...(n % 2 == 0 ? 6 : 30), using: &r) {
                bytes += (Int.random(in: 0..<24, using: &r) == 0 ? invalidPieces : valid).randomElement(using: &r)!
            }
            let expected = String(validating: bytes, as: UTF8.self)
            let got = Self.decodeString(bytes)
            #expect(got == expected, "\(bytes)")
            if expected == nil { invalid += 1 }
        }
        #expect(invalid > 3_000 && invalid < 17_000, "both kinds are tried: \(invalid) invalid")
        for bad: [UInt8] in [[0xF1, 0x80, 0x80, 0x41], [0xED, 0xA0, 0x80], [0xC0, 0xAF], [0x61, 0xFF]] {
            #expect(Self.decodeString(bad) == nil, "\(bad)")
        }
    }

    /// `_decodeUTF8`'s string, or nil when it throws (its only error is `.invalidUTF8`).
    static func decodeString(_ bytes: [UInt8]) -> String? {
        bytes.withUnsafeBytes { b in try? _decodeUTF8(b) }
    }

    /// A row whose string bytes are not UTF-8 is refused, whichever position the string has.
    @Test func aRowWithInvalidUTF8IsRefused() throws {
        let e: Properties = ["ID": .int(1), "P_String": .string("abcé"), "P_Untyped": .json("\"xé\"")]
        var bytes = Self.codec.encode(e)
        for target in [Array("abcé".utf8), Array("\"xé\"".utf8)] {
            var damaged = bytes
            let at = (0...(damaged.count - target.count)).first { Array(damaged[$0..<($0 + target.count)]) == target }!
            damaged[at + target.count - 2] = 0xF1  // é is C3 A9: C3 becomes F1, a truncated 4-byte lead
            #expect(throws: RowCodecError.invalidUTF8) { try Self.codec.decode(damaged) }
        }
        bytes = Self.codec.encode(e)
        #expect(try Self.codec.decode(bytes) == e)
    }

    /// A shared name array is never written through: changing one decoded row leaves the next alone.
    @Test func decodedRowsShareNamesButNotChanges() throws {
        var r = SeededRandom(seed: 7)
        var full = Properties()
        for p in Self.schema.entityTypes["T.All"]!.properties {
            switch p.type {
            case .primitive(let k): full.appendNew(p.name, Self.randomValue(k, &r))
            case .enumeration: full.appendNew(p.name, .enumMember(1))
            case .complex: full.appendNew(p.name, .complex(["Label": .string("l")]))
            case .collection: full.appendNew(p.name, .collection([]))
            }
        }
        let bytes = Self.codec.encode(full)
        var a = try Self.codec.decode(bytes)
        #expect(a.keys == Self.codec.names)
        a["Extra"] = .int(3)
        a["ID"] = nil
        a["P_String"] = .string("changed")
        #expect(try Self.codec.decode(bytes) == full)
        #expect(Self.codec.names.count == full.count)
    }
}
