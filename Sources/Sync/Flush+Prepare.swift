package import LMDB
package import Queue
package import Storage

extension Flush {
    // MARK: 1. Plan and mark

    /// Plans the next round (without the requests `excluding` names: a round on its way) and
    /// marks its requests sent, in one write transaction.
    package func prepare(excluding: Set<Int64> = []) async throws -> [Outgoing] {
        let (queue, options) = (self.queue, self.options)
        return try await store.write(usingReserve: true) { t in
            try Self.prepare(t, queue: queue, options: options, excluding: excluding)
        }
    }

    /// The next round's requests (see `Flush`), marked sent in `t`, with what goes over the wire.
    package static func prepare(
        _ t: WriteView, queue: RequestQueue, options: Options, now: EDMDateTimeOffset = .now,
        excluding: Set<Int64> = []
    ) throws -> [Outgoing] {
        let planned = try plan(t.reader, queue: queue, options: options, excluding: excluding)  // FlushPlan.swift
        if planned.isEmpty { return [] }
        let etags = ServerETags(store: queue.store)
        var out: [Outgoing] = []
        var position: [Int64: Int] = [:]  // where each request of the round stands in `out`
        for p in planned {
            // Planned from this transaction's reading of the queue: the record is there.
            let (before, r) = try queue.markSentKeepingBefore(t, id: p.id, at: now)
            var etag = p.ifMatch ? try etags.get(t.reader, set: r.entitySet, keyBytes: r.keyBytes) : nil
            if r.method == .putStream, options.settings.streamIfMatch == .media {
                etag = try streamETag(t.reader, r, queue: queue) ?? etag
            }
            var change = try Self.change(r, queue: queue, etag: etag, markers: options.settings.createMarkers)
            change.group = p.group
            if let reference = p.reference {
                change.parent = ContentIDReference(change: String(reference.parent), navigation: reference.navigation)
                change.serviceAssigned.formUnion(reference.omit)
            }
            if let inside = p.inside {
                // Its foreign key to the parent is the nesting's to state (the parent's key may be local).
                change.inside = ContentIDReference(change: String(inside.parent), navigation: inside.navigation)
                change.serviceAssigned.formUnion(inside.omit)
            }
            change.dependsOn = dependsOn(p, earlier: out, position: position)
            position[p.id] = out.count
            out.append(Outgoing(record: r, change: change, before: before))
        }
        return out
    }

    /// The `$batch` ids `planned` names in `dependsOn`: its predecessors, which the planner put
    /// earlier in the round (`position` finds them in `earlier`), except those of its own change
    /// set (members of one atomicity group are not linked by `dependsOn`).
    static func dependsOn(_ planned: PlannedRequest, earlier: [Outgoing], position: [Int64: Int]) -> [String] {
        planned.predecessors.filter { pred in
            guard let i = position[pred] else { return false }
            return earlier[i].change.group.map { $0 != planned.group } ?? true
        }.map(String.init)
    }

    /// The change `r` sends: its kind, entity, body, the ETag to match (not for a create) and its
    /// identity. A create whose key is local leaves out the key properties the service assigns
    /// (computed ones, and those holding local values — not even as null, which a service may
    /// refuse for a key property that is not nullable).
    static func change(
        _ r: RequestRecord, queue: RequestQueue, etag: String?, markers: [String: String] = [:]
    ) throws -> OutgoingChange {
        if r.method == .call { return try call(r, queue: queue) }
        let set = try queue.store.set(r.entitySet)
        let kind: OutgoingChange.Kind =
            switch r.method {
            case .create: .create
            case .update: .update
            case .replace: .replace
            case .delete: .delete
            case .putStream: .putStream
            case .createMedia: .createMedia
            case .link: .link
            case .unlink: .unlink
            case .call: .call
            }
        let key = try r.keyBytes.withUnsafeBytes { try KeyCodec.decode($0, count: set.type.key.count).values }
        var assigned: Set<String> = []
        if r.method.isCreate, r.localKey {
            for (name, v) in zip(set.type.key, key)
            where set.type.property(name)?.computed == true || isLocalKeyValue(v) {
                assigned.insert(name)
            }
        }
        let custom = r.customHeaders.sorted { $0.key < $1.key }
        var change = OutgoingChange(
            kind: kind, set: r.entitySet, key: key, keyText: r.entityKey,
            body: r.method.carriesStream || r.method.isLinkChange ? nil : try body(r, queue: queue, markers: markers),
            serviceAssigned: assigned,
            etag: r.method.isCreate ? nil : etag, repeatabilityID: r.repeatabilityID,
            firstSent: r.firstSentAt ?? .now,
            customHeaders: custom.map { ($0.key, $0.value) }, id: String(r.id), localKey: r.localKey)
        if r.method.carriesStream { change.stream = try stream(r, queue: queue) }
        if r.method.isLinkChange {
            let sent = try LinkChange.of(r)
            let target = try queue.store.set(sent.targetSet)
            let targetKey = try sent.targetBytes.withUnsafeBytes {
                try KeyCodec.decode($0, count: target.type.key.count).values
            }
            change.link = OutgoingLink(
                navigation: sent.navigation, targetSet: sent.targetSet, targetKey: targetKey,
                targetKeyText: sent.targetKey, collection: sent.collection)
        }
        return change
    }

    /// The call `r` sends: on its entity when bound (no ETag: an action is not a change of the
    /// entity's representation, and a service that asks for one says so), else at the service root.
    static func call(_ r: RequestRecord, queue: RequestQueue) throws -> OutgoingChange {
        let sent = try OperationCall.of(r)
        var key: [Value] = []
        if !r.isUnboundCall {
            let set = try queue.store.set(r.entitySet)
            key = try r.keyBytes.withUnsafeBytes { try KeyCodec.decode($0, count: set.type.key.count).values }
        }
        let custom = r.customHeaders.sorted { $0.key < $1.key }
        var change = OutgoingChange(
            kind: .call, set: r.entitySet, key: key, keyText: r.entityKey, body: nil, etag: nil,
            repeatabilityID: r.repeatabilityID, firstSent: r.firstSentAt ?? .now,
            customHeaders: custom.map { ($0.key, $0.value) }, id: String(r.id))
        change.call = OutgoingCall(
            operation: sent.operation, importName: sent.importName, isAction: sent.isAction,
            httpMethod: sent.httpMethod, parameters: try sent.values(schema: queue.store.schema))
        return change
    }

    /// The bytes stream replacement `r` sends, opened (the queue keeps its file until it
    /// settles), with its content type and the stream's edit link.
    static func stream(_ r: RequestRecord, queue: RequestQueue) throws -> OutgoingStream {
        let sent = try StreamChange.of(r)
        guard let streams = queue.store.streams else { throw EntityError.badInput("this store has no streams") }
        let known = try queue.store.read { t in
            try streams.record(
                t, entityKey: EntityStore.entityKey(set: r.entitySet, keyBytes: r.keyBytes), name: sent.stream)
        }
        let file = try streams.open(
            StreamRecord(state: .stored, file: sent.file, size: sent.size, sha256: sent.sha256),
            what: sent.describe(r))
        var out = OutgoingStream(
            name: sent.stream, contentType: sent.contentType, editLink: known?.editLink, bytes: file)
        out.slug = sent.slug
        return out
    }

    /// The ETag stream replacement `r` must match: the service's media ETag of the version it
    /// replaces (kept in the stream's record while the replacement is local), nil when the
    /// service gave none — then the entity's ETag goes (a service whose entity ETag covers its
    /// media: SAP Gateway's media entities, odatapy).
    static func streamETag(_ t: ReadView, _ r: RequestRecord, queue: RequestQueue) throws -> String? {
        guard let sent = try? StreamChange.of(r), let streams = queue.store.streams else { return nil }
        return try streams.record(
            t, entityKey: EntityStore.entityKey(set: r.entitySet, keyBytes: r.keyBytes), name: sent.stream)?.mediaETag
    }

    /// Negative integers and strings starting with `~` are local keys (`fillLocalKey`).
    static func isLocalKeyValue(_ v: Value) -> Bool {
        switch v {
        case .int(let i): i < 0
        case .string(let s): s.hasPrefix("~")
        default: false
        }
    }
}
