import Queue
import Storage

extension Flush {
    // MARK: 3. Judge

    /// What each answer means; reads entities back for reconciliation. Throws `BackendError`
    /// when such a read gets no answer.
    package func judge(_ round: [Outgoing], _ responses: [ChangeAnswer]) async throws -> [Verdict] {
        guard responses.count == round.count else {
            return round.map { _ in .stop("the service answered \(responses.count) requests of \(round.count)") }
        }
        // The whole answer is checked before any of it is judged: an answer that cannot be
        // mapped onto the requests (a proxy that reordered a batch's parts) leaves every request
        // of the round in doubt — sent, settled by nothing — instead of archiving one for another's
        // refusal.
        if let why = mismatch(round, responses) {
            return round.map { _ in .stop("the service's answer does not match the requests sent: \(why)") }
        }
        var verdicts: [Verdict] = []
        var position: [String: Int] = [:]
        for (i, (o, response)) in zip(round, responses).enumerated() {
            var verdict = try await judge(o, response)
            // A 424 whose predecessors in the round are all settled by the client after all (a
            // re-sent create the service refused as existing, found applied by reconciliation) or
            // go again: not run, and nothing against it; it goes again in the next round.
            if case .dependent = verdict, o.change.group == nil, !o.change.dependsOn.isEmpty,
                o.change.dependsOn.allSatisfy({ id in
                    position[id].map { p in
                        switch verdicts[p] {
                        case .success, .again: true;
                        default: false
                        }
                    } ?? false
                })
            {
                verdict = .again(
                    "request \(o.record.id) was not run: the service took request \(o.change.dependsOn.joined(separator: ", ")) as failed"
                )
            }
            position[o.change.id] = i
            verdicts.append(verdict)
        }
        // Members of an atomicity group that failed: 424 for all but the one that failed.
        var groups: [String: [Int]] = [:]
        for (i, o) in round.enumerated() { if let g = o.change.group { groups[g, default: []].append(i) } }
        for (_, members) in groups {
            guard
                let failing = members.first(where: {
                    if case .dependent = verdicts[$0] {
                        false
                    } else if case .success = verdicts[$0] {
                        false
                    } else {
                        true
                    }
                })
            else { continue }
            for m in members where m != failing {
                guard case .dependent(let e) = verdicts[m] else { continue }
                switch verdicts[failing] {
                case .refused, .refusedWith, .conflict:
                    verdicts[m] = .refusedWith(
                        cause: round[failing].record.id,
                        ServiceError(
                            httpStatus: e.httpStatus, code: e.code,
                            message:
                                "not applied: request \(round[failing].record.id) of the same change set (transaction \(round[m].record.transactionID ?? "")) was refused"
                        ))
                default:
                    verdicts[m] = .stop(
                        "request \(round[m].record.id) was not applied: its change set stopped at request \(round[failing].record.id)"
                    )
                }
            }
        }
        return verdicts
    }

    /// Why `answers` cannot be the answers to `round`, in order: a success that carries an entity
    /// of another key than its request's (but a create with a local key, whose key the service
    /// gives). Nil when nothing says so.
    func mismatch(_ round: [Outgoing], _ answers: [ChangeAnswer]) -> String? {
        for (o, answer) in zip(round, answers) where answer.isSuccess {
            let r = o.record
            // A call's answer is what the operation returns, of any entity or none.
            guard let json = answer.entity, !(r.method.isCreate && r.localKey), o.change.keyFromAnswer == false,
                r.method != .delete, r.method != .call,
                let set = try? store.set(r.entitySet)
            else { continue }
            // The key properties only (the rest is skipped, as `ServerNotes` lets it be).
            var notes: ServerNotes? = ServerNotes()
            guard
                let image = try? ValueJSON(schema: store.schema).properties(
                    from: json, properties: set.type.properties.filter { set.type.key.contains($0.name) },
                    owner: r.entitySet, notes: &notes),
                let key = try? set.keyValues(image), let bytes = try? set.encodeKey(key)
            else { continue }
            if bytes != r.keyBytes {
                return
                    "request \(r.id) (\(r.method.rawValue) \(r.entitySet)(\(r.entityKey))) was answered with the entity \(r.entitySet)(\(set.describeKey(key)))"
            }
        }
        return nil
    }

    func judge(_ o: Outgoing, _ answer: ChangeAnswer) async throws -> Verdict {
        let r = o.record
        let what = "request \(r.id) (\(r.method.rawValue) \(r.entitySet)(\(r.entityKey)))"
        switch answer.status {
        case 200..<300:
            return try await success(o, answer, reconciled: answer.foundByMarker)
        case 424:
            return .dependent(answer.error)
        case 428 where o.change.etag == nil && !r.method.isCreate && !o.change.dependsOn.isEmpty:
            return .again(
                "\(what): the service requires an ETag to match; it comes with the answer to request \(o.change.dependsOn.joined(separator: ", "))"
            )
        case 423:
            // Locked (SAP: "locked by user …"): not applied, and not the change's fault. It stays
            // queued, not archived; the flush goes on with the rest and the next one sends it.
            return .again("\(what): the service answered 423 (locked); it stays queued for the next flush")
        case 401, 403, 407, 408, 429, 500...:
            return .stop("\(what): the service answered \(answer.status): \(answer.error.message)")
        case 400..<500:
            if options.reconcile, r.attempts > 1, o.change.group == nil, let v = try await reconcile(o, answer) {
                return v
            }
            if answer.status == 404, r.method == .delete || r.method == .unlink, o.change.group == nil {
                // Another copy deleted it first: gone, as asked (outside a change set, whose one
                // error answers every member).
                return .success(image: nil, etag: nil, reconciled: true, status: 404)
            }
            if answer.status == 412, !r.method.isCreate, r.method != .call {
                return try await conflict(o, answer)
            }
            return .refused(answer.error)
        default:
            return .stop("\(what): the service answered \(answer.status), which flush does not expect")
        }
    }

    /// A success: the service's image (from the answer, or for a create without one from the
    /// entity at its address) and the new ETag.
    func success(_ o: Outgoing, _ answer: ChangeAnswer, reconciled: Bool = false) async throws -> Verdict {
        let r = o.record
        guard r.method != .delete else {
            return .success(image: nil, etag: nil, reconciled: reconciled, status: answer.status)
        }
        if r.isUnboundCall {
            return .success(image: nil, etag: nil, reconciled: reconciled, status: answer.status)
        }
        if r.method == .putStream || r.method.isLinkChange || r.method == .call {
            // What a bound call did to its entity is the service's: read it back.
            return try await streamReplaced(o, answer, reconciled: reconciled)
        }
        let (repeatability, notThere, twice) = (answer.repeatability, answer.notFoundByMarker, answer.foundTwice)
        var answer = answer
        if answer.entity == nil, answer.unreadable == nil, r.method.isCreate, r.localKey {
            // The key the service gave is needed: read the entity it created.
            guard let location = answer.location else {
                return .stop(
                    "request \(r.id) (POST \(r.entitySet)): the service answered \(answer.status) without the entity or its Location; its key is unknown"
                )
            }
            var read = try await backend.read(.address(location, set: r.entitySet), extra: options.headers)
            guard read.status == 200 else {
                return .stop("request \(r.id) (POST \(r.entitySet)): reading \(location) back answered \(read.status)")
            }
            read.etag = read.etag ?? answer.etag
            answer = read
        }
        if r.attempts > 1, r.method != .delete, !reconciled, answer.unreadable == nil,
            let (key, keyText) = answeredKey(o, answer)
        {
            // Sent before: this answer may be the service's record of the first execution
            // (repeatability), from before other clients changed the entity. What the store
            // keeps must be the entity as it is now, with its ETag: read it back.
            let read = try await backend.read(
                .key(set: r.entitySet, key: key, keyText: keyText), extra: options.headers)
            if read.status == 200, read.entity != nil, read.unreadable == nil {
                let messages = answer.messages
                answer = read
                answer.messages = messages
            }
        }
        if let why = answer.unreadable {
            return .stop("request \(r.id): the service's answer (\(answer.status)) cannot be read: \(why)")
        }
        var image: Properties? = nil
        let etag = answer.etag ?? answer.entityETag
        if let json = answer.entity {
            do {
                let set = try store.set(r.entitySet)
                // Properties the store's $metadata lacks are skipped: a service may add some.
                var notes: ServerNotes? = ServerNotes()
                image = try ValueJSON(schema: store.schema).properties(
                    from: json, properties: set.type.properties,
                    navigation: Set(set.type.navigationProperties.map(\.name)), owner: r.entitySet,
                    notes: &notes)
                // The answer is the whole entity only for a create or a PUT, or a PATCH answered with
                // a representation; its key must be the request's unless the key was local.
                let key = try set.keyValues(image!)
                if try set.encodeKey(key) != r.keyBytes && !(r.method.isCreate && r.localKey)
                    && o.change.keyFromAnswer == false
                {
                    return .stop(
                        "request \(r.id): the service answered with the entity \(r.entitySet)(\(set.describeKey(key))), not \(r.entitySet)(\(r.entityKey))"
                    )
                }
            } catch {
                return .stop("request \(r.id): the service's answer (\(answer.status)) cannot be read: \(error)")
            }
        } else if r.method.isCreate && r.localKey {
            return .stop(
                "request \(r.id) (POST \(r.entitySet)): the service's answer has no entity; its key is unknown")
        }
        // A create whose key the service assigns, sent before (its answer lost), answered as a
        // new create by a service that did not say it executed it once: nothing tells this one
        // from a second entity made by the second attempt.
        let inDoubt =
            r.method.isCreate && r.localKey && r.attempts > 1 && repeatability != .accepted
            && (!reconciled || twice) && !notThere
        // A media create's stream: the media ETag its answer's entity announces.
        var mediaETag: String? = nil
        if r.method == .createMedia, let json = answer.entity, let set = try? store.set(r.entitySet) {
            mediaETag = PayloadReader.announcedStreams(json, type: set.type, etag: etag, all: true)[""]?.mediaETag
        }
        return .success(
            image: image, etag: etag, reconciled: reconciled, inDoubt: inDoubt, status: answer.status,
            mediaETag: mediaETag)
    }

    /// The key of the entity `o`'s answer is about: the request's, or for a create whose key the
    /// service assigns the one its answer carries (nil when it carries none that reads).
    func answeredKey(_ o: Outgoing, _ answer: ChangeAnswer) -> (key: [Value], text: String)? {
        let r = o.record
        guard r.method.isCreate && r.localKey || o.change.keyFromAnswer else { return (o.change.key, r.entityKey) }
        guard let json = answer.entity, let set = try? store.set(r.entitySet) else { return nil }
        var notes: ServerNotes? = ServerNotes()
        guard
            let image = try? ValueJSON(schema: store.schema).properties(
                from: json, properties: set.type.properties.filter { set.type.key.contains($0.name) },
                owner: r.entitySet, notes: &notes),
            let key = try? set.keyValues(image)
        else { return nil }
        return (key, set.describeKey(key))
    }

    /// A refusal for a stale ETag (412), with the service's entity as it is now, read back: the
    /// conflict's third version (`Verdict.conflict`). A read that gets no usable answer leaves a
    /// plain refusal.
    func conflict(_ o: Outgoing, _ answer: ChangeAnswer) async throws -> Verdict {
        let r = o.record
        let read = try await backend.read(
            .key(set: r.entitySet, key: o.change.key, keyText: r.entityKey), extra: options.headers)
        if read.status == 404 || read.status == 410 {
            return .conflict(answer.error, server: nil, etag: nil)
        }
        guard read.status == 200, let json = read.entity, read.unreadable == nil,
            let set = try? store.set(r.entitySet)
        else { return .refused(answer.error) }
        var notes: ServerNotes? = ServerNotes()
        guard
            let there = try? ValueJSON(schema: store.schema).properties(
                from: json, properties: set.type.properties,
                navigation: Set(set.type.navigationProperties.map(\.name)), owner: r.entitySet, notes: &notes),
            let key = try? set.keyValues(there), (try? set.encodeKey(key)) == r.keyBytes
        else { return .refused(answer.error) }
        let etag = read.etag ?? read.entityETag
        // A stream's conflict: the service's media ETag now, what "keep mine" sends against.
        let stream = try? StreamChange.of(r)
        let mediaETag = stream.flatMap {
            PayloadReader.announcedStreams(json, type: set.type, etag: etag, all: true)[$0.stream]?.mediaETag
        }
        return .conflict(answer.error, server: there, etag: etag, mediaETag: mediaETag)
    }

    /// A re-sent request refused as if already applied, checked against the service: nil when it
    /// is a true refusal.
    func reconcile(_ o: Outgoing, _ answer: ChangeAnswer) async throws -> Verdict? {
        let r = o.record
        switch (r.method, answer.status) {
        case (.delete, 404):
            return .success(image: nil, etag: nil, reconciled: true, status: 404)
        case (.putStream, 412):
            return try await streamAlreadyThere(o)
        case (.create, 409) where !r.localKey, (.update, 412), (.replace, 412):
            let read = try await backend.read(
                .key(set: r.entitySet, key: o.change.key, keyText: r.entityKey), extra: options.headers)
            guard read.status == 200, let json = read.entity else { return nil }
            let set = try store.set(r.entitySet)
            guard
                let there = try? ValueJSON(schema: store.schema).properties(
                    from: json, properties: set.type.properties,
                    navigation: Set(set.type.navigationProperties.map(\.name)), owner: r.entitySet)
            else { return nil }
            var sent = try queue.body(of: r)
            // A create to a service that takes only the properties a create sets: what went over
            // the wire had no nulls and no computed properties, and what it did not send is at the
            // service's default, which need not be null.
            let onlySet = options.capabilities.createCarriesOnlySetProperties && r.method == .create
            if onlySet {
                sent = Properties(sent.filter { k, v in !v.isNull && !(set.type.property(k)?.computed ?? false) })
            }
            for (k, v) in sent where (there[k] ?? .null) != v {
                if v.isNull && (there[k] ?? .null).isNull { continue }
                return nil
            }
            if r.method != .update && !onlySet {
                // A create or PUT sent the whole entity: what it left out is null there (but what
                // the service computes).
                for (k, v) in there where sent[k] == nil && !v.isNull && !set.type.key.contains(k) {
                    if options.capabilities.createCarriesOnlySetProperties, set.type.property(k)?.computed == true {
                        continue
                    }
                    return nil
                }
            }
            return try await success(o, read, reconciled: true)
        default:
            return nil
        }
    }

    /// A stream replacement (or a link change) the service applied: the entity is read back, for
    /// its ETag (a
    /// service's entity ETag may cover its media, as odatapy's and SAP Gateway's media entities'
    /// do) and its image; the stream's new media ETag is the answer's `ETag`, else the one the
    /// entity read back announces. A read that fails leaves the entity as it was and its ETag
    /// unknown (the next change goes without one, or a refresh brings it).
    func streamReplaced(_ o: Outgoing, _ answer: ChangeAnswer, reconciled: Bool) async throws -> Verdict {
        let r = o.record
        let read = try await backend.read(
            .key(set: r.entitySet, key: o.change.key, keyText: r.entityKey), extra: options.headers)
        var image: Properties? = nil
        var etag: String? = nil
        var mediaETag = answer.etag
        if read.status == 200, let json = read.entity, read.unreadable == nil, let set = try? store.set(r.entitySet) {
            var notes: ServerNotes? = ServerNotes()
            if let there = try? ValueJSON(schema: store.schema).properties(
                from: json, properties: set.type.properties,
                navigation: Set(set.type.navigationProperties.map(\.name)), owner: r.entitySet, notes: &notes),
                let key = try? set.keyValues(there), (try? set.encodeKey(key)) == r.keyBytes
            {
                image = there
                etag = read.etag ?? read.entityETag
                if mediaETag == nil, let name = o.change.stream?.name {
                    mediaETag =
                        PayloadReader.announcedStreams(json, type: set.type, etag: etag, all: true)[name]?.mediaETag
                }
            }
        }
        return .success(image: image, etag: etag, reconciled: reconciled, status: answer.status, mediaETag: mediaETag)
    }

    /// A stream replacement sent again after its answer was lost, refused with 412: the first
    /// attempt may have been applied (its media ETag is then the service's, not the one sent).
    /// The service's bytes are read back and hashed, never held whole: the same SHA-256 as sent
    /// is the replacement applied.
    func streamAlreadyThere(_ o: Outgoing) async throws -> Verdict? {
        let r = o.record
        guard let sent = try? StreamChange.of(r) else { return nil }
        let hash = StreamDigest()
        let got = try await backend.download(
            set: r.entitySet, key: o.change.key, keyText: r.entityKey, name: sent.stream,
            link: nil, into: hash, extra: options.headers)
        guard got.isSuccess, hash.hex() == sent.sha256 else { return nil }
        var answer = ChangeAnswer(status: got.status, etag: got.etag)
        answer.etag = got.etag
        return try await streamReplaced(o, answer, reconciled: true)
    }
}
