import LMDB
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The entity row format: a version byte, a null bitmap and an offset table, then the values.
///
/// ```
/// u8 version (1) · u16 n · ⌈n/8⌉ bytes null bitmap · (n+1) × u32 offsets · values
/// ```
/// Property `i`'s bytes are `values[offset[i]..<offset[i+1]]`, so one property is read without
/// decoding the rest — `$filter` reads the bytes in the memory map. Properties are in the order of
/// the entity (or complex) type's declaration; a row written before a property was added simply
/// has fewer entries and reads the rest as null.
package struct RowCodec: Sendable {
    package static let formatVersion: UInt8 = 1
    package let schema: Schema
    package let properties: [Property]
    /// Each property's primitive type, nil for complex, enum and collection types: `decode`
    /// switches on these, which (unlike `TypeRef`) copy and retain nothing.
    let primitives: [EDMPrimitive?]
    /// The property names, which every decoded row without nulls shares.
    let names: [String]

    package init(schema: Schema, properties: [Property]) {
        self.schema = schema
        self.properties = properties
        primitives = properties.map { if case .primitive(let p) = $0.type { p } else { nil } }
        names = properties.map(\.name)
    }

    package init(schema: Schema, entityType: EntityType) {
        self.init(schema: schema, properties: entityType.properties)
    }

    /// Encodes `values` (validated already) in property order; absent names are null.
    package func encode(_ values: Properties) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + 16 * properties.count)
        encode(values, into: &out)
        return out
    }

    func encode(_ values: Properties, into out: inout [UInt8]) {
        let n = properties.count
        let base = out.count
        out.append(Self.formatVersion)
        out.append(UInt8(n & 0xFF)); out.append(UInt8(n >> 8))
        let bitmapAt = out.count
        out.append(contentsOf: repeatElement(0, count: (n + 7) / 8))
        let offsetsAt = out.count
        out.append(contentsOf: repeatElement(0, count: 4 * (n + 1)))
        let dataAt = out.count
        var cursor = 0
        for (i, p) in properties.enumerated() {
            let off = UInt32(out.count - dataAt)
            _storeU32(off, &out, offsetsAt + 4 * i)
            let v = values.value(p.name, cursor: &cursor) ?? .null
            if v.isNull {
                out[bitmapAt + i / 8] |= 1 << (i % 8)
            } else {
                appendPayload(v, type: p.type, &out)
            }
        }
        _storeU32(UInt32(out.count - dataAt), &out, offsetsAt + 4 * n)
        _ = base
    }

    func appendPayload(_ v: Value, type: TypeRef, _ out: inout [UInt8]) {
        switch (v, type) {
        case (.string(let s), _), (.json(let s), _): out.append(contentsOf: s.utf8)
        case (.bool(let b), _): out.append(b ? 1 : 0)
        case (.int(let i), .primitive(let p)):
            switch p {
            case .byte, .sbyte: out.append(UInt8(truncatingIfNeeded: i))
            case .int16: _appendLE(UInt16(truncatingIfNeeded: i), &out)
            case .int32: _appendLE(UInt32(truncatingIfNeeded: i), &out)
            default: _appendLE(UInt64(bitPattern: i), &out)
            }
        case (.int(let i), _), (.enumMember(let i), _): _appendLE(UInt64(bitPattern: i), &out)
        case (.double(let d), .primitive(.single)): _appendLE(Float(d).bitPattern, &out)
        case (.double(let d), _): _appendLE(d.bitPattern, &out)
        case (.decimal(let d), _):
            _appendLE(UInt16(bitPattern: d.scale), &out)
            _appendLE(UInt64(truncatingIfNeeded: d.significand), &out)
            _appendLE(UInt64(truncatingIfNeeded: d.significand >> 64), &out)
        case (.date(let d), _): _appendLE(UInt32(bitPattern: d.days), &out)
        case (.dateTimeOffset(let d), _):
            _appendLE(UInt64(bitPattern: d.ticks), &out)
            _appendLE(UInt16(bitPattern: d.offsetMinutes), &out)
        case (.timeOfDay(let t), _): _appendLE(UInt64(bitPattern: t.ticks), &out)
        case (.duration(let t), _): _appendLE(UInt64(bitPattern: t.ticks), &out)
        case (.guid(let g), _): out.append(contentsOf: g.bytes)
        case (.binary(let b), _): out.append(contentsOf: b)
        case (.complex(let props), .complex(let name)):
            let ct = schema.complexTypes[name]!
            RowCodec(schema: schema, properties: ct.properties).encode(props, into: &out)
        case (.collection(let items), .collection(let element)):
            _appendLE(UInt32(items.count), &out)
            for item in items {
                if item.isNull { _appendLE(UInt32.max, &out); continue }
                let lenAt = out.count
                _appendLE(UInt32(0), &out)
                appendPayload(item, type: element, &out)
                _storeU32(UInt32(out.count - lenAt - 4), &out, lenAt)
            }
        default:
            preconditionFailure("RowCodec: value \(v) was not validated against \(type)")
        }
    }

    // MARK: - Decoding

    /// Decodes every property of a row. Throws `RowCodecError` for bytes that are not a valid row.
    package func decode(_ bytes: UnsafeRawBufferPointer) throws(RowCodecError) -> Properties {
        try decode(bytes, depth: 0)
    }

    /// Nested complex values and collections deeper than this are refused (corrupt bytes could
    /// otherwise nest until the stack overflows).
    static let maxDepth = 64

    func decode(_ bytes: UnsafeRawBufferPointer, depth: Int) throws(RowCodecError) -> Properties {
        guard depth < Self.maxDepth else { throw .tooDeep }
        let row = try RowView(bytes)
        let n = properties.count
        var values: [Value] = []
        values.reserveCapacity(n)
        // The names of the values, built only once a property turns out null; until then `names`.
        var present: [String]? = nil
        for i in 0..<n {
            guard let s = try row.slice(i) else {
                if present == nil { present = Array(names[..<i]); present!.reserveCapacity(n) }
                continue
            }
            if let p = primitives[i] {
                values.append(try RowView.decodePrimitive(s, p))
            } else {
                values.append(try RowView.decodePayload(s, type: properties[i].type, schema: schema, depth: depth))
            }
            present?.append(names[i])
        }
        return Properties(uniqueNames: present ?? names, values: values)
    }

    package func decode(_ bytes: [UInt8]) throws(RowCodecError) -> Properties {
        let r: Result<Properties, RowCodecError> = bytes.withUnsafeBytes { b in
            do throws(RowCodecError) { return .success(try decode(b)) } catch { return .failure(error) }
        }
        return try r.get()
    }
}

/// A row in place (usually in the memory map): reads one property at a time, checking bounds.
/// Two words (the bytes' start, their length and the property count), so that it and what holds
/// it (a query's `ResultRow`) pass in registers; the header's positions are computed from the count.
package struct RowView {
    @usableFromInline let base: UnsafeRawPointer
    @usableFromInline let length: UInt32
    @usableFromInline let n: UInt16

    /// Checks the header; throws when the bytes cannot be a row. Inlinable, as `slice`: a scan
    /// calls both for every row from another module.
    @inlinable
    package init(_ bytes: UnsafeRawBufferPointer) throws(RowCodecError) {
        guard bytes.count >= 3, let base = bytes.baseAddress else { throw .truncated }
        guard bytes[0] == RowCodec.formatVersion else { throw .unsupportedVersion(bytes[0]) }
        guard bytes.count <= UInt32.max else { throw .badOffsets }
        let n = Int(bytes[1]) | Int(bytes[2]) << 8
        self.base = base
        self.length = UInt32(bytes.count)
        self.n = UInt16(n)
        let dataAt = Self.dataAt(n)
        guard dataAt <= bytes.count else { throw .truncated }
        guard Int(_loadU32(bytes, dataAt - 4)) == bytes.count - dataAt else { throw .badOffsets }
    }

    /// The row's bytes.
    @inlinable
    package var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: Int(length)) }
    /// How many properties the row has.
    @inlinable
    package var count: Int { Int(n) }

    /// Where the offset table and the values start, for a row of `n` properties (the null bitmap
    /// starts at 3).
    @inlinable @inline(__always)
    static func offsetsAt(_ n: Int) -> Int { 3 + (n + 7) >> 3 }
    @inlinable @inline(__always)
    static func dataAt(_ n: Int) -> Int { offsetsAt(n) + 4 * (n + 1) }

    /// The payload of property `i`, or nil when it is null or beyond the row's properties.
    @inlinable @inline(__always)
    package func slice(_ i: Int) throws(RowCodecError) -> UnsafeRawBufferPointer? {
        let n = Int(self.n)
        guard i < n else { return nil }
        if base.load(fromByteOffset: 3 + i >> 3, as: UInt8.self) & (1 << (i & 7)) != 0 { return nil }
        let offsetsAt = Self.offsetsAt(n)
        let dataAt = offsetsAt + 4 * (n + 1)
        let start = Int(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: offsetsAt + 4 * i, as: UInt32.self)))
        let end = Int(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: offsetsAt + 4 * i + 4, as: UInt32.self)))
        guard start <= end, dataAt + end <= Int(length) else { throw .badOffsets }
        return UnsafeRawBufferPointer(start: base + (dataAt + start), count: end - start)
    }

    /// Decodes property `i` as `type`.
    package func value(at i: Int, type: TypeRef, schema: Schema, depth: Int = 0) throws(RowCodecError) -> Value {
        guard let s = try slice(i) else { return .null }
        return try RowView.decodePayload(s, type: type, schema: schema, depth: depth)
    }

    static func decodePayload(
        _ s: UnsafeRawBufferPointer, type: TypeRef, schema: Schema, depth: Int
    ) throws(RowCodecError) -> Value {
        func need(_ n: Int) throws(RowCodecError) { guard s.count == n else { throw .badLength(type.description) } }
        switch type {
        case .primitive(let p): return try decodePrimitive(s, p)
        case .enumeration:
            try need(8)
            return .enumMember(Int64(bitPattern: _loadLE(s, 0, 8)))
        case .complex(let name):
            guard let ct = schema.complexTypes[name] else { throw .unknownType(name) }
            return .complex(try RowCodec(schema: schema, properties: ct.properties).decode(s, depth: depth + 1))
        case .collection(let element):
            guard depth < RowCodec.maxDepth else { throw .tooDeep }
            guard s.count >= 4 else { throw .truncated }
            let n = Int(_loadU32(s, 0))
            guard n <= s.count else { throw .badLength(type.description) }
            var items: [Value] = []
            items.reserveCapacity(n)
            var at = 4
            for _ in 0..<n {
                guard at + 4 <= s.count else { throw .truncated }
                let len = _loadU32(s, at)
                at += 4
                if len == UInt32.max { items.append(.null); continue }
                guard at + Int(len) <= s.count else { throw .truncated }
                let part = UnsafeRawBufferPointer(rebasing: s[at..<(at + Int(len))])
                items.append(try decodePayload(part, type: element, schema: schema, depth: depth + 1))
                at += Int(len)
            }
            guard at == s.count else { throw .badLength(type.description) }
            return .collection(items)
        }
    }
    /// Decodes a primitive value's bytes.
    @inline(__always)
    package static func decodePrimitive(_ s: UnsafeRawBufferPointer, _ p: EDMPrimitive) throws(RowCodecError) -> Value {
        func need(_ n: Int) throws(RowCodecError) {
            guard s.count == n else { throw .badLength(TypeRef.primitive(p).description) }
        }
        switch p {
        case .string: return .string(try _decodeUTF8(s))
        case .json: return .json(try _decodeUTF8(s))
        case .boolean:
            try need(1)
            guard s[0] <= 1 else { throw .badLength(TypeRef.primitive(p).description) }
            return .bool(s[0] == 1)
        case .byte: try need(1); return .int(Int64(s[0]))
        case .sbyte: try need(1); return .int(Int64(Int8(bitPattern: s[0])))
        case .int16: try need(2); return .int(Int64(Int16(bitPattern: UInt16(_loadLE(s, 0, 2)))))
        case .int32: try need(4); return .int(Int64(Int32(bitPattern: UInt32(_loadLE(s, 0, 4)))))
        case .int64: try need(8); return .int(Int64(bitPattern: _loadLE(s, 0, 8)))
        case .single: try need(4); return .double(Double(Float(bitPattern: UInt32(_loadLE(s, 0, 4)))))
        case .double: try need(8); return .double(Double(bitPattern: _loadLE(s, 0, 8)))
        case .decimal:
            try need(18)
            let scale = Int16(bitPattern: UInt16(_loadLE(s, 0, 2)))
            let lo = _loadLE(s, 2, 8), hi = _loadLE(s, 10, 8)
            let sig = Int128(bitPattern: UInt128(hi) << 64 | UInt128(lo))
            return .decimal(EDMDecimal(significand: sig, scale: scale))
        case .date: try need(4); return .date(EDMDate(days: Int32(bitPattern: UInt32(_loadLE(s, 0, 4)))))
        case .dateTimeOffset, .dateTime:
            try need(10)
            return .dateTimeOffset(
                EDMDateTimeOffset(
                    ticks: Int64(bitPattern: _loadLE(s, 0, 8)),
                    offsetMinutes: Int16(bitPattern: UInt16(_loadLE(s, 8, 2)))))
        case .timeOfDay, .time: try need(8); return .timeOfDay(EDMTimeOfDay(ticks: Int64(bitPattern: _loadLE(s, 0, 8))))
        case .duration: try need(8); return .duration(EDMDuration(ticks: Int64(bitPattern: _loadLE(s, 0, 8))))
        case .guid:
            try need(16)
            return .guid(
                EDMGuid(
                    high: UInt64(bigEndian: s.loadUnaligned(as: UInt64.self)),
                    low: UInt64(bigEndian: s.loadUnaligned(fromByteOffset: 8, as: UInt64.self))))
        case .binary: return .binary(Array(s))
        }
    }
}

/// Why bytes could not be read as a row.
package enum RowCodecError: Error, Sendable, Hashable, CustomStringConvertible {
    case truncated
    case unsupportedVersion(UInt8)
    case badOffsets
    case badLength(String)
    case invalidUTF8
    case unknownType(String)
    case tooDeep

    package var description: String {
        switch self {
        case .truncated: "row bytes end too early"
        case .unsupportedVersion(let v): "row format version \(v) is not supported"
        case .badOffsets: "row offset table is inconsistent"
        case .badLength(let t): "row value has the wrong length for \(t)"
        case .invalidUTF8: "row string is not valid UTF-8"
        case .unknownType(let t): "row refers to unknown type \(t)"
        case .tooDeep: "row nests complex values or collections more than \(RowCodec.maxDepth) deep"
        }
    }
}

/// Decodes UTF-8, refusing invalid bytes. ASCII (the common case) skips the validating decoder,
/// which is several times slower.
@inline(__always)
func _decodeUTF8(_ s: UnsafeRawBufferPointer) throws(RowCodecError) -> String {
    var ascii = true
    var i = 0
    let n = s.count
    while i + 8 <= n {
        if s.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { ascii = false; break }
        i += 8
    }
    if ascii {
        while i < n { if s[i] >= 0x80 { ascii = false; break }; i += 1 }
    }
    var str = String(decoding: s, as: UTF8.self)
    if ascii { return str }
    // Decoding replaced any invalid sequence with U+FFFD, so the string is valid UTF-8 if and only
    // if its bytes are the input's. (`String(validating:)` is generic over the encoding and looks
    // its metadata up at run time: slower for the same answer.)
    let same = str.withUTF8 { u in u.count == s.count && memcmp(u.baseAddress!, s.baseAddress!, s.count) == 0 }
    guard same else { throw .invalidUTF8 }
    return str
}

@inline(__always)
func _appendLE<T: FixedWidthInteger>(_ v: T, _ out: inout [UInt8]) {
    withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) }
}

@inline(__always)
func _storeU32(_ v: UInt32, _ out: inout [UInt8], _ at: Int) {
    out[at] = UInt8(v & 0xFF); out[at + 1] = UInt8(v >> 8 & 0xFF)
    out[at + 2] = UInt8(v >> 16 & 0xFF); out[at + 3] = UInt8(v >> 24)
}

@inlinable @inline(__always)
func _loadU32(_ b: UnsafeRawBufferPointer, _ at: Int) -> UInt32 {
    UInt32(b[at]) | UInt32(b[at + 1]) << 8 | UInt32(b[at + 2]) << 16 | UInt32(b[at + 3]) << 24
}

/// The `n`-byte little-endian integer at `at` (the caller has checked the bounds).
@inline(__always)
func _loadLE(_ b: UnsafeRawBufferPointer, _ at: Int, _ n: Int) -> UInt64 {
    switch n {
    case 8: return UInt64(littleEndian: b.loadUnaligned(fromByteOffset: at, as: UInt64.self))
    case 4: return UInt64(UInt32(littleEndian: b.loadUnaligned(fromByteOffset: at, as: UInt32.self)))
    case 2: return UInt64(UInt16(littleEndian: b.loadUnaligned(fromByteOffset: at, as: UInt16.self)))
    default:
        var v: UInt64 = 0
        for k in (0..<n).reversed() { v = v << 8 | UInt64(b[at + k]) }
        return v
    }
}
