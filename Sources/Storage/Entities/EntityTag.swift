import LMDB
/// The ETag of an entity: a weak validator derived from the bytes of its stored row.
///
/// A row's bytes are its whole state (every property, in the row codec), so two rows with the same
/// bytes are the same representation, and any write that changes a property changes the bytes.
/// Deriving the tag needs no version column, no extra write per change, and gives every entity a
/// tag however it got into the store (`load`, a local change, a served write, a refresh).
/// It is weak (`W/"…"`): it stands for the representation's content, which is what `If-Match`
/// protects. The hash is 64-bit FNV-1a, stable across processes and machines.
///
/// ```swift
/// let tag = EntityTag.of(row: bytes)   // W/"8c1f0a2b3d4e5f60"
/// ```
package enum EntityTag {
    /// The tag of a row, `W/"` + 16 lowercase hex digits + `"`.
    package static func of(row: UnsafeRawBufferPointer) -> String {
        format(hash(row))
    }

    package static func of(row: [UInt8]) -> String {
        row.withUnsafeBytes { of(row: $0) }
    }

    /// FNV-1a, 64 bits.
    package static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01b3 }
        return h
    }

    package static func format(_ hash: UInt64) -> String {
        let hex = String(hash, radix: 16)
        return "W/\"" + String(repeating: "0", count: 16 - hex.count) + hex + "\""
    }

    /// Whether an `If-Match` / `If-None-Match` header value matches `tag`: `*` matches any
    /// existing entity; otherwise a comma-separated list of tags, compared weakly (a `W/` prefix on
    /// either side is ignored, as RFC 9110's weak comparison does).
    package static func header(_ value: String, matches tag: String) -> Bool {
        let opaque = { (s: Substring) -> Substring in
            let t = s.trimmingWhitespace()
            return t.hasPrefix("W/") ? t.dropFirst(2) : t
        }
        let mine = opaque(Substring(tag))
        for part in value.split(separator: ",") {
            let p = part.trimmingWhitespace()
            if p == "*" || opaque(p) == mine { return true }
        }
        return false
    }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return s
    }
}
