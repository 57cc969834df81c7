import LMDB
import Queue
import Storage

// MARK: 1. Plan (the round planner; `prepare` in Flush.swift marks and sends what it plans)

extension Flush {
    /// One request of the next round, as planned: what `prepare` marks sent and puts in the `$batch`.
    ///
    /// - `id`: the request's id in the queue.
    /// - `group`: its atomicity group in the `$batch` (`t` and the id of its change set's first
    ///   request in the round); nil for a request outside any change set.
    /// - `predecessors`: the requests still queued that must be done before it — earlier requests
    ///   of its entity and the creates it refers to —, in id order. Each is done already or goes
    ///   before it in this round.
    /// - `ifMatch`: whether it goes with the ETag the store holds for its entity, to match:
    ///   false only for a change-set member after an earlier change of its entity in the round.
    struct PlannedRequest: Equatable, Sendable {
        var id: Int64
        var group: String?
        var predecessors: [Int64]
        var ifMatch: Bool
        /// A create earlier in its change set whose key the service assigns, named by its
        /// Content-ID (`ContentIDReference`): nil for most.
        var reference: ParentReference? = nil
        /// A create that goes inline in an earlier create of its change set (a deep insert): that
        /// one and the navigation property it goes under. Nil for most.
        var inside: ParentReference? = nil
    }

    /// The next round, in order (see `Flush` and `PlannedRequest`).
    ///
    /// A change of an entity whose ETag the store holds never goes in the round trip of an earlier
    /// change of the same entity: the ETag it would carry to match is the one from before that change, and
    /// the service would refuse it (412). It goes in the next one, when the answer to the earlier
    /// one has brought the new ETag. In a change set (one atomicity group, all or nothing, nothing
    /// in between) it goes along without an ETag to match: the first change of the entity checks it.
    ///
    /// The queue is read in id order only as far as the round needs (a flush with batch size 1
    /// reads one record a round, not the whole queue); a change set needs all its members, so
    /// meeting one reads the whole queue and plans again from the start (`planFully`).
    ///
    /// `excluding`: the requests of a round on its way, planned as not in this flush — they are
    /// not planned again, and what must wait for them (their entities' later changes, what refers
    /// to their creates, their change sets) waits.
    static func plan(
        _ t: ReadView, queue: RequestQueue, options: Options, excluding: Set<Int64> = []
    ) throws -> [PlannedRequest] {
        var planner = RoundPlanner(t, queue: queue, options: options, excluding: excluding)
        var metChangeSet = false
        try queue.records.scan(t) { p in
            let r = try RequestRecord(p)
            // Its members may lie further on, and everything before it was planned without them.
            if r.transactionID != nil, r.status != .error { metChangeSet = true; return false }
            planner.take(r)
            try planner.consider(r)
            return !planner.isFull
        }
        // Without a change set, considering each record as it is read is what `planFully` does,
        // in the same id order (a later record a request refers to is fetched by id);
        // `FlushPlanTests` checks that the two plan the same round.
        return metChangeSet
            ? try planFully(t, queue: queue, options: options, excluding: excluding) : planner.round
    }

    /// `plan` from the whole queue (what it does when it meets a change set).
    static func planFully(
        _ t: ReadView, queue: RequestQueue, options: Options, excluding: Set<Int64> = []
    ) throws -> [PlannedRequest] {
        var planner = RoundPlanner(t, queue: queue, options: options, excluding: excluding)
        try queue.records.scan(t) { p in
            planner.take(try RequestRecord(p)); return true
        }
        for r in planner.taken.sorted(by: { $0.id < $1.id }) {
            if planner.isFull { break }
            try planner.consider(r)
        }
        return planner.round
    }

    /// The state of planning one round: the records taken in so far (in id order) and the round.
    ///
    /// It keeps the records themselves, not their ids, wherever it looks them up again (an
    /// entity's chain aside), so nothing it holds can name a record it has not got.
    private struct RoundPlanner {
        let t: ReadView
        let queue: RequestQueue
        let options: Options
        let etags: ServerETags
        /// Requests of the round on its way: planned as not in this flush.
        let excluded: Set<Int64>
        /// The records taken in (`take`), in the order read.
        var taken: [RequestRecord] = []
        /// Records by id: those taken in, and those fetched by id (a dependency on a later record).
        var known: [Int64: RequestRecord] = [:]
        /// Each entity's requests taken in, in id order, by `RequestQueue.entityPrefix`.
        var chains: [[UInt8]: [Int64]] = [:]
        /// Each change set's members taken in and not in error, in id order, by transaction id.
        var changeSets: [String: [RequestRecord]] = [:]
        /// The round so far, in the order it goes.
        var round: [PlannedRequest] = []
        var inRound: Set<Int64> = []
        /// The operation calls taken in that this flush sends or has sent, in id order: every
        /// later request waits for the last one before it (`predecessors`).
        var calls: [Int64] = []
        /// Change sets already considered: each is considered once, at the first member met.
        var consideredChangeSets: Set<String> = []
        /// A change set did not fit: the round ends here.
        var isClosed = false

        init(_ t: ReadView, queue: RequestQueue, options: Options, excluding: Set<Int64>) {
            (self.t, self.queue, self.options, etags) = (t, queue, options, ServerETags(store: queue.store))
            excluded = excluding
        }

        /// The round takes no more: the batch size reached, or a change set that did not fit.
        var isFull: Bool { isClosed || round.count >= options.batchSize }

        /// Takes in the next record in id order.
        mutating func take(_ r: RequestRecord) {
            known[r.id] = r
            taken.append(r)
            chains[RequestQueue.entityPrefix(set: r.entitySet, keyBytes: r.keyBytes), default: []].append(r.id)
            if r.method == .call, isQueuedForThisFlush(r) { calls.append(r.id) }
            if let tx = r.transactionID, r.status != .error { changeSets[tx, default: []].append(r) }
        }

        /// The record `id`, taken in or fetched; nil when it is not queued.
        mutating func record(_ id: Int64) throws -> RequestRecord? {
            if let r = known[id] { return r }
            let r = try queue.record(t, id: id)
            known[id] = r
            return r
        }

        /// Whether the service's round trip cannot make a request depend on another outside its
        /// change set (a V2 `$batch`).
        var noCrossGroupDependencies: Bool { !options.capabilities.dependenciesAcrossGroups }

        /// Whether this flush sends `r`: not in error, of the flushed category, and not on its way.
        func isInFlush(_ r: RequestRecord) -> Bool {
            r.status != .error && (options.category == nil || r.uploadCategory == options.category)
                && !excluded.contains(r.id)
        }

        /// Whether this flush sends `r` or has sent it (a round on its way): not in error, and of
        /// the flushed category.
        func isQueuedForThisFlush(_ r: RequestRecord) -> Bool {
            r.status != .error && (options.category == nil || r.uploadCategory == options.category)
        }

        /// Requests that must be done before `r`: earlier ones of its entity, and the creates it
        /// refers to — those still queued. An operation call keeps the queue's order whole: it
        /// waits for every earlier request this flush sends, and every later one waits for it.
        mutating func predecessors(of r: RequestRecord) throws -> [Int64] {
            let chain = chains[RequestQueue.entityPrefix(set: r.entitySet, keyBytes: r.keyBytes)] ?? []
            var preds = try r.dependencies.filter { try record($0) != nil } + chain.filter { $0 < r.id }
            if r.method == .call {
                preds += taken.filter { $0.id < r.id && isQueuedForThisFlush($0) }.map(\.id)
            } else if let call = calls.last(where: { $0 < r.id }) {
                preds.append(call)
            }
            return Array(Set(preds)).sorted()
        }

        /// Whether request `id` is a create with a local key: what comes after it waits for its answer.
        mutating func isLocalCreate(_ id: Int64) throws -> Bool {
            try record(id).map { $0.method.isCreate && $0.localKey } ?? false
        }

        /// Whether a request with predecessors `preds` can go in this round after `staged` (more
        /// of its own change set): every predecessor goes before it in this round and is not a
        /// create with a local key (its URL or body gets the service's key only from that answer).
        mutating func canGo(after preds: [Int64], staged: Set<Int64> = []) throws -> Bool {
            for p in preds {
                guard inRound.contains(p) || staged.contains(p) else { return false }
                if try isLocalCreate(p) { return false }
            }
            return true
        }

        /// Whether `r` waits for a request of the round on its way: one of its predecessors is
        /// there, or a member of its change set.
        mutating func waitsForExcluded(_ r: RequestRecord) throws -> Bool {
            if try predecessors(of: r).contains(where: excluded.contains) { return true }
            guard let tx = r.transactionID else { return false }
            return changeSets[tx]?.contains { excluded.contains($0.id) } ?? false
        }

        /// Whether an earlier change of `r`'s entity is in this round (or in `staged`).
        func followsInRound(_ r: RequestRecord, staged: Set<Int64> = []) -> Bool {
            let chain = chains[RequestQueue.entityPrefix(set: r.entitySet, keyBytes: r.keyBytes)] ?? []
            return chain.contains { $0 < r.id && (inRound.contains($0) || staged.contains($0)) }
        }

        /// Whether the store holds an ETag for `r`'s entity (a create has none to send).
        func holdsETag(_ r: RequestRecord) throws -> Bool {
            guard !r.method.isCreate else { return false }
            return try etags.get(t, set: r.entitySet, keyBytes: r.keyBytes) != nil
        }

        /// Adds `r`, a record taken in, to the round if it can go (with its change set, if it is in one).
        /// A request that waits for the round on its way (`excluded`) ends the round, so that the
        /// rounds go in request-id order as they would one after the other.
        mutating func consider(_ r: RequestRecord) throws {
            guard isInFlush(r), !inRound.contains(r.id) else { return }
            if !excluded.isEmpty, try waitsForExcluded(r) {
                isClosed = true
                return
            }
            if r.method.carriesStream || r.method == .call && r.transactionID == nil {
                try considerStream(r)
            } else if let tx = r.transactionID {
                try considerChangeSet(tx)
            } else {
                try considerAlone(r)
            }
        }

        /// A request outside any change set goes when `canGo`, and not after an earlier change
        /// of its entity in the round if it would carry an ETag from before that change.
        mutating func considerAlone(_ r: RequestRecord) throws {
            let preds = try predecessors(of: r)
            // A V2 `$batch` has no `dependsOn`: a request after a failed one runs all the same, so
            // a request waits for its predecessors' answers.
            if noCrossGroupDependencies, !preds.isEmpty { return }
            guard try canGo(after: preds) else { return }
            if followsInRound(r), try holdsETag(r) { return }
            admit([PlannedRequest(id: r.id, group: nil, predecessors: preds, ifMatch: true)])
        }

        /// A stream replacement (or a media create) goes in a round trip of its own (its bytes are
        /// the body of a PUT; a JSON `$batch` carries no binary body), once its entity's earlier
        /// requests are done: it ends the round it would join, and goes first in the next. So
        /// does an operation call outside a change set, once every earlier request is done
        /// (`predecessors`): what it does on the service may depend on any of them. (A call in a
        /// change set goes with it, once every request before the call is done or in the round.)
        mutating func considerStream(_ r: RequestRecord) throws {
            guard try predecessors(of: r).isEmpty else { return }
            if round.isEmpty {
                admit([PlannedRequest(id: r.id, group: nil, predecessors: [], ifMatch: true)])
            }
            isClosed = true
        }

        /// Change set `tx` goes as one group — the members that can go now — if the round has room
        /// for all of them; considered once.
        mutating func considerChangeSet(_ tx: String) throws {
            guard consideredChangeSets.insert(tx).inserted else { return }
            guard let members = membersToSend(tx) else { return }
            let stage = try stage(members)
            guard let first = stage.first else { return }
            if !round.isEmpty && round.count + stage.count > options.batchSize { isClosed = true; return }
            let group = "t\(first.id)"
            admit(
                stage.map {
                    PlannedRequest(
                        id: $0.id, group: group, predecessors: $0.predecessors, ifMatch: $0.ifMatch,
                        reference: $0.reference, inside: $0.inside)
                })
        }

        /// The members of change set `tx` to send, in id order; nil when it waits.
        func membersToSend(_ tx: String) -> [RequestRecord]? {
            // `consider` met a member taken in and not in error, so `changeSets[tx]` holds it.
            var members = changeSets[tx] ?? []
            // A change set not wholly in this flush (another category) waits.
            if members.contains(where: { !isInFlush($0) }) { return nil }
            // A change set once sent goes again exactly as it went: its sent members.
            if members.contains(where: { $0.status == .sent }) { members = members.filter { $0.status == .sent } }
            return members
        }

        /// Those of `members` that can go now, in order, with their group still to be named; empty
        /// when a member waits on a request outside the change set that is not in the round.
        ///
        /// A member that needs the key of a create earlier in the change set whose key the service
        /// assigns goes along naming it by its Content-ID where the service resolves such
        /// references and the member can (`Flush.reference`). Where it cannot, the change set
        /// waits whole — the flush's start refuses it (`refuseChangeSetsThatCannotGoWhole`) — or,
        /// with `splitTransactions`, goes without that member, which follows after the answer.
        mutating func stage(_ members: [RequestRecord]) throws -> [PlannedRequest] {
            let memberIDs = Set(members.map(\.id))
            let store = queue.store
            if let tree = Flush.deepInsert(
                members, capabilities: options.capabilities, configuration: options.settings, schema: store.schema)
            {
                return try stageDeep(members, tree)
            }
            var stage: [PlannedRequest] = []
            var staged: Set<Int64> = []
            for m in members {
                let preds = try predecessors(of: m)
                if preds.contains(where: {
                    !memberIDs.contains($0) && (noCrossGroupDependencies || !inRound.contains($0))
                }) {
                    return []
                }
                // Creates of this change set, staged before it, whose key the service assigns.
                let parents = try preds.filter { staged.contains($0) }.filter { try isLocalCreate($0) }
                var reference: ParentReference? = nil
                if let p = parents.first, parents.count == 1, options.capabilities.contentIDReferences,
                    let parent = try record(p)
                {
                    reference = Flush.reference(from: m, to: parent, schema: queue.store.schema)
                }
                let others = reference == nil ? preds : preds.filter { !parents.contains($0) }
                if try canGo(after: others, staged: staged) {
                    stage.append(
                        PlannedRequest(
                            id: m.id, group: nil, predecessors: preds, ifMatch: !followsInRound(m, staged: staged),
                            reference: reference))
                    staged.insert(m.id)
                } else if !options.settings.splitTransactions && m.status == .pending {
                    return []  // never a part of it
                }
            }
            return stage
        }

        /// A deep insert (`Flush.deepInsert`): every member goes, the first as the POST and the
        /// others inline in it (`inside`), once every predecessor outside it is done or in the round.
        mutating func stageDeep(_ members: [RequestRecord], _ tree: [Int64: ParentReference]) throws -> [PlannedRequest]
        {
            let memberIDs = Set(members.map(\.id))
            var stage: [PlannedRequest] = []
            for m in members {
                let preds = try predecessors(of: m)
                let outside = preds.filter { !memberIDs.contains($0) }
                if noCrossGroupDependencies, !outside.isEmpty { return [] }
                guard try canGo(after: outside) else { return [] }
                stage.append(
                    PlannedRequest(
                        id: m.id, group: nil, predecessors: preds, ifMatch: false, inside: tree[m.id]))
            }
            return stage
        }

        /// Puts `requests` in the round, in order.
        mutating func admit(_ requests: [PlannedRequest]) {
            for p in requests {
                round.append(p)
                inRound.insert(p.id)
            }
        }
    }
}
