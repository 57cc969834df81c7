/// One segment of a member path, with its 1-based column: a property or navigation name, a
/// qualified name (type cast), `$it`, `$count` or `*`.
package struct PathSegment: Sendable, Hashable, CustomStringConvertible {
    package var name: String
    package var position: Int

    package init(_ name: String, at position: Int) {
        self.name = name
        self.position = position
    }

    package var description: String { name }
}

/// Binary operators of `$filter`, besides `and`/`or` (which are n-ary nodes).
package enum BinaryOperator: String, Sendable, Hashable, CaseIterable {
    case eq, ne, gt, ge, lt, le, has
    case add, sub, mul, div, divby, mod

    package var isComparison: Bool {
        switch self {
        case .eq, .ne, .gt, .ge, .lt, .le: true
        default: false
        }
    }
}

package enum LambdaKind: String, Sendable, Hashable {
    case any, all
}

/// A `$filter` (or `$orderby`) expression node with its 1-based column in the option text.
///
/// The position of an operator node is its operator's column; of a path, call or lambda, the
/// column of its first segment or name.
package struct Expr: Sendable, Hashable, CustomStringConvertible {
    package indirect enum Kind: Sendable, Hashable {
        case literal(Literal)
        /// `Name`, `Address/City`, `$it/Name`, `d/Price` (lambda variable), `Orders/$count`.
        case path([PathSegment])
        /// `Orders/any(d:d/Total gt 5)`; `any()` has neither variable nor predicate.
        case lambda(LambdaKind, path: [PathSegment], variable: PathSegment?, predicate: Expr?)
        case and([Expr])
        case or([Expr])
        case not(Expr)
        case negate(Expr)
        case binary(BinaryOperator, Expr, Expr)
        /// `X in (a, b)`: the list holds literal nodes only.
        case `in`(Expr, [Expr])
        /// A function call, by name as written (`contains`, `geo.distance`, `Model.Fn`).
        case call(String, [Expr])
        /// A parameter alias, `@p` (name without `@`): its value is the URL's `@p=…` option, null
        /// when the URL gives none, or a prepared query's argument (see `ODataURL.aliases`).
        case alias(String)
    }

    package var kind: Kind
    package var position: Int
    /// Height of the tree below this node, bounded so evaluation cannot exhaust the stack.
    let depth: Int

    package init(_ kind: Kind, at position: Int) {
        self.kind = kind
        self.position = position
        var children: [Expr] = []
        switch kind {
        case .literal, .path, .alias: break
        case .lambda(_, _, _, let p): if let p { children = [p] }
        case .and(let xs), .or(let xs), .call(_, let xs): children = xs
        case .not(let x), .negate(let x): children = [x]
        case .binary(_, let a, let b): children = [a, b]
        case .in(let x, let xs): children = [x] + xs
        }
        depth = 1 + children.reduce(0) { max($0, $1.depth) }
    }

    /// A compact S-expression: `(eq Country 'US')`, `(and a b)`, `(any Orders d (gt d/Total 5))`.
    package var description: String {
        switch kind {
        case .literal(let l): return l.description
        case .path(let segments): return segments.map(\.name).joined(separator: "/")
        case .lambda(let kind, let path, let variable, let predicate):
            var parts = ["\(kind)", path.map(\.name).joined(separator: "/")]
            if let variable { parts.append(variable.name) }
            if let predicate { parts.append(predicate.description) }
            return "(" + parts.joined(separator: " ") + ")"
        case .and(let xs): return "(and " + xs.map(\.description).joined(separator: " ") + ")"
        case .or(let xs): return "(or " + xs.map(\.description).joined(separator: " ") + ")"
        case .not(let x): return "(not \(x))"
        case .negate(let x): return "(- \(x))"
        case .binary(let op, let a, let b): return "(\(op.rawValue) \(a) \(b))"
        case .in(let x, let list):
            return "(in \(x) (" + list.map(\.description).joined(separator: " ") + "))"
        case .call(let name, let args):
            return "(" + ([name] + args.map(\.description)).joined(separator: " ") + ")"
        case .alias(let name): return "@" + name
        }
    }
}

extension Expr {
    /// The first parameter alias in the tree, with its column (depth-first, left to right).
    var firstAlias: (name: String, position: Int)? {
        switch kind {
        case .alias(let name): return (name, position)
        case .literal, .path: return nil
        case .lambda(_, _, _, let p): return p?.firstAlias
        case .and(let xs), .or(let xs), .call(_, let xs): return xs.lazy.compactMap(\.firstAlias).first
        case .not(let x), .negate(let x): return x.firstAlias
        case .binary(_, let a, let b): return a.firstAlias ?? b.firstAlias
        case .in(let x, let xs): return x.firstAlias ?? xs.lazy.compactMap(\.firstAlias).first
        }
    }
}

extension Expr {
    /// Nodes in the tree.
    var nodeCount: Int {
        switch kind {
        case .literal, .path, .alias: return 1
        case .lambda(_, _, _, let p): return 1 + (p?.nodeCount ?? 0)
        case .and(let xs), .or(let xs), .call(_, let xs): return xs.reduce(1) { $0 + $1.nodeCount }
        case .not(let x), .negate(let x): return 1 + x.nodeCount
        case .binary(_, let a, let b): return 1 + a.nodeCount + b.nodeCount
        case .in(let x, let xs): return xs.reduce(1 + x.nodeCount) { $0 + $1.nodeCount }
        }
    }

    /// Adds each alias use in the tree to `uses`.
    func countAliasUses(_ uses: inout [String: Int]) {
        switch kind {
        case .alias(let name): uses[name, default: 0] += 1
        case .literal, .path: break
        case .lambda(_, _, _, let p): p?.countAliasUses(&uses)
        case .and(let xs), .or(let xs), .call(_, let xs): for x in xs { x.countAliasUses(&uses) }
        case .not(let x), .negate(let x): x.countAliasUses(&uses)
        case .binary(_, let a, let b): a.countAliasUses(&uses); b.countAliasUses(&uses)
        case .in(let x, let xs): x.countAliasUses(&uses); for i in xs { i.countAliasUses(&uses) }
        }
    }
}

extension QueryOptions {
    /// Adds each alias use in `$filter` and `$orderby`, here and nested in `$expand`, to `uses`.
    func countAliasUses(_ uses: inout [String: Int]) {
        filter?.countAliasUses(&uses)
        for o in orderBy { o.expression.countAliasUses(&uses) }
        for e in expand { e.options.countAliasUses(&uses) }
    }
}
