import LMDB
package import Query
import Queue
package import Storage

/// Defining requests: named read URLs whose results the store keeps.
package enum DefiningRequests {
    /// Binds `url` against `schema` and checks that it is a defining request: a read of a whole
    /// entity set (no key, navigation, singleton or `/$count`) that is not one of the store's own
    /// sets, with `$filter`, `$select`, `$expand` (any options inside it) and custom options only —
    /// `$orderby`, `$top`, `$skip`, `$count`, `$search`, `$skiptoken` and `$format` are refused,
    /// since a refresh reads the whole collection.
    package static func bind(_ url: String, schema: Schema) throws -> BoundQuery {
        let query = try Binder(schema: schema).bind(url)
        guard query.path.segments.count == 1, let segment = query.path.segments.first, segment.key == nil,
            !segment.isSingle,
            !query.path.isCount
        else {
            throw EntityError.badInput(
                "a defining request reads an entity set ('Set?$filter=…'), not a key, navigation, singleton or /$count: '\(Membership.quoted(url))'"
            )
        }
        guard !schema.isSystemSet(segment.entitySet) else {
            throw EntityError.badInput(
                "'\(segment.entitySet)' is one of the store's own sets; a defining request reads the service's")
        }
        let o = query.options
        for (name, present) in [
            ("$orderby", !o.orderBy.isEmpty), ("$top", o.top != nil), ("$skip", o.skip != nil), ("$count", o.count),
            ("$search", o.search != nil), ("$skiptoken", query.skipToken != nil), ("$format", query.format != nil),
        ] where present {
            throw EntityError.badInput(
                "\(name) is not allowed in a defining request: refresh reads the whole collection (use $filter, $select and $expand)"
            )
        }
        return query
    }

    /// `url` made fit for an HTTP request line: spaces, quotes that need it, control and non-ASCII
    /// characters percent-encoded; `%XX` escapes already there are kept.
    package static func encode(_ url: String) -> String {
        let bytes = Array(url.utf8)
        var out = ""
        var i = 0
        func hex(_ b: UInt8) -> Bool {
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66)
        }
        while i < bytes.count {
            let b = bytes[i]
            let keep: Bool
            switch b {
            case 0x25: keep = i + 2 < bytes.count && hex(bytes[i + 1]) && hex(bytes[i + 2])
            case 0x21, 0x24...0x2F, 0x30...0x3B, 0x3D, 0x3F...0x5A, 0x5F, 0x61...0x7A, 0x7E: keep = true
            default: keep = false
            }
            if keep {
                out.unicodeScalars.append(Unicode.Scalar(b))
            } else {
                out += "%" + (b < 16 ? "0" : "") + String(b, radix: 16, uppercase: true)
            }
            i += 1
        }
        return out
    }
}
