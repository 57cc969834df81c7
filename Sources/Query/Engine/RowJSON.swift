import Storage

/// Writes one stored property straight from its row bytes as OData JSON, without making a `Value`:
/// the kinds below are formatted with the same `JSONBuffer` functions `ValueJSON.write` uses for
/// the decoded value, so the bytes are identical. Other types go through `ValueJSON`.
enum RowJSON {
    enum Kind: Equatable {
        case string
        case boolean
        /// A little-endian integer of 1, 2, 4 or 8 bytes.
        case integer(width: Int, signed: Bool)
        case decimal
        case date
        case dateTimeOffset
        case timeOfDay
        case guid
        /// Written from the decoded `Value`.
        case value
    }

    static func kind(of type: TypeRef) -> Kind {
        guard case .primitive(let p) = type else { return .value }
        switch p {
        case .string: return .string
        case .boolean: return .boolean
        case .byte: return .integer(width: 1, signed: false)
        case .sbyte: return .integer(width: 1, signed: true)
        case .int16: return .integer(width: 2, signed: true)
        case .int32: return .integer(width: 4, signed: true)
        case .int64: return .integer(width: 8, signed: true)
        case .decimal: return .decimal
        case .date: return .date
        case .dateTimeOffset, .dateTime: return .dateTimeOffset
        case .timeOfDay, .time: return .timeOfDay
        case .guid: return .guid
        default: return .value
        }
    }

    /// Writes the non-null payload `s` of a property of `kind`; false (nothing written) when the
    /// bytes do not have the kind's length or a string is not valid UTF-8 — the caller then
    /// decodes the value, which reports the corrupt row.
    @inline(__always)
    static func write(_ kind: Kind, _ s: UnsafeRawBufferPointer, to out: inout JSONBuffer) -> Bool {
        switch kind {
        case .string:
            return out.appendString(utf8: s)
        case .boolean:
            guard s.count == 1, s[0] <= 1 else { return false }
            out.append(s[0] == 1 ? "true" : "false")
        case .integer(let width, let signed):
            guard s.count == width else { return false }
            let v: Int64
            switch (width, signed) {
            case (1, false): v = Int64(s[0])
            case (1, true): v = Int64(Int8(bitPattern: s[0]))
            case (2, _): v = Int64(Int16(littleEndian: s.loadUnaligned(as: Int16.self)))
            case (4, _): v = Int64(Int32(littleEndian: s.loadUnaligned(as: Int32.self)))
            default: v = Int64(littleEndian: s.loadUnaligned(as: Int64.self))
            }
            out.appendInt(v)
        case .decimal:
            guard s.count == 18 else { return false }
            let scale = Int16(littleEndian: s.loadUnaligned(as: Int16.self))
            let lo = UInt64(littleEndian: s.loadUnaligned(fromByteOffset: 2, as: UInt64.self))
            let hi = UInt64(littleEndian: s.loadUnaligned(fromByteOffset: 10, as: UInt64.self))
            out.appendDecimal(
                EDMDecimal(significand: Int128(bitPattern: UInt128(hi) << 64 | UInt128(lo)), scale: scale))
        case .date:
            guard s.count == 4 else { return false }
            out.append(0x22)
            out.appendDate(EDMDate(days: Int32(littleEndian: s.loadUnaligned(as: Int32.self))))
            out.append(0x22)
        case .dateTimeOffset:
            guard s.count == 10 else { return false }
            out.append(0x22)
            out.appendDateTimeOffset(
                EDMDateTimeOffset(
                    ticks: Int64(littleEndian: s.loadUnaligned(as: Int64.self)),
                    offsetMinutes: Int16(littleEndian: s.loadUnaligned(fromByteOffset: 8, as: Int16.self))))
            out.append(0x22)
        case .timeOfDay:
            guard s.count == 8 else { return false }
            out.append(0x22)
            out.appendTime(ticks: Int64(littleEndian: s.loadUnaligned(as: Int64.self)))
            out.append(0x22)
        case .guid:
            guard s.count == 16 else { return false }
            out.append(0x22)
            out.appendGuid(
                EDMGuid(
                    high: UInt64(bigEndian: s.loadUnaligned(as: UInt64.self)),
                    low: UInt64(bigEndian: s.loadUnaligned(fromByteOffset: 8, as: UInt64.self))))
            out.append(0x22)
        case .value:
            return false
        }
        return true
    }
}
