package import LMDB
import Queue
package import Storage

/// The ETag the service last gave for each entity (database `etags`: the set name as a key
/// component ‖ the entity's key tuple → the ETag, UTF-8, exactly as the service sent it). Flush
/// sends it as `If-Match` when it changes or deletes the entity and records the new one from the
/// service's answer; refresh records the ones it downloads.
///
/// ```swift
/// let etags = ServerETags(store: store)
/// try store.write { t in try etags.put(t, set: "Products", keyBytes: key, etag: #"W/"1a2b""#) }
/// let tag = try store.read { t in try etags.get(t, set: "Products", keyBytes: key) }
/// ```
package struct ServerETags: Sendable {
    package let store: EntityStore

    package init(store: EntityStore) { self.store = store }

    /// The database key of an entity: the same prefix `q/by-entity` uses.
    package static func key(set: String, keyBytes: some Collection<UInt8>) -> [UInt8] {
        EntityStore.entityKey(set: set, keyBytes: keyBytes)
    }

    /// The ETag recorded for the entity, or nil.
    package func get(_ t: ReadView, set: String, keyBytes: [UInt8]) throws -> String? {
        guard let bytes = try t.get(store.serverETags, Self.key(set: set, keyBytes: keyBytes)) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Records the entity's ETag (an empty one is not an ETag: it removes the record).
    package func put(_ t: WriteView, set: String, keyBytes: [UInt8], etag: String) throws {
        guard !etag.isEmpty else { return try delete(t, set: set, keyBytes: keyBytes) }
        try t.put(store.serverETags, Self.key(set: set, keyBytes: keyBytes), Array(etag.utf8))
    }

    /// Forgets the entity's ETag (none recorded: nothing happens).
    package func delete(_ t: WriteView, set: String, keyBytes: [UInt8]) throws {
        _ = try t.delete(store.serverETags, Self.key(set: set, keyBytes: keyBytes))
    }

    /// The invariants of `etags`, each problem as a sentence: every key is a service entity set's
    /// name followed by exactly one key tuple of that set, and every value something an
    /// `If-Match` header can carry: non-empty UTF-8 without control characters.
    package func check(_ t: ReadView, maxProblems: Int = 100) throws -> [String] {
        var problems: [String] = []
        func problem(_ s: String) { if problems.count < maxProblems { problems.append(s) } }
        try t.withCursor(store.serverETags) { c in
            var e = try c.first()
            var n = 0
            while let (k, v) = e {
                n += 1
                let described = Self.describe(k, store: store)
                switch Self.decodeKey(k, store: store) {
                case .failure(let why): problem("etags: entry \(n) (\(described)): \(why)")
                case .success: break
                }
                if !Self.isHeaderValue(v) {
                    problem(
                        "etags: the ETag of \(described) cannot be sent as an If-Match header: '\(String(decoding: v.prefix(80), as: UTF8.self))'"
                    )
                }
                e = try c.next()
            }
        }
        return problems
    }

    static func isHeaderValue(_ v: UnsafeRawBufferPointer) -> Bool {
        !v.isEmpty && !v.contains(where: { $0 < 0x20 || $0 == 0x7F }) && String(validating: v, as: UTF8.self) != nil
    }

    struct BadKey: Error, CustomStringConvertible { var description: String }

    /// The set and key tuple of an `etags` key, or why it is not one.
    static func decodeKey(
        _ k: UnsafeRawBufferPointer, store: EntityStore
    ) -> Result<(set: String, keyBytes: [UInt8]), BadKey> {
        guard let (values, length) = try? KeyCodec.decode(k, count: 1), case .string(let name) = values[0] else {
            return .failure(BadKey(description: "the key does not start with an entity set's name"))
        }
        guard let set = try? store.set(name), !store.schema.isSystemSet(name) else {
            return .failure(BadKey(description: "'\(name)' is not one of the service's entity sets"))
        }
        let rest = UnsafeRawBufferPointer(rebasing: k[length...])
        guard let decoded = try? KeyCodec.decode(rest, count: set.type.key.count), decoded.length == rest.count else {
            return .failure(BadKey(description: "what follows '\(name)' is not one key of that set"))
        }
        return .success((name, Array(rest)))
    }

    static func describe(_ k: UnsafeRawBufferPointer, store: EntityStore) -> String {
        if case .success(let (name, keyBytes)) = decodeKey(k, store: store), let set = try? store.set(name) {
            return "\(name)(\(set.describeKeyBytes(keyBytes)))"
        }
        return k.prefix(32).map { String($0, radix: 16) }.joined(separator: " ")
    }
}
