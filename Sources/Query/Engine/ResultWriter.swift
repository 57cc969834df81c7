import Foundation
import Storage

/// Writes query results as OData V4 JSON, JSON lines or a text table, straight from the rows into
/// a byte buffer, handing 64 KiB chunks to the sink.
struct ResultWriter {
    let schema: Schema
    let format: QueryEngine.Format
    let options: ResultOptions
    let sink: (UnsafeRawBufferPointer) throws -> Void
    let values: ValueJSON
    var buffer = JSONBuffer(capacity: 1 << 16 + 4096)
    var first = true
    /// Table columns, fixed by the first entity.
    var columns: [String]? = nil

    init(
        schema: Schema, format: QueryEngine.Format, options: ResultOptions = ResultOptions(),
        sink: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) {
        self.schema = schema
        self.format = format
        self.options = options
        self.sink = sink
        values = ValueJSON(schema: schema)
    }

    mutating func raw(_ s: String) throws { buffer.appendRaw(s); try flushIfFull() }

    mutating func flushIfFull() throws {
        if buffer.count >= 1 << 16 { try flush() }
    }

    mutating func flush() throws {
        if !buffer.isEmpty {
            try buffer.bytes.withUnsafeBytes { try sink($0) }
            buffer.removeAll()
        }
    }

    /// Writes one entity into the buffer, moved out of `self` while `writeEntity` (a method of
    /// this writer) runs.
    private mutating func appendEntity(_ e: EntityRef, shape: EntityShape, executor: QueryExecutor) throws {
        var out = JSONBuffer(capacity: 0)
        swap(&out, &buffer)
        defer { swap(&out, &buffer) }
        try writeEntity(e, shape: shape, executor: executor, to: &out)
    }

    mutating func beginCollection(context: String, count: Int?) throws {
        guard format == .json else { return }
        if options.verbose { return beginCollectionV2(count: count) }
        buffer.append("{\"@odata.context\":")
        buffer.appendString(options.contextURL(context))
        if let count { buffer.append(",\"@odata.count\":"); buffer.appendInt(Int64(count)) }
        buffer.append(",\"value\":[")
    }

    /// Closes the collection; a delta link is written only when there is no next link (only the
    /// last page of a collection carries one).
    mutating func endCollection(nextLink: String?, deltaLink: String? = nil) throws {
        guard format == .json else { return }
        if options.verbose { return endCollectionV2(nextLink: nextLink) }
        buffer.append("]")
        if let nextLink {
            buffer.append(",\"@odata.nextLink\":")
            buffer.appendString(options.link(nextLink))
        } else if let deltaLink {
            buffer.append(",\"@odata.deltaLink\":")
            buffer.appendString(options.link(deltaLink))
        }
        buffer.append("}\n")
    }

    mutating func single(_ e: EntityRef, context: String, shape: EntityShape, executor: QueryExecutor) throws {
        switch format {
        case .json where options.verbose:
            buffer.append("{\"d\":")
            try writeEntityV2(e, shape: shape, executor: executor, to: &buffer)
            buffer.append("}\n")
        case .json:
            var body = JSONBuffer()
            try writeEntity(e, shape: shape, executor: executor, to: &body)
            buffer.append("{\"@odata.context\":")
            buffer.appendString(options.contextURL(context))
            if body.count > 2 {
                buffer.append(UInt8(ascii: ",")); buffer.bytes.append(contentsOf: body.bytes.dropFirst())
            } else {
                buffer.append("}")
            }
            buffer.append("\n")
        default:
            try entity(e, shape: shape, executor: executor)
        }
    }

    /// Writes `e` as `entity` does, or — when its expansions would pass the response's budget
    /// (`ExpansionBudget`) — writes nothing of it and returns false. `entity` writes a whole
    /// entity, its expansions included, into the buffer before it flushes, so what it began is
    /// still there to take back.
    mutating func entityWithinBudget(_ e: EntityRef, shape: EntityShape, executor: QueryExecutor) throws -> Bool {
        let (mark, wasFirst, hadColumns) = (buffer.count, first, columns)
        do {
            try entity(e, shape: shape, executor: executor)
            return true
        } catch  where executor.expansions.exhausted && buffer.count >= mark {
            buffer.truncate(to: mark)
            (first, columns) = (wasFirst, hadColumns)
            return false
        }
    }

    mutating func entity(_ e: EntityRef, shape: EntityShape, executor: QueryExecutor) throws {
        switch format {
        case .json:
            if !first { buffer.append(UInt8(ascii: ",")) }
            first = false
            try appendEntity(e, shape: shape, executor: executor)
        case .jsonl:
            try appendEntity(e, shape: shape, executor: executor)
            buffer.append("\n")
        case .table:
            let selected = selectedProperties(e.set, shape.options)
            if columns == nil {
                let names = selected.map(\.name)
                columns = names
                buffer.appendRaw(names.map { pad($0) }.joined(separator: " ") + "\n")
                buffer.appendRaw(names.map { _ in String(repeating: "-", count: 20) }.joined(separator: " ") + "\n")
            }
            var cells: [String] = []
            for p in selected {
                var cell = ""
                let v = try e.value(p.name)
                if case .string(let s) = v { cell = s } else { values.write(v, type: p.type, to: &cell) }
                if cell.count >= 2, cell.hasPrefix("\""), cell.hasSuffix("\""), !v.isString {
                    cell = String(cell.dropFirst().dropLast())
                }
                cells.append(pad(cell))
            }
            buffer.appendRaw(cells.joined(separator: " ") + "\n")
        }
        try flushIfFull()
    }

    /// A delta entry for an entity that is no longer in the collection:
    /// `{"@odata.id":"Set(key)","@removed":{"reason":"deleted"}}` (reason `changed`: it exists
    /// but left the filter).
    mutating func removed(id: String, reason: StaticString) throws {
        if !first { buffer.append(UInt8(ascii: ",")) }
        first = false
        buffer.append("{\"@odata.id\":")
        buffer.appendString(id)
        buffer.append(",\"@removed\":{\"reason\":\"")
        buffer.append(reason)
        buffer.append("\"}}")
        try flushIfFull()
    }

    /// A delta entry of an entity of another set than the response's (OData JSON Format 4.0,
    /// *Delta Response*: such an entry names its set): `{"@odata.context":"$metadata#Set/$entity",
    /// "@odata.id":…,…}`, the rest as `writeEntity` writes it.
    mutating func entity(
        _ e: EntityRef, context: String, shape: EntityShape, executor: QueryExecutor
    ) throws {
        var body = JSONBuffer()
        try writeEntity(e, shape: shape, executor: executor, to: &body)
        if !first { buffer.append(UInt8(ascii: ",")) }
        first = false
        buffer.append("{\"@odata.context\":")
        buffer.appendString(options.contextURL(context + "/$entity"))
        if body.count > 2 {
            buffer.append(UInt8(ascii: ",")); buffer.bytes.append(contentsOf: body.bytes.dropFirst())
        } else {
            buffer.append("}")
        }
        try flushIfFull()
    }

    /// A delta entry for an entity of another set than the response's that is no longer in it, in
    /// OData JSON Format 4.0's form: `{"@odata.context":"$metadata#Set/$deletedEntity",
    /// "id":"Set(key)","reason":"deleted"}`.
    mutating func removed(id: String, context: String, reason: StaticString) throws {
        if !first { buffer.append(UInt8(ascii: ",")) }
        first = false
        buffer.append("{\"@odata.context\":")
        buffer.appendString(options.contextURL(context + "/$deletedEntity"))
        buffer.append(",\"id\":")
        buffer.appendString(id)
        buffer.append(",\"reason\":\"")
        buffer.append(reason)
        buffer.append("\"}")
        try flushIfFull()
    }

    func pad(_ s: String) -> String {
        let clean = s.replacingOccurrences(of: "\n", with: " ")
        if clean.count > 20 { return String(clean.prefix(19)) + "…" }
        return clean + String(repeating: " ", count: 20 - clean.count)
    }

    func selectedProperties(_ set: EntitySetHandle, _ options: BoundOptions) -> [Property] {
        guard let select = options.select else { return set.type.properties }
        let names = Set(select.properties.compactMap { $0.steps.first?.name })
        return set.type.properties.filter { names.contains($0.name) }
    }

    /// `$select` paths as a tree: property → nil (all of it) or the selected parts of a complex value.
    final class SelectTree {
        var children: [String: SelectTree?] = [:]
        init(_ paths: [[String]]) {
            for path in paths where !path.isEmpty { add(path[...]) }
        }
        private init() {}
        private func add(_ path: ArraySlice<String>) {
            let head = path.first!
            if path.count == 1 { children[head] = .some(nil); return }
            if case .some(nil) = children[head] { return }  // already whole
            let sub = (children[head] ?? nil) ?? SelectTree()
            sub.add(path.dropFirst())
            children[head] = sub
        }
    }

    /// Writes a complex value keeping only the properties `tree` selects.
    func writeSelected(_ v: Value, type: TypeRef, tree: SelectTree, to out: inout JSONBuffer) {
        guard case .complex(let props) = v, case .complex(let name) = type, let ct = schema.complexTypes[name] else {
            values.write(v, type: type, to: &out)
            return
        }
        out.append(UInt8(ascii: "{"))
        var first = true
        for p in ct.properties {
            guard let sub = tree.children[p.name] else { continue }
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.appendString(p.name)
            out.append(UInt8(ascii: ":"))
            if let sub {
                writeSelected(props[p.name] ?? .null, type: p.type, tree: sub, to: &out)
            } else {
                values.write(props[p.name] ?? .null, type: p.type, to: &out)
            }
        }
        out.append(UInt8(ascii: "}"))
    }

    /// One entity as a JSON object: `@odata.id` when the shape says so, `@odata.etag` when asked,
    /// selected properties in declaration order, then expansions.
    func writeEntity(_ e: EntityRef, shape: EntityShape, executor: QueryExecutor, to out: inout JSONBuffer) throws {
        if options.verbose { return try writeEntityV2(e, shape: shape, executor: executor, to: &out) }
        out.append(UInt8(ascii: "{"))
        var firstMember = true
        if shape.writesID {
            out.append("\"@odata.id\":")
            try shape.writeCanonicalURL(e, to: &out)
            firstMember = false
        }
        if shape.etags {
            if !firstMember { out.append(UInt8(ascii: ",")) }
            out.append("\"@odata.etag\":")
            EntityShape.writeTag(try e.etagHash(), to: &out)
            firstMember = false
        }
        if e.set.streams != nil {
            try writeMediaAnnotations(e, shape: shape, executor: executor, first: &firstMember, to: &out)
        }
        for c in shape.columns {
            if !firstMember { out.append(UInt8(ascii: ",")) }
            firstMember = false
            out.bytes.append(contentsOf: c.member)
            if let sub = c.subtree {
                writeSelected(try e.value(at: c.index), type: c.type, tree: sub, to: &out)
            } else if c.kind != .value, e.isRow {
                // Straight from the row's bytes, without a `Value` (`RowJSON`).
                if let raw = try e.rawBytes(at: c.index) {
                    if !RowJSON.write(c.kind, raw, to: &out) {
                        if c.kind == .string {
                            throw EntityError.corruptRow(set: e.set.name, key: "", reason: "string is not valid UTF-8")
                        }
                        values.write(try e.value(at: c.index), type: c.type, to: &out)  // reports the corrupt row
                    }
                } else {
                    out.append("null")
                }
            } else {
                values.write(try e.value(at: c.index), type: c.type, to: &out)
            }
        }
        for expansion in shape.expansions {
            if !firstMember { out.append(UInt8(ascii: ",")) }
            firstMember = false
            try writeExpansion(e, expansion, executor: executor, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// `"Items":[…]` or `"Customer":{…}|null`, with the nested options applied.
    func writeExpansion(
        _ e: EntityRef, _ expansion: EntityShape.Expansion, executor: QueryExecutor, to out: inout JSONBuffer
    ) throws {
        let expand = expansion.expand
        let name = expand.navigation.name
        let plan = try expansionPlan(e, expansion, executor: executor)
        if expand.navigation.isCollection {
            if expand.options.count {
                out.appendString(name + "@odata.count")
                out.append(UInt8(ascii: ":")); out.appendInt(Int64(try plan.map(executor.count) ?? 0))
                out.append(UInt8(ascii: ","))
            }
            out.appendString(name)
            out.append(":[")
            try writeExpanded(plan, expansion, executor: executor, to: &out)
            out.append(UInt8(ascii: "]"))
        } else {
            out.appendString(name)
            out.append(UInt8(ascii: ":"))
            try writeExpanded(plan, expansion, executor: executor, to: &out)
        }
    }

    /// How to read the entities `expansion` reaches from `e`; nil when it reaches none (a null
    /// foreign key, or a navigation the store cannot resolve).
    func expansionPlan(_ e: EntityRef, _ expansion: EntityShape.Expansion, executor: QueryExecutor) throws -> QueryPlan?
    {
        let constraints = try executor.evaluator.navigator.constraints(of: e, expansion.expand.navigation)
        if constraints == nil, let keys = try executor.evaluator.navigator.linked(e, expansion.expand) {
            return Planner.plan(expansion.shape.set, options: expansion.expand.options, keys: keys)
        }
        guard let constraints, !constraints.contains(where: { $0.1.isNull }) else { return nil }
        return Planner.plan(expansion.shape.set, options: expansion.expand.options, equalities: constraints)
    }

    /// The entities of `plan`, comma-separated, each in the writer's dialect — for a single-valued
    /// navigation the first one, or `null`.
    func writeExpanded(
        _ plan: QueryPlan?, _ expansion: EntityShape.Expansion, executor: QueryExecutor, to out: inout JSONBuffer
    ) throws {
        let single = !expansion.expand.navigation.isCollection
        var written = 0
        if let plan {
            try executor.run(plan) { child in
                try executor.expansions.spend(on: expansion.expand)
                if written > 0 { out.append(UInt8(ascii: ",")) }
                written += 1
                try writeEntity(child, shape: expansion.shape, executor: executor, to: &out)
                return !single
            }
        }
        if single, written == 0 { out.append("null") }
    }
}

/// How the entities of one set are written under one `BoundOptions`, decided once per request
/// (and per `$expand` level) rather than per row: the `$select` tree, whether `@odata.id` and
/// `@odata.etag` are written, and the same for each expansion.
final class EntityShape {
    struct Expansion {
        let expand: BoundExpand
        let shape: EntityShape
    }

    /// A selected structural property: its row position, `"Name":` as JSON, and the selected
    /// parts when only some of a complex value is selected.
    struct Column {
        let index: Int
        let member: [UInt8]
        let type: TypeRef
        /// How the value is written from the row's bytes (`RowJSON`).
        let kind: RowJSON.Kind
        let subtree: ResultWriter.SelectTree?
    }

    let set: EntitySetHandle
    let options: BoundOptions
    /// The selected structural properties in declaration order.
    let columns: [Column]
    /// `@odata.id` is written when the selected properties leave out a key property (OData JSON
    /// Format, *Control Information: id*: in minimal metadata it is left out only when it can be
    /// computed from the key properties in the payload), or always (delta entries).
    let writesID: Bool
    let etags: Bool
    /// A singleton's canonical URL is its name.
    let isSingleton: Bool
    let expansions: [Expansion]
    /// What `writeCanonicalURL` needs, worked out once: `Set(` and each key property's row
    /// position, type and `Name=` (composite keys).
    private let urlPrefix: [UInt8]
    private let keys: [(position: Int, isString: Bool, prefix: [UInt8])]
    /// The URL being written; reused from entity to entity (a shape serves one request, on one thread).
    private var scratch: [UInt8] = []

    init(set: EntitySetHandle, options: BoundOptions, store: EntityStore, etags: Bool, alwaysID: Bool = false) throws {
        self.set = set
        self.options = options
        let tree = options.select.map { ResultWriter.SelectTree($0.properties.map { $0.steps.map(\.name) }) }
        columns = set.type.properties.indices.compactMap { i in
            let p = set.type.properties[i]
            var subtree: ResultWriter.SelectTree? = nil
            if let tree {
                guard let selected = tree.children[p.name] else { return nil }
                subtree = selected
            }
            var member = JSONBuffer(capacity: p.name.utf8.count + 3)
            member.appendString(p.name)
            member.append(UInt8(ascii: ":"))
            return Column(
                index: i, member: member.bytes, type: p.type, kind: RowJSON.kind(of: p.type), subtree: subtree)
        }
        let keysSelected = tree.map { t in set.type.key.allSatisfy { t.children[$0] != nil } } ?? true
        writesID = alwaysID || !keysSelected
        self.etags = etags
        isSingleton = store.schema.entitySet(set.name)?.isSingleton ?? false
        urlPrefix = Array((set.name + (isSingleton ? "" : "(")).utf8)
        let composite = set.type.key.count > 1
        keys = set.type.key.enumerated().compactMap { n, name in
            guard let i = set.position(of: name) else { return nil }
            let isString: Bool
            if case .primitive(.string) = set.type.properties[i].type { isString = true } else { isString = false }
            return (i, isString, Array(((n > 0 ? "," : "") + (composite ? name + "=" : "")).utf8))
        }
        expansions = try options.expand.map { e in
            Expansion(
                expand: e,
                shape: try EntityShape(set: try store.set(e.entitySet), options: e.options, store: store, etags: etags))
        }
    }

    /// Writes the entity's canonical URL relative to the service root as a JSON string:
    /// `Set('k')`, `Set(A='x',B=1)`, or a singleton's name; key literals as in a request URL
    /// (`EntitySetHandle.literal`), a string key straight from the row's bytes.
    func writeCanonicalURL(_ e: EntityRef, to out: inout JSONBuffer) throws {
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: urlPrefix)
        if !isSingleton {
            let quote = UInt8(ascii: "'")
            for k in keys {
                scratch.append(contentsOf: k.prefix)
                if k.isString, let raw = try e.rawBytes(at: k.position) {
                    scratch.append(quote)
                    for b in raw {
                        scratch.append(b)
                        if b == quote { scratch.append(quote) }
                    }
                    scratch.append(quote)
                } else {
                    let v = try e.value(at: k.position)
                    if case .int(let i) = v {
                        scratch.append(contentsOf: String(i).utf8)
                    } else {
                        scratch.append(contentsOf: EntitySetHandle.literal(v).utf8)
                    }
                }
            }
            scratch.append(UInt8(ascii: ")"))
        }
        let ok = scratch.withUnsafeBytes { out.appendString(utf8: $0) }
        if !ok { throw EntityError.corruptRow(set: e.set.name, key: "", reason: "string is not valid UTF-8") }
    }

    /// The canonical URL of the entity of `set` with key `key`, as `writeCanonicalURL` writes it.
    static func canonicalURL(_ set: EntitySetHandle, _ key: [Value]) -> String {
        set.name + "(" + set.describeKey(key) + ")"
    }

    /// `"W/\"<16 hex digits>\""` (`EntityTag.format` as a JSON string) without making a String.
    static func writeTag(_ hash: UInt64, to out: inout JSONBuffer) {
        out.append("\"W/\\\"")
        for shift in stride(from: 60, through: 0, by: -4) {
            let d = UInt8((hash >> UInt64(shift)) & 0xF)
            out.append(d < 10 ? 0x30 + d : 0x57 + d)
        }
        out.append("\\\"\"")
    }
}
