import LMDB
/// The order-preserving tuple encoding of keys: `bytes(a) < bytes(b)` exactly when `a < b`.
///
/// Each component is a type tag and a self-delimiting payload, so tuples concatenate (an index entry
/// is the index tuple followed by the primary-key tuple) and a prefix of a tuple is a range.
/// - null sorts first; integers are big-endian with the sign bit flipped; doubles use the usual bit
///   flips with `-0.0` read as `0.0` and every NaN as one NaN that sorts above `+infinity`;
/// - decimals are sign, exponent and digits (exact at any scale: `1.50` and `1.5` encode alike);
/// - strings and binaries are their bytes with `0x00` escaped as `00 FF` and ended by `00 00`;
/// - a descending component is the complement of its ascending bytes.
package enum KeyCodec {
    /// LMDB's largest key (`mdb_env_get_maxkeysize` with the default build).
    package static let maxKeySize = 511

    enum Tag: UInt8 {
        case null = 0x05
        case boolFalse = 0x10, boolTrue = 0x11
        case int = 0x20
        case double = 0x28
        case decimalNegative = 0x30, decimalZero = 0x31, decimalPositive = 0x32
        case string = 0x40
        case binary = 0x48
        case date = 0x50
        case dateTimeOffset = 0x58
        case timeOfDay = 0x60
        case duration = 0x68
        case guid = 0x70
        case enumMember = 0x78
    }

    /// Appends one component. Throws for values that cannot be key components (complex,
    /// collection, JSON).
    package static func append(_ value: Value, descending: Bool = false, to out: inout [UInt8]) throws(KeyCodecError) {
        let start = out.count
        switch value {
        case .null: out.append(Tag.null.rawValue)
        case .bool(let b): out.append(b ? Tag.boolTrue.rawValue : Tag.boolFalse.rawValue)
        case .int(let i): out.append(Tag.int.rawValue); appendSigned(i, &out)
        case .enumMember(let i): out.append(Tag.enumMember.rawValue); appendSigned(i, &out)
        case .double(let d): out.append(Tag.double.rawValue); appendDouble(d, &out)
        case .decimal(let d): appendDecimal(d, &out)
        case .string(let s): out.append(Tag.string.rawValue); appendEscaped(s.utf8, &out)
        case .binary(let b): out.append(Tag.binary.rawValue); appendEscaped(b, &out)
        case .date(let d): out.append(Tag.date.rawValue); appendSigned(Int64(d.days), &out)
        case .dateTimeOffset(let d): out.append(Tag.dateTimeOffset.rawValue); appendSigned(d.ticks, &out)
        case .timeOfDay(let t): out.append(Tag.timeOfDay.rawValue); appendSigned(t.ticks, &out)
        case .duration(let t): out.append(Tag.duration.rawValue); appendSigned(t.ticks, &out)
        case .guid(let g): out.append(Tag.guid.rawValue); out.append(contentsOf: g.bytes)
        case .json, .complex, .collection: throw KeyCodecError.notKeyable
        }
        if descending {
            for i in start..<out.count { out[i] = ~out[i] }
        }
    }

    /// Encodes a tuple; `descending[i]` (default false) flips component `i`.
    package static func encode(_ values: [Value], descending: [Bool] = []) throws(KeyCodecError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(16 * values.count)
        for (i, v) in values.enumerated() {
            try append(v, descending: i < descending.count && descending[i], to: &out)
        }
        return out
    }

    /// Decodes `count` components from the front of `bytes`, typed by `types` (needed to tell the
    /// integer widths and V2 date-times apart; `nil` reads the natural type of the tag).
    /// Returns the values and the number of bytes used.
    package static func decode(
        _ bytes: UnsafeRawBufferPointer, count: Int, descending: [Bool] = []
    ) throws(KeyCodecError) -> (values: [Value], length: Int) {
        var values: [Value] = []
        var i = 0
        for c in 0..<count {
            let desc = c < descending.count && descending[c]
            let (v, n) = try decodeOne(bytes, at: i, descending: desc)
            values.append(v)
            i += n
        }
        return (values, i)
    }

    /// The byte length of the first `count` components, found without decoding them.
    package static func tupleLength(
        _ bytes: UnsafeRawBufferPointer, count: Int, descending: [Bool] = []
    ) throws(KeyCodecError) -> Int {
        var i = 0
        for c in 0..<count {
            let flip: UInt8 = c < descending.count && descending[c] ? 0xFF : 0
            guard i < bytes.count, let tag = Tag(rawValue: bytes[i] ^ flip) else { throw .truncated }
            switch tag {
            case .null, .boolFalse, .boolTrue, .decimalZero: i += 1
            case .int, .enumMember, .date, .dateTimeOffset, .timeOfDay, .duration, .double: i += 9
            case .guid: i += 17
            case .decimalPositive, .decimalNegative:
                let end: UInt8 = (tag == .decimalNegative ? 0xFF : 0) ^ flip
                i += 3
                while i < bytes.count, bytes[i] != end { i += 1 }
                i += 1
            case .string, .binary:
                i += 1
                while i + 1 < bytes.count, !(bytes[i] == flip && bytes[i + 1] == flip) { i += bytes[i] == flip ? 2 : 1 }
                i += 2
            }
            guard i <= bytes.count else { throw .truncated }
        }
        return i
    }

    /// The byte length of the component that starts at `offset`.
    package static func componentLength(
        _ bytes: UnsafeRawBufferPointer, at offset: Int, descending: Bool
    ) throws(KeyCodecError) -> Int {
        try decodeOne(bytes, at: offset, descending: descending).1
    }

    // MARK: - Payloads

    @inline(__always)
    static func appendSigned(_ v: Int64, _ out: inout [UInt8]) {
        let u = UInt64(bitPattern: v) ^ (1 << 63)
        withUnsafeBytes(of: u.bigEndian) { out.append(contentsOf: $0) }
    }

    static func appendDouble(_ d: Double, _ out: inout [UInt8]) {
        var x = d
        if x.isNaN { x = .nan } else if x == 0 { x = 0 }
        var bits = x.bitPattern
        if x.isNaN { bits = 0x7FF8_0000_0000_0000 }
        bits = (bits & (1 << 63)) != 0 ? ~bits : bits | (1 << 63)
        withUnsafeBytes(of: bits.bigEndian) { out.append(contentsOf: $0) }
    }

    /// The digits are those of `EDMDecimal.digitsAndExponent`, made here without a `String` (this
    /// runs for every decimal sort key and index entry): written least significant first, reversed,
    /// then the exponent they give filled in before them.
    static func appendDecimal(_ d: EDMDecimal, _ out: inout [UInt8]) {
        if d.isZero { out.append(Tag.decimalZero.rawValue); return }
        let n = d.normalized
        let negative = n.significand < 0
        out.append(negative ? Tag.decimalNegative.rawValue : Tag.decimalPositive.rawValue)
        let flip: UInt8 = negative ? 0xFF : 0
        let exponentAt = out.count
        out.append(0)
        out.append(0)
        let first = out.count
        let magnitude = n.significand.magnitude
        if let m = UInt64(exactly: magnitude) {
            var rest = m
            while rest != 0 { out.append((UInt8(rest % 10) + 1) ^ flip); rest /= 10 }
        } else {
            var rest = magnitude
            while rest != 0 { out.append((UInt8(rest % 10) + 1) ^ flip); rest /= 10 }
        }
        out[first...].reverse()
        let e = UInt16(clamping: out.count - first - Int(n.scale) + 0x8000)
        out[exponentAt] = UInt8(e >> 8) ^ flip
        out[exponentAt + 1] = UInt8(e & 0xFF) ^ flip
        out.append(flip)
    }

    @inline(__always)
    static func appendEscaped<C: Sequence<UInt8>>(_ bytes: C, _ out: inout [UInt8]) {
        for b in bytes {
            out.append(b)
            if b == 0 { out.append(0xFF) }
        }
        out.append(0)
        out.append(0)
    }

    // MARK: - Decoding

    static func decodeOne(
        _ bytes: UnsafeRawBufferPointer, at start: Int, descending: Bool
    ) throws(KeyCodecError) -> (Value, Int) {
        let flip: UInt8 = descending ? 0xFF : 0
        @inline(__always) func byte(_ i: Int) throws(KeyCodecError) -> UInt8 {
            guard i < bytes.count else { throw KeyCodecError.truncated }
            return bytes[i] ^ flip
        }
        func int64(_ at: Int) throws(KeyCodecError) -> Int64 {
            guard at + 8 <= bytes.count else { throw KeyCodecError.truncated }
            var u: UInt64 = 0
            for k in 0..<8 { u = u << 8 | UInt64(bytes[at + k] ^ flip) }
            return Int64(bitPattern: u ^ (1 << 63))
        }
        guard let tag = Tag(rawValue: try byte(start)) else { throw KeyCodecError.badTag }
        let p = start + 1
        switch tag {
        case .null: return (.null, 1)
        case .boolFalse: return (.bool(false), 1)
        case .boolTrue: return (.bool(true), 1)
        case .int: return (.int(try int64(p)), 9)
        case .enumMember: return (.enumMember(try int64(p)), 9)
        case .date:
            let d = try int64(p)
            guard let days = Int32(exactly: d) else { throw KeyCodecError.badTag }
            return (.date(EDMDate(days: days)), 9)
        case .dateTimeOffset: return (.dateTimeOffset(EDMDateTimeOffset(ticks: try int64(p))), 9)
        case .timeOfDay: return (.timeOfDay(EDMTimeOfDay(ticks: try int64(p))), 9)
        case .duration: return (.duration(EDMDuration(ticks: try int64(p))), 9)
        case .double:
            let raw = UInt64(bitPattern: try int64(p)) ^ (1 << 63)
            let bits = (raw & (1 << 63)) != 0 ? raw & ~(1 << 63) : ~raw
            return (.double(Double(bitPattern: bits)), 9)
        case .guid:
            guard p + 16 <= bytes.count else { throw KeyCodecError.truncated }
            return (.guid(EDMGuid(bytes: (0..<16).map { bytes[p + $0] ^ flip })), 17)
        case .decimalZero: return (.decimal(EDMDecimal(0)), 1)
        case .decimalPositive, .decimalNegative:
            let negative = tag == .decimalNegative
            let f2: UInt8 = negative ? 0xFF : 0
            let e = Int(UInt16(try byte(p) ^ f2) << 8 | UInt16(try byte(p + 1) ^ f2)) - 0x8000
            var sig: Int128 = 0
            var n = 0
            var i = p + 2
            while true {
                let b = try byte(i) ^ f2
                i += 1
                if b == 0 { break }
                guard b >= 1, b <= 10, n < 38 else { throw KeyCodecError.badTag }
                sig = sig * 10 + Int128(b - 1)
                n += 1
            }
            guard n > 0 else { throw KeyCodecError.badTag }
            let scale = n - e
            guard let sc = Int16(exactly: scale) else { throw KeyCodecError.badTag }
            return (.decimal(EDMDecimal(significand: negative ? -sig : sig, scale: sc)), i - start)
        case .string, .binary:
            var out: [UInt8] = []
            var i = p
            while true {
                let b = try byte(i)
                if b == 0 {
                    let next = try byte(i + 1)
                    if next == 0 { i += 2; break }
                    guard next == 0xFF else { throw KeyCodecError.badTag }
                    out.append(0)
                    i += 2
                } else {
                    out.append(b)
                    i += 1
                }
            }
            if tag == .binary { return (.binary(out), i - start) }
            guard let s = String(validating: out, as: UTF8.self) else { throw KeyCodecError.invalidUTF8 }
            return (.string(s), i - start)
        }
    }
}

/// Why a key could not be encoded or decoded.
package enum KeyCodecError: Error, Sendable, Hashable, CustomStringConvertible {
    case notKeyable
    case truncated
    case badTag
    case invalidUTF8

    package var description: String {
        switch self {
        case .notKeyable: "a complex, collection or untyped value cannot be part of a key"
        case .truncated: "key bytes end too early"
        case .badTag: "key bytes are not a valid key encoding"
        case .invalidUTF8: "key string is not valid UTF-8"
        }
    }
}
