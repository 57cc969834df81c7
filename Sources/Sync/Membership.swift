package import LMDB
import Queue
package import Storage

/// Which entities each defining request holds, and the refresh state kept per request.
///
/// Layout (format 4's sync databases and `meta`):
///
/// | database | key | value |
/// |---|---|---|
/// | `membership` | name ‖ `0x00` ‖ set ‖ key | the refresh generation that last saw it (UInt64, big-endian); 0: *retained* |
/// | `membership/by-entity` | set ‖ key ‖ name | empty |
/// | `etags` | set ‖ key | the entity's `@odata.etag` from the service (UTF-8) |
/// | `meta` | `delta/<name>` | the request's `@odata.deltaLink` (relative to the service root when it was under it) |
/// | `meta` | `refresh/generation/<name>` | the generation of the request's newest full read (UInt64, big-endian) |
///
/// "set ‖ key" is `EntityStore.entityKey(set:keyBytes:)`: the set name as a key component,
/// then the key tuple — the same prefix as `q/by-entity`'s and `etags`'. Names are 1 to 128
/// characters of `A–Z a–z 0–9 _ - .`, so a name never holds `0x00`.
///
/// An entity is *held* by a request while its entry has a generation above 0. An entry with
/// generation 0 is *retained*: the service no longer returns the entity for that request, but the
/// entity has pending local changes, so it stays (with its entry, so a later refresh finds it
/// again) until the queue no longer needs it.
package struct Membership: Sendable {
    package let store: EntityStore
    /// The three sync databases, looked up once (a look-up by name hashes the name).
    let entryDB: Database
    let byEntityDB: Database
    let etagDB: Database

    package init(store: EntityStore) {
        self.store = store
        entryDB = store.membership
        byEntityDB = store.membershipByEntity
        etagDB = store.serverETags
    }

    static let deltaPrefix = "delta/"
    static let generationPrefix = "refresh/generation/"
    /// Requests whose service refused change tracking (the status it answered, as text).
    static let untrackedPrefix = "refresh/untracked/"
    /// The generation of a retained entry.
    package static let retained: UInt64 = 0
    /// The longest defining-request name.
    package static let maxNameLength = 128

    // MARK: Names and keys

    /// Refuses a name that is empty, longer than 128 characters or has a character other than
    /// letters, digits, `_`, `-` and `.`.
    package static func validate(name: String) throws(EntityError) {
        let ok =
            !name.isEmpty && name.utf8.count <= maxNameLength
            && name.utf8.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x5F
                    || b == 0x2D || b == 0x2E
            }
        guard ok else {
            throw .badInput(
                "a defining request's name must be 1 to \(maxNameLength) letters, digits, '_', '-' or '.', not '\(quoted(name))'"
            )
        }
    }

    static func quoted(_ s: String) -> String {
        var out = ""
        for scalar in s.unicodeScalars.prefix(40) {
            if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return s.unicodeScalars.count > 40 ? out + "…" : out
    }

    static func namePrefix(_ name: String) -> [UInt8] { Array(name.utf8) + [0] }

    static func memberKey(name: String, entity: [UInt8]) -> [UInt8] { namePrefix(name) + entity }

    static func byEntityKey(entity: [UInt8], name: String) -> [UInt8] { entity + Array(name.utf8) }

    static func generationBytes(_ g: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        withUnsafeBytes(of: g.bigEndian) { out.append(contentsOf: $0) }
        return out
    }

    static func generation(of bytes: some Collection<UInt8>) -> UInt64? {
        guard bytes.count == 8 else { return nil }
        return bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }

    // MARK: meta

    func metaKey(_ prefix: String, _ name: String) -> [UInt8] { Array((prefix + name).utf8) }

    /// The generation of the request's newest full read (0 before the first).
    package func generation(_ t: ReadView, name: String) throws -> UInt64 {
        try t.get(store.meta, metaKey(Self.generationPrefix, name)).flatMap { Self.generation(of: $0) } ?? 0
    }

    func setGeneration(_ t: WriteView, name: String, _ g: UInt64) throws {
        try t.put(store.meta, metaKey(Self.generationPrefix, name), Self.generationBytes(g))
    }

    /// The delta link kept for the request, if any.
    package func deltaLink(_ t: ReadView, name: String) throws -> String? {
        try t.get(store.meta, metaKey(Self.deltaPrefix, name)).map { String(decoding: $0, as: UTF8.self) }
    }

    package func setDeltaLink(_ t: WriteView, name: String, _ link: String?) throws {
        if let link {
            try t.put(store.meta, metaKey(Self.deltaPrefix, name), Array(link.utf8))
        } else {
            try t.delete(store.meta, metaKey(Self.deltaPrefix, name))
        }
    }

    /// The status the service answered when it refused change tracking for the request (400 or
    /// 501), remembered so that later refreshes read it in full without asking; nil: not refused.
    package func untracked(_ t: ReadView, name: String) throws -> Int? {
        try t.get(store.meta, metaKey(Self.untrackedPrefix, name)).flatMap { Int(String(decoding: $0, as: UTF8.self)) }
    }

    package func setUntracked(_ t: WriteView, name: String, status: Int?) throws {
        if let status {
            try t.put(store.meta, metaKey(Self.untrackedPrefix, name), Array(String(status).utf8))
        } else {
            try t.delete(store.meta, metaKey(Self.untrackedPrefix, name))
        }
    }

    /// Forgets the request's delta link and generation (undefine).
    package func forgetState(_ t: WriteView, name: String) throws {
        try t.delete(store.meta, metaKey(Self.untrackedPrefix, name))
        try t.delete(store.meta, metaKey(Self.deltaPrefix, name))
        try t.delete(store.meta, metaKey(Self.generationPrefix, name))
    }

    // MARK: Entries

    /// Records that request `name` holds the entity (with generation `g`). Returns false when it
    /// already did with `g` (the entity came earlier in the same read).
    @discardableResult
    func hold(_ t: WriteView, name: String, entity: [UInt8], generation g: UInt64) throws -> Bool {
        let key = Self.memberKey(name: name, entity: entity)
        let value = Self.generationBytes(g)
        // One search for an entity new to the request (most of a first read), two for one it had.
        if let old = try t.putIfAbsent(entryDB, key, value) {
            if Self.generation(of: old) == g { return false }
            try t.put(entryDB, key, value)
        }
        try t.put(byEntityDB, Self.byEntityKey(entity: entity, name: name), [])
        return true
    }

    /// The requests that have an entry for the entity, with their generations.
    package func holders(_ t: ReadView, entity: [UInt8]) throws -> [(name: String, generation: UInt64)] {
        var names: [String] = []
        try t.withCursor(byEntityDB) { c in
            var e = try c.seek(entity)
            while let (k, _) = e, k.starts(with: entity) {
                // Only this entity's entries: the rest of the key is a name (no 0x00 and no key tag).
                let rest = k[entity.count...]
                if !rest.isEmpty, !rest.contains(0) { names.append(String(decoding: rest, as: UTF8.self)) }
                e = try c.next()
            }
        }
        return try names.compactMap { n in
            guard let v = try t.get(entryDB, Self.memberKey(name: n, entity: entity)) else { return nil }
            return (n, Self.generation(of: v) ?? 0)
        }
    }

    /// Whether some request holds the entity (an entry with a generation above 0).
    package func isHeld(_ t: ReadView, entity: [UInt8]) throws -> Bool {
        try holders(t, entity: entity).contains { $0.generation != Self.retained }
    }

    /// What `release` did.
    enum Released: Equatable {
        /// The request had no entry for the entity: nothing changed.
        case notMember
        /// Its entry is gone; another request still holds the entity.
        case stillHeld
        /// No request holds it, but it has pending local changes: kept, entry retained (generation 0).
        case retained
        /// No request holds it any more: the entity is deleted from the store.
        case removed
        /// Its entry is gone and the entity is kept (undefine of an entity with pending changes).
        case orphaned
    }

    /// Request `name` no longer has the entity. When no request holds it afterwards it is deleted
    /// (with its ETag and any retained entries), unless it has pending local changes: then
    /// request `name` keeps a retained entry (or, with `retain` false — undefine — none).
    func release(
        _ t: WriteView, name: String, set: EntitySetHandle, keyBytes: [UInt8], retain: Bool = true
    ) throws -> Released {
        let entity = set.entityKey(keyBytes)
        let key = Self.memberKey(name: name, entity: entity)
        guard try t.get(entryDB, key) != nil else { return .notMember }
        let others = try holders(t.reader, entity: entity).filter { $0.name != name }
        if others.contains(where: { $0.generation != Self.retained }) {
            try drop(t, name: name, entity: entity)
            return .stillHeld
        }
        if try !RequestQueue(store: store).chain(t.reader, set: set.name, keyBytes: keyBytes).isEmpty {
            if retain {
                try t.put(entryDB, key, Self.generationBytes(Self.retained))
                return .retained
            }
            try drop(t, name: name, entity: entity)
            return .orphaned
        }
        try drop(t, name: name, entity: entity)
        for o in others { try drop(t, name: o.name, entity: entity) }
        let values = try keyBytes.withUnsafeBytes { try KeyCodec.decode($0, count: set.type.key.count).values }
        _ = try set.delete(t, key: values)
        try t.delete(etagDB, entity)
        return .removed
    }

    func drop(_ t: WriteView, name: String, entity: [UInt8]) throws {
        try t.delete(entryDB, Self.memberKey(name: name, entity: entity))
        try t.delete(byEntityDB, Self.byEntityKey(entity: entity, name: name))
    }

    /// For flush, when the service acknowledged the DELETE of an entity: every request's entry
    /// for it goes (the entity is gone here and there), and so does its ETag. Call it in the
    /// acknowledgment's transaction.
    package func entityDeleted(_ t: WriteView, set: String, keyBytes: [UInt8]) throws {
        let entity = EntityStore.entityKey(set: set, keyBytes: keyBytes)
        for h in try holders(t.reader, entity: entity) { try drop(t, name: h.name, entity: entity) }
        try t.delete(etagDB, entity)
    }

    /// Writes the entity's ETag from the service (`etags`: set ‖ key → UTF-8), or removes it.
    func putETag(_ t: WriteView, entity: [UInt8], _ etag: String?) throws {
        if let etag {
            try t.put(etagDB, entity, Array(etag.utf8))
        } else {
            try t.delete(etagDB, entity)
        }
    }

    /// Visits request `name`'s entries after entity `after` (exclusive; nil: from the first)
    /// until `body` returns false; `body` gets the entity (set ‖ key) and the generation.
    func entries(_ t: ReadView, name: String, after: [UInt8]?, _ body: ([UInt8], UInt64) throws -> Bool) throws {
        let prefix = Self.namePrefix(name)
        try t.withCursor(entryDB) { c in
            let start = prefix + (after ?? [])
            var e = try c.seek(start)
            if after != nil, let (k, _) = e, k.elementsEqual(start) { e = try c.next() }
            while let (k, v) = e, k.starts(with: prefix) {
                if try !body(Array(k[prefix.count...]), Self.generation(of: v) ?? 0) { return }
                e = try c.next()
            }
        }
    }

    /// Releases request `name`'s entries with a generation below `below` (all of them with
    /// `UInt64.max`), at most `chunk` per write transaction. The entries are looked at in read
    /// transactions (`chunk` × 50 at a time), so memory stays bounded however many the request
    /// has, and a sweep that finds nothing stale writes nothing. With `retain` false (undefine)
    /// an entity with pending local changes keeps no entry. Returns how many entities were
    /// deleted and how many retained.
    package func sweep(
        name: String, below: UInt64, retain: Bool = true, chunk: Int = 1_000
    ) async throws -> (removed: Int, retained: Int) {
        let store = self.store
        var after: [UInt8]? = nil
        var total = (removed: 0, retained: 0)
        while true {
            let scan = try store.read { t in try stale(t, name: name, below: below, chunk: chunk, after: after) }
            if !scan.stale.isEmpty {
                let stale = scan.stale
                let (removed, retained) = try await store.write { t in
                    try Membership(store: store).release(t, name: name, stale: stale, below: below, retain: retain)
                }
                total.removed += removed
                total.retained += retained
            }
            if scan.done { return total }
            after = scan.last
        }
    }

    /// `sweep` for callers on their own threads (undefine).
    package func sweepBlocking(
        name: String, below: UInt64, retain: Bool = true, chunk: Int = 1_000
    ) throws -> (removed: Int, retained: Int) {
        let store = self.store
        var after: [UInt8]? = nil
        var total = (removed: 0, retained: 0)
        while true {
            let scan = try store.read { t in try stale(t, name: name, below: below, chunk: chunk, after: after) }
            if !scan.stale.isEmpty {
                let stale = scan.stale
                let (removed, retained) = try store.write { t in
                    try Membership(store: store).release(t, name: name, stale: stale, below: below, retain: retain)
                }
                total.removed += removed
                total.retained += retained
            }
            if scan.done { return total }
            after = scan.last
        }
    }

    /// From the entry after `after`: up to `chunk` entities whose entry is below `below`, the
    /// last entity looked at, and whether the request's entries ended.
    func stale(
        _ t: ReadView, name: String, below: UInt64, chunk: Int, after: [UInt8]?
    ) throws -> (stale: [[UInt8]], last: [UInt8]?, done: Bool) {
        var stale: [[UInt8]] = []
        var last: [UInt8]? = nil
        var looked = 0
        var done = true
        try entries(t, name: name, after: after) { entity, g in
            last = entity
            looked += 1
            if g < below { stale.append(entity) }
            if stale.count >= chunk || looked >= chunk * 50 { done = false; return false }
            return true
        }
        return (stale, last, done)
    }

    /// Releases the entities of `stale` whose entry is still below `below`.
    func release(
        _ t: WriteView, name: String, stale: [[UInt8]], below: UInt64, retain: Bool
    ) throws -> (removed: Int, retained: Int) {
        var (removed, retained) = (0, 0)
        for entity in stale {
            guard let value = try t.get(entryDB, Self.memberKey(name: name, entity: entity)),
                (Self.generation(of: value) ?? 0) < below
            else { continue }
            let split = entity.withUnsafeBytes { store.splitEntityKey($0) }
            guard let (set, keyBytes, _) = split else { continue }
            switch try release(t, name: name, set: set, keyBytes: keyBytes, retain: retain) {
            case .removed: removed += 1
            case .retained: retained += 1
            case .notMember, .stillHeld, .orphaned: break
            }
        }
        return (removed, retained)
    }

    // MARK: Integrity

    /// The membership invariants, in read transaction `t`; each problem as a sentence.
    ///
    /// - every `membership` entry decodes (a defined request's name, `0x00`, a service set and a
    ///   whole key of it, an 8-byte generation) and has its `membership/by-entity` twin, and every
    ///   `membership/by-entity` entry has its `membership` twin (one to one);
    /// - the entity of an entry exists, or its last pending request deletes it;
    /// - `meta`'s `delta/<name>` and `refresh/generation/<name>` keys name defined requests.
    package func check(_ t: ReadView, defined: Set<String>, maxProblems: Int = 100) throws -> [String] {
        var problems: [String] = []
        func problem(_ s: String) { if problems.count < maxProblems { problems.append(s) } }
        let queue = RequestQueue(store: store)
        try t.withCursor(entryDB) { c in
            var e = try c.first()
            while let (k, v) = e {
                defer { e = try? c.next() }
                guard let zero = k.firstIndex(of: 0) else {
                    problem("membership: an entry has no name separator"); continue
                }
                let name = String(decoding: k[..<zero], as: UTF8.self)
                if !defined.contains(name) {
                    problem("membership: an entry names '\(Self.quoted(name))', which is not a defining request")
                }
                guard Self.generation(of: v) != nil else {
                    problem(
                        "membership: the entry of '\(Self.quoted(name))' has a value of \(v.count) bytes, not a generation"
                    ); continue
                }
                let rest = UnsafeRawBufferPointer(rebasing: k[(zero + 1)...])
                guard let (set, keyBytes, length) = store.splitEntityKey(rest), length == rest.count else {
                    problem("membership: an entry of '\(Self.quoted(name))' does not decode as an entity set and key");
                    continue
                }
                let entity = Array(rest)
                let what = "\(set.name)(\(set.describeKeyBytes(keyBytes)))"
                if try t.get(byEntityDB, Self.byEntityKey(entity: entity, name: name)) == nil {
                    problem("membership: \(what) of '\(Self.quoted(name))' has no membership/by-entity entry")
                }
                if try set.row(t, key: keyBytes) == nil {
                    let last = try queue.chain(t, set: set.name, keyBytes: keyBytes).last
                    if last?.method != .delete {
                        problem(
                            "membership: '\(Self.quoted(name))' holds \(what), which does not exist and has no pending delete"
                        )
                    }
                }
            }
        }
        try t.withCursor(byEntityDB) { c in
            var e = try c.first()
            while let (k, _) = e {
                defer { e = try? c.next() }
                guard let (_, _, length) = store.splitEntityKey(k), length < k.count else {
                    problem("membership/by-entity: an entry does not decode as an entity set, key and name"); continue
                }
                let name = String(decoding: k[length...], as: UTF8.self)
                if try t.get(entryDB, Self.memberKey(name: name, entity: Array(k[..<length]))) == nil {
                    problem("membership/by-entity: an entry of '\(Self.quoted(name))' has no membership entry")
                }
            }
        }
        for prefix in [Self.deltaPrefix, Self.generationPrefix, Self.untrackedPrefix] {
            let p = Array(prefix.utf8)
            try t.withCursor(store.meta) { c in
                var e = try c.seek(p)
                while let (k, v) = e, k.starts(with: p) {
                    let name = String(decoding: k[p.count...], as: UTF8.self)
                    if !defined.contains(name) {
                        problem("meta: '\(Self.quoted(String(decoding: k, as: UTF8.self)))' names no defining request")
                    }
                    if prefix == Self.generationPrefix, Self.generation(of: v) == nil {
                        problem("meta: '\(Self.quoted(String(decoding: k, as: UTF8.self)))' is not a generation")
                    }
                    if prefix == Self.untrackedPrefix,
                        Int(String(decoding: v, as: UTF8.self)).map({ (400..<600).contains($0) }) != true
                    {
                        problem("meta: '\(Self.quoted(String(decoding: k, as: UTF8.self)))' is not an HTTP status")
                    }
                    e = try c.next()
                }
            }
        }
        return problems
    }
}
