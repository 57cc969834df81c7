import Queue
package import Storage
package import Sync

/// OData V4 (and S/4HANA's RAP services): JSON bodies as the store writes them, `PATCH`, the
/// OASIS repeatability headers, `Prefer: return=representation` on a create, `$count=true`,
/// `Prefer: odata.maxpagesize`.
package struct V4Dialect: Dialect {
    package init() {}

    package var capabilities: BackendCapabilities { .v4 }

    package var countOption: String { "$count=true" }

    /// A create sends the properties the entity sets (not nulls) but those the service assigns;
    /// an update or a replacement sends the body as queued; every change carries
    /// `Repeatability-Request-ID` and `Repeatability-First-Sent` (OData 4.01 §11.4.12) and the
    /// ETag to match as `If-Match`.
    package func request(for change: OutgoingChange, store: EntityStore) throws -> WireRequest {
        let url: String
        var body: [UInt8]? = nil
        switch change.kind {
        case .create:
            url = change.parent?.url ?? Wire.percentEncoded(change.set)
            let set = try store.set(change.set)
            var props = try Wire.properties(change, store: store)
            for name in change.serviceAssigned { props[name] = nil }
            // What the entity sets, not every declared property as null: a property left out takes
            // the service's default, and a service that dropped one from its `$metadata` still
            // takes a create that never set it. Keys are sent whatever their value.
            let select = Set(
                set.type.properties.map(\.name).filter { name in
                    !change.serviceAssigned.contains(name)
                        && (set.type.key.contains(name) || !(props[name]?.isNull ?? true))
                })
            var text = ""
            ValueJSON(schema: store.schema).write(props, properties: set.type.properties, select: select, to: &text)
            body = Array(text.utf8)
        case .update, .replace:
            url =
                try change.parent?.url
                ?? entityPath(set: change.set, key: change.key, keyText: change.keyText, store: store)
            body = change.body.map { Array($0.utf8) } ?? Array("{}".utf8)
        case .delete:
            url =
                try change.parent?.url
                ?? entityPath(set: change.set, key: change.key, keyText: change.keyText, store: store)
        case .putStream:
            // The bytes go from `change.stream` as the request is sent (`WireRequest.source`).
            url = Wire.streamPath(
                change, entity: try entityPath(set: change.set, key: change.key, keyText: change.keyText, store: store))
        case .createMedia:
            url = Wire.percentEncoded(change.set)
        case .call:
            // An action (OData 4.01 Part 1 §11.5.4): POST to the bound entity's path and the
            // action's qualified name, or to the action import; the parameters a JSON object.
            guard let call = change.call else { throw BackendError.badResponse("a call without its operation") }
            if !call.isAction {
                // A function (§11.5.3): GET, its parameters inline as V4 literals.
                let inline = call.parameters.map { "\($0.name)=\(EntitySetHandle.literal($0.value))" }
                let name =
                    Wire.percentEncoded(call.importName ?? call.operation) + "("
                    + Wire.percentEncoded(inline.joined(separator: ",")) + ")"
                url =
                    call.importName != nil
                    ? name
                    : try entityPath(set: change.set, key: change.key, keyText: change.keyText, store: store) + "/"
                        + name
            } else if let name = call.importName {
                url = Wire.percentEncoded(name)
            } else {
                // On an entity an earlier create of the change set made: by its Content-ID (`$1`).
                let entity =
                    try change.parent?.url
                    ?? entityPath(set: change.set, key: change.key, keyText: change.keyText, store: store)
                url = entity + "/" + Wire.percentEncoded(call.operation)
            }
            guard call.isAction else { break }
            let json = ValueJSON(schema: store.schema)
            var text = "{"
            for (i, p) in call.parameters.enumerated() {
                if i > 0 { text += "," }
                JSONWriter.write(.string(p.name), to: &text)
                text += ":"
                json.write(p.value, type: p.type, to: &text)
            }
            body = Array((text + "}").utf8)
        case .link, .unlink:
            // `Set(key)/Nav/$ref` (OData 4.01 Part 1 §11.4.6): added by POST (PUT for a
            // single-valued navigation) with the target's id, removed by DELETE naming it in `$id`.
            guard let link = change.link else { throw BackendError.badResponse("a link change without its link") }
            let target =
                link.serviceRoot
                + (try entityPath(set: link.targetSet, key: link.targetKey, keyText: link.targetKeyText, store: store))
            let ref =
                try entityPath(set: change.set, key: change.key, keyText: change.keyText, store: store) + "/"
                + Wire.percentEncoded(link.navigation) + "/$ref"
            url = change.kind == .unlink && link.collection ? ref + "?$id=" + Wire.queryEncoded(target) : ref
            if change.kind == .link {
                var text = JSONBuffer()
                text.append("{\"@odata.id\":")
                text.appendString(target)
                text.append("}")
                body = text.bytes
            }
        }
        var headers = Wire.customHeaders(change) + Wire.slug(change)
        // Repeatability is for a request that changes something (a function only reads).
        if change.call?.isAction != false {
            headers.append(("Repeatability-Request-ID", change.repeatabilityID.description))
            headers.append(("Repeatability-First-Sent", Wire.imfDate(change.firstSent)))
        }
        if let etag = change.etag { headers.append(("If-Match", etag)) }
        if change.kind == .create || change.kind == .createMedia,
            !headers.contains(where: { $0.0.lowercased() == "prefer" })
        {
            headers.append(("Prefer", "return=representation"))
        }
        var method = Wire.method(change.kind)
        if change.kind == .link, change.link?.collection == false { method = "PUT" }
        if change.call?.isAction == false { method = "GET" }
        return WireRequest(method: method, url: url, headers: headers, body: body)
    }

    package func entityPath(set: String, key: [Value], keyText: String, store: EntityStore) throws -> String {
        Wire.percentEncoded("\(set)(\(keyText))")
    }

    package func literal(_ v: Value, type: EDMPrimitive?) -> String { EntitySetHandle.literal(v) }

    /// `odata.track-changes` for a delta link, `odata.maxpagesize` for the page size.
    package func pageHeaders(_ page: PageRequest) -> [(String, String)] {
        var prefer: [String] = []
        if page.trackChanges { prefer.append("odata.track-changes") }
        if let n = page.pageSize { prefer.append("odata.maxpagesize=\(n)") }
        return prefer.isEmpty ? [] : [("Prefer", prefer.joined(separator: ", "))]
    }
}
