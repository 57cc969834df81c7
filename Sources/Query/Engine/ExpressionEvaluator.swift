import Foundation
package import Storage

/// Evaluates bound expressions against entities, with OData's null semantics (see `TypedExpr`).
///
/// Reads through `navigator` for navigation paths and lambdas, so it lives inside one read
/// transaction. A filter keeps an entity only when its predicate is `true`.
package struct ExpressionEvaluator {
    let navigator: Navigator
    /// Lambda variables in scope: an entity (collection navigation) or a value (collection property).
    var variables: [String: Variable] = [:]
    /// `now()` is fixed for one query.
    let now: EDMDateTimeOffset

    enum Variable {
        case entity(EntityRef)
        case value(Value)
    }

    init(navigator: Navigator) {
        self.navigator = navigator
        let ticks = Int64(Date().timeIntervalSince1970 * 10_000_000)
        now = EDMDateTimeOffset(ticks: ticks)
    }

    /// `offline.isLocal()`, `offline.hasPendingChanges()`, `offline.inErrorState()` of `it`, from
    /// the request queue's `q/by-entity` (no scan of the queue).
    func localState(_ name: String, _ it: EntityRef) throws -> Bool {
        let state: LocalState
        if let pk = it.primaryKey {
            state = try navigator.store.localState(navigator.t, set: it.set.name, keyBytes: pk)
        } else {
            let pk = try it.set.encodeKey(try it.set.keyValues(try it.properties()))
            state = try navigator.store.localState(navigator.t, set: it.set.name, keyBytes: pk)
        }
        switch name {
        case "offline.islocal": return state.isLocal
        case "offline.haspendingchanges": return state.hasPendingChanges
        default: return state.inErrorState
        }
    }

    /// Whether `predicate` is true for `entity`.
    package func matches(_ predicate: TypedExpr, _ entity: EntityRef) throws -> Bool {
        if case .bool(true) = try evaluate(predicate, entity) { return true }
        return false
    }

    package func evaluate(_ e: TypedExpr, _ it: EntityRef) throws -> Value {
        switch e.kind {
        case .literal(let v): return v
        case .property(let path): return try resolve(path, it)
        case .compare(let op, let a, let b):
            if let r = try compareStringOnBytes(op, a, b, it) { return r }
            let x = try evaluate(a, it), y = try evaluate(b, it)
            return .bool(Self.compare(op, x, y))
        case .isNull(let x): return .bool(try evaluate(x, it).isNull)
        case .and(let xs): return try threeValued(xs, it, deciding: false)
        case .or(let xs): return try threeValued(xs, it, deciding: true)
        case .not(let x):
            if case .bool(let b) = try evaluate(x, it) { return .bool(!b) }
            return .null
        case .arithmetic(let op, let a, let b):
            return try Arithmetic.apply(op, try evaluate(a, it), try evaluate(b, it), at: e.position)
        case .negate(let x): return Arithmetic.negate(try evaluate(x, it))
        case .convert(let x): return Arithmetic.convert(try evaluate(x, it), to: e.type)
        case .function(let name, _) where name.hasPrefix("offline."):
            return .bool(try localState(name, it))
        case .function(let name, let args):
            return try Functions.call(
                name, try args.map { try evaluate($0, it) }, resultType: e.type, now: now, at: e.position)
        case .any(let path, let variable, let predicate):
            for element in try collection(path, it) {
                guard let predicate, let variable else { return .bool(true) }
                var inner = self
                inner.variables[variable] = element
                if try inner.matches(predicate, it) { return .bool(true) }
            }
            return .bool(false)
        case .all(let path, let variable, let predicate):
            for element in try collection(path, it) {
                var inner = self
                inner.variables[variable] = element
                if try !inner.matches(predicate, it) { return .bool(false) }
            }
            return .bool(true)
        case .in(let x, let values):
            let v = try evaluate(x, it)
            return .bool(values.contains { odataEqual(v, $0) })
        case .has(let x, let flag):
            guard case .enumMember(let v) = try evaluate(x, it) else { return .null }
            return .bool(v & flag == flag)
        case .count(let path):
            return .int(Int64(try collection(path, it).count))
        }
    }

    /// `StringProperty op 'literal'` on a row: compares the row's UTF-8 bytes with the literal's,
    /// which is ordinal order, without making a String. Nil when the shape does not apply.
    @inline(__always)
    func compareStringOnBytes(
        _ op: ComparisonOperator, _ a: TypedExpr, _ b: TypedExpr, _ it: EntityRef
    ) throws -> Value? {
        guard it.isRow, case .property(let path) = a.kind, path.variable == nil, path.steps.count == 1,
            case .property(let p) = path.steps[0], case .primitive(.string) = p.type,
            case .literal(.string(let text)) = b.kind, let i = it.set.position(of: p.name)
        else { return nil }
        guard let raw = try it.rawBytes(at: i) else { return .bool(op == .ne) }  // null: only `ne` holds
        var literal = text
        let c: Int = literal.withUTF8 { l in
            let n = min(raw.count, l.count)
            let m = n == 0 ? 0 : memcmp(raw.baseAddress!, l.baseAddress!, n)
            if m != 0 { return m < 0 ? -1 : 1 }
            return raw.count == l.count ? 0 : (raw.count < l.count ? -1 : 1)
        }
        switch op {
        case .eq: return .bool(c == 0)
        case .ne: return .bool(c != 0)
        case .gt: return .bool(c > 0)
        case .ge: return .bool(c >= 0)
        case .lt: return .bool(c < 0)
        case .le: return .bool(c <= 0)
        }
    }

    /// Three-valued `and` (`deciding` false) or `or` (true): the first operand equal to `deciding`
    /// settles it; else null if any operand was null; else the other truth value.
    func threeValued(_ xs: [TypedExpr], _ it: EntityRef, deciding: Bool) throws -> Value {
        var sawNull = false
        for x in xs {
            switch try evaluate(x, it) {
            case .bool(let b) where b == deciding: return .bool(deciding)
            case .null: sawNull = true
            default: break
            }
        }
        return sawNull ? .null : .bool(!deciding)
    }

    /// `eq`/`ne` treat null as a value; the ordering comparisons are false with a null operand.
    @inline(__always)
    static func compare(_ op: ComparisonOperator, _ x: Value, _ y: Value) -> Bool {
        switch op {
        case .eq: return odataEqual(x, y)
        case .ne: return !odataEqual(x, y)
        default:
            if x.isNull || y.isNull { return false }
            guard let c = compareValues(x, y) else { return false }
            switch op {
            case .gt: return c > 0
            case .ge: return c >= 0
            case .lt: return c < 0
            default: return c <= 0
            }
        }
    }

    /// The value at a member path: from `$it` or a lambda variable, through complex properties and
    /// single-valued navigation (null when a step finds nothing).
    func resolve(_ path: PropertyPath, _ it: EntityRef) throws -> Value {
        var entity: EntityRef? = it
        var value: Value = .null
        if let name = path.variable {
            switch variables[name] {
            case .entity(let e)?: entity = e
            case .value(let v)?: entity = nil; value = v
            case nil: return .null
            }
        }
        for step in path.steps {
            switch step {
            case .property(let p):
                if let e = entity {
                    value = try e.value(p.name)
                    entity = nil
                } else if case .complex(let props) = value {
                    value = props[p.name] ?? .null
                } else {
                    return .null
                }
            case .navigation(let nav, let target):
                guard let e = entity else { return .null }
                guard let next = try navigator.related(e, nav, targetSet: target).first else { return .null }
                entity = next
            }
        }
        if entity != nil { return .null }  // a path that ends on an entity has no primitive value
        return value
    }

    /// The elements a lambda or `$count` ranges over: related entities or a collection's items.
    func collection(_ path: PropertyPath, _ it: EntityRef) throws -> [Variable] {
        var entity: EntityRef? = it
        var value: Value = .null
        if let name = path.variable {
            switch variables[name] {
            case .entity(let e)?: entity = e
            case .value(let v)?: entity = nil; value = v
            case nil: return []
            }
        }
        for (n, step) in path.steps.enumerated() {
            let last = n == path.steps.count - 1
            switch step {
            case .property(let p):
                if let e = entity {
                    value = try e.value(p.name); entity = nil
                } else if case .complex(let props) = value {
                    value = props[p.name] ?? .null
                } else {
                    return []
                }
            case .navigation(let nav, let target):
                guard let e = entity else { return [] }
                let related = try navigator.related(e, nav, targetSet: target)
                if last { return related.map { .entity($0) } }
                guard let first = related.first else { return [] }
                entity = first
            }
        }
        if case .collection(let items) = value { return items.map { .value($0) } }
        return []
    }
}
