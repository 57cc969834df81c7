import LMDB
/// Bounds on the work one request URL may ask of the query engine, so a short URL cannot run for
/// minutes or fill memory (a `$expand` that follows a cyclic navigation ten levels deep, lambdas
/// nested in lambdas). A request past a limit fails with an error naming it; nothing is written.
///
/// Part of the store configuration (`"limits": {"maxExpansionDepth": 5, …}`) and of `QueryEngine`.
/// The defaults follow ASP.NET OData's conventions (`MaxExpansionDepth`, `MaxNodeCount`,
/// `MaxAnyAllExpressionDepth`), loosened where the local store makes a step cheap:
///
/// - `maxExpansionDepth` 5: levels of nested `$expand` (V2 `A/B/C` is three). Deep enough for
///   order → items → product → supplier → country; a deeper chain is almost always a cycle.
/// - `maxNodeCount` 100: nodes of all `$filter`, `$orderby` and `$expand` trees of the request
///   together (each operator, operand, function argument, `in` list item and expand item is one),
///   ASP.NET's default for `$filter`. Each node is evaluated per candidate row, so this bounds the
///   per-row work of a request by a constant.
/// - `maxAnyAllDepth` 2: `any`/`all` nested in `any`/`all`, two deep (items of the orders of a
///   customer). Each level multiplies the work per row by a collection's size.
/// - `maxExpandedEntities` 100,000: related entities written by `$expand` in one response (one
///   page with server-driven paging). An expansion's entities are assembled in memory with their
///   parent, and cycles multiply them: this caps both memory and time (0.25 s in a release build).
///   A server-driven page ends before the entity that would pass it (its next link continues
///   there); without paging the response fails. Large exports page (`--page-size`) or raise it.
public struct QueryLimits: Sendable, Hashable {
    public var maxExpansionDepth: Int
    public var maxNodeCount: Int
    public var maxAnyAllDepth: Int
    public var maxExpandedEntities: Int

    public init(
        maxExpansionDepth: Int = 5, maxNodeCount: Int = 100, maxAnyAllDepth: Int = 2,
        maxExpandedEntities: Int = 100_000
    ) {
        self.maxExpansionDepth = maxExpansionDepth
        self.maxNodeCount = maxNodeCount
        self.maxAnyAllDepth = maxAnyAllDepth
        self.maxExpandedEntities = maxExpandedEntities
    }

    /// The members by their JSON names, in the order they are written.
    static var members: [(name: String, path: WritableKeyPath<QueryLimits, Int>)] {
        [
            ("maxExpansionDepth", \.maxExpansionDepth), ("maxNodeCount", \.maxNodeCount),
            ("maxAnyAllDepth", \.maxAnyAllDepth), ("maxExpandedEntities", \.maxExpandedEntities),
        ]
    }

    /// Reads `{"maxExpansionDepth": 5, …}`: members left out keep their defaults; unknown members,
    /// non-integers and negative values are errors.
    package init(json: JSON) throws(EntityError) {
        self.init()
        guard case .object(let items) = json else { throw .badInput("configuration: limits must be a JSON object") }
        for (name, value) in items {
            guard let member = Self.members.first(where: { $0.name == name }) else {
                throw .badInput("configuration: unknown member '\(name)' of limits")
            }
            guard case .number(let text) = value, let n = Int(text), n >= 0 else {
                throw .badInput("configuration: limits.\(name) must be a non-negative integer")
            }
            self[keyPath: member.path] = n
        }
    }

    package var json: JSON {
        .object(Self.members.map { ($0.name, .number(String(self[keyPath: $0.path]))) })
    }
}
