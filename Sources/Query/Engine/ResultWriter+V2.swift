import Storage

/// OData V2 verbose JSON ([MS-ODATA] §2.2.6.3), for a store made from V2 `$metadata`
/// (`ResultOptions.verbose`):
///
/// ```json
/// {"d":{"__count":"2","results":[
///   {"__metadata":{"id":"http://h/Products('A')","uri":"http://h/Products('A')","type":"NS.Product","etag":"W/\"…\""},
///    "ProductID":"A","Price":"10.50","CreatedAt":"/Date(1700000000000)/",
///    "ToSupplier":{"__deferred":{"uri":"http://h/Products('A')/ToSupplier"}}}],
///  "__next":"http://h/Products?$skiptoken=…"}}
/// ```
///
/// Values take V2's forms (`ValueJSON.writeV2`); a navigation property that is not expanded is
/// `__deferred` (when no `$select` leaves it out), an expanded collection `{"results":[…]}`, an
/// expanded single one an object or `null`.
extension ResultWriter {
    mutating func beginCollectionV2(count: Int?) {
        buffer.append("{\"d\":{")
        if let count {
            buffer.append("\"__count\":\"")
            buffer.appendInt(Int64(count))
            buffer.append("\",")
        }
        buffer.append("\"results\":[")
    }

    mutating func endCollectionV2(nextLink: String?) {
        buffer.append("]")
        if let nextLink {
            buffer.append(",\"__next\":")
            buffer.appendString(options.link(nextLink))
        }
        buffer.append("}}\n")
    }

    /// One entity as a V2 object: `__metadata`, the selected properties in declaration order,
    /// then each navigation property — expanded, or deferred.
    func writeEntityV2(_ e: EntityRef, shape: EntityShape, executor: QueryExecutor, to out: inout JSONBuffer) throws {
        let root = options.serviceRoot ?? ""
        var url = JSONBuffer()
        try shape.writeCanonicalURL(e, to: &url)
        // The relative URL as written (a JSON string): its text without the quotes, under the root.
        let relative = String(decoding: url.bytes.dropFirst().dropLast(), as: UTF8.self)
        out.append("{\"__metadata\":{\"id\":")
        out.appendRaw("\"" + root + relative + "\"")
        out.append(",\"uri\":")
        out.appendRaw("\"" + root + relative + "\"")
        out.append(",\"type\":")
        out.appendString(e.set.type.qualifiedName)
        if shape.etags {
            out.append(",\"etag\":")
            EntityShape.writeTag(try e.etagHash(), to: &out)
        }
        if e.set.streams != nil { try writeMediaMetadataV2(e, executor: executor, absolute: root + relative, to: &out) }
        out.append("}")
        for c in shape.columns {
            out.append(UInt8(ascii: ","))
            out.bytes.append(contentsOf: c.member)
            let v = try e.value(at: c.index)
            if let sub = c.subtree {
                writeSelected(v, type: c.type, tree: sub, to: &out)
            } else {
                values.writeV2(v, type: c.type, to: &out)
            }
        }
        let expanded = Dictionary(shape.expansions.map { ($0.expand.navigation.name, $0) }) { a, _ in a }
        for nav in e.set.type.navigationProperties {
            if let expansion = expanded[nav.name] {
                out.append(UInt8(ascii: ","))
                try writeExpansionV2(e, expansion, executor: executor, to: &out)
            } else if shape.options.select == nil {
                out.append(UInt8(ascii: ","))
                out.appendString(nav.name)
                out.append(":{\"__deferred\":{\"uri\":")
                out.appendRaw("\"" + root + relative + "/" + nav.name + "\"")
                out.append("}}")
            }
        }
        out.append(UInt8(ascii: "}"))
    }

    /// `"Items":{"results":[…]}` or `"Customer":{…}|null`, with the nested options applied.
    func writeExpansionV2(
        _ e: EntityRef, _ expansion: EntityShape.Expansion, executor: QueryExecutor, to out: inout JSONBuffer
    ) throws {
        let plan = try expansionPlan(e, expansion, executor: executor)
        out.appendString(expansion.expand.navigation.name)
        out.append(UInt8(ascii: ":"))
        let collection = expansion.expand.navigation.isCollection
        if collection { out.append("{\"results\":[") }
        try writeExpanded(plan, expansion, executor: executor, to: &out)
        if collection { out.append("]}") }
    }
}
