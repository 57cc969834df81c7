package import Storage

package enum ComparisonOperator: String, Sendable, Hashable, CaseIterable {
    case eq, ne, gt, ge, lt, le
}

package enum ArithmeticOperator: String, Sendable, Hashable, CaseIterable {
    /// `div` on integers truncates; `divby` always divides exactly (Decimal for integers).
    case add, sub, mul, div, divby, mod
}

/// A bound, type-checked `$filter`/`$orderby` expression.
///
/// Every node has a result `type` (nil only for a `null` literal) and the 1-based column it came
/// from. Operands of comparisons and arithmetic already have one value representation: numeric
/// promotion is explicit (`convert` nodes, or literals converted in place), so an evaluator never
/// mixes `.int`, `.decimal` and `.double`.
///
/// Null semantics (OData): any operator or function with a null operand yields null, except:
/// - `eq`: null eq null is true; null eq non-null is false.
/// - `ne`: null ne null is false; null ne non-null is true.
/// - `gt ge lt le`: false when either side is null.
/// - `and`: false if either side is false, else null if either is null; `or`: true if either is
///   true, else null if either is null; `not null` is null.
/// - A `$filter` keeps an entity only when the result is true (null counts as false).
/// - `isNull(x)` is true exactly when x is null; `in` is true when `eq` is true for some item.
/// - An arithmetic result that does not fit its type (overflow) is null too; division by an integer
///   or decimal zero fails the request (see `Arithmetic`).
package struct TypedExpr: Sendable, Hashable, CustomStringConvertible {
    package indirect enum Kind: Sendable, Hashable {
        case literal(Value)
        case property(PropertyPath)
        case compare(ComparisonOperator, TypedExpr, TypedExpr)
        /// `x eq null` (and `x ne null` as `not(isNull(x))`).
        case isNull(TypedExpr)
        case and([TypedExpr])
        case or([TypedExpr])
        case not(TypedExpr)
        case arithmetic(ArithmeticOperator, TypedExpr, TypedExpr)
        case negate(TypedExpr)
        /// Numeric promotion of the operand to this node's `type` (int → decimal → double).
        case convert(TypedExpr)
        /// A built-in function, lower-cased (`contains`, `year`, …; `cast` converts its one argument
        /// to this node's `type`). See `FunctionBinding.swift` for the signatures.
        case function(String, [TypedExpr])
        /// True when some element of the collection at `path` satisfies `predicate`, which sees the
        /// element as `variable`; without a predicate, when the collection is not empty.
        case any(PropertyPath, variable: String?, predicate: TypedExpr?)
        /// True when every element satisfies `predicate` (true for an empty collection).
        case all(PropertyPath, variable: String, predicate: TypedExpr)
        /// `x in (v1, v2, …)`, values already converted to `x`'s type.
        case `in`(TypedExpr, [Value])
        /// `flags has Namespace.Enum'Member'`: all bits of the member value are set.
        case has(TypedExpr, Int64)
        /// The number of elements of the collection at `path` (`Orders/$count`).
        case count(PropertyPath)
    }

    package var kind: Kind
    package var type: TypeRef?
    package var position: Int

    package init(_ kind: Kind, type: TypeRef?, at position: Int) {
        self.kind = kind
        self.type = type
        self.position = position
    }

    static let boolean = TypeRef.primitive(.boolean)

    /// An S-expression: `(eq Country 'US')`, `(Edm.Decimal Quantity)` for a conversion,
    /// `(any SalesOrders d (gt d/GrossAmount 100M))`.
    package var description: String {
        switch kind {
        case .literal(let v): return Self.format(v, type)
        case .property(let p): return p.description
        case .compare(let op, let a, let b): return "(\(op.rawValue) \(a) \(b))"
        case .isNull(let x): return "(isnull \(x))"
        case .and(let xs): return "(and " + xs.map(\.description).joined(separator: " ") + ")"
        case .or(let xs): return "(or " + xs.map(\.description).joined(separator: " ") + ")"
        case .not(let x): return "(not \(x))"
        case .arithmetic(let op, let a, let b): return "(\(op.rawValue) \(a) \(b))"
        case .negate(let x): return "(- \(x))"
        case .convert(let x): return "(\(type?.description ?? "null") \(x))"
        case .function(let name, let args):
            let target = name == "cast" ? [type?.description ?? "null"] : []
            return "(" + ([name] + args.map(\.description) + target).joined(separator: " ") + ")"
        case .any(let path, let variable, let predicate):
            return "("
                + (["any", path.description] + [variable, predicate?.description].compactMap { $0 }).joined(
                    separator: " ") + ")"
        case .all(let path, let variable, let predicate): return "(all \(path) \(variable) \(predicate))"
        case .in(let x, let values):
            return "(in \(x) (" + values.map { Self.format($0, x.type) }.joined(separator: " ") + "))"
        case .has(let x, let v): return "(has \(x) \(v))"
        case .count(let path): return "(count \(path))"
        }
    }

    static func format(_ value: Value, _ type: TypeRef?) -> String {
        if case .enumMember(let n) = value, case .enumeration(let name) = type { return "\(name)'\(n)'" }
        return Literal.format(value, type?.primitive)
    }
}
