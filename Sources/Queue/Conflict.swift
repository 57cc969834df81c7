package import LMDB
package import Storage

extension RequestQueue {
    /// Records a conflict on the ErrorArchive entry of request `id` (archived just now, refused
    /// for a stale ETag): the three versions — the service's image the change was made on
    /// (`base/`), the entity as changed here, and `server`, the service's entity when the refusal
    /// came (nil: gone there) — and the properties where this store's and the service's differ.
    /// The service's entity becomes the entity's server image (`base/`): giving the change up
    /// (`resolveError`) then adopts it, and the change sent again (`retryError`, or a further
    /// change that revives it) goes against it — with its ETag, which the caller records.
    @discardableResult
    package func recordConflict(
        _ t: WriteView, id: Int64, server: Properties?, serverETag: String?
    ) throws -> ConflictVersions? {
        guard var row = try errorArchive.get(t.reader, key: [.int(id)]), let r = try record(t.reader, id: id) else {
            return nil
        }
        let set = try store.set(r.entitySet)
        let baseDB = store.base(ofSet: set.name)
        let base = try t.get(baseDB, r.keyBytes).map { try set.codec.decode($0) }
        let key = try r.keyBytes.withUnsafeBytes { try KeyCodec.decode($0, count: set.type.key.count).values }
        let local = try set.get(t.reader, key: key)
        row["BaseEntity"] = base.map { .string(json(set, $0)) } ?? .null
        row["LocalEntity"] = local.map { .string(json(set, $0)) } ?? .null
        row["ServerEntity"] = server.map { .string(json(set, $0)) } ?? .null
        row["ServerETag"] = serverETag.map { .string($0) } ?? .null
        var differences: [String] = []
        for p in set.type.properties where !set.type.key.contains(p.name) {
            let mine = local?[p.name] ?? .null, theirs = server?[p.name] ?? .null
            if mine != theirs && !(mine.isNull && theirs.isNull) { differences.append(p.name) }
        }
        row["Differences"] = .string(differences.joined(separator: ","))
        try errorArchive.upsert(t, row)
        // The service's entity is the one the change now goes against (a base exists: the
        // entity's first request is a change of a server entity, not a create).
        if let server, base != nil { try t.put(baseDB, r.keyBytes, set.codec.encode(server)) }
        return ConflictVersions(
            requestID: id, set: set.name, key: key, keyText: r.entityKey, serverETag: serverETag, base: base,
            local: local, server: server, differences: differences)
    }

    /// How a conflict recorded on request `r` (`recordConflict`) is settled without a person: by
    /// the program's resolver for the set if it registered one, else by `policy` (the set's
    /// `conflictPolicies`). `what` names where the conflict was met, for the outcome's message.
    package enum ConflictSettlement: Sendable { case gaveUp, resent, waiting }

    package func settleConflict(
        _ t: WriteView, _ r: RequestRecord, _ versions: ConflictVersions, status: Int?, what: String,
        policy: ConflictPolicy
    ) throws -> ConflictSettlement {
        let resolver = store.conflictResolvers.decide(versions)
        let by = resolver == nil ? "the set's policy" : "the program's resolver"
        let resolution: ConflictResolution =
            resolver
            ?? {
                switch policy {
                case .manual: .manual
                case .serverWins: .takeTheirs
                case .clientWins: .keepMine
                }
            }()
        // Sending again needs the service's version, and stops after a few conflicts in a row.
        let mayResend = versions.server != nil && r.attempts < ConflictPolicy.maxClientWinsAttempts
        switch resolution {
        case .takeTheirs:
            try resolveError(t, id: r.id)
            try recordOutcome(
                t, r, .givenUp, status: status,
                message: "\(what), resolved by \(by) (take theirs): the service's version kept")
            return .gaveUp
        case .keepMine where mayResend:
            try retryError(t, id: r.id)
            return .resent
        case .merged(let values) where mayResend:
            try retryError(t, id: r.id)
            let keys = Set(try store.set(r.entitySet).type.key)
            let changes = Properties(values.filter { !keys.contains($0.key) })
            if !changes.isEmpty {
                _ = try apply(
                    .update(set: r.entitySet, key: versions.key, changes: changes), options: ChangeOptions(),
                    optimize: store.configuration.requestQueueOptimization, in: t)
            }
            return .resent
        default:
            return .waiting
        }
    }
}
