import Queue
package import Storage
package import Sync

/// OData V2 (SAP Gateway): V2 JSON bodies (`ValueJSON.writeV2`), key predicates in V2 literals,
/// `MERGE` for a partial update (or `updateMethod`), `$inlinecount=allpages`, no `Prefer` on a
/// create (a V2 create answers with the entity). Every change carries SAP Gateway's idempotency
/// headers — `RequestID` (the repeatability id as 32 hexadecimal digits, the same on every
/// attempt) and `RepeatabilityCreation` (when it was first sent) — which a Gateway service built
/// as idempotent honours by executing the change once and answering it again as it first did,
/// with `RepeatabilityResult: accepted`; a service that does not ignores them (SAP's "Idempotency"
/// documentation of Gateway services). V2 has no OASIS `Repeatability-*` headers.
package struct V2Dialect: Dialect {
    /// The method of a partial update: nil for `MERGE` (which SAP Gateway takes inside and
    /// outside `$batch`), or `PATCH` for a service configured to take it.
    package var updateMethod: String?

    package init(updateMethod: String? = nil) { self.updateMethod = updateMethod }

    package var capabilities: BackendCapabilities { .v2 }

    package var countOption: String { "$inlinecount=allpages" }

    /// A create leaves out nulls (V2 leaves a property a create does not send at its default),
    /// the properties the service computes (`sap:creatable="false"`, which Gateway refuses to be
    /// sent) and those it assigns (a local key's values).
    package func request(for change: OutgoingChange, store: EntityStore) throws -> WireRequest {
        if change.kind == .call { return try call(change, store: store) }
        let set = try store.set(change.set)
        let json = ValueJSON(schema: store.schema)
        var method = Wire.method(change.kind)
        var url =
            try change.parent?.url
            ?? entityPath(set: change.set, key: change.key, keyText: change.keyText, store: store)
        var body: [UInt8]? = nil
        switch change.kind {
        case .create:
            url = change.parent?.url ?? Wire.percentEncoded(change.set)
            let props = try Wire.properties(change, store: store)
            var select: Set<String> = []
            for p in set.type.properties {
                guard let v = props[p.name], !v.isNull, !change.serviceAssigned.contains(p.name) else { continue }
                if p.computed, !set.type.key.contains(p.name) { continue }
                select.insert(p.name)
            }
            body = json.writeV2(props, properties: set.type.properties, select: select)
        case .update:
            method = updateMethod ?? "MERGE"
            let props = try Wire.properties(change, store: store)
            body = json.writeV2(props, properties: set.type.properties, select: Set(props.keys))
        case .replace:
            let props = try Wire.properties(change, store: store)
            let select = Set(set.type.properties.filter { !$0.computed || set.type.key.contains($0.name) }.map(\.name))
            body = json.writeV2(props, properties: set.type.properties, select: select)
        case .delete:
            break
        case .putStream:
            // The bytes go from `change.stream` as the request is sent (`WireRequest.source`).
            url = Wire.streamPath(change, entity: url)
        case .createMedia:
            url = Wire.percentEncoded(change.set)
        case .call:
            return try call(change, store: store)
        case .link, .unlink:
            // `Set(key)/$links/Nav` ([MS-ODATA] §2.2.7.1.3, SAP Gateway): added by POST (PUT for a
            // single-valued navigation) with `{"uri": …}`, removed by DELETE of
            // `$links/Nav(targetKey)` (of `$links/Nav` for a single-valued one).
            guard let link = change.link else { throw BackendError.badResponse("a link change without its link") }
            let target = try entityPath(
                set: link.targetSet, key: link.targetKey, keyText: link.targetKeyText, store: store)
            url += "/$links/" + Wire.percentEncoded(link.navigation)
            if change.kind == .link {
                var text = JSONBuffer()
                text.append("{\"uri\":")
                text.appendString(link.serviceRoot + target)
                text.append("}")
                body = text.bytes
                if !link.collection { method = "PUT" }
            } else if link.collection {
                url += String(target.dropFirst(Wire.percentEncoded(link.targetSet).count))
            }
        }
        var headers = Wire.customHeaders(change) + Wire.slug(change)
        headers.append(("RequestID", Self.requestID(change.repeatabilityID)))
        headers.append(("RepeatabilityCreation", Wire.imfDate(change.firstSent)))
        if let etag = change.etag { headers.append(("If-Match", etag)) }
        return WireRequest(method: method, url: url, headers: headers, body: body)
    }

    /// A function import called ([MS-ODATA] §2.2.3.6.1.4 service operations; SAP Gateway): with
    /// the method it declares (`m:HttpMethod`), at the service root, its parameters as V2 URI
    /// literals in the query (a null one left out) and no body — a call bound by `sap:action-for`
    /// too, whose entity the key parameters name. The idempotency headers go as with any change.
    func call(_ change: OutgoingChange, store: EntityStore) throws -> WireRequest {
        guard let call = change.call else { throw BackendError.badResponse("a call without its operation") }
        guard change.parent == nil else {
            throw BackendError.badResponse(
                "\(call.operation): a V2 function import names its entity by key parameters, not by a Content-ID; flush the create it acts on first (no contentIDReferences)"
            )
        }
        var parameters = call.parameters
        if !change.set.isEmpty {
            // Bound: a key parameter left out is the entity's key as it is now.
            let keyNames = try store.set(change.set).type.key
            for (i, p) in parameters.enumerated() where p.value.isNull {
                if let k = keyNames.firstIndex(of: p.name), k < change.key.count { parameters[i].value = change.key[k] }
            }
        }
        var query: [String] = []
        for p in parameters where !p.value.isNull {
            guard case .primitive(let type) = p.type else {
                throw BackendError.badResponse(
                    "\(call.operation): parameter '\(p.name)' is of type \(p.type); a V2 function import takes primitive parameters only"
                )
            }
            query.append(Wire.queryEncoded(p.name) + "=" + Wire.queryEncoded(Self.literal(p.value, type: type)))
        }
        var url = Wire.percentEncoded(call.importName ?? call.operation)
        if !query.isEmpty { url += "?" + query.joined(separator: "&") }
        var headers = Wire.customHeaders(change)
        if call.isAction {
            headers.append(("RequestID", Self.requestID(change.repeatabilityID)))
            headers.append(("RepeatabilityCreation", Wire.imfDate(change.firstSent)))
        }
        return WireRequest(method: call.httpMethod, url: url, headers: headers, body: nil)
    }

    /// `Set(key)` with the key in V2's literals (`123L` for Int64, `guid'…'`, `datetime'…'`, `1.5M`).
    package func entityPath(set: String, key: [Value], keyText: String, store: EntityStore) throws -> String {
        let type = try store.set(set).type
        let literals = zip(type.key, key).map { name, v in Self.literal(v, type: type.property(name)?.type.primitive) }
        let predicate =
            literals.count == 1 ? literals[0] : zip(type.key, literals).map { "\($0)=\($1)" }.joined(separator: ",")
        return Wire.percentEncoded("\(set)(\(predicate))")
    }

    /// `odata.track-changes` (SAP's V2 services with delta support take it); no page size — V2 has
    /// no client-driven paging, and Gateway pages as its service implementation decides.
    package func pageHeaders(_ page: PageRequest) -> [(String, String)] {
        page.trackChanges ? [("Prefer", "odata.track-changes")] : []
    }

    /// Gateway's `RequestID`: a GUID as 32 hexadecimal digits (upper case, no hyphens).
    static func requestID(_ id: EDMGuid) -> String {
        String(id.description.filter { $0 != "-" }.uppercased())
    }

    /// A key value as a V2 URI literal ([MS-ODATA] §2.2.2).
    package func literal(_ v: Value, type: EDMPrimitive?) -> String { Self.literal(v, type: type) }

    static func literal(_ v: Value, type: EDMPrimitive?) -> String {
        switch v {
        case .int(let i) where type == .int64: "\(i)L"
        case .decimal(let d): "\(d)M"
        case .guid(let g): "guid'\(g)'"
        case .dateTimeOffset(let d) where type == .dateTimeOffset: "datetimeoffset'\(d)'"
        case .dateTimeOffset(let d):
            // Edm.DateTime: the instant in UTC, without an offset.
            "datetime'\(String(EDMDateTimeOffset(ticks: d.ticks).description.dropLast()))'"
        case .timeOfDay(let t): "time'\(ValueJSON.v2Time(ticks: t.ticks))'"
        default: EntitySetHandle.literal(v)
        }
    }
}
