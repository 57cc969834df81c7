import LMDB
/// What the request queue says of one entity: answers SAP's local-state functions in `$filter`
/// (`offline.isLocal()`, `offline.hasPendingChanges()`, `offline.inErrorState()`).
package struct LocalState: Sendable, Hashable {
    /// Created locally and not yet acknowledged by the service.
    package var isLocal = false
    /// Has requests in the queue.
    package var hasPendingChanges = false
    /// One of its requests was refused by the service (it is in ErrorArchive).
    package var inErrorState = false
}

extension EntityStore {
    /// The `q/by-entity` key prefix of an entity: its set name as a key component, then its key tuple.
    package static func byEntityPrefix(set: String, keyBytes: some Collection<UInt8>) -> [UInt8] {
        var out = (try? KeyCodec.encode([.string(set)])) ?? []
        out.append(contentsOf: keyBytes)
        return out
    }

    /// Codes in a `q/by-entity` value (`[method, status, flags]`), as the request queue writes them.
    package enum ByEntityCode {
        package static let create: UInt8 = 1
        package static let error: UInt8 = 2
    }

    /// The entity's local state, from its `q/by-entity` entries alone (no record is read).
    package func localState(_ t: ReadView, set: String, keyBytes: some Collection<UInt8>) throws -> LocalState {
        let prefix = Self.byEntityPrefix(set: set, keyBytes: keyBytes)
        var state = LocalState()
        try t.withCursor(byEntity) { c in
            var e = try c.seek(prefix)
            var first = true
            while let (k, v) = e, k.count == prefix.count + 8, k.starts(with: prefix), v.count >= 2 {
                state.hasPendingChanges = true
                if first && v[0] == ByEntityCode.create { state.isLocal = true }
                if v[1] == ByEntityCode.error { state.inErrorState = true }
                first = false
                e = try c.next()
            }
        }
        return state
    }
}
