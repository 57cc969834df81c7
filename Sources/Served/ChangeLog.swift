package import LMDB
package import Storage
/// The served role's change log: what changed since a delta token, for `@odata.deltaLink`.
///
/// Layout, written in the same transaction as the entity change:
/// - `changes`: change sequence number (UInt64 big-endian, from 1, strictly increasing) → kind
///   (1 byte: upsert or delete) ‖ set name (a key-codec string) ‖ the entity's key tuple;
/// - `changes/by-entity`: set name ‖ key tuple → the entity's sequence number (8 bytes).
///
/// The log is compacted as it is written: each change deletes the entity's previous entry, so it
/// holds one entry per entity ever changed (its newest) and an entity changed after a token is
/// exactly one whose entry is above it. The next number is the last entry's + 1, read before the
/// entity's previous entry is deleted; since an entry is only ever deleted by a change that adds a
/// higher one in the same transaction, the last number never goes down and none is reused (no
/// counter is written).
///
/// ```swift
/// let log = ChangeLog(store: store)
/// try store.write { t in try log.record(t, set: "Products", keyBytes: key, kind: .upsert) }
/// let (changed, token) = try store.read { t in try log.changes(t, set: "Products", since: 0) }
/// ```
package struct ChangeLog: Sendable {
    package enum Kind: UInt8, Sendable {
        case upsert = 1
        case delete = 2
    }

    /// One entry, decoded.
    package struct Entry: Sendable, Hashable {
        package var sequence: UInt64
        package var kind: Kind
        package var set: String
        package var keyBytes: [UInt8]
    }

    package let store: EntityStore

    package init(store: EntityStore) { self.store = store }

    static func sequenceKey(_ n: UInt64) -> [UInt8] {
        withUnsafeBytes(of: n.bigEndian) { Array($0) }
    }

    static func sequence(_ bytes: some Collection<UInt8>) -> UInt64? {
        guard bytes.count == 8 else { return nil }
        return bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The `changes/by-entity` key of an entity (the `q/by-entity` prefix: set name, then key
    /// tuple). Throws when it is longer than an LMDB key may be.
    package static func entityKey(set: String, keyBytes: some Collection<UInt8>) throws(EntityError) -> [UInt8] {
        let key = EntityStore.entityKey(set: set, keyBytes: keyBytes)
        guard key.count <= KeyCodec.maxKeySize else {
            throw .badInput(
                "the key of this \(set) entity is too long for the change log: the set name and key encode to \(key.count) bytes; the limit is \(KeyCodec.maxKeySize)"
            )
        }
        return key
    }

    /// Splits a `changes/by-entity` key (or an entry value after its kind byte) into set name and
    /// key tuple; nil when it does not decode.
    static func split(_ bytes: UnsafeRawBufferPointer) -> (set: String, keyBytes: [UInt8])? {
        guard let (values, n) = try? KeyCodec.decode(bytes, count: 1), case .string(let set)? = values.first else {
            return nil
        }
        return (set, Array(bytes[n...]))
    }

    // MARK: Writing

    /// Records that the entity `keyBytes` of `set` changed: a new entry at the next sequence
    /// number, and the entity's previous entry (if any) deleted. Returns the new number.
    @discardableResult
    package func record(_ t: WriteView, set: String, keyBytes: [UInt8], kind: Kind) throws -> UInt64 {
        let entity = try Self.entityKey(set: set, keyBytes: keyBytes)
        // The next number first: the entity's previous entry may be the last one.
        let next = try last(t.reader) + 1
        if let old = try t.get(store.changesByEntity, entity) {
            guard let previous = Self.sequence(old) else {
                throw EntityError.badInput(
                    "changes/by-entity: the entry of \(set) \(keyBytes) does not decode (run offline-store check)")
            }
            try t.delete(store.changes, Self.sequenceKey(previous))
        }
        try t.put(store.changes, Self.sequenceKey(next), [kind.rawValue] + entity)
        try t.put(store.changesByEntity, entity, Self.sequenceKey(next))
        return next
    }

    // MARK: Reading

    /// The newest sequence number (0 when the log is empty): the token that means "now".
    package func last(_ t: ReadView) throws -> UInt64 {
        try t.withCursor(store.changes) { c in
            guard let (k, _) = try c.last() else { return 0 }
            guard let n = Self.sequence(k) else {
                throw EntityError.badInput(
                    "changes: the last entry's key is not a sequence number (run offline-store check)")
            }
            return n
        }
    }

    /// The entries above `token`, oldest first, and the newest number (the next token). Only
    /// entries of `set` when it is given.
    ///
    /// - Throws: `ChangeTokenError` when `token` is above the newest number (a token this store
    ///   never handed out), `EntityError` for an entry that does not decode.
    package func entries(_ t: ReadView, set: String?, since token: UInt64) throws -> (entries: [Entry], token: UInt64) {
        let newest = try last(t)
        guard token <= newest else { throw ChangeTokenError(token: token, newest: newest) }
        var out: [Entry] = []
        let prefix = set.map { EntityStore.entityKey(set: $0, keyBytes: []) }
        try t.withCursor(store.changes) { c in
            guard token < UInt64.max else { return }
            var e = try c.seek(Self.sequenceKey(token + 1))
            while let (k, v) = e {
                if prefix.map({ v.count > $0.count && v[1...].starts(with: $0) }) ?? true {
                    guard let entry = Self.entry(key: k, value: v) else {
                        throw EntityError.badInput("changes: an entry does not decode (run offline-store check)")
                    }
                    out.append(entry)
                }
                e = try c.next()
            }
        }
        return (out, newest)
    }

    /// One page of the entries in (`start`, `bound`], oldest first: at most `limit` entries of
    /// `sets` (every set when nil; other sets' entries are passed over and not counted), and
    /// whether entries of `sets` in that range are left after them (`more`). A delta response
    /// read in pages reads its pages with one `bound`, the log's newest number when its first page
    /// was read, each page after the last sequence number of the page before (`start`).
    ///
    /// - Throws: `ChangeTokenError` when `bound` is above the newest number (a number this store
    ///   never handed out), `EntityError` for an entry that does not decode.
    package func entries(
        _ t: ReadView, sets: Set<String>?, after start: UInt64, through bound: UInt64, limit: Int?
    ) throws -> (entries: [Entry], more: Bool) {
        let newest = try last(t)
        guard bound <= newest else { throw ChangeTokenError(token: bound, newest: newest) }
        var out: [Entry] = []
        var more = false
        try t.withCursor(store.changes) { c in
            guard start < bound else { return }
            var e = try c.seek(Self.sequenceKey(start + 1))
            while let (k, v) = e {
                guard let entry = Self.entry(key: k, value: v) else {
                    throw EntityError.badInput("changes: an entry does not decode (run offline-store check)")
                }
                if entry.sequence > bound { break }
                if sets?.contains(entry.set) ?? true {
                    if let limit, out.count >= limit {
                        more = true
                        break
                    }
                    out.append(entry)
                }
                e = try c.next()
            }
        }
        return (out, more)
    }

    /// An entry from its key and value, or nil when they do not decode.
    static func entry(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Entry? {
        guard let n = sequence(key), n > 0, let first = value.first, let kind = Kind(rawValue: first),
            let (set, keyBytes) = split(UnsafeRawBufferPointer(rebasing: value[1...]))
        else { return nil }
        return Entry(sequence: n, kind: kind, set: set, keyBytes: keyBytes)
    }
}

/// A delta token above the change log's newest entry: not one this store handed out (another
/// store's, or the store was restored from an older copy). The client must start again with a
/// full read.
package struct ChangeTokenError: Error, Sendable, Hashable, CustomStringConvertible {
    package var token: UInt64
    package var newest: UInt64

    package init(token: UInt64, newest: UInt64) {
        self.token = token
        self.newest = newest
    }

    package var description: String {
        "delta token \(token) is ahead of this store's change log (its newest change is \(newest)); it is not from this store or the store was restored from an older copy: read the data again without a token"
    }
}
