import LMDB
import Foundation
import Storage

/// A bound `$filter` (a plan's residual) compiled once per query into a tree of closures over the
/// row's bytes, so a scan does no tree walk, no name look-up and no `Value` boxing per row.
///
/// What is compiled: `and`, `or`, `not`, `true`/`false`, `isNull(P)`, `P in (…)` and comparisons of a
/// structural property `P` of the entity (one step, no lambda variable) with a literal of the same
/// representation — strings (ordinal, on the UTF-8 bytes, as the interpreter compares a row's string
/// with a literal), the integer types and enums, `Decimal` (exact, at any scale), `Single`/`Double`
/// (with the interpreter's NaN order), `Boolean`, `Date`, `DateTimeOffset` (by instant), `TimeOfDay`,
/// `Duration`, `Guid` — also through the binder's integer-to-decimal or integer-to-double promotion.
/// Property offsets are resolved and literals encoded once, here. Everything else (functions,
/// arithmetic, navigation, lambdas, complex members) is a leaf that calls `ExpressionEvaluator`, as
/// is any leaf whose stored value does not have its type's length (so a corrupt row fails as the
/// interpreter fails). Results are three-valued exactly as `ExpressionEvaluator`'s (see `TypedExpr`).
///
/// A class: a scan holds one reference, where copying a struct of these members retained each per row.
final class CompiledFilter {
    /// A node's result: `Value.bool` true/false, `.null`, or `other` (a non-boolean value the
    /// interpreter returned, which `and`/`or` skip and `not` turns to null, as the interpreter does).
    enum Truth: UInt8 { case no, yes, null, other }
    /// A node runs on the row and its primary key; only a leaf handed to the interpreter makes an
    /// `EntityRef` of them, so a scan makes none for the rows the filter rejects.
    typealias Node = (RowView, MappedBytes?) throws -> Truth

    let expression: TypedExpr
    let evaluator: ExpressionEvaluator
    let root: Node
    /// Leaves and junctions run as compiled closures, and leaves handed to the interpreter.
    let compiledNodes: Int
    let interpretedNodes: Int

    init(_ expression: TypedExpr, set: EntitySetHandle, evaluator: ExpressionEvaluator) {
        var compiler = Compiler(set: set, evaluator: evaluator)
        root = compiler.node(expression)
        compiledNodes = compiler.compiled
        interpretedNodes = compiler.interpreted
        self.expression = expression
        self.evaluator = evaluator
    }

    /// Whether the predicate is true for `entity`; an entity that is not a row goes to the interpreter.
    @inline(__always)
    func matches(_ entity: EntityRef) throws -> Bool {
        guard case .row(let row) = entity.source else { return try evaluator.matches(expression, entity) }
        return try root(row, entity.primaryKey) == .yes
    }

    /// The three-valued result for `entity` (tests compare it with the interpreter's).
    func truth(_ entity: EntityRef) throws -> Truth {
        guard case .row(let row) = entity.source else { return Self.truth(try evaluator.evaluate(expression, entity)) }
        return try root(row, entity.primaryKey)
    }

    static func truth(_ v: Value) -> Truth {
        switch v {
        case .bool(let b): b ? .yes : .no
        case .null: .null
        default: .other
        }
    }

    struct Compiler {
        let set: EntitySetHandle
        let evaluator: ExpressionEvaluator
        var compiled = 0
        var interpreted = 0

        mutating func node(_ e: TypedExpr) -> Node {
            switch e.kind {
            case .literal(let v):
                compiled += 1
                let t = CompiledFilter.truth(v)
                return { _, _ in t }
            case .and(let xs):
                compiled += 1
                return junction(xs, deciding: .no)
            case .or(let xs):
                compiled += 1
                return junction(xs, deciding: .yes)
            case .not(let x):
                compiled += 1
                let inner = node(x)
                return { r, pk in
                    switch try inner(r, pk) {
                    case .yes: .no
                    case .no: .yes
                    default: .null
                    }
                }
            case .isNull(let x):
                if let (i, _) = simpleProperty(x) {
                    compiled += 1
                    let fallback = interpret(e, counted: false)
                    return { r, pk in
                        do { return try r.slice(i) == nil ? .yes : .no } catch { return try fallback(r, pk) }
                    }
                }
            case .compare(let op, let a, let b):
                if let n = compare(op, a, b, e) { compiled += 1; return n }
            case .in(let x, let values):
                if !values.isEmpty, !values.contains(where: \.isNull), let n = membership(x, values, e) {
                    compiled += 1; return n
                }
            default:
                break
            }
            return interpret(e)
        }

        /// A leaf the interpreter evaluates.
        mutating func interpret(_ e: TypedExpr, counted: Bool = true) -> Node {
            if counted { interpreted += 1 }
            let evaluator = self.evaluator, set = self.set
            return { r, pk in
                CompiledFilter.truth(try evaluator.evaluate(e, EntityRef(set: set, view: r, primaryKey: pk)))
            }
        }

        /// Three-valued `and` (`deciding` .no) or `or` (.yes), as `ExpressionEvaluator.threeValued`,
        /// folded from the left into pairs: `and(a, b, c)` is `and(and(a, b), c)`, which decides,
        /// evaluates and throws in the same order. No array of nodes: an array holds closures at
        /// its element type's most general abstraction, so each call through it took two thunks.
        mutating func junction(_ xs: [TypedExpr], deciding: Truth) -> Node {
            guard let first = xs.first else { return { _, _ in deciding == .no ? .yes : .no } }
            var acc = node(first)
            for x in xs.dropFirst() { acc = Self.pair(acc, node(x), deciding: deciding) }
            if xs.count == 1 {
                // One operand: its truth, with `other` taken as the non-deciding value, as a loop would.
                let a = acc
                return { r, pk in
                    let x = try a(r, pk)
                    return x == deciding || x == .null ? x : (deciding == .no ? .yes : .no)
                }
            }
            return acc
        }

        static func pair(_ a: @escaping Node, _ b: @escaping Node, deciding: Truth) -> Node {
            { r, pk in
                let x = try a(r, pk)
                if x == deciding { return deciding }
                let y = try b(r, pk)
                if y == deciding { return deciding }
                if x == .null || y == .null { return .null }
                return deciding == .no ? .yes : .no
            }
        }

        /// `P` of the entity being filtered: its row position and type.
        func simpleProperty(_ e: TypedExpr) -> (Int, TypeRef)? {
            guard case .property(let path) = e.kind, path.variable == nil, path.steps.count == 1,
                case .property(let p) = path.steps[0], let i = set.position(of: p.name),
                set.type.properties[i].type == p.type
            else { return nil }
            return (i, p.type)
        }

        /// `P`, or `P` promoted from an integer type to `Decimal` or `Double` (`convert`).
        func operand(_ e: TypedExpr) -> (position: Int, stored: TypeRef, promotedTo: EDMPrimitive?)? {
            if let (i, t) = simpleProperty(e) { return (i, t, nil) }
            guard case .convert(let inner) = e.kind, let target = e.type?.primitive,
                target == .decimal || target == .double,
                let (i, t) = simpleProperty(inner), let p = t.primitive, p.isInteger
            else { return nil }
            return (i, t, target)
        }

        /// A comparison of a property with a literal (either side); nil when not compilable.
        mutating func compare(_ op: ComparisonOperator, _ a: TypedExpr, _ b: TypedExpr, _ whole: TypedExpr) -> Node? {
            var op = op
            var (p, lit) = (a, b)
            var flipped = false
            if case .literal = a.kind {
                (p, lit) = (b, a)
                flipped = true
                switch op {
                case .gt: op = .lt
                case .ge: op = .le
                case .lt: op = .gt
                case .le: op = .ge
                default: break
                }
            }
            guard case .literal(let value) = lit.kind, !value.isNull, let operand = operand(p),
                let cmp = Self.comparator(
                    operand.stored, promotedTo: operand.promotedTo, value, stringsAsValues: flipped)
            else { return nil }
            let i = operand.position
            let fallback = interpret(whole, counted: false)
            // A null property: `eq` false, `ne` true, the orderings false (the literal is not null).
            let onNull: Truth = op == .ne ? .yes : .no
            @inline(__always) func node(_ test: @escaping (Int) -> Bool) -> Node {
                { r, pk in
                    let s: UnsafeRawBufferPointer?
                    do { s = try r.slice(i) } catch { return try fallback(r, pk) }
                    guard let s else { return onNull }
                    guard let c = cmp(s) else { return try fallback(r, pk) }
                    return test(c) ? .yes : .no
                }
            }
            switch op {
            case .eq: return node { $0 == 0 }
            case .ne: return node { $0 != 0 }
            case .gt: return node { $0 > 0 }
            case .ge: return node { $0 >= 0 }
            case .lt: return node { $0 < 0 }
            case .le: return node { $0 <= 0 }
            }
        }

        /// `P in (v1, v2, …)`: true when `P eq v` for some `v` (every `v` non-null, so a null `P` is false).
        mutating func membership(_ x: TypedExpr, _ values: [Value], _ whole: TypedExpr) -> Node? {
            guard let operand = operand(x) else { return nil }
            // Each in a struct: an array of bare closures would call each through two thunks.
            struct Comparator { let order: (UnsafeRawBufferPointer) -> Int? }
            var cmps: [Comparator] = []
            for v in values {
                guard let c = Self.comparator(operand.stored, promotedTo: operand.promotedTo, v, stringsAsValues: true)
                else { return nil }
                cmps.append(Comparator(order: c))
            }
            let i = operand.position
            let fallback = interpret(whole, counted: false)
            return { r, pk in
                let s: UnsafeRawBufferPointer?
                do { s = try r.slice(i) } catch { return try fallback(r, pk) }
                guard let s else { return .no }
                for c in cmps {
                    guard let d = c.order(s) else { return try fallback(r, pk) }
                    if d == 0 { return .yes }
                }
                return .no
            }
        }

        /// Compares a stored value's bytes with `literal`: -1, 0, 1 as `compareValues` of the decoded
        /// value and the literal; nil when the bytes do not have the type's length. Nil (not
        /// compilable) unless the decoded value and the literal are of one kind.
        ///
        /// Strings: `P op 'literal'` compares bytes (ordinal), as the interpreter does on a row.
        /// With `stringsAsValues` (`'literal' op P`, `P in (…)`), the interpreter compares Strings,
        /// which are equal when canonically equivalent (`"e\u{301}"` and `"é"`, `"\u{212A}"` and `"K"`):
        /// then bytes that differ decide only when both sides are ASCII; otherwise nil, and the
        /// interpreter decides.
        static func comparator(
            _ type: TypeRef, promotedTo: EDMPrimitive?, _ literal: Value,
            stringsAsValues: Bool = false
        ) -> ((UnsafeRawBufferPointer) -> Int?)? {
            if case .enumeration = type {
                guard promotedTo == nil, case .enumMember(let y) = literal else { return nil }
                return { s in s.count == 8 ? order(Int64(bitPattern: load(s, 8)), y) : nil }
            }
            guard let p = type.primitive else { return nil }
            if p.isInteger {
                let width: Int
                switch p {
                case .byte, .sbyte: width = 1
                case .int16: width = 2
                case .int32: width = 4
                default: width = 8
                }
                let signed = p != .byte
                @inline(__always) func integer(_ s: UnsafeRawBufferPointer) -> Int64 {
                    let raw = load(s, width)
                    guard signed, width < 8 else { return Int64(bitPattern: raw) }
                    let shift = UInt64(64 - 8 * width)
                    return Int64(bitPattern: raw << shift) >> shift
                }
                switch (promotedTo, literal) {
                case (nil, .int(let y)):
                    return { s in s.count == width ? order(integer(s), y) : nil }
                case (.decimal?, .decimal(let y)):
                    let ys = y.significand, yScale = y.scale
                    return { s in s.count == width ? decimalOrder(Int128(integer(s)), 0, ys, yScale) : nil }
                case (.double?, .double(let y)):
                    return { s in s.count == width ? doubleOrder(Double(integer(s)), y) : nil }
                default:
                    return nil
                }
            }
            guard promotedTo == nil else { return nil }
            switch (p, literal) {
            case (.string, .string(let text)):
                let l = Array(text.utf8)
                let literalIsASCII = l.allSatisfy { $0 < 0x80 }
                return { s in
                    let c: Int = l.withUnsafeBytes { l in
                        let n = min(s.count, l.count)
                        let m = n == 0 ? 0 : memcmp(s.baseAddress!, l.baseAddress!, n)
                        if m != 0 { return m < 0 ? -1 : 1 }
                        return s.count == l.count ? 0 : (s.count < l.count ? -1 : 1)
                    }
                    if c == 0 || !stringsAsValues { return c }
                    return literalIsASCII && !s.contains(where: { $0 >= 0x80 }) ? c : nil
                }
            case (.boolean, .bool(let y)):
                return { s in s.count == 1 && s[0] <= 1 ? order(s[0] == 1 ? 1 : 0, y ? 1 : 0) : nil }
            case (.decimal, .decimal(let y)):
                let ys = y.significand, yScale = y.scale
                return { s in
                    guard s.count == 18 else { return nil }
                    let scale = Int16(bitPattern: UInt16(truncatingIfNeeded: load(s, 2)))
                    let lo = s.loadUnaligned(fromByteOffset: 2, as: UInt64.self).littleEndian
                    let hi = s.loadUnaligned(fromByteOffset: 10, as: UInt64.self).littleEndian
                    return decimalOrder(Int128(bitPattern: UInt128(hi) << 64 | UInt128(lo)), scale, ys, yScale)
                }
            case (.double, .double(let y)):
                return { s in s.count == 8 ? doubleOrder(Double(bitPattern: load(s, 8)), y) : nil }
            case (.single, .double(let y)):
                return { s in
                    s.count == 4
                        ? doubleOrder(Double(Float(bitPattern: UInt32(truncatingIfNeeded: load(s, 4)))), y) : nil
                }
            case (.date, .date(let y)):
                return { s in
                    s.count == 4 ? order(Int32(bitPattern: UInt32(truncatingIfNeeded: load(s, 4))), y.days) : nil
                }
            case (.dateTimeOffset, .dateTimeOffset(let y)), (.dateTime, .dateTimeOffset(let y)):
                return { s in s.count == 10 ? order(Int64(bitPattern: load(s, 8)), y.ticks) : nil }
            case (.timeOfDay, .timeOfDay(let y)), (.time, .timeOfDay(let y)):
                return { s in s.count == 8 ? order(Int64(bitPattern: load(s, 8)), y.ticks) : nil }
            case (.duration, .duration(let y)):
                return { s in s.count == 8 ? order(Int64(bitPattern: load(s, 8)), y.ticks) : nil }
            case (.guid, .guid(let y)):
                // Stored big-endian, high word first: byte order is (high, low) order.
                return { s in
                    guard s.count == 16 else { return nil }
                    let h = s.loadUnaligned(fromByteOffset: 0, as: UInt64.self).bigEndian
                    let l = s.loadUnaligned(fromByteOffset: 8, as: UInt64.self).bigEndian
                    return h != y.high ? order(h, y.high) : order(l, y.low)
                }
            default:
                return nil
            }
        }
    }
}

@inline(__always)
private func order<T: Comparable>(_ x: T, _ y: T) -> Int { x < y ? -1 : (x == y ? 0 : 1) }

/// Little-endian unsigned load of `n` ≤ 8 bytes (the caller checked the length).
@inline(__always)
private func load(_ s: UnsafeRawBufferPointer, _ n: Int) -> UInt64 {
    switch n {
    case 8: return s.loadUnaligned(as: UInt64.self).littleEndian
    case 4: return UInt64(s.loadUnaligned(as: UInt32.self).littleEndian)
    case 2: return UInt64(s.loadUnaligned(as: UInt16.self).littleEndian)
    default:
        var v: UInt64 = 0
        for k in (0..<n).reversed() { v = v << 8 | UInt64(s[k]) }
        return v
    }
}

/// `compareValues` on two doubles: NaN equals NaN and is above every number.
@inline(__always)
func doubleOrder(_ x: Double, _ y: Double) -> Int {
    if x.isNaN || y.isNaN { return x.isNaN && y.isNaN ? 0 : (x.isNaN ? 1 : -1) }
    return order(x, y)
}

/// The exact order of `a × 10^-aScale` and `b × 10^-bScale` (what `EDMDecimal`'s `<` and `==` give),
/// without making Strings: the operand with the smaller scale is brought to the larger one; if
/// that overflows, its magnitude is the larger.
func decimalOrder(_ a: Int128, _ aScale: Int16, _ b: Int128, _ bScale: Int16) -> Int {
    if aScale == bScale { return order(a, b) }
    if (a < 0) != (b < 0) { return a < 0 ? -1 : 1 }
    if a == 0 || b == 0 { return order(a, b) }
    var x = a, y = b
    let diff = Int(aScale) - Int(bScale)
    if diff > 0 {
        guard let scaled = scaleUp(y, by: diff) else { return y < 0 ? 1 : -1 }  // |y| is the larger
        y = scaled
    } else {
        guard let scaled = scaleUp(x, by: -diff) else { return x < 0 ? -1 : 1 }  // |x| is the larger
        x = scaled
    }
    return order(x, y)
}

/// `v × 10^n`, or nil when it does not fit in `Int128`.
private func scaleUp(_ v: Int128, by n: Int) -> Int128? {
    var r = v
    var left = n
    while left > 0 {
        let step = min(left, 18)
        var p: Int128 = 1
        for _ in 0..<step { p *= 10 }
        let (m, o) = r.multipliedReportingOverflow(by: p)
        if o { return nil }
        r = m
        left -= step
    }
    return r
}
