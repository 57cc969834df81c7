import Queue
import Storage

extension Flush {
    // MARK: Create markers

    /// The marker property of `r`'s set (`markers`: `SyncSettings.createMarkers`) when `r` is a create
    /// whose key the service assigns; nil otherwise.
    static func marker(of r: RequestRecord, in store: EntityStore, markers: [String: String]) -> Property? {
        guard r.method == .create, r.localKey, let name = markers[r.entitySet],
            let set = try? store.set(r.entitySet)
        else { return nil }
        return set.type.property(name)
    }

    /// The identity a create carries in its marker: its repeatability id — the GUID itself in a
    /// GUID property, else its 32 hexadecimal digits (upper case, no hyphens: what SAP Gateway's
    /// `RequestID` looks like). The same on every attempt.
    static func markerValue(_ r: RequestRecord, _ marker: Property) -> Value {
        if marker.type == .primitive(.guid) { return .guid(r.repeatabilityID) }
        return .string(String(r.repeatabilityID.description.filter { $0 != "-" }.uppercased()))
    }

    /// `r`'s body with its marker set to its identity (whatever the create held there), when its
    /// set has a marker; the body as queued otherwise.
    static func body(_ r: RequestRecord, queue: RequestQueue, markers: [String: String]) throws -> String? {
        guard let marker = marker(of: r, in: queue.store, markers: markers) else { return r.body }
        var body = try queue.body(of: r)
        body[marker.name] = markerValue(r, marker)
        return queue.json(try queue.store.set(r.entitySet), body)
    }

    /// Sends `round` — but first looks up each create sent before (its answer lost) whose set has
    /// a marker, outside an atomicity group: one the service holds already is answered by the
    /// entity found (`ChangeAnswer.foundByMarker`) and not sent again. Answers in `round`'s order.
    /// A look-up that fails (an error status, an unreadable answer) leaves the create to be sent,
    /// in doubt as without a marker; one that finds nothing sends it as new, not in doubt
    /// (`ChangeAnswer.notFoundByMarker`) — the look-up cannot see an earlier attempt the service
    /// is still working on, which only a service slower than the flush's own timeout leaves.
    /// Two entities found with one marker were made before this store looked (a second attempt
    /// that was sent without a look-up): the first is taken, and the create is flagged in doubt.
    func send(_ round: [Outgoing]) async throws -> [ChangeAnswer] {
        var found: [Int: ChangeAnswer] = [:]
        var absent: Set<Int> = []  // looked up, and the service answered that it holds none
        for (i, o) in round.enumerated() where o.record.attempts > 1 && o.change.group == nil {
            guard let marker = Self.marker(of: o.record, in: store, markers: options.settings.createMarkers) else {
                continue
            }
            let matches = try await backend.find(
                set: o.record.entitySet, property: marker.name, equals: Self.markerValue(o.record, marker), limit: 2,
                extra: options.headers)
            guard let first = matches.first else {
                absent.insert(i)
                continue
            }
            guard first.foundByMarker else { continue }
            var answer = first
            answer.foundTwice = matches.count > 1
            found[i] = answer
        }
        func marking(_ answers: [ChangeAnswer]) -> [ChangeAnswer] {
            var answers = answers
            for i in absent where i < answers.count { answers[i].notFoundByMarker = true }
            return answers
        }
        if found.isEmpty { return marking(try await backend.send(round.map(\.change), extra: options.headers)) }
        // The rest goes without the ones found (and without waiting for them: they are applied).
        let foundIDs = Set(found.keys.map { round[$0].change.id })
        var rest: [OutgoingChange] = []
        for (i, o) in round.enumerated() where found[i] == nil {
            var change = o.change
            change.dependsOn.removeAll { foundIDs.contains($0) }
            rest.append(change)
        }
        var sent = rest.isEmpty ? [] : try await backend.send(rest, extra: options.headers)[...]
        return marking(round.indices.map { i in found[i] ?? sent.popFirst() ?? ChangeAnswer(status: 0) })
    }
}
